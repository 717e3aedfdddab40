"""The checkpoint's files on a SparkSession: a bare path qualified as the session says, the failover slices
reaching the executors' Python workers only as the copies the driver shipped with ``SparkContext.addFile``,
and the controller refusing a location it cannot open before its election. The store itself, without
Spark: ``tests/unit/streaming/test_streaming_checkpoint_fs.py``.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from core import events as ev
from core.codec.events import event_from_json
from core.model import Broker, TopicPartition
from core.snapshot import PartitionStateZnode, TopicZnode, ZkSnapshot
from livectl import local
from streaming.driver.app import ControllerApp
from streaming.driver.startup import resolve_buckets
from streaming.query import failover
from streaming.runtime.checkpoint_fs import CheckpointError, FileSystemCheckpointStore, child
from streaming.settings import Settings

pytestmark = pytest.mark.spark

BUCKETS = 4


def test_a_bare_path_is_local_on_a_session_without_a_default_file_system(spark: Any, tmp_path: Path) -> None:
    assert spark.sparkContext.getConf().get("spark.hadoop.fs.defaultFS", None) is None
    store = FileSystemCheckpointStore.for_spark(spark, str(tmp_path / "bare"))
    assert store.root == f"file:{tmp_path / 'bare'}"
    settings = Settings.from_mapping({"checkpoint_dir": str(tmp_path / "bare"), "num_buckets": 3})
    previous = spark.conf.get("spark.sql.shuffle.partitions")
    try:
        assert resolve_buckets(spark, settings, store).num_buckets == 3
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", previous)
    assert json.loads((tmp_path / "bare" / "livectl.json").read_text())["num_buckets"] == 3


def _load_in_worker(folder: str) -> Any:
    def load(bucket: int) -> tuple[int, str | None, bool]:
        # runs in a Python worker: no JVM gateway, only the files Spark fetched for the task
        shipped = failover.ShippedSnapshots()
        return bucket, shipped.read(folder, bucket), shipped.exists(child(folder, "elsewhere"), bucket)

    return load


def test_executors_read_the_snapshot_the_driver_shipped(spark: Any, tmp_path: Path) -> None:
    store = FileSystemCheckpointStore((tmp_path / "ck").as_uri())
    topics = tuple(TopicZnode(f"t{i}", ((0, (1, 2)),)) for i in range(12))
    states = tuple((TopicPartition(f"t{i}", 0), PartitionStateZnode(1, 0, (1, 2), 1, 0)) for i in range(12))
    snap = ZkSnapshot(5, 4, (Broker(1, 7), Broker(2, 8)), topics, states)
    ref = failover.write_snapshot(store, 1000, snap, BUCKETS)
    folder = str(ref["path"])
    assert folder == child(store.root, "failover", "epoch-5")
    assert sorted(store.list_names(folder)) == [f"bucket-{b}.json" for b in range(BUCKETS)]
    assert (tmp_path / "ck" / "failover" / "epoch-5" / "bucket-0.json").is_file()

    assert failover.ship_snapshots(spark, store, folder) == BUCKETS
    assert failover.ship_snapshots(spark, store) == 0  # at start: every epoch, but each slice once
    # the driver's staged copies live in Spark's own folder of added files, which Spark deletes
    from pyspark import SparkFiles

    staged = Path(failover.staging_folder(spark))
    assert staged.parent == Path(SparkFiles.getRootDirectory())
    assert len([p for p in staged.iterdir() if p.name.endswith(".json")]) >= BUCKETS
    rows = spark.sparkContext.parallelize(range(BUCKETS), BUCKETS).map(_load_in_worker(folder)).collect()
    parts = failover.split_snapshot(snap, BUCKETS)
    for bucket, text, elsewhere in sorted(rows):
        assert text is not None, f"bucket {bucket}: the worker found no shipped copy"
        event = event_from_json(text)
        assert isinstance(event, ev.ControllerFailover) and event.snapshot == parts[bucket]
        assert not elsewhere  # a folder never shipped is not found
    # the step's check, as on the executors: the shipped copy is there, another checkpoint's is not
    shipped = failover.ShippedSnapshots()
    assert failover.unusable_reason(ref, 0, 4, store.root, shipped) is None
    other = {**ref, "path": child(store.root + "-other", "failover", "epoch-5")}
    assert "another checkpoint" in str(failover.unusable_reason(other, 0, 4, store.root, shipped))


def test_the_controller_refuses_a_checkpoint_it_cannot_open(
    spark: Any, zookeeper: local.Service, tmp_path: Path
) -> None:
    settings = Settings.from_mapping(
        {"zookeeper_connect": zookeeper.connect, "checkpoint_dir": "nosuch://bucket/livectl", "num_buckets": 2}
    )
    app = ControllerApp(settings, spark=spark)
    ready = threading.Event()
    with pytest.raises(CheckpointError) as e:
        app.run(ready)
    assert e.value.uri == "nosuch://bucket/livectl" and "Unrecognized filesystem type" in e.value.reason
    assert app.fence is None and not ready.is_set()  # refused before the election
