"""Spark's Kafka source (``format("kafka")``, connector 4.2.0 on Spark 4.3.0) against livectl's Python source,
on the shared local SparkSession and real Apache Kafka: the same records give the same frame, a checkpoint
Spark's source wrote is continued by the Python source (the replay behind the failover barrier relies on it),
and the choice reads which source wrote a checkpoint."""

from __future__ import annotations

import threading
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer

from sinks.requests import ensure_topics
from streaming.query.pipeline import load_query_source, query_options
from streaming.runtime.checkpoint_fs import FileSystemCheckpointStore, batch_ids, child
from streaming.settings import Settings
from streaming.source.query_source import SourceChoiceError, choose, connector_jars, python_checkpoint

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(not connector_jars(""), reason="Spark's Kafka connector not resolved: run scripts/setup"),
]


class Collector:
    """foreachBatch target: every row of every batch."""

    def __init__(self) -> None:
        self.rows: list[tuple[Any, ...]] = []
        self.lock = threading.Lock()

    def __call__(self, frame: Any, batch_id: int) -> None:
        rows = [tuple(r) for r in frame.collect()]
        with self.lock:
            self.rows.extend(rows)


def _settings(bootstrap: str, suffix: str, **changes: Any) -> Settings:
    return replace(
        Settings(),
        bootstrap_servers=bootstrap,
        admin_topic=f"sk-admin-{suffix}",
        broker_events_topic=f"sk-events-{suffix}",
        **{"max_records_per_batch": 7, **changes},
    )


def _produce(bootstrap: str, s: Settings, start: int, count: int) -> None:
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    for i in range(start, start + count):
        topic = s.admin_topic if i % 3 else s.broker_events_topic
        # a record without a key, and text that is not ASCII, among them
        key = None if i % 4 == 0 else f"k{i}".encode()
        p.send(topic, key=key, value=f'{{"n":{i},"é":"ü"}}'.encode())
    p.flush()
    p.close()


def _drain(spark: Any, s: Settings, checkpoint: Path) -> tuple[Any, list[tuple[Any, ...]]]:
    """Everything the source of ``s`` has now, from ``checkpoint`` (Trigger.AvailableNow); the frame's schema
    and its rows."""
    frame = load_query_source(spark, s, query_options(s))
    sink = Collector()
    query = (
        frame.writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(180)
    assert query.exception() is None
    return frame.schema, sink.rows


def test_both_sources_read_the_same_records_into_the_same_frame(spark: Any, kafka_broker: Any, tmp_path: Path) -> None:
    suffix = uuid.uuid4().hex[:8]
    s = _settings(kafka_broker.bootstrap, suffix)
    ensure_topics(kafka_broker.bootstrap, [s.admin_topic, s.broker_events_topic], partitions=2)
    _produce(kafka_broker.bootstrap, s, 0, 30)

    kafka_schema, kafka_rows = _drain(spark, replace(s, query_source="kafka"), tmp_path / "kafka")
    python_schema, python_rows = _drain(spark, replace(s, query_source="python"), tmp_path / "python")

    assert kafka_schema == python_schema
    assert [f.name for f in kafka_schema.fields] == ["key", "value", "topic", "partition", "offset", "timestamp"]
    assert len(kafka_rows) == 30
    assert sorted(kafka_rows, key=repr) == sorted(python_rows, key=repr)
    assert any(r[0] is None for r in kafka_rows) and any("ü" in r[1] for r in kafka_rows)
    # maxOffsetsPerTrigger came from max_records_per_batch: more than one batch, each planned and committed in
    # the checkpoint Spark wrote, as livectl's store reads it
    store = FileSystemCheckpointStore.for_spark(spark, str(tmp_path / "kafka"))
    offsets = batch_ids(store, child(store.root, "offsets"))
    assert len(offsets) >= 30 // 7
    assert batch_ids(store, child(store.root, "commits")) == offsets == list(range(len(offsets)))


def test_the_python_source_continues_a_checkpoint_spark_s_kafka_source_wrote(
    spark: Any, kafka_broker: Any, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:8]
    s = _settings(kafka_broker.bootstrap, suffix, max_records_per_batch=1000)
    ensure_topics(kafka_broker.bootstrap, [s.admin_topic, s.broker_events_topic], partitions=2)
    checkpoint = tmp_path / "checkpoint"
    store = FileSystemCheckpointStore.for_spark(spark, str(checkpoint))

    def last_offsets() -> str | None:
        planned = batch_ids(store, child(store.root, "offsets"))
        return store.read_text(child(store.root, "offsets", str(planned[-1]))) if planned else None

    _produce(kafka_broker.bootstrap, s, 0, 10)
    _, first = _drain(spark, replace(s, query_source="kafka"), checkpoint)
    assert len(first) == 10
    assert not python_checkpoint(last_offsets())
    kafka_jars = {"spark.jars": ",".join(connector_jars(""))}
    assert choose("auto", kafka_jars, last_offsets(), prefers="kafka").source == "kafka"

    _produce(kafka_broker.bootstrap, s, 10, 5)
    _, second = _drain(spark, replace(s, query_source="python"), checkpoint)
    # exactly the records after Spark's source's last offsets: none again, none skipped
    assert sorted(int(r[1].split(",")[0].split(":")[1]) for r in second) == list(range(10, 15))
    # the Python source's offsets carry its marks: auto stays with it, kafka is refused
    assert python_checkpoint(last_offsets())
    assert choose("auto", kafka_jars, last_offsets(), prefers="kafka").source == "python"
    with pytest.raises(SourceChoiceError, match="the Python source wrote"):
        choose("kafka", kafka_jars, last_offsets())
