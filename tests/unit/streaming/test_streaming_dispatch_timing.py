"""The dispatcher's public timing hook (``on_batch_timed``): one :class:`BatchTiming` per ``foreachBatch``
call, carried out or failed, so that benchmarks need not patch the dispatcher."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest
from pyspark.errors import AnalysisException

from sinks.errors import ControllerFencedError
from sinks.memory import MemoryRequestSink, MemoryZkSink, MemoryZooKeeper
from sinks.ports import Fence
from streaming.query.dispatch import BatchTiming, Dispatcher

pytestmark = pytest.mark.unit


class _NoJar(AnalysisException):
    """What ``spark.udf.registerJavaFunction`` raises on a driver without livectl's jar
    (``streaming.monitoring.spark_ui.publish_figures`` then announces a job of no task)."""

    def __init__(self) -> None:
        Exception.__init__(self, "[CANNOT_LOAD_FUNCTION_CLASS] Cannot load class livectl.spark.BatchFigures")

    def getCondition(self) -> str:
        return "CANNOT_LOAD_FUNCTION_CLASS"


class _Udf:
    def registerJavaFunction(self, name: str, java_class: str, return_type: Any) -> None:
        raise _NoJar()


class _SparkContext:
    applicationId = "local-dispatch-timing"  # noqa: N815 (SparkContext's name)

    def __init__(self) -> None:
        self.properties: dict[str, str | None] = {}
        self.descriptions: list[str] = []
        self.empty_jobs = 0

    def setJobDescription(self, text: str) -> None:
        self.descriptions.append(text)
        self.properties["spark.job.description"] = text

    def getLocalProperty(self, key: str) -> str | None:
        return self.properties.get(key)

    def setLocalProperty(self, key: str, value: str | None) -> None:
        self.properties[key] = value

    def emptyRDD(self) -> _SparkContext:
        return self

    def count(self) -> int:
        self.empty_jobs += 1
        return 0


class _Session:
    def __init__(self) -> None:
        self.sparkContext = _SparkContext()
        self.udf = _Udf()


class _BatchFrame:
    """What ``foreachBatch`` hands the dispatcher: ``toPandas()`` and its session."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self.frame = frame
        self.sparkSession = _Session()

    def toPandas(self) -> pd.DataFrame:
        return self.frame


def _dispatcher(timings: list[BatchTiming], **kwargs: Any) -> Dispatcher:
    fence = Fence(controller_epoch=1, epoch_zk_version=0)
    zk = MemoryZooKeeper()
    zk.create("/controller_epoch", b"1")
    return Dispatcher(MemoryZkSink(zk, fence, "q"), MemoryRequestSink(fence), on_batch_timed=timings.append, **kwargs)


def _empty() -> pd.DataFrame:
    return pd.DataFrame({"bucket": [], "seq": [], "kind": [], "payload": []})


def test_every_batch_is_timed_in_order_spark_job_then_dispatch() -> None:
    timings: list[BatchTiming] = []
    d = _dispatcher(timings)
    for batch_id in (0, 1):
        d(_BatchFrame(_empty()), batch_id)
    assert [t.batch_id for t in timings] == [0, 1]
    for t in timings:
        assert t.start <= t.to_pandas_end <= t.end
    assert d.last_report is not None and d.last_report.batch_id == 1


def test_a_failed_batch_is_timed_too() -> None:
    timings: list[BatchTiming] = []
    d = _dispatcher(timings, fenced=True)
    with pytest.raises(ControllerFencedError):
        d(_BatchFrame(_empty()), 5)
    assert [t.batch_id for t in timings] == [5]
    assert timings[0].start <= timings[0].to_pandas_end <= timings[0].end
