"""The state-change log written through ``pyarrow.fs`` and read by Spark, and the Spark UI's job descriptions.

HDFS cannot be had on this machine: the ``file:`` scheme (pyarrow's ``LocalFileSystem``, the same ``FileSystem``
API and code path) stands in for it. The UI is disabled in the shared test session; Spark's status store,
which the Jobs tab and the REST API ``/api/v1/applications/<id>/jobs`` both read, is kept regardless.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from spark_status import job_descriptions

from admin.audit import read_spark
from core import decisions as dc
from core.kafka.requests import RequestApi, WireBody
from sinks.memory import MemoryRequestSink, MemoryZkSink, MemoryZooKeeper
from sinks.ports import Fence
from streaming.monitoring.audit_log import AuditLog, FileSystemAuditFiles
from streaming.monitoring.audit_rows import AuditBatch
from streaming.query.dispatch import Dispatcher
from streaming.query.stateful import KIND_METRICS, METRIC_COLUMNS, OUTPUT_SCHEMA
from streaming.runtime.checkpoint_fs import FileSystemCheckpointStore

pytestmark = pytest.mark.spark

T0 = dt.datetime(2026, 11, 23, 23, 59, 59, tzinfo=dt.UTC)


def lai(broker: int, partition: int, leader: int) -> dc.BrokerRequest:
    body = {
        "controllerId": 1000,
        "controllerEpoch": 4,
        "topicStates": [
            {
                "topicName": "orders",
                "partitionStates": [{"partitionIndex": partition, "leader": leader, "leaderEpoch": 1, "isr": [1, 2]}],
            }
        ],
    }
    return dc.BrokerRequest(broker, RequestApi.LEADER_AND_ISR, WireBody(body))


def test_the_log_is_appended_once_and_spark_sql_reads_it(spark: Any, tmp_path: Path) -> None:
    class CrashOnce(FileSystemAuditFiles):
        crashed = False

        def write_bytes(self, uri: str, data: bytes) -> None:
            super().write_bytes(uri, data)
            if not self.crashed:
                self.crashed = True
                raise OSError("driver killed after the data file")

    files = CrashOnce.for_spark(spark, (tmp_path / "ck-audit").as_uri())
    checkpoint = FileSystemCheckpointStore.for_spark(spark, (tmp_path / "ck").as_uri())
    now = [T0]
    log = AuditLog(files, checkpoint, 1000, 4, clock=lambda: now[0], log_lines=False)
    b0 = AuditBatch(0, requests=[lai(1, 0, 1), lai(2, 0, 1)])
    with pytest.raises(OSError):
        log(b0)
    now[0] = T0 + dt.timedelta(seconds=2)
    log(b0)  # Spark's replay of batch 0: the same file, the first attempt's time
    log(b0)  # and again after the commit: nothing
    log(AuditBatch(1, admin_results=[dc.AdminResult("r7", "create_topic", dc.AdminStatus.OK)]))
    on_disk = sorted(p.relative_to(tmp_path / "ck-audit") for p in (tmp_path / "ck-audit").rglob("*.parquet"))
    assert [str(p.parent) for p in on_disk] == ["date=2026-11-23", "date=2026-11-24"]

    spark.read.parquet(files.root).createOrReplaceTempView("audit_once")
    rows = spark.sql(
        "SELECT date, batch_id, kind, action, topic, partition, brokers, request_id FROM audit_once "
        "ORDER BY batch_id, seq"
    ).collect()
    assert [(str(r.date), r.batch_id, r.kind, r.topic, r.partition, sorted(r.brokers or [])) for r in rows] == [
        ("2026-11-23", 0, "request", "orders", 0, [1, 2]),
        ("2026-11-24", 1, "admin_result", None, None, []),
    ]
    # livectl audit's reader for URIs other than local paths: Spark
    found = read_spark(files.root, request_id="r7")
    assert [(r["batch_id"], r["outcome"]) for r in found] == [(1, "ok")]
    assert found[0]["time"] == T0 + dt.timedelta(seconds=2)
    assert read_spark(files.root, topic="orders", since=T0 + dt.timedelta(seconds=1)) == []
    # a table that is not there: livectl audit's "no state-change log" (Spark's PATH_NOT_FOUND)
    with pytest.raises(FileNotFoundError):
        read_spark((tmp_path / "no-audit").as_uri())


def test_the_jobs_tab_says_the_figures_after_the_batch(spark: Any) -> None:
    fence = Fence(4, 0)
    zk = MemoryZooKeeper()
    zk.create("/controller_epoch", b"4")
    d = Dispatcher(MemoryZkSink(zk, fence, "q"), MemoryRequestSink(fence), controller_id=1000, controller_epoch=4)
    figures = dict.fromkeys(METRIC_COLUMNS, 0) | {"UnderReplicatedPartitions": 3, "ReassigningPartitions": 2}
    figures["GlobalPartitionCount"] = 30
    row = (0, 0, KIND_METRICS, json.dumps(figures), *[figures[c] for c in METRIC_COLUMNS], None)
    d(spark.createDataFrame([row], OUTPUT_SCHEMA), 68)
    assert d.figures_job is not None, "the jar is on the session's spark.jars: the figures job ran"
    d.figures_job.result(120)  # the job runs in a thread of its own
    newest = job_descriptions(spark.sparkContext, limit=5)
    # the figures job runs on a thread of its own: beside the batch's jobs, in either order
    [said] = [x for x in newest if x.startswith("livectl c1000 e4 batch 68: offline 0, URP 3, reassigning 2; ")]
    assert said.startswith("livectl c1000 e4 batch 68: offline 0, URP 3, reassigning 2; imbalanced 0"), said
    assert "partitions 30" in said
    assert "livectl c1000 e4 batch 68: deciding" in newest
    # the announcement left the thread's description as it was
    assert spark.sparkContext.getLocalProperty("spark.job.description") == "livectl c1000 e4 batch 68: deciding"
