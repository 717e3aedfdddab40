"""The Kafka source's options checked without a broker: each bad option is named with its reason; the
security settings reach the options."""

from __future__ import annotations

import pytest

from streaming.source_options import KafkaSourceError, SourceOptions

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


def test_security_settings_reach_the_source_options_and_errors_name_the_setting() -> None:
    from streaming.settings import Settings, SettingsError
    from streaming.source_options import KafkaSourceError, SourceOptions

    s = Settings().with_overrides(
        [
            "kafka_security_protocol=SASL_PLAINTEXT",
            "kafka_sasl_mechanism=PLAIN",
            'kafka_sasl_jaas_config=x username="u" password="pw"',
        ]
    )
    props = s.kafka_security().properties()
    assert props["security.protocol"] == "SASL_PLAINTEXT" and "pw" not in repr(s)
    # what streaming.query gives the source: kafka.<name> options
    options = {"bootstrap_servers": "h:1", "topics": "a", **{f"kafka.{k}": v for k, v in props.items()}}
    parsed = SourceOptions.parse(options)
    assert dict(parsed.security) == props
    with pytest.raises(KafkaSourceError) as e:
        SourceOptions.parse({"bootstrap_servers": "h:1", "topics": "a", "kafka.security.protocol": "TLS"})
    assert e.value.option == "kafka.security.protocol"
    with pytest.raises(SettingsError) as se:
        Settings().with_overrides(["kafka_sasl_mechanism=MD5"])
    assert se.value.key == "kafka_sasl_mechanism"
