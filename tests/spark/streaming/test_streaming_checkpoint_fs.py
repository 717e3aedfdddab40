"""livectl's files beside the checkpoint go through Hadoop's FileSystem (the driver's JVM), and reach the
executors' Python workers only as the copies the driver shipped with ``SparkContext.addFile``.

HDFS and S3 cannot be had on this machine: the ``file:`` scheme (Hadoop's LocalFileSystem, the same
``FileSystem`` API and the same code path) and bare paths (Hadoop's default file system) stand in for them.
"""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

from core import events as ev
from core.codec.events import event_from_json
from core.model import Broker, TopicPartition
from core.snapshot import PartitionStateZnode, TopicZnode, ZkSnapshot
from livectl import local
from streaming.driver.app import ControllerApp
from streaming.driver.startup import has_committed_batch, resolve_buckets, uncommitted_batch
from streaming.query import failover
from streaming.runtime.checkpoint_fs import CheckpointError, HadoopCheckpointStore, batch_ids, child
from streaming.settings import Settings

pytestmark = pytest.mark.spark

BUCKETS = 4


def test_files_go_through_hadoop_for_a_file_uri(spark: Any, tmp_path: Path) -> None:
    uri = (tmp_path / "ck").as_uri()  # file:///…
    store = HadoopCheckpointStore(spark, uri)
    assert store.root == f"file:{tmp_path / 'ck'}"  # Hadoop's qualified form of the same folder
    meta = child(store.root, "livectl.json")
    assert not store.exists(meta) and store.list_names(store.root) == []
    store.write_text(meta, '{"version":1,"num_buckets":3}')
    store.write_text(meta, '{"version":1,"num_buckets":4}')  # a rewrite replaces the file
    assert json.loads(store.read_text(meta))["num_buckets"] == 4
    # on the local disk where the URI says, with no temporary file left behind
    assert json.loads((tmp_path / "ck" / "livectl.json").read_text())["num_buckets"] == 4
    assert "livectl.json" in store.list_names(store.root)
    assert not [n for n in store.list_names(store.root) if n.endswith(".tmp")]
    # Spark's commit/offset listings: batch ids only, not its .crc or temporary files
    for name in ("0", "1", ".1.crc", "2", ".2.tmp"):
        (tmp_path / "ck" / "offsets").mkdir(exist_ok=True)
        (tmp_path / "ck" / "offsets" / name).write_text("v1")
    (tmp_path / "ck" / "commits").mkdir()
    (tmp_path / "ck" / "commits" / "0").write_text("v1")
    assert batch_ids(store, child(store.root, "offsets")) == [0, 1, 2]
    assert has_committed_batch(store) and uncommitted_batch(store) == 2
    with pytest.raises(CheckpointError) as e:
        store.read_text(child(store.root, "missing.json"))
    assert e.value.uri.endswith("missing.json") and "FileNotFoundException" in e.value.reason


def test_a_write_is_staged_locally_and_copied_by_hadoop(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bytes reach the JVM as a local file Hadoop copies (not through py4j): the text arrives whole,
    nothing is left in the driver's temporary folder, and a write Hadoop refuses is a CheckpointError that
    leaves nothing behind either."""
    staging = tmp_path / "driver-tmp"
    staging.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(staging))
    store = HadoopCheckpointStore(spark, (tmp_path / "ck").as_uri())
    big = child(store.root, "failover", "epoch-1", "bucket-0.json")
    text = '{"a":"' + "é∂x" * 2_000_000 + '"}'  # 6M characters, not all ASCII
    store.write_text(big, text)
    assert store.read_text(big) == text
    assert (tmp_path / "ck" / "failover" / "epoch-1" / "bucket-0.json").read_text(encoding="utf-8") == text
    assert list(staging.iterdir()) == []
    (tmp_path / "ck" / "plain").write_text("a file where a folder is needed")
    with pytest.raises(CheckpointError) as e:
        store.write_text(child(store.root, "plain", "x.json"), "{}")
    assert e.value.uri.endswith("plain/x.json") and "cannot write it" in str(e.value)
    assert list(staging.iterdir()) == []


def test_a_bare_path_is_the_default_file_system(spark: Any, tmp_path: Path) -> None:
    store = HadoopCheckpointStore(spark, str(tmp_path / "bare"))
    assert store.root == f"file:{tmp_path / 'bare'}"
    settings = Settings.from_mapping({"checkpoint_dir": str(tmp_path / "bare"), "num_buckets": 3})
    previous = spark.conf.get("spark.sql.shuffle.partitions")
    try:
        assert resolve_buckets(spark, settings, store).num_buckets == 3
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", previous)
    assert json.loads((tmp_path / "bare" / "livectl.json").read_text())["num_buckets"] == 3
    relative = HadoopCheckpointStore(spark, f"rel-{uuid.uuid4().hex[:6]}/ck")
    # relative to the default file system's working folder, as Spark's checkpointLocation is
    assert relative.root.startswith("file:/") and relative.root.endswith("/ck")


def test_a_scheme_spark_cannot_open_is_refused_with_the_uri_and_sparks_reason(spark: Any) -> None:
    with pytest.raises(CheckpointError) as e:
        HadoopCheckpointStore(spark, "nosuch://bucket/livectl")
    assert e.value.uri == "nosuch://bucket/livectl"
    assert 'No FileSystem for scheme "nosuch"' in e.value.reason
    assert str(e.value).startswith("checkpoint nosuch://bucket/livectl: Spark cannot open it:")


def _load_in_worker(folder: str) -> Any:
    def load(bucket: int) -> tuple[int, str | None, bool]:
        # runs in a Python worker: no JVM gateway, only the files Spark fetched for the task
        shipped = failover.ShippedSnapshots()
        return bucket, shipped.read(folder, bucket), shipped.exists(child(folder, "elsewhere"), bucket)

    return load


def test_executors_read_the_snapshot_the_driver_shipped(spark: Any, tmp_path: Path) -> None:
    store = HadoopCheckpointStore(spark, (tmp_path / "ck").as_uri())
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


def test_the_controller_refuses_a_checkpoint_spark_cannot_open(
    spark: Any, zookeeper: local.Service, tmp_path: Path
) -> None:
    settings = Settings.from_mapping(
        {"zookeeper_connect": zookeeper.connect, "checkpoint_dir": "nosuch://bucket/livectl", "num_buckets": 2}
    )
    app = ControllerApp(settings, spark=spark)
    ready = threading.Event()
    with pytest.raises(CheckpointError) as e:
        app.run(ready)
    assert e.value.uri == "nosuch://bucket/livectl" and 'scheme "nosuch"' in e.value.reason
    assert app.fence is None and not ready.is_set()  # refused before the election
