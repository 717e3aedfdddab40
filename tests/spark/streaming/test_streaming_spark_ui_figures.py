"""The controller's figures in Spark's Stages tab: named accumulators of the one-task job after each batch.

The UI is disabled in the shared test session; Spark's status store, which the Stages tab and the REST API
``/api/v1/applications/<id>/stages`` (``accumulatorUpdates``) both read, is kept regardless. The session
has the shipped ``livectl-spark.jar`` on ``spark.jars``, as ``livectl run`` gives it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pyspark.sql.types import LongType
from spark_status import job_descriptions, stage_figures

from sinks.memory import MemoryRequestSink, MemoryZkSink, MemoryZooKeeper
from sinks.ports import Fence
from streaming.monitoring.spark_ui import FIGURES_CLASS, FIGURES_PROPERTY
from streaming.query.dispatch import Dispatcher
from streaming.query.stateful import KIND_METRICS, METRIC_COLUMNS, OUTPUT_SCHEMA

pytestmark = pytest.mark.spark


def test_each_batch_stage_lists_the_figures_after_it_as_named_accumulators(spark: Any) -> None:
    fence = Fence(4, 0)
    zk = MemoryZooKeeper()
    zk.create("/controller_epoch", b"4")
    d = Dispatcher(MemoryZkSink(zk, fence, "q"), MemoryRequestSink(fence), controller_id=1000, controller_epoch=4)
    sc = spark.sparkContext

    def batch(batch_id: int, figures: dict[str, int]) -> None:
        row = (0, 0, KIND_METRICS, json.dumps(figures), *[figures[c] for c in METRIC_COLUMNS], None)
        d(spark.createDataFrame([row], OUTPUT_SCHEMA), batch_id)
        assert d.figures_job is not None, "the jar is on the session's spark.jars: the figures job ran"
        d.figures_job.result(120)  # the job runs in a thread of its own; its task adds the figures

    first = dict.fromkeys(METRIC_COLUMNS, 0) | {"OfflinePartitionsCount": 2, "GlobalPartitionCount": 30}
    batch(68, first)
    batch(69, first | {"OfflinePartitionsCount": 0, "GlobalTopicCount": 4})
    # the status store is fed by Spark's listener bus; its default 10 s wait is short on a loaded machine
    sc._jsc.sc().listenerBus().waitUntilEmpty(120_000)

    newest = stage_figures(sc, limit=2)
    # each stage its own batch's figures (fresh accumulators: never a sum over batches), newest first
    assert newest[0] == (
        "livectl figures after batch 69",
        dict.fromkeys(METRIC_COLUMNS, 0)
        | {"GlobalPartitionCount": 30, "GlobalTopicCount": 4, "ActiveControllerCount": 1},
    )
    assert newest[1][0] == "livectl figures after batch 68"
    assert newest[1][1]["OfflinePartitionsCount"] == 2 and newest[1][1]["GlobalTopicCount"] == 0
    # the stage's job carries the batch summary as its description, and leaves the thread's own as it was
    summary = job_descriptions(sc, limit=1)[0]
    assert summary.startswith("livectl c1000 e4 batch 69: offline 0; imbalanced 0, topics 4")
    assert sc.getLocalProperty("spark.job.description") == "livectl c1000 e4 batch 69: deciding"
    assert sc.getLocalProperty("callSite.short") is None

    # bad input to the JVM side is refused with the line and the reason, and the property is cleared
    sc.setLocalProperty(FIGURES_PROPERTY, "OfflinePartitionsCount\t1\nGlobalTopicCount\tfour\n")
    refused = "figures line 2: value of GlobalTopicCount is not a whole number: 'four'"
    try:
        with pytest.raises(Exception, match=refused):
            spark.udf.registerJavaFunction("livectl_bad_figures", FIGURES_CLASS, LongType())
    finally:
        sc.setLocalProperty(FIGURES_PROPERTY, None)
