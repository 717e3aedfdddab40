"""The controller's start-up, before its query runs: ZooKeeper, the checkpoint's facts, where the source
starts, and the failover hand-off.

- :func:`zookeeper_client`: this controller's ZooKeeper session (its lease lives and dies with it);
- the checkpoint's facts: its identity, its bucket count (fixed for its life), its committed and
  planned micro-batches;
- :func:`source_start`: where the query reads from, so that the failover reference is the first thing it
  handles under the new epoch (the failover barrier);
- :func:`hand_off`: Kafka's ``onControllerFailover`` first step — read the ZooKeeper tree, write and ship
  its snapshot, and publish the reference every bucket loads it by (:mod:`streaming.query.failover`).
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from core.codec.snapshot import StateTexts
from core.snapshot import ZkSnapshot
from streaming.query import failover
from streaming.query.bucket_keys import checkpoint_meta, pin_scheme
from streaming.query.decided import ship_decided
from streaming.query.outcome import Outcome, matching
from streaming.runtime.checkpoint_fs import CheckpointStore, batch_ids, child
from streaming.settings import Settings, SettingsError

if TYPE_CHECKING:
    from streaming.query.pipeline import SourceStart

log = logging.getLogger("livectl.app")

SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"


def zookeeper_client(s: Settings) -> Any:
    """The kazoo client of this controller's ZooKeeper session, not started yet."""
    from kazoo.client import KazooClient
    from kazoo.retry import KazooRetry

    zk = KazooClient(
        hosts=s.zookeeper_connect,
        timeout=s.zookeeper_session_timeout_ms / 1000,
        # reconnect at least every second: kazoo's default backoff grows to a minute, so a ZooKeeper
        # restarted within the session timeout could be found only after the session expired
        connection_retry=KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=1.0),
        **s.zookeeper_security().client_kwargs(),
    )
    return zk


def livectl_topics(settings: Settings) -> list[str]:
    return [
        settings.admin_topic,
        settings.broker_events_topic,
        settings.requests_topic,
        settings.admin_results_topic,
        settings.rejected_topic,
    ]


def has_committed_batch(store: CheckpointStore) -> bool:
    return bool(batch_ids(store, child(store.root, "commits")))


def has_planned_batch(store: CheckpointStore) -> bool:
    return bool(batch_ids(store, child(store.root, "offsets")))


def checkpoint_identity(store: CheckpointStore) -> str:
    """This checkpoint's identity (``livectl-checkpoint-id`` in it, made at its first use): the ZooKeeper
    sink records it in its progress znode, so that a micro-batch replayed on this checkpoint resumes
    where it stopped and a progress znode left by another checkpoint's run is not taken for this one's."""
    path = child(store.root, "livectl-checkpoint-id")
    if store.exists(path):
        return store.read_text(path).strip()
    identity = uuid.uuid4().hex
    store.write_text(path, identity)
    return identity


def uncommitted_batch(store: CheckpointStore) -> int | None:
    """The id of a micro-batch planned (in ``offsets/``) but not committed (in ``commits/``), if any."""
    planned = batch_ids(store, child(store.root, "offsets"))
    committed = batch_ids(store, child(store.root, "commits"))
    if planned and (not committed or planned[-1] > committed[-1]):
        return planned[-1]
    return None


_LOCAL = re.compile(r"local(?:\[(\*|\d+)(?:,\s*\d+)?\])?")
_LOCAL_CLUSTER = re.compile(r"local-cluster\[\s*(\d+)\s*,\s*(\d+)\s*,\s*\d+\s*\]")


def executor_cores(conf: Mapping[str, str], default_parallelism: int, cpu_count: int | None = None) -> tuple[int, str]:
    """The cores the application's executors run tasks on, and where that figure comes from: the
    master's own count (``local[N]``, ``local-cluster[n,c,m]``; ``local[*]``: Spark's ``defaultParallelism``,
    which in local mode is the thread count Spark gave ``*`` — the JVM's view of the CPUs, container limits
    included — unless ``spark.default.parallelism`` overrides it, then ``cpu_count``, by default
    :func:`os.cpu_count`), else ``spark.cores.max``, else ``spark.executor.instances`` ×
    ``spark.executor.cores``, else Spark's ``defaultParallelism`` at this moment (the executors registered so
    far; on a cluster whose executors come later, set ``num_buckets``)."""
    master = conf.get("spark.master", "").strip()
    if m := _LOCAL.fullmatch(master):
        cores = m.group(1)
        if cores == "*":
            if not conf.get("spark.default.parallelism"):
                return max(default_parallelism, 1), f"master {master} (Spark's defaultParallelism)"
            return max(cpu_count or os.cpu_count() or 1, 1), f"master {master}"
        return max(1 if cores is None else int(cores), 1), f"master {master}"
    if m := _LOCAL_CLUSTER.fullmatch(master):
        return max(int(m.group(1)) * int(m.group(2)), 1), f"master {master}"
    if conf.get("spark.cores.max"):
        return max(int(conf["spark.cores.max"]), 1), "spark.cores.max"
    if conf.get("spark.executor.instances") and conf.get("spark.executor.cores"):
        n = int(conf["spark.executor.instances"]) * int(conf["spark.executor.cores"])
        return max(n, 1), "spark.executor.instances × spark.executor.cores"
    return max(default_parallelism, 1), "the executor cores registered at start (Spark's defaultParallelism)"


def default_buckets(spark: Any) -> tuple[int, str]:
    """The bucket count a new checkpoint gets when the ``num_buckets`` setting is 0: Spark's
    ``spark.sql.shuffle.partitions`` when it was set (``--conf``, a properties file, the session's builder),
    else one bucket per executor core (:func:`executor_cores`) — on ``local[2]`` two buckets run at once
    and each micro-batch's Python work is split in two, with no third state store to commit."""
    if SHUFFLE_PARTITIONS in spark.conf.getAll:
        return int(spark.conf.get(SHUFFLE_PARTITIONS)), SHUFFLE_PARTITIONS
    sc = spark.sparkContext
    conf = dict(sc.getConf().getAll())
    return executor_cores(conf, int(sc.defaultParallelism))


def resolve_buckets(spark: Any, settings: Settings, store: CheckpointStore) -> Settings:
    """Fix the bucket count: the setting, else :func:`default_buckets`; then make the shuffle partitions
    equal to it and check it against the checkpoint (``livectl.json`` in it, through the checkpoint's file
    system), whose state is partitioned by it."""
    data = checkpoint_meta(store)
    if data is not None:
        recorded = int(data["num_buckets"])
        if settings.num_buckets and recorded != settings.num_buckets:
            raise SettingsError(
                "num_buckets",
                f"is {settings.num_buckets} but the checkpoint {store.root} was made with {recorded}; "
                "the bucket count is fixed for the life of a checkpoint (use a new checkpoint_dir to change it)",
            )
        buckets = recorded
    else:
        buckets, source = (
            (settings.num_buckets, "the num_buckets setting") if settings.num_buckets else default_buckets(spark)
        )
        log.info("new checkpoint %s: %d state buckets (from %s)", store.root, buckets, source)
    # the key scheme pinned before the query writes state under its keys; the file read once, written at most once
    pin_scheme(store, buckets, data)
    spark.conf.set(SHUFFLE_PARTITIONS, str(buckets))
    return replace(settings, num_buckets=buckets)


def with_query_source(spark: Any, s: Settings, store: CheckpointStore, *, say: bool = False) -> Settings:
    """``s`` with ``query_source`` resolved to the source this run reads with
    (:func:`streaming.source.query_source.choose`: the setting, the session's ``spark.jars`` / ``spark.jars.packages``,
    and which source wrote the checkpoint's last offsets); ``say``: log the one line that says which one runs and
    why."""
    from streaming.source.query_source import choose

    conf = spark.sparkContext.getConf()
    props = {key: conf.get(key) or "" for key in ("spark.jars", "spark.jars.packages")}
    planned = batch_ids(store, child(store.root, "offsets"))
    last = store.read_text(child(store.root, "offsets", str(planned[-1]))) if planned else None
    choice = choose(s.query_source, props, last)
    if say:
        log.info("%s", choice.line())
    return replace(s, query_source=choice.source)


def other_controller(zk: Any) -> int | None:
    """The ``brokerid`` in ``/controller`` (Kafka's JSON), or ``None`` when no controller is elected."""
    from streaming.driver.lease import LeaseError, read_controller_id

    try:
        return read_controller_id(zk)
    except LeaseError:  # not Kafka's JSON: no controller known
        return None


def source_start(
    s: Settings, store: CheckpointStore, epoch: int, resume_from: CheckpointStore | None = None
) -> SourceStart:
    """Where this run's query reads from, so that the failover reference it is about to publish is
    the first thing it handles under ``epoch``.

    On a checkpoint with planned micro-batches (a restart or a takeover) the source holds back every
    record past the checkpoint until the reference of ``epoch`` is on the topic (the failover
    barrier): the replayed batch, if any, runs first, then the snapshot is read, then the reference
    opens the barrier. Without it, batches run on the checkpoint's bucket state between the query's
    start and the reference would write what the snapshot then misses.

    On a new checkpoint the buckets hold nothing, and events before the reference are history (they
    are answered ``NOT_CONTROLLER``, :func:`streaming.query.failover_refs.applicable_events`); ``latest`` is
    resolved to the topics' ends now, before the reference is published, or the query (which asks
    for its first offsets only when it plans its first batch) could start past it and never load
    the cluster.

    A new checkpoint that ``resume_from`` another (``resume_from_checkpoint``, :mod:`streaming.driver.rebucket`)
    starts where that one's last committed micro-batch ended, behind the failover barrier like a used one:
    the records no controller handled yet wait for the snapshot (the reference says ``"resumes"``)."""
    from streaming.query.pipeline import SourceStart

    if batch_ids(store, child(store.root, "offsets")):
        return SourceStart(barrier_epoch=epoch, barrier_path=failover.failover_root(s.checkpoint_dir))
    if resume_from is not None:
        from streaming.driver.rebucket import resume_offsets

        offsets = resume_offsets(resume_from, store)
        log.info("resuming from checkpoint %s: reading from %s", resume_from.root, offsets)
        return SourceStart(
            starting_offsets=offsets, barrier_epoch=epoch, barrier_path=failover.failover_root(s.checkpoint_dir)
        )
    if s.starting_offsets == "latest":
        from streaming.source.kafka_source import KafkaStreamReader
        from streaming.source.options import SourceOptions

        options = {
            "bootstrap_servers": s.bootstrap_servers,
            "topics": f"{s.admin_topic},{s.broker_events_topic}",
            "starting_offsets": "latest",
        }
        # the same consumer settings as the query's source (streaming.query.pipeline.controller_frame)
        options.update({f"kafka.{k}": v for k, v in s.kafka_security().properties().items()})
        reader = KafkaStreamReader(SourceOptions.parse(options))
        try:
            ends = reader.initialOffset()
        finally:
            reader.stop()
        log.info("starting_offsets latest: reading from %s", ends)
        return SourceStart(starting_offsets=json.dumps(ends, sort_keys=True))
    return SourceStart()


def hand_off(
    spark: Any,
    zk: Any,
    producer: Any,
    s: Settings,
    *,
    watcher: Any,
    store: CheckpointStore,
    read: Callable[[], ZkSnapshot] | None = None,
    resumes: bool = False,
    after_read: Callable[[], object] | None = None,
    topic_data: Callable[[ZkSnapshot], Mapping[str, bytes]] | None = None,
    state_texts: StateTexts | None = None,
    outcomes: Callable[[], Mapping[int, Outcome]] | None = None,
) -> Any:
    """Read the ZooKeeper tree, prime the admin-path watcher with it, write and ship its snapshot, then
    publish the failover reference on ``livectl.broker-events`` (which opens the failover barrier).
    Returns the snapshot. ``read`` gives the tree read after this controller won the lease (and after any
    replay): :mod:`streaming.warm.failover_warm`; by default it is read here. ``resumes``: a new checkpoint
    moved from another (:mod:`streaming.driver.rebucket`); the buckets handle the records that waited for the
    reference after it. ``after_read`` is called once the tree is read, before the snapshot is written (an
    active start's Python warm-up, :mod:`streaming.warm.warmup`). ``topic_data`` gives the topic znodes' data as
    the read got them, for the admin-path watcher's first round
    (:meth:`streaming.zk.snapshot_reader.SnapshotReader.topic_data`). ``state_texts``: the partition states and topic
    znodes a standby encoded ahead (:attr:`streaming.zk.snapshot_reader.SnapshotReader.state_texts`), for the files.
    ``outcomes``: the buckets' failover batches a standby decided ahead (:class:`streaming.query.decided.Decider`);
    those whose slice is the one written now are shipped with it."""
    from streaming.zk.snapshot_reader import read_snapshot

    started = time.monotonic()
    snapshot = read() if read is not None else read_snapshot(zk)
    read_s = time.monotonic() - started
    if after_read is not None:
        after_read()
    watcher.prime(snapshot, topic_data(snapshot) if topic_data is not None else None)
    written: dict[str, str] = {}
    ref = failover.write_snapshot(
        store, s.controller_id, snapshot, s.num_buckets, written=written, state_texts=state_texts
    )
    if resumes:
        ref["resumes"] = True
    # the executors get the files before the reference that names them can reach a task
    failover.ship_snapshots(spark, store, str(ref["path"]), texts=written)
    ahead: dict[int, Outcome] = {}
    if outcomes is not None and s.metrics_port == 0:  # with the summaries on, the buckets step anyway
        ahead = matching(outcomes(), ref, written, s.controller_config())
        ship_decided(spark, ahead, str(ref["path"]))
    producer.send(s.broker_events_topic, key=b"controller", value=failover.ref_to_json(ref).encode())
    producer.flush()
    log.info(
        "failover snapshot: %d brokers, %d topics, %d partitions in %.1f s (%.1f s waiting for the read)%s",
        len(snapshot.brokers),
        len(snapshot.topics),
        len(snapshot.partition_states),
        time.monotonic() - started,
        read_s,
        "" if outcomes is None else f"; {len(ahead)} of {s.num_buckets} buckets' failover batch decided ahead",
    )
    return snapshot
