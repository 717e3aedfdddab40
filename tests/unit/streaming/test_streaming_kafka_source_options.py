"""The Kafka source's options checked without a broker: each bad option is named with its reason; the
security settings reach the options."""

from __future__ import annotations

import json
from typing import Any

import pytest

from streaming.source.options import (
    AHEAD,
    MARKS,
    Ahead,
    KafkaSourceError,
    SourceOptions,
    ahead_of,
    source_offset,
    split_offset,
)

pytestmark = pytest.mark.unit


def test_bad_starting_offsets_and_barrier_options_name_the_field() -> None:
    base = {"bootstrap_servers": "h:1", "topics": "a,b"}
    with pytest.raises(KafkaSourceError, match=r"starting_offsets: is not valid JSON"):
        SourceOptions.parse({**base, "starting_offsets": "{nope"})
    with pytest.raises(KafkaSourceError, match=r"starting_offsets\.c: is not one of the topics read"):
        SourceOptions.parse({**base, "starting_offsets": '{"c": {"0": 1}}'})
    with pytest.raises(KafkaSourceError, match=r"starting_offsets\.a\.0: the offset must be a non-negative integer"):
        SourceOptions.parse({**base, "starting_offsets": '{"a": {"0": -1}}'})
    with pytest.raises(KafkaSourceError, match=r"starting_offsets\.a\.x: the partition"):
        SourceOptions.parse({**base, "starting_offsets": '{"a": {"x": 1}}'})
    with pytest.raises(KafkaSourceError, match="barrier_topic and barrier_epoch go together"):
        SourceOptions.parse({**base, "barrier_topic": "a"})
    with pytest.raises(KafkaSourceError, match="barrier_epoch: must be an integer"):
        SourceOptions.parse({**base, "barrier_topic": "a", "barrier_epoch": "x"})
    with pytest.raises(KafkaSourceError, match="barrier_topic: 'c' is not one of the topics read"):
        SourceOptions.parse({**base, "barrier_topic": "c", "barrier_epoch": "1"})
    opts = SourceOptions.parse({**base, "starting_offsets": '{"b": {"1": 5, "0": 3}}'})
    assert opts.starting_offsets == "explicit" and opts.starting_positions == (("b", 0, 3), ("b", 1, 5))
    with pytest.raises(KafkaSourceError, match=r"first_read_wait_ms: must be a whole number of ms, got '1\.5'"):
        SourceOptions.parse({**base, "first_read_wait_ms": "1.5"})
    with pytest.raises(KafkaSourceError, match="first_read_wait_ms: must be 0 or more, got '-1'"):
        SourceOptions.parse({**base, "firstReadWaitMs": "-1"})
    assert SourceOptions.parse(base).first_read_wait_ms == 10000
    assert SourceOptions.parse({**base, "firstReadWaitMs": "0"}).first_read_wait_ms == 0
    with pytest.raises(KafkaSourceError, match=r"request_timeout_ms: must be a whole number of ms, got '1e4'"):
        SourceOptions.parse({**base, "request_timeout_ms": "1e4"})
    with pytest.raises(KafkaSourceError, match="request_timeout_ms: must be at least 1000, got '50'"):
        SourceOptions.parse({**base, "requestTimeoutMs": "50"})
    assert SourceOptions.parse(base).request_timeout_ms == 30000
    assert SourceOptions.parse({**base, "kafka.request.timeout.ms": "10000"}).request_timeout_ms == 10000
    with pytest.raises(KafkaSourceError, match=r"unreachable_timeout_ms: must be a whole number of ms, got '1m'"):
        SourceOptions.parse({**base, "unreachable_timeout_ms": "1m"})
    with pytest.raises(KafkaSourceError, match="unreachable_timeout_ms: must be 0 or more, got '-5'"):
        SourceOptions.parse({**base, "unreachableTimeoutMs": "-5"})
    assert SourceOptions.parse(base).unreachable_timeout_ms == 60000
    assert SourceOptions.parse({**base, "unreachableTimeoutMs": "0"}).unreachable_timeout_ms == 0


def test_the_source_offset_carries_the_marks_of_the_records_before_its_positions() -> None:
    positions = {("b", 10): 7, ("b", 2): 0, ("a", 0): 3}
    marks = {("a", 0): "1795511590146-0a1b2c3d", ("b", 2): "stale"}
    offset = source_offset(positions, marks)
    # partitions sorted numerically, the marks last; a position at a log's first record has none
    assert list(offset) == ["a", "b", MARKS] and list(offset["b"]) == ["2", "10"]
    assert offset[MARKS] == {"a": {"0": "1795511590146-0a1b2c3d"}}
    assert split_offset(offset) == (positions, {("a", 0): "1795511590146-0a1b2c3d"})
    assert source_offset(positions, {}) == {"a": {"0": 3}, "b": {"2": 0, "10": 7}}
    # a source offset is taken back as starting offsets, marks and all (a checkpoint moved to another)
    opts = SourceOptions.parse({"bootstrap_servers": "h:1", "topics": "a,b", "starting_offsets": json.dumps(offset)})
    assert opts.starting_positions == (("a", 0, 3), ("b", 2, 0), ("b", 10, 7))
    assert opts.starting_marks == (("a", 0, "1795511590146-0a1b2c3d"),)


def test_a_record_handed_out_ahead_is_named_until_the_position_passes_it() -> None:
    ref = Ahead("events", 0, 9, "1795511590146-0a1b2c3d")
    held = source_offset({("events", 0): 4, ("admin", 0): 2}, {}, ref)
    assert list(held) == ["admin", "events", AHEAD] and ahead_of(held) == ref
    # the offset's positions and marks are what they were: the record is not a topic
    assert split_offset(held) == ({("admin", 0): 2, ("events", 0): 4}, {})
    assert ahead_of(source_offset({("events", 0): 9}, {}, ref)) == ref
    passed = source_offset({("events", 0): 10}, {}, ref)
    assert AHEAD not in passed and ahead_of(passed) is None
    # as starting offsets (a hand-copied checkpoint offset) it is refused by name, not read as a topic
    with pytest.raises(KafkaSourceError, match=r"starting_offsets\.@ahead: is not one of the topics read"):
        SourceOptions.parse(
            {"bootstrap_servers": "h:1", "topics": "admin,events", "starting_offsets": json.dumps(held)}
        )


@pytest.mark.parametrize(
    ("marks", "reason"),
    [
        ("[1]", r"starting_offsets\.@last: must be an object"),
        ('{"c": {"0": "m"}}', r"starting_offsets\.@last\.c: is not one of the topics read"),
        ('{"a": {"x": "m"}}', r"starting_offsets\.@last\.a\.x: the partition"),
        ('{"a": {"0": 5}}', r"starting_offsets\.@last\.a\.0: the mark must be a non-empty string"),
    ],
)
def test_bad_marks_in_starting_offsets_name_the_field(marks: str, reason: str) -> None:
    text = '{"a": {"0": 1}, "@last": ' + marks + "}"
    with pytest.raises(KafkaSourceError, match=reason):
        SourceOptions.parse({"bootstrap_servers": "h:1", "topics": "a,b", "starting_offsets": text})


def test_security_settings_reach_the_source_options_and_errors_name_the_setting() -> None:
    from streaming.settings import Settings, SettingsError
    from streaming.source.options import KafkaSourceError, SourceOptions

    s = Settings().with_overrides(
        [
            "kafka_security_protocol=SASL_PLAINTEXT",
            "kafka_sasl_mechanism=PLAIN",
            'kafka_sasl_jaas_config=x username="u" password="pw"',
        ]
    )
    props = s.kafka_security().properties()
    assert props["security.protocol"] == "SASL_PLAINTEXT" and "pw" not in repr(s)
    # what streaming.query.pipeline gives the source: kafka.<name> options
    options = {"bootstrap_servers": "h:1", "topics": "a", **{f"kafka.{k}": v for k, v in props.items()}}
    parsed = SourceOptions.parse(options)
    assert dict(parsed.security) == props
    with pytest.raises(KafkaSourceError) as e:
        SourceOptions.parse({"bootstrap_servers": "h:1", "topics": "a", "kafka.security.protocol": "TLS"})
    assert e.value.option == "kafka.security.protocol"
    with pytest.raises(SettingsError) as se:
        Settings().with_overrides(["kafka_sasl_mechanism=MD5"])
    assert se.value.key == "kafka_sasl_mechanism"


class _ListOffsetsLike:
    """kafka-python's consumer as it fails when a broker answers a partition without an offset and no error:
    the partition is missing from its result and the lookup raises ``KeyError``. ``misses`` counts how many
    more times each partition is answered that way."""

    def __init__(self, misses: dict[str, int]) -> None:
        self.misses = dict(misses)
        self.calls = 0

    def _ask(self, tps: list[Any], base: int) -> dict[Any, int]:
        self.calls += 1
        for tp in tps:
            if self.misses.get(tp.topic, 0) > 0:
                self.misses[tp.topic] -= 1
                raise KeyError(tp)
        return {tp: base + tp.partition for tp in tps}

    def beginning_offsets(self, tps: list[Any]) -> dict[Any, int]:
        return self._ask(tps, 0)

    def end_offsets(self, tps: list[Any]) -> dict[Any, int]:
        return self._ask(tps, 100)


def _reader(consumer: _ListOffsetsLike) -> Any:
    from streaming.source.kafka_source import KafkaStreamReader

    reader = KafkaStreamReader(SourceOptions.parse({"bootstrap_servers": "h:1", "topics": "a,b"}))
    reader.kafka.consumer = consumer
    return reader


def test_a_partition_answered_without_an_offset_is_asked_again_not_fatal() -> None:
    from kafka import TopicPartition

    tps = [TopicPartition("a", 0), TopicPartition("b", 1)]
    consumer = _ListOffsetsLike({"b": 3})
    reader = _reader(consumer)
    assert reader.kafka.list_offsets("beginning", tps) == {tps[0]: 0, tps[1]: 1}
    assert reader.kafka.list_offsets("end", tps) == {tps[0]: 100, tps[1]: 101}
    assert consumer.calls > 2


def test_a_partition_never_answered_is_an_error_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from kafka import TopicPartition

    import streaming.source.consumer as ks

    monkeypatch.setattr(ks, "OFFSETS_RETRY_S", 0.5)
    reader = _reader(_ListOffsetsLike({"b": 10**6}))
    with pytest.raises(KafkaSourceError, match=r"b-1: the broker gave no end offset for 0 s"):
        reader.kafka.list_offsets("end", [TopicPartition("a", 0), TopicPartition("b", 1)])
