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

from typing import Any

from streaming.dispatch import Dispatcher
from streaming.routing import ROUTED_SCHEMA, make_prepare
from streaming.settings import Settings
from streaming.stateful import METRIC_COLUMNS, OUTPUT_SCHEMA, STATE_SCHEMA, make_step

OBSERVATION_NAME = "livectl"


def register_source(spark: Any) -> None:
    from streaming.kafka_source import KafkaDataSource

    spark.dataSource.register(KafkaDataSource)


def controller_frame(spark: Any, settings: Settings) -> Any:
    """The streaming DataFrame of decision rows (before ``foreachBatch``), with observed metrics."""
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.state import GroupStateTimeout

    from streaming.kafka_source import SOURCE_NAME

    register_source(spark)
    records = (
        spark.readStream.format(SOURCE_NAME)
        .option("bootstrap_servers", settings.bootstrap_servers)
        .option("topics", f"{settings.admin_topic},{settings.broker_events_topic}")
        .option("starting_offsets", settings.starting_offsets)
        .option("max_records_per_batch", str(settings.max_records_per_batch))
        .option("fail_on_data_loss", str(settings.fail_on_data_loss).lower())
    )
    # Kafka's security properties reach the source's consumer as ``kafka.<name>``, as with Spark's own
    # Kafka source (Spark redacts options named like passwords in its plans and UI)
    for name, value in settings.kafka_security().properties().items():
        records = records.option(f"kafka.{name}", value)
    records = records.load()
    routed = records.mapInPandas(make_prepare(settings.num_buckets, settings.admin_topic), ROUTED_SCHEMA)
    decisions = routed.groupBy("bucket").applyInPandasWithState(
        make_step(settings.checkpoint_dir), OUTPUT_SCHEMA, STATE_SCHEMA, "append", GroupStateTimeout.NoTimeout
    )
    metrics = [F.coalesce(F.sum(F.col(m)), F.lit(0)).alias(m) for m in METRIC_COLUMNS]
    return decisions.observe(
        OBSERVATION_NAME,
        # the query runs only while this driver holds the controller lease
        F.max(F.lit(1)).alias("ActiveControllerCount"),
        *metrics,
        F.count(F.lit(1)).alias("DecisionRows"),
    )


def start_query(spark: Any, settings: Settings, dispatcher: Dispatcher) -> Any:
    """Start the named query with its checkpoint; returns the ``StreamingQuery``."""
    frame = controller_frame(spark, settings)
    return (
        frame.writeStream.queryName(settings.query_name)
        .outputMode("append")
        .option("checkpointLocation", settings.checkpoint_dir)
        .trigger(processingTime=settings.trigger_interval)
        .foreachBatch(dispatcher)
        .start()
    )
