"""livectl's files beside the checkpoint go through ``pyarrow.fs`` for the checkpoint's URI, with no Spark.

HDFS and S3 cannot be had on this machine: the ``file:`` scheme (pyarrow's ``LocalFileSystem``, the same
``FileSystem`` API and the same code path) and bare paths stand in for them; the other schemes are shown
refused or qualified without reaching a server. The Spark side (the session's default file system, the
executors' shipped copies, the controller's refusal): ``tests/spark/streaming/test_streaming_checkpoint_fs_spark.py``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from streaming.driver.startup import has_committed_batch, uncommitted_batch
from streaming.query.bucket_keys import BucketKeys, checkpoint_meta, checkpoint_scheme
from streaming.runtime.checkpoint_fs import (
    CheckpointError,
    FileSystemCheckpointStore,
    batch_ids,
    child,
    qualify,
    split_uri,
)

pytestmark = pytest.mark.unit


def test_files_go_through_the_file_system_of_a_file_uri(tmp_path: Path) -> None:
    uri = (tmp_path / "ck").as_uri()  # file:///…
    store = FileSystemCheckpointStore(uri)
    assert store.root == f"file:{tmp_path / 'ck'}"  # Hadoop's qualified form of the same folder, as Spark names it
    meta = child(store.root, "livectl.json")
    assert not store.exists(meta) and store.list_names(store.root) == []
    store.write_text(meta, '{"version":1,"num_buckets":3}')
    store.write_text(meta, '{"version":1,"num_buckets":4}')  # a rewrite replaces the file
    assert json.loads(store.read_text(meta))["num_buckets"] == 4
    # on the local disk where the URI says, with no temporary file left behind
    assert json.loads((tmp_path / "ck" / "livectl.json").read_text())["num_buckets"] == 4
    assert store.list_names(store.root) == ["livectl.json"]
    assert store.exists(store.root) and store.exists(meta)
    # Spark's commit/offset listings: batch ids only, not its .crc or temporary files
    (tmp_path / "ck" / "offsets").mkdir()
    for name in ("0", "1", ".1.crc", "2", ".2.tmp", "10"):
        (tmp_path / "ck" / "offsets" / name).write_text("v1")
    (tmp_path / "ck" / "commits").mkdir()
    (tmp_path / "ck" / "commits" / "0").write_text("v1")
    assert batch_ids(store, child(store.root, "offsets")) == [0, 1, 2, 10]
    assert has_committed_batch(store) and uncommitted_batch(store) == 10
    assert store.list_names(child(store.root, "state")) == []  # a folder that is not there: nothing in it
    with pytest.raises(CheckpointError) as e:
        store.read_text(child(store.root, "missing.json"))
    assert e.value.uri == child(store.root, "missing.json")
    assert e.value.reason.startswith("cannot read it: FileNotFoundError:") and "missing.json" in e.value.reason


def test_a_write_arrives_whole_under_its_name_and_a_refused_one_names_the_uri(tmp_path: Path) -> None:
    store = FileSystemCheckpointStore((tmp_path / "ck").as_uri())
    big = child(store.root, "failover", "epoch-1", "bucket-0.json")
    text = '{"a":"' + "é∂x" * 2_000_000 + '"}'  # 6M characters, not all ASCII; the folders made on the way
    store.write_text(big, text)
    assert store.read_text(big) == text
    assert (tmp_path / "ck" / "failover" / "epoch-1" / "bucket-0.json").read_text(encoding="utf-8") == text
    assert os.listdir(tmp_path / "ck" / "failover" / "epoch-1") == ["bucket-0.json"]
    # a name whose extension pyarrow would take for a compression is written and read as it is
    store.write_text(child(store.root, "notes.gz"), "plain")
    assert (tmp_path / "ck" / "notes.gz").read_text() == "plain" == store.read_text(child(store.root, "notes.gz"))
    (tmp_path / "ck" / "plain").write_text("a file where a folder is needed")
    with pytest.raises(CheckpointError) as e:
        store.write_text(child(store.root, "plain", "x.json"), "{}")
    assert e.value.uri == child(store.root, "plain", "x.json") and "cannot write it: " in str(e.value)
    assert (tmp_path / "ck" / "plain").read_text() == "a file where a folder is needed"
    with pytest.raises(CheckpointError, match="not under"):
        store.read_text((tmp_path / "elsewhere.json").as_uri())


def test_a_bare_path_is_local_unless_a_default_file_system_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FileSystemCheckpointStore(str(tmp_path / "bare"))
    assert store.root == f"file:{tmp_path / 'bare'}"
    # livectl.json, as the driver's start writes it, where the bare path says
    assert checkpoint_scheme(store, 3) is BucketKeys.SPREAD
    assert checkpoint_meta(store) == {"version": 1, "num_buckets": 3, "bucket_keys": "spread"}
    assert json.loads((tmp_path / "bare" / "livectl.json").read_text())["num_buckets"] == 3
    # relative to the working folder, as Spark's checkpointLocation on a local default file system
    monkeypatch.chdir(tmp_path)
    relative = FileSystemCheckpointStore("rel/./ck/")
    assert relative.root == f"file:{tmp_path / 'rel' / 'ck'}"
    assert FileSystemCheckpointStore("rel/ck", default_fs="file:///").root == relative.root
    # forms of one local folder name it alike: Spark, the driver and the executors compare these strings
    for form in (f"file://{tmp_path}/ck", f"file:{tmp_path}//ck/", f"file://localhost{tmp_path}/x/../ck"):
        assert qualify(form) == f"file:{tmp_path / 'ck'}", form


def test_qualified_names_of_other_file_systems() -> None:
    assert qualify("/srv/ck", "hdfs://nn:8020") == "hdfs://nn:8020/srv/ck"
    assert qualify("/srv/ck", "hdfs://nn:8020/") == "hdfs://nn:8020/srv/ck"
    assert qualify("hdfs:/srv//ck/", "hdfs://nn:8020") == "hdfs://nn:8020/srv/ck"  # Hadoop's default authority
    assert qualify("hdfs://other/srv/ck", "hdfs://nn:8020") == "hdfs://other/srv/ck"
    assert qualify("S3A://bucket/livectl/ck/") == "s3a://bucket/livectl/ck"
    assert qualify("viewfs://cluster/ck", "hdfs://nn") == "viewfs://cluster/ck"
    assert split_uri("abfss://box@acct.dfs.core.windows.net/ck") == ("abfss", "box@acct.dfs.core.windows.net", "/ck")
    assert split_uri("dir/a:b") == ("", "", "dir/a:b")  # a colon after a slash is part of a name, as for Hadoop
    with pytest.raises(CheckpointError) as e:
        qualify("rel/ck", "hdfs://nn:8020")
    assert e.value.uri == "rel/ck" and "relative path on the default file system hdfs://nn:8020" in e.value.reason
    for bad, why in (("", "no location"), ("s3a://b/ck?region=x", "no query"), ("file://host/ck", "with a host")):
        with pytest.raises(CheckpointError, match=why) as e:
            qualify(bad)
        assert e.value.uri == bad


def test_a_location_that_cannot_be_opened_is_refused_with_the_uri_and_pyarrows_reason(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError) as e:
        FileSystemCheckpointStore("nosuch://bucket/livectl")
    assert e.value.uri == "nosuch://bucket/livectl"
    assert (
        e.value.reason == "cannot open it: ArrowInvalid: Unrecognized filesystem type in URI: nosuch://bucket/livectl"
    )
    assert str(e.value) == f"checkpoint nosuch://bucket/livectl: {e.value.reason}"
    # pyarrow opens it, Spark's Hadoop does not: livectl and Spark must name one location
    with pytest.raises(CheckpointError, match="not a scheme for Spark's checkpoint"):
        FileSystemCheckpointStore("mock:///livectl")
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(CheckpointError, match="a file, not a folder"):
        FileSystemCheckpointStore(str(tmp_path / "file"))
