"""Which source the query reads with (streaming.source.query_source), the connector's jars, and Spark's Kafka source's
options: no Spark (the sources themselves: tests/spark/streaming/test_streaming_spark_kafka_source.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streaming.query.pipeline import SourceStart, kafka_options, query_options, run_source
from streaming.settings import Settings, SettingsError
from streaming.source.query_source import (
    AUTO_PREFERS,
    SourceChoiceError,
    choose,
    connector_configured,
    connector_jars,
    java_security,
    python_checkpoint,
    without_marks,
)

pytestmark = pytest.mark.unit

JARS = {"spark.jars": "/x/livectl-spark.jar,/c/spark-sql-kafka-0-10_2.13-4.2.0.jar,/c/kafka-clients-3.9.2.jar"}
PACKAGES = {"spark.jars.packages": "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"}
KAFKA_WRITTEN = 'v1\n{"batchWatermarkMs":0}\n{"adm":{"0":3},"ev":{"0":5}}'
PYTHON_WRITTEN = (
    'v1\n{"batchWatermarkMs":0}\n{"@last":{"ev":{"0":"1700000000000-0a1b2c3d"}},"adm":{"0":0},"ev":{"0":5}}'
)


def test_auto_takes_the_source_measured_faster_the_python_one_and_says_so() -> None:
    assert AUTO_PREFERS == "python"
    for conf in ({}, JARS, PACKAGES):
        choice = choose("auto", conf)
        assert choice.source == "python"
        assert choice.line() == (
            "query source: livectl's Python Kafka source: query_source=auto takes the source measured faster "
            "(docs/spark-kafka-source.md); query_source=kafka for Spark's"
        )


def test_auto_preferring_spark_s_source_takes_it_when_its_connector_is_on_the_class_path() -> None:
    assert choose("auto", JARS, prefers="kafka").source == "kafka"
    line = choose("auto", PACKAGES, prefers="kafka").line()
    assert "spark.jars.packages has org.apache.spark:spark-sql-kafka-0-10" in line
    without = choose("auto", {"spark.jars": "/x/livectl-spark.jar"}, prefers="kafka")
    assert without.source == "python"
    assert without.line() == (
        "query source: livectl's Python Kafka source: query_source=auto, no spark-sql-kafka-0-10 jar on "
        "spark.jars / spark.jars.packages"
    )
    # a checkpoint the Python source wrote stays with it
    assert choose("auto", JARS, PYTHON_WRITTEN, prefers="kafka").source == "python"
    assert choose("auto", JARS, KAFKA_WRITTEN, prefers="kafka").source == "kafka"


def test_python_is_taken_as_asked_and_kafka_is_refused_where_it_cannot_run() -> None:
    assert choose("python", JARS).source == "python"
    assert choose("kafka", JARS, KAFKA_WRITTEN).source == "kafka"
    with pytest.raises(SourceChoiceError, match=r"query_source'.*needs Spark's Kafka connector"):
        choose("kafka", {})
    with pytest.raises(SourceChoiceError, match="kafka cannot read this checkpoint: the Python source wrote"):
        choose("kafka", JARS, PYTHON_WRITTEN)
    with pytest.raises(SourceChoiceError, match="must be one of auto, kafka, python"):
        choose("spark", JARS)


def test_the_setting_is_checked_and_named() -> None:
    assert Settings().query_source == "auto"
    assert Settings().with_overrides(["query_source=kafka"]).query_source == "kafka"
    with pytest.raises(SettingsError, match="query_source"):
        Settings().with_overrides(["query_source=jvm"])


def test_which_source_wrote_a_checkpoint() -> None:
    assert not python_checkpoint(None)
    assert not python_checkpoint(KAFKA_WRITTEN)
    assert python_checkpoint(PYTHON_WRITTEN)


def test_connector_jars_found_in_the_setup_s_folder_or_named_by_the_setting(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    assert connector_jars("", [cache]) == []
    for name in ("spark-sql-kafka-0-10_2.13-4.2.0.jar", "kafka-clients-3.9.2.jar", "commons-pool2-2.13.1.jar"):
        (cache / name).write_bytes(b"")
    found = connector_jars("", [tmp_path / "absent", cache])
    assert [Path(j).name for j in found] == [
        "commons-pool2-2.13.1.jar",
        "kafka-clients-3.9.2.jar",
        "spark-sql-kafka-0-10_2.13-4.2.0.jar",
    ]
    assert connector_jars(str(cache)) == found
    one = str(cache / "spark-sql-kafka-0-10_2.13-4.2.0.jar")
    assert connector_jars(one) == [one]
    assert connector_configured({"spark.jars": ",".join(found)}) is not None
    with pytest.raises(SourceChoiceError, match=r"spark_kafka_jars': no such jar file: /nowhere\.jar"):
        connector_jars("/nowhere.jar")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SourceChoiceError, match="holds no spark-sql-kafka-0-10 jar"):
        connector_jars(str(empty))


def _settings(*overrides: str) -> Settings:
    return Settings().with_overrides(
        ["bootstrap_servers=b:9", "admin_topic=adm", "broker_events_topic=ev", "max_records_per_batch=77", *overrides]
    )


def test_spark_s_kafka_source_options_from_livectl_s_settings() -> None:
    jaas = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="c" password="p";'
    s = _settings(
        "query_source=kafka",
        "fail_on_data_loss=false",
        "kafka_security_protocol=SASL_SSL",
        "kafka_sasl_mechanism=SCRAM-SHA-512",
        f"kafka_sasl_jaas_config={jaas}",
        "kafka_ssl_truststore_location=/ca.pem",
    )
    assert run_source(s) == "kafka"
    assert query_options(s) == kafka_options(s)
    assert kafka_options(s) == {
        "kafka.bootstrap.servers": "b:9",
        "subscribe": "adm,ev",
        "startingOffsets": "earliest",
        "failOnDataLoss": "false",
        "maxOffsetsPerTrigger": "77",
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": jaas,
        "kafka.ssl.truststore.location": "/ca.pem",
        "kafka.ssl.truststore.type": "PEM",
    }
    # behind the failover barrier: the reference is published before the start; the run is not capped
    marked = json.dumps({"adm": {"0": 3}, "ev": {"0": 5}, "@last": {"ev": {"0": "1-00000000"}}})
    behind = kafka_options(s, SourceStart(starting_offsets=marked, barrier_epoch=4, barrier_path="/c/f"))
    assert "maxOffsetsPerTrigger" not in behind
    assert json.loads(behind["startingOffsets"]) == {"adm": {"0": 3}, "ev": {"0": 5}}
    # unresolved (a caller outside the controller): the Python source, as before
    assert run_source(_settings()) == "python" and "topics" in query_options(_settings())


def test_security_properties_as_the_java_client_s() -> None:
    assert java_security({"security.protocol": "SSL", "ssl.ca.location": "/ca.pem"}) == {
        "security.protocol": "SSL",
        "ssl.truststore.location": "/ca.pem",
        "ssl.truststore.type": "PEM",
    }
    # Java's names as livectl's clients take them (PEM files): Java's default store type is JKS
    pem = {"ssl.truststore.location": "/ca.pem", "ssl.keystore.location": "/me.pem", "ssl.key.password": "k"}
    assert java_security(pem) == {**pem, "ssl.truststore.type": "PEM", "ssl.keystore.type": "PEM"}
    said = {**pem, "ssl.truststore.type": "PEM", "ssl.keystore.type": "PEM"}
    assert java_security(said) == said
    jaas = java_security({"sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "u", "sasl.password": 'p"w'})
    assert jaas["sasl.jaas.config"] == (
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p\\"w";'
    )
    with pytest.raises(SourceChoiceError, match=r"'ssl\.key\.location': Spark's Kafka source"):
        java_security({"ssl.key.location": "/k.pem"})


def test_starting_offsets_lose_the_python_source_s_marks() -> None:
    assert without_marks("latest") == "latest"
    assert without_marks('{"@last":{"a":{"0":"m"}},"a":{"0":4}}') == '{"a":{"0":4}}'
