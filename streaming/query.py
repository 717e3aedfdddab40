"""The controller query: Kafka topics in, ``applyInPandasWithState`` per bucket, ``foreachBatch`` out.

::

    livectl-kafka source (livectl.admin + livectl.broker-events, Kafka offsets as source offsets)
      → mapInPandas(prepare): great-expectations suite, decode, route to buckets (+ one tick per bucket)
      → groupBy(bucket).applyInPandasWithState(make_step(checkpoint)) — core.controller.step per bucket
      → observe("livectl", Kafka's controller metrics)
      → foreachBatch(Dispatcher): ZooKeeper sink, then request sink, then admin results / rejected

``spark.sql.shuffle.partitions`` must equal the bucket count (DESIGN.md, decision 1): every shuffle
partition is a state store written on every micro-batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from streaming.bucket_keys import BucketKeys, checkpoint_scheme, group_keys
from streaming.dispatch import Dispatcher
from streaming.routing import ROUTED_SCHEMA, make_prepare
from streaming.settings import Settings
from streaming.stateful import METRIC_COLUMNS, OUTPUT_SCHEMA, STATE_SCHEMA, make_step

OBSERVATION_NAME = "livectl"


def register_source(spark: Any) -> None:
    from streaming.kafka_source import KafkaDataSource

    spark.dataSource.register(KafkaDataSource)


@dataclass(frozen=True)
class SourceStart:
    """How this run of the query starts reading (:mod:`streaming.kafka_source`): ``starting_offsets``
    for a new checkpoint (``earliest``, ``latest`` or a JSON object of offsets; ``None``: the setting),
    and the failover barrier — no record past the checkpoint until the reference of controller epoch
    ``barrier_epoch`` (or newer) whose snapshot is under ``barrier_path`` is on the broker-events topic."""

    starting_offsets: str | None = None
    barrier_epoch: int | None = None
    barrier_path: str | None = None


def controller_frame(spark: Any, settings: Settings, start: SourceStart | None = None) -> Any:
    """The streaming DataFrame of decision rows (before ``foreachBatch``), with observed metrics."""
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.state import GroupStateTimeout

    from streaming.source_options import SOURCE_NAME

    register_source(spark)
    start = start or SourceStart()
    reader = (
        spark.readStream.format(SOURCE_NAME)
        .option("bootstrap_servers", settings.bootstrap_servers)
        .option("topics", f"{settings.admin_topic},{settings.broker_events_topic}")
        .option("starting_offsets", start.starting_offsets or settings.starting_offsets)
        .option("max_records_per_batch", str(settings.max_records_per_batch))
        .option("fail_on_data_loss", str(settings.fail_on_data_loss).lower())
    )
    # Kafka's security properties reach the source's consumer as ``kafka.<name>``, as with Spark's own
    # Kafka source (Spark redacts options named like passwords in its plans and UI)
    for name, value in settings.kafka_security().properties().items():
        reader = reader.option(f"kafka.{name}", value)
    if start.barrier_epoch is not None:
        reader = reader.option("barrier_topic", settings.broker_events_topic).option(
            "barrier_epoch", str(start.barrier_epoch)
        )
        if start.barrier_path is not None:
            reader = reader.option("barrier_path", start.barrier_path)
    records = reader.load()
    routed = records.mapInPandas(make_prepare(settings.num_buckets, settings.admin_topic), ROUTED_SCHEMA)
    routed = keyed_by_bucket(spark, routed, settings)
    step = make_step(
        settings.checkpoint_dir,
        settings.controller_config(),
        summaries=settings.metrics_port > 0,
        num_buckets=settings.num_buckets,
    )
    decisions = routed.groupBy("bucket").applyInPandasWithState(
        step, OUTPUT_SCHEMA, STATE_SCHEMA, "append", GroupStateTimeout.NoTimeout
    )
    metrics = [F.coalesce(F.sum(F.col(m)), F.lit(0)).alias(m) for m in METRIC_COLUMNS]
    return decisions.observe(
        OBSERVATION_NAME,
        # the query runs only while this driver holds the controller lease
        F.max(F.lit(1)).alias("ActiveControllerCount"),
        *metrics,
        F.count(F.lit(1)).alias("DecisionRows"),
    )


def keyed_by_bucket(spark: Any, routed: Any, settings: Settings) -> Any:
    """``routed`` with each bucket index replaced by its grouping key under the checkpoint's scheme
    (:mod:`streaming.bucket_keys`: one shuffle partition, so one task, per bucket)."""
    from pyspark.sql import functions as F

    from streaming.checkpoint_fs import HadoopCheckpointStore

    store = HadoopCheckpointStore(spark, settings.checkpoint_dir)
    scheme = checkpoint_scheme(store, settings.num_buckets)
    if scheme is BucketKeys.IDENTITY:
        return routed
    keys = F.array(*[F.lit(k) for k in group_keys(settings.num_buckets, scheme)])
    bucket = F.col("bucket")
    return routed.withColumn("bucket", F.when(bucket >= 0, F.element_at(keys, bucket + 1)).otherwise(bucket))


def start_query(spark: Any, settings: Settings, dispatcher: Dispatcher, start: SourceStart | None = None) -> Any:
    """Start the named query with its checkpoint; returns the ``StreamingQuery``."""
    frame = controller_frame(spark, settings, start)
    return (
        frame.writeStream.queryName(settings.query_name)
        .outputMode("append")
        .option("checkpointLocation", settings.checkpoint_dir)
        .trigger(processingTime=settings.trigger_interval)
        .foreachBatch(dispatcher)
        .start()
    )
