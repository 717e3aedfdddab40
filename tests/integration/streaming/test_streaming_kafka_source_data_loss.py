"""The source's data-loss rule (Spark's ``failOnDataLoss``) against a topic deleted and created again.

Apache Kafka keeps its logs across a restart; a topic deleted and created again under the reader comes back
empty, and the offsets in a checkpoint point past the end of the new log — or, once the new log has grown past
them, at records the checkpoint never read (told apart by the mark of the last record read). The reader is the
same object Spark drives (``KafkaStreamReader.read``), called here without Spark, on the session's broker.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from waiting import wait_until

from livectl import local
from sinks.requests import ensure_topics
from streaming.source.kafka_source import KafkaStreamReader
from streaming.source.options import MARKS, KafkaSourceError, SourceOptions

pytestmark = pytest.mark.integration


class Topic:
    """A topic of this test's own on the session's broker, that the test may delete and create again."""

    def __init__(self, broker: local.Service) -> None:
        self.bootstrap = broker.bootstrap
        self.name = f"loss.{uuid.uuid4().hex[:8]}"
        ensure_topics(self.bootstrap, [self.name])

    def recreate(self) -> None:
        """Deleted, gone from the broker's metadata, then created again (empty, one partition)."""
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap)
        try:
            admin.delete_topics([self.name])
            wait_until(f"{self.name} gone from the broker's metadata", lambda: self.name not in admin.list_topics(), 90)
        finally:
            admin.close()
        ensure_topics(self.bootstrap, [self.name])


@pytest.fixture
def topic(kafka_broker: local.Service) -> Iterator[Topic]:
    yield Topic(kafka_broker)


def _produce(topic: Topic, values: list[str]) -> None:
    p = KafkaProducer(bootstrap_servers=topic.bootstrap, acks="all")
    for v in values:
        p.send(topic.name, value=v.encode(), partition=0)
    p.flush()
    p.close()


def _reader(topic: Topic, fail: str) -> KafkaStreamReader:
    opts = {
        "bootstrap_servers": topic.bootstrap,
        "topics": topic.name,
        "fail_on_data_loss": fail,
        "poll_timeout_ms": "200",
    }
    return KafkaStreamReader(SourceOptions.parse(opts))


def _values(rows: Iterator[tuple[Any, ...]]) -> list[tuple[str, int]]:
    return [(r[1], r[4]) for r in rows]


def _read_checked(reader: KafkaStreamReader, start: dict[str, Any]) -> tuple[list[tuple[str, int]], dict[str, Any]]:
    """``reader.read(start)`` once the broker answers its offset check: a read whose check got no answer
    within ``poll_timeout_ms`` (a recreated topic's metadata is slow under load) reads nothing and leaves
    the offset where it was, and is tried again; anything else — rows, a moved offset, an error — is its
    answer. No answer within 30 s fails the test (it used to go on with the empty read)."""

    def answer() -> tuple[list[tuple[str, int]], dict[str, Any]] | None:
        rows, end = reader.read(start)
        values = _values(rows)
        return (values, end) if values or end != start else None

    answered = wait_until("the reader's answer to its offset check", answer, 30, interval=0.2)
    assert answered is not None  # wait_until returns only an answer
    return answered


def test_offsets_gone_with_a_recreated_topic_fail_by_default_or_restart_from_earliest(
    topic: Topic, caplog: pytest.LogCaptureFixture
) -> None:
    _produce(topic, [f"before-{i}" for i in range(5)])
    strict, lenient = _reader(topic, "true"), _reader(topic, "false")
    try:
        rows, end = strict.read(strict.initialOffset())
        assert [v for v, _ in _values(rows)] == [f"before-{i}" for i in range(5)]
        assert end[topic.name] == {"0": 5} and list(end[MARKS][topic.name]) == ["0"]
        # nothing new: the checkpoint's offset is the log's end, which is not a loss
        rows, again = strict.read(end)
        assert _values(rows) == [] and again == end

        topic.recreate()
        _produce(topic, ["after-0", "after-1"])

        with pytest.raises(KafkaSourceError) as failed:
            _read_checked(strict, end)
        message = str(failed.value)
        assert f"data loss on {topic.name}-0" in message
        assert "reads from offset 5 but the log now ends at offset" in message
        assert "fail_on_data_loss=false" in message

        with caplog.at_level(logging.WARNING, logger="livectl.kafka_source"):
            values, after = _read_checked(lenient, end)
        assert values == [("after-0", 0), ("after-1", 1)]
        # partitions that appear later (a topic created again with more of them) are read from their beginning
        assert after[topic.name]["0"] == 2 and all(o == 0 for p, o in after[topic.name].items() if p != "0")
        assert any(f"data loss on {topic.name}-0" in r.getMessage() for r in caplog.records)
        # and it goes on from there: the next record once, nothing twice
        _produce(topic, ["after-2"])
        rows, last = lenient.read(after)
        assert _values(rows) == [("after-2", 2)] and last[topic.name]["0"] == 3
    finally:
        strict.stop()
        lenient.stop()


def test_a_new_log_grown_past_the_checkpoints_offset_is_told_from_the_old_one(
    topic: Topic, caplog: pytest.LogCaptureFixture
) -> None:
    """Offsets alone cannot tell the two logs apart (Spark's source has that blind spot); the mark of the
    last record read can."""
    _produce(topic, [f"before-{i}" for i in range(3)])
    strict, lenient = _reader(topic, "true"), _reader(topic, "false")
    try:
        rows, end = strict.read(strict.initialOffset())
        assert [v for v, _ in _values(rows)] == ["before-0", "before-1", "before-2"] and end[topic.name]["0"] == 3

        topic.recreate()
        _produce(topic, [f"after-{i}" for i in range(5)])

        with pytest.raises(KafkaSourceError) as failed:
            _read_checked(strict, end)
        message = str(failed.value)
        assert f"data loss on {topic.name}-0: the checkpoint reads from offset 3 but the record at offset 2" in message
        assert "is not the one it read there" in message and "fail_on_data_loss=false" in message

        with caplog.at_level(logging.WARNING, logger="livectl.kafka_source"):
            values, after = _read_checked(lenient, end)
        # every record of the new log, from its beginning: none skipped
        assert values == [(f"after-{i}", i) for i in range(5)] and after[topic.name]["0"] == 5
        assert any(f"data loss on {topic.name}-0" in r.getMessage() for r in caplog.records)
        # and the new log's own offsets check as the same log afterwards
        rows, again = strict.read(after)
        assert _values(rows) == [] and again == after
    finally:
        strict.stop()
        lenient.stop()


def test_a_planned_batch_re_read_from_a_log_written_again_is_data_loss(topic: Topic) -> None:
    """Re-reading a planned batch (the topic deleted and created again) finds other records at its offsets:
    stop by default; with ``fail_on_data_loss=false`` that partition's records are left out (the next read
    takes the new log from its beginning)."""
    _produce(topic, [f"before-{i}" for i in range(3)])
    strict, lenient = _reader(topic, "true"), _reader(topic, "false")
    try:
        start = strict.initialOffset()
        _, end = strict.read(start)
        assert [r[1] for r in strict.readBetweenOffsets(start, end)] == ["before-0", "before-1", "before-2"]

        topic.recreate()
        _produce(topic, [f"after-{i}" for i in range(4)])

        with pytest.raises(
            KafkaSourceError, match="the record at offset 2 is not the one the planned batch ended with"
        ):
            list(strict.readBetweenOffsets(start, end))
        assert [r for r in lenient.readBetweenOffsets(start, end) if r[2] == topic.name and r[3] == 0] == []
    finally:
        strict.stop()
        lenient.stop()
