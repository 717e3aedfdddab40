"""The livectl-kafka streaming source on the shared local SparkSession, against real Apache Kafka.

One query reads two topics; it is stopped and restarted from the same checkpoint while records keep
arriving: every record is read exactly once across both runs.
"""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer

from sinks.requests import ensure_topics
from streaming.source.kafka_source import KafkaDataSource
from streaming.source.options import SOURCE_NAME, KafkaSourceError, SourceOptions

pytestmark = pytest.mark.spark


def _produce(bootstrap: str, topic: str, start: int, count: int) -> set[tuple[str, str]]:
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    sent = set()
    for i in range(start, start + count):
        key, value = f"k{i % 5}", f"{topic}:{i}"
        p.send(topic, key=key.encode(), value=value.encode())
        sent.add((topic, value))
    p.flush()
    p.close()
    return sent


class Collector:
    """foreachBatch target: keeps every row and the size of every batch."""

    def __init__(self) -> None:
        self.rows: list[tuple[Any, ...]] = []
        self.batch_sizes: list[int] = []
        self.lock = threading.Lock()

    def __call__(self, frame: Any, batch_id: int) -> None:
        rows = [tuple(r) for r in frame.collect()]
        with self.lock:
            self.rows.extend(rows)
            if rows:
                self.batch_sizes.append(len(rows))


def _start(spark: Any, bootstrap: str, topics: list[str], checkpoint: Path, sink: Collector, **opts: str) -> Any:
    reader = (
        spark.readStream.format(SOURCE_NAME)
        .option("bootstrap_servers", bootstrap)
        .option("topics", ",".join(topics))
        .option("max_records_per_batch", "25")
    )
    for k, v in opts.items():
        reader = reader.option(k, v)
    return reader.load().writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint)).start()


def test_options_are_checked_with_the_option_named() -> None:
    with pytest.raises(KafkaSourceError, match="topics: is required"):
        SourceOptions.parse({"bootstrap_servers": "h:1"})
    with pytest.raises(KafkaSourceError, match="starting_offsets"):
        SourceOptions.parse({"kafka.bootstrap.servers": "h:1", "subscribe": "a", "startingOffsets": "middle"})
    opts = SourceOptions.parse({"BOOTSTRAP_SERVERS": "h:1", "topics": "b, a ,b", "maxOffsetsPerTrigger": "5"})
    assert (opts.topics, opts.max_records_per_batch) == (("a", "b"), 5)


def test_records_are_read_exactly_once_across_a_restart(spark: Any, kafka_broker: Any, tmp_path: Path) -> None:
    suffix = uuid.uuid4().hex[:8]
    topics = [f"src-a-{suffix}", f"src-b-{suffix}"]
    ensure_topics(kafka_broker.bootstrap, topics, partitions=2)
    spark.dataSource.register(KafkaDataSource)
    checkpoint = tmp_path / "checkpoint"

    sent = _produce(kafka_broker.bootstrap, topics[0], 0, 40) | _produce(kafka_broker.bootstrap, topics[1], 0, 20)
    first = Collector()
    query = _start(spark, kafka_broker.bootstrap, topics, checkpoint, first)
    query.processAllAvailable()
    query.stop()
    assert {(r[2], r[1]) for r in first.rows} == sent
    assert len(first.rows) == len(sent)
    assert max(first.batch_sizes) <= 25 and len(first.batch_sizes) >= 3
    key, value, topic, partition, offset, timestamp = first.rows[0]
    assert key.startswith("k") and value.startswith(topic) and partition in (0, 1) and offset >= 0
    assert timestamp is not None

    # records produced while the query is down, then a restart from the same checkpoint
    more = _produce(kafka_broker.bootstrap, topics[0], 40, 30) | _produce(kafka_broker.bootstrap, topics[1], 20, 7)
    second = Collector()
    query = _start(spark, kafka_broker.bootstrap, topics, checkpoint, second)
    query.processAllAvailable()
    # and records produced while it runs
    during = _produce(kafka_broker.bootstrap, topics[1], 27, 5)
    query.processAllAvailable()
    query.stop()
    assert {(r[2], r[1]) for r in second.rows} == more | during
    assert len(second.rows) == len(more | during)
    positions = [(r[2], r[3], r[4]) for r in first.rows + second.rows]
    assert len(positions) == len(set(positions))  # none read twice

    # a new checkpoint starting at "latest" sees only what comes after it started
    latest = Collector()
    query = _start(spark, kafka_broker.bootstrap, topics, tmp_path / "latest", latest, starting_offsets="latest")
    query.processAllAvailable()
    after = _produce(kafka_broker.bootstrap, topics[0], 100, 3)
    query.processAllAvailable()
    query.stop()
    assert {(r[2], r[1]) for r in latest.rows} == after


def test_a_planned_batch_is_re_read_exactly(kafka_broker: Any) -> None:
    """What Spark does after a crash between planning and committing a batch: readBetweenOffsets."""
    from streaming.source.kafka_source import KafkaStreamReader

    topic = f"src-c-{uuid.uuid4().hex[:8]}"
    ensure_topics(kafka_broker.bootstrap, [topic], partitions=3)
    _produce(kafka_broker.bootstrap, topic, 0, 50)
    opts = {"bootstrap_servers": kafka_broker.bootstrap, "topics": topic, "max_records_per_batch": "20"}
    reader = KafkaStreamReader(SourceOptions.parse(opts))
    start = reader.initialOffset()
    assert start == {topic: {"0": 0, "1": 0, "2": 0}}
    rows, end = reader.read(start)
    first = list(rows)
    assert len(first) == 20 and sum(end[topic].values()) == 20
    rows2, end2 = reader.read(end)
    second = list(rows2)
    assert len(second) == 20
    # a fresh reader (a restarted query) re-reads both planned batches identically
    again = KafkaStreamReader(SourceOptions.parse(opts))
    assert sorted(again.readBetweenOffsets(start, end)) == sorted(first)
    assert sorted(again.readBetweenOffsets(end, end2)) == sorted(second)
    rest, end3 = again.read(end2)
    assert len(list(rest)) == 10 and sum(end3[topic].values()) == 50
    empty, same = again.read(end3)
    assert list(empty) == [] and same == end3
    reader.stop()
    again.stop()


def test_the_query_uses_the_source_prepared_ahead_only_when_loaded_with_its_options(
    spark: Any, kafka_broker: Any, tmp_path: Path
) -> None:
    from streaming.query.pipeline import SourceStart, StartTimes, controller_frame, prepare_source
    from streaming.settings import Settings

    s = Settings().with_overrides(
        [f"bootstrap_servers={kafka_broker.bootstrap}", f"checkpoint_dir={tmp_path / 'cp'}", "num_buckets=2"]
    )
    prepared = prepare_source(spark, s)
    assert prepared.frame.isStreaming and prepared.frame.schema.simpleString() == (
        "struct<key:string,value:string,topic:string,partition:int,offset:bigint,timestamp:timestamp>"
    )
    # a new checkpoint: the query's source is the one loaded ahead
    times = StartTimes()
    frame = controller_frame(spark, s, SourceStart(), times=times, prepared=prepared)
    assert frame.isStreaming and [name for name, _ in times.phases] == ["source prepared ahead", "plan built"]
    # behind the failover barrier (a used checkpoint): other options, so its own source
    times = StartTimes()
    controller_frame(spark, s, SourceStart(barrier_epoch=3), times=times, prepared=prepared)
    assert [name for name, _ in times.phases] == ["source registered", "source loaded", "plan built"]
