"""Controller failover: hand a ZooKeeper snapshot to every bucket through the input stream.

When the driver wins the controller lease (a cold start with an empty checkpoint, a restart, or a standby
taking over) it does what Kafka's ``onControllerFailover`` does first: read the cluster from ZooKeeper.
The snapshot can be far too large for a Kafka record (100k partitions ≈ 10 MB), so the driver

1. splits it by bucket and writes ``<checkpoint>/failover/epoch-<N>/bucket-<b>.json`` through the
   checkpoint's file system (:mod:`streaming.runtime.checkpoint_fs`; each file the versioned JSON of
   a :class:`core.events.ControllerFailover` restricted to that bucket's topics; write-once: a replayed
   micro-batch reads exactly what the first attempt read), then
2. ships the files to the executors (``SparkContext.addFile``, :func:`ship_snapshots`), then
3. publishes a small reference record ``{"version":1,"type":"controller_failover_ref",
   "controller_id":…,"controller_epoch":…,"epoch_zk_version":…,"path":"<folder URI>"}`` to
   ``livectl.broker-events``.

The reference is routed to every bucket like any cluster-scoped event. On a used checkpoint nothing after
the checkpoint is processed before it (the source's failover barrier, :mod:`streaming.source.kafka_source`), and
the records that waited for it are handled after the snapshot is loaded
(:func:`streaming.query.failover_refs.events_of`): every write under the new controller epoch starts from the tree
the snapshot read. On a new checkpoint, events before it are history
(:func:`streaming.query.failover_refs.applicable_events`).
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol

from core import events as ev
from core.codec.events import event_from_json
from core.codec.snapshot import StateTexts, encode_failover_json
from core.snapshot import ZkSnapshot
from streaming.query.routing import bucket_of
from streaming.query.validation import FAILOVER_REF_TYPE
from streaming.runtime.checkpoint_fs import CheckpointStore, child, parent


def split_snapshot(snapshot: ZkSnapshot, num_buckets: int) -> list[ZkSnapshot]:
    """The snapshot restricted to each bucket's topics; brokers and the controller epoch go to all."""
    owner: dict[str, int] = {}  # a topic's bucket, computed once (its partition states are many)

    def bucket(topic: str) -> int:
        of = owner.get(topic)
        if of is None:
            of = owner[topic] = bucket_of(topic, num_buckets)
        return of

    def deal(items: tuple[Any, ...], topic_of: Callable[[Any], str]) -> list[tuple[Any, ...]]:
        # one pass: each item goes to its own bucket's list (not one filter per bucket)
        hands: list[list[Any]] = [[] for _ in range(num_buckets)]
        for item in items:
            hands[bucket(topic_of(item))].append(item)
        return [tuple(h) for h in hands]

    s = snapshot
    topics = deal(s.topics, lambda t: t.topic)
    states = deal(s.partition_states, lambda ps: ps[0].topic)
    pending = deal(s.pending_reassignments, lambda p: p.topic)
    deleting = deal(s.topics_to_delete, lambda t: t)
    preferred = deal(s.pending_preferred_elections, lambda tp: tp.topic)
    configs = deal(s.topic_configs, lambda c: c[0])
    offline = deal(s.offline_replica_topics, lambda t: t)
    return [
        replace(
            s,
            topics=topics[b],
            partition_states=states[b],
            pending_reassignments=pending[b],
            topics_to_delete=deleting[b],
            pending_preferred_elections=preferred[b],
            topic_configs=configs[b],
            offline_replica_topics=offline[b],
        )
        for b in range(num_buckets)
    ]


def failover_root(checkpoint_dir: str) -> str:
    """The folder under which every epoch's snapshot of this checkpoint goes. ``checkpoint_dir`` is the
    checkpoint's qualified URI (:attr:`streaming.runtime.checkpoint_fs.CheckpointStore.root`), so references and
    this folder compare as strings on the driver, in the source and on the executors alike."""
    return child(checkpoint_dir, "failover")


def bucket_file(folder: str, bucket: int) -> str:
    return child(folder, f"bucket-{bucket}.json")


def write_snapshot(
    store: CheckpointStore,
    controller_id: int,
    snapshot: ZkSnapshot,
    num_buckets: int,
    *,
    written: dict[str, str] | None = None,
    state_texts: StateTexts | None = None,
) -> dict[str, Any]:
    """Write the per-bucket files through the checkpoint's file system (once per epoch) and return the
    reference record to publish. Executors cannot read the checkpoint themselves: :func:`ship_snapshots`
    must hand them the files before the reference is published. ``written``, when given, receives the
    text of each file written now by its URI (a file kept from an earlier attempt is not in it), so that
    :func:`ship_snapshots` need not read it back. ``state_texts``: partition states and topic znodes
    already encoded (a standby's, :attr:`streaming.zk.snapshot_reader.SnapshotReader.state_texts`)."""
    folder = child(failover_root(store.root), f"epoch-{snapshot.controller_epoch}")
    for b, part in enumerate(split_snapshot(snapshot, num_buckets)):
        target = bucket_file(folder, b)
        if store.exists(target):  # write-once: a restarted driver with the same epoch keeps the first snapshot
            continue
        # the same text as event_to_json(ControllerFailover(controller_id, part)), built without reflection
        text = encode_failover_json(controller_id, part, state_texts)
        store.write_text(target, text)
        if written is not None:
            written[target] = text
    return {
        "version": 1,
        "type": FAILOVER_REF_TYPE,
        "controller_id": controller_id,
        "controller_epoch": snapshot.controller_epoch,
        "epoch_zk_version": snapshot.controller_epoch_zk_version,
        "num_buckets": num_buckets,
        "path": folder,
    }


class SnapshotFiles(Protocol):
    """Where the bucket step finds the snapshot slice a reference names: ``None`` when it is not there."""

    def exists(self, folder: str, bucket: int) -> bool: ...

    def read(self, folder: str, bucket: int) -> str | None: ...


class StoreSnapshots:
    """Reads the slices straight from the checkpoint's store: for code that runs where the store is (the
    driver, tests and benchmarks that drive :func:`streaming.query.stateful.step_bucket` by hand)."""

    def __init__(self, store: CheckpointStore) -> None:
        self.store = store

    def exists(self, folder: str, bucket: int) -> bool:
        return self.store.exists(bucket_file(folder, bucket))

    def read(self, folder: str, bucket: int) -> str | None:
        path = bucket_file(folder, bucket)
        return self.store.read_text(path) if self.store.exists(path) else None


def shipped_name(folder: str, bucket: int) -> str:
    """The name under which the driver ships one slice with ``SparkContext.addFile``: Spark keys added
    files by file name, so the name carries a digest of the folder's URI (checkpoint and epoch)."""
    digest = hashlib.sha256(folder.encode()).hexdigest()[:20]
    return f"livectl-failover-{digest}-bucket-{bucket}.json"


class ShippedSnapshots:
    """The executors' way to the snapshot: the copies the driver shipped with ``SparkContext.addFile``,
    found with ``SparkFiles.get`` in the Python worker.

    Why this way: the bucket step runs in a Python worker on an executor, possibly on another machine,
    and a file system client per scheme (libhdfs for HDFS, S3's credentials, …) would be needed on every
    executor. The driver reads the checkpoint (:mod:`streaming.runtime.checkpoint_fs`) and adds each slice
    to the SparkContext; Spark's own file distribution
    (the driver's file server) hands every added file to every executor before its next task runs, and
    to executors that join later (a restarted worker) before their first. The reference is published
    only after its files are added, so the task that meets it has them. Stateless: the step's closure
    carries it to the workers as is."""

    @staticmethod
    def _local(folder: str, bucket: int) -> str | None:
        return shipped_copy(shipped_name(folder, bucket))

    def exists(self, folder: str, bucket: int) -> bool:
        return self._local(folder, bucket) is not None

    def read(self, folder: str, bucket: int) -> str | None:
        local = self._local(folder, bucket)
        if local is None:
            return None
        # a local copy in the executor's work folder, not a checkpoint path
        with open(local, encoding="utf-8") as f:
            return f.read()


def shipped_copy(name: str) -> str | None:
    """The local path of the file the driver shipped as ``name`` (``SparkContext.addFile``, found with
    ``SparkFiles.get`` in the Python worker), or ``None`` when nothing was shipped here by that name."""
    from pyspark import SparkFiles

    try:
        local = SparkFiles.get(name)
    except Exception:  # no SparkContext nor worker: nothing was shipped here
        return None
    return local if os.path.isfile(local) else None


def ship_file(spark: Any, local: str, content: Callable[[], str | bytes]) -> bool:
    """Driver: write ``content()`` to the staging path ``local`` (whole, then renamed into place) and add it
    to the SparkContext; ``False`` when this SparkContext shipped that path already (Spark serves an added
    name once). A failed add removes the copy, so that the next call tries again."""
    if os.path.exists(local):
        return False
    data = content()
    with open(local + ".tmp", "wb") as out:  # the driver's staging copy
        out.write(data if isinstance(data, bytes) else data.encode())
    os.replace(local + ".tmp", local)
    try:
        spark.sparkContext.addFile(local)
    except Exception:
        os.remove(local)
        raise
    return True


#: application id -> the driver's local folder of staged copies (Spark refuses one name from two paths)
_STAGING: dict[str, str] = {}


def staging_folder(spark: Any) -> str:
    """The driver's folder for staged snapshot copies: inside the folder Spark keeps the driver's added
    files in (``SparkFiles.getRootDirectory()``, under ``spark.local.dir``), which Spark deletes when the
    SparkContext stops or the driver exits. A folder of its own under the system's temporary folder, as
    before, outlived every controller that was killed (each with one snapshot file per bucket)."""
    from pyspark import SparkFiles

    sc = spark.sparkContext
    staging = _STAGING.get(sc.applicationId)
    if staging is None:
        staging = _STAGING[sc.applicationId] = tempfile.mkdtemp(
            prefix="livectl-shipped-", dir=SparkFiles.getRootDirectory()
        )
        atexit.register(shutil.rmtree, staging, True)
    return staging


def ship_snapshots(
    spark: Any, store: CheckpointStore, folder: str | None = None, *, texts: dict[str, str] | None = None
) -> int:
    """Driver: add the slices of snapshot ``folder`` (``None``: of every epoch under the checkpoint's
    ``failover/``) to the SparkContext, as :class:`ShippedSnapshots` finds them. Each slice is read
    through the checkpoint's file system and staged in a local folder of the driver's, from which
    Spark's file server serves it whatever the checkpoint's scheme. A slice already shipped by this
    SparkContext is not shipped again (they are write-once). Returns how many files were added.

    At start the driver ships every epoch the checkpoint holds: a replayed or not yet processed batch may
    meet the reference of an earlier controller, which the buckets must be able to load as the previous
    driver's executors could."""
    staging = staging_folder(spark)
    if folder is None:
        root = failover_root(store.root)
        folders = [child(root, name) for name in store.list_names(root) if name.startswith("epoch-")]
    else:
        folders = [folder]
    added = 0
    for f in folders:
        for name in store.list_names(f):
            m = re.fullmatch(r"bucket-(\d+)\.json", name)
            if m is None:
                continue
            uri = child(f, name)
            local = os.path.join(staging, shipped_name(f, int(m.group(1))))

            def text(uri: str = uri) -> str:
                return texts[uri] if texts is not None and uri in texts else store.read_text(uri)

            added += ship_file(spark, local, text)
    return added


def unusable_reason(
    ref: dict[str, Any], bucket: int, state_epoch: int, checkpoint_dir: str | None, snapshots: SnapshotFiles
) -> str | None:
    """Why a reference cannot be applied to ``bucket`` (whose state holds ``state_epoch``), or ``None``."""
    epoch = int(ref.get("controller_epoch", -1))
    if epoch <= state_epoch:
        return f"stale: epoch {epoch} is not newer than the bucket's epoch {state_epoch}"
    folder = str(ref.get("path", ""))
    if checkpoint_dir is not None and parent(parent(folder)) != checkpoint_dir.rstrip("/"):
        return f"written for another checkpoint ({folder}), not {checkpoint_dir}"
    if not snapshots.exists(folder, bucket):
        return f"its snapshot {bucket_file(folder, bucket)} is gone"
    return None


def load_bucket_failover(ref: dict[str, Any], bucket: int, snapshots: SnapshotFiles) -> ev.ControllerFailover:
    """The :class:`ControllerFailover` event for ``bucket`` named by a reference record."""
    folder = str(ref["path"])
    text = snapshots.read(folder, bucket)
    if text is None:
        raise FileNotFoundError(f"the failover snapshot {bucket_file(folder, bucket)} is gone")
    event = event_from_json(text)
    if not isinstance(event, ev.ControllerFailover):  # pragma: no cover - written by write_snapshot only
        raise TypeError(f"{bucket_file(folder, bucket)} holds a {type(event).__name__}, not a controller_failover")
    return event


def ref_to_json(ref: dict[str, Any]) -> str:
    return json.dumps(ref, separators=(",", ":"), sort_keys=True)
