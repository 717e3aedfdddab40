"""The controller process: lease, failover hand-off, liveness bridge, the query, and a clean stop.

:meth:`ControllerApp.run` does, in order:

1. connects to ZooKeeper, starts its SparkSession, opens the checkpoint through ``pyarrow.fs`` for its
   URI (:mod:`streaming.runtime.checkpoint_fs`; a URI it cannot open is refused here, before the election),
   and takes the controller lease (Kafka's election: ephemeral ``/controller`` and ``/controller_epoch``
   + 1 in one multi-op). Meanwhile, in the background, the query's source is loaded and then the Python
   workers are warmed (:class:`streaming.query.pipeline.SourceAhead`, :class:`streaming.warm.warmup.Warmup`). A second
   instance waits here as a standby, its SparkSession already up, until the active one's session ends;
2. makes sure the livectl topics exist;
3. on a cold start (no committed micro-batch in the checkpoint) clears the ZooKeeper sink's progress
   znode, so batch ids restarting at 0 are not mistaken for replays;
4. ships the failover snapshots the checkpoint holds to the executors (``SparkContext.addFile``), then
   starts the query with the fenced sinks. On a used checkpoint its source holds back every record past
   the checkpoint (the failover barrier, :meth:`ControllerApp._source_start`); the micro-batch the previous
   controller planned but did not commit is replayed, and waited for;
5. reads the ZooKeeper tree (Kafka's layout; re-reading only what changed since a standby's reads ahead:
   :mod:`streaming.warm.failover_warm`), writes and ships its snapshot — all of it beside the query's start
   when nothing is to be replayed, after the replay otherwise — and hands it to every bucket
   as a failover reference on ``livectl.broker-events`` (:mod:`streaming.query.failover`): the reference opens
   the barrier, so the first micro-batch under the new epoch loads the snapshot before anything else;
6. starts the liveness bridge (``/brokers/ids`` → broker startup / failure events), the admin-path watcher
   (:mod:`streaming.zk.admin_watch`, primed with the snapshot before its reference is published) and the auto
   leader rebalance schedule (:mod:`streaming.driver.auto_rebalance`), and waits. It stops
   the query when the lease is lost (the ZooKeeper session expired) or a write is fenced, on SIGTERM/SIGINT,
   or when ``stop()`` is called.

Each step lives with its concern: :mod:`streaming.driver.startup` (ZooKeeper, the checkpoint's facts, where the source
starts, the failover hand-off), :mod:`streaming.driver.session` (the SparkSession), :mod:`streaming.driver.wiring` (the
fenced sinks, the dispatcher, the query's start), :mod:`streaming.driver.side_threads` (the driver's threads beside the
query) and :mod:`streaming.driver.shutdown` (the fence check, the query's stop, the exit outcome).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from sinks.ports import RequestSinkPort, ZkSinkPort
from streaming.driver.replay_progress import ReplayWatch
from streaming.driver.session import spark_session, spark_ui_address
from streaming.driver.shutdown import fence_check, fenced_if_replaced, raise_outcome, stop_query
from streaming.driver.side_threads import (
    Opened,
    admin_watcher,
    controller_config_now,
    log_dirs_watch,
    start_side_threads,
)
from streaming.driver.startup import (
    hand_off,
    has_planned_batch,
    livectl_topics,
    other_controller,
    resolve_buckets,
    source_start,
    uncommitted_batch,
    with_query_source,
    zookeeper_client,
)
from streaming.driver.wiring import (
    SinkWrapper,
    add_listeners,
    audit_log,
    build_dispatcher,
    fenced_sinks,
    start_query_when_free,
    wait_committed,
)
from streaming.monitoring import spark_ui
from streaming.query import failover
from streaming.query.decided import decide_ahead_enabled, standby_decider
from streaming.query.dispatch import BatchTiming, Dispatcher
from streaming.runtime.background import in_background
from streaming.runtime.checkpoint_fs import CheckpointStore, FileSystemCheckpointStore
from streaming.settings import Settings
from streaming.warm.failover_warm import ReadAhead, read_in_background
from streaming.warm.warmup import Warmup, start_warmup, warmup_early, warmup_enabled
from streaming.zk.snapshot_reader import SnapshotReader

log = logging.getLogger("livectl.app")


@dataclass
class ControllerApp:
    settings: Settings
    spark: Any = None
    master: str | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    query: Any = None
    dispatcher: Dispatcher | None = None
    fence: Any = None
    lost_reason: str | None = None
    #: this controller's ZooKeeper session (its lease); closing it is what a crash does
    zk: Any = None
    #: wraps the sinks (fault injection in tests: crash inside a micro-batch)
    wrap_sinks: SinkWrapper | None = None
    #: given to the :class:`Dispatcher`: the timing of every micro-batch's ``foreachBatch`` call (benchmarks)
    on_batch_timed: Callable[[BatchTiming], object] | None = None
    #: called once, first thing, when this controller learns it was fenced or lost its lease (from the
    #: thread that learnt it; must not block): ``livectl run`` silences the Python, py4j and Spark logs
    #: there, so that stopping a query in the middle of a batch prints nothing but its one line
    on_fenced: Callable[[str], None] | None = None
    _fenced_once: threading.Lock = field(default_factory=threading.Lock)
    _fence_handled: threading.Event = field(default_factory=threading.Event)
    #: the Python workers' interpreter when the user chose none (``livectl run``: the driver's own)
    worker_python: str | None = None
    #: Spark properties given on the command line (``livectl run --conf``); they win over every other
    spark_conf: dict[str, str] = field(default_factory=dict)
    #: the checkpoint's file system, opened at start
    checkpoint: CheckpointStore | None = None
    #: what the metrics endpoint and status page show (``None`` while ``metrics_port`` is 0)
    observatory: Any = None

    def stop(self) -> None:
        self._stop.set()

    def run(self, ready: threading.Event | None = None) -> None:
        """Blocks until stopped; raises :class:`streaming.driver.shutdown.ControllerStoppedError` when the lease was
        lost or fenced, :class:`streaming.errors.StreamingError` when the query failed."""
        from streaming.driver.lease import ControllerLease
        from streaming.monitoring.metrics_http import start_endpoint
        from streaming.monitoring.observatory import Role

        s = self.settings
        # first, so that a standby serves it while it waits (ActiveControllerCount 0)
        self.observatory, metrics_server = start_endpoint(s.controller_id, s.metrics_port, s.metrics_bind_address)
        zk = self.zk = zookeeper_client(s)
        try:
            zk.start(timeout=30)
        except BaseException:
            if metrics_server is not None:
                metrics_server.stop()
            raise
        lease = ControllerLease(
            zk,
            s.controller_id,
            on_lost=self._on_lease_lost,
            acl_for=s.zookeeper_security().acl_for,
            take_over_from_kafka=s.take_over_from_kafka,
        )
        opened = Opened(zk, lease)
        try:
            self._run_elected(opened, ready)
        finally:
            stop_query(self.query)
            opened.close()
            if self.observatory is not None and self.observatory.role is not Role.FENCED:
                self._set_role(Role.STOPPED)
            if metrics_server is not None:
                metrics_server.stop()

    def _run_elected(self, opened: Opened, ready: threading.Event | None) -> None:
        """Wait for the lease, then run the query as the elected controller until it stops (the steps of
        the module's docstring); what it opens goes into ``opened``."""
        from kafka import KafkaProducer

        from sinks.requests import ensure_topics
        from streaming.driver.preflight import wait_for_kafka
        from streaming.query.pipeline import SourceAhead, rehearse_in_background, run_source

        zk, lease = opened.zk, opened.lease
        store = self._start_spark(zk)
        # which source the query reads with, for the preparation ahead; again once elected (the checkpoint's
        # offsets may have been written meanwhile by the active controller's source)
        asked = self.settings.query_source
        self.settings = with_query_source(self.spark, self.settings, store)
        standby = other_controller(zk) is not None
        # Python workers started before the first batch needs them: now (a standby while it waits), or for an active
        # start told so, once the tree is read (beside the read, on local[N], they slow it: streaming.warm.warmup)
        warm_after_read = not standby and not warmup_early(self.spark)
        # the source's Python planner work first (beside the election, or while a standby waits), then the
        # warm-up: Spark starts the warm-up's worker daemon inside a lock those planner processes need
        # (streaming.query.pipeline.SourceAhead)
        warmup = Warmup(self.spark) if not warm_after_read and warmup_enabled(self.spark) else None
        source_ahead = SourceAhead(
            self.spark,
            self.settings,
            then=(lambda: warmup.start(after_prime=True)) if warmup is not None else None,
            beside=warmup.prime if warmup is not None else None,
        ).start()
        if standby:
            # the query's plan built once while it waits: built again after winning, it is quicker
            rehearse_in_background(self.spark, self.settings, source_ahead)
        reader = SnapshotReader(zk)
        # a standby reads the tree ahead while it waits, watching the partition-state znodes
        # (streaming.warm.failover_warm): the read after winning then re-reads and decodes only what changed
        # read on every start, so that a bad value is refused whether or not this controller waits as a standby
        decide_ahead = decide_ahead_enabled(self.spark)
        decider = (
            standby_decider(self.settings, store, lambda: controller_config_now(zk, self.settings))
            if standby and decide_ahead
            else None
        )
        ahead = (
            ReadAhead(reader, prepare=lambda: failover.ship_snapshots(self.spark, store), decider=decider).start()
            if standby
            else None
        )
        try:
            fence = self._await_lease(lease, zk)
        finally:
            if ahead is not None:
                ahead.stop()
        if fence is None:
            return
        s = self.settings
        # a standby can win the lease while Kafka is away (restarting): wait for it as a sink waits for an
        # unreachable service, then stop with one line (livectl run: Kafka at … is unreachable …)
        wait_for_kafka(s, s.sink_retry_timeout_ms / 1000)
        kafka_config = s.kafka_security().client_kwargs()
        ensure_topics(s.bootstrap_servers, livectl_topics(s), client_config=kafka_config)
        producer = opened.producer = KafkaProducer(
            **kafka_config, bootstrap_servers=s.bootstrap_servers, acks="all", linger_ms=0
        )
        # the admin paths of ZooKeeper-era tools (:mod:`streaming.zk.admin_watch`); the controller configs of
        # /config/brokers/<default> and /<controller_id> as they stand now go into the query's buckets
        watcher = opened.watcher = admin_watcher(zk, producer, s, fence.controller_epoch)
        replay = uncommitted_batch(store)
        # nothing to replay: nothing before the failover reference writes to ZooKeeper, so the tree can be
        # read while the query starts (streaming.warm.failover_warm)
        early = read_in_background(reader) if replay is None else None
        if early is not None and warm_after_read:
            # the moment the read ends (in its thread), not when the hand-off below gets to it
            early.add_done_callback(lambda _: start_warmup(self.spark))
        s = self.settings = s.with_controller_configs(watcher.read_configs())
        zk_sink, request_sink = fenced_sinks(zk, fence, s, store)
        opened.request_sink = request_sink
        # its transactional init (which fences every earlier controller's producer) beside the rest of the
        # start, not in the first micro-batch
        request_sink.start()
        sinks: tuple[ZkSinkPort, RequestSinkPort] = (zk_sink, request_sink)
        if self.wrap_sinks is not None:
            sinks = self.wrap_sinks(*sinks)
        dispatcher = self.dispatcher = build_dispatcher(
            sinks,
            zk=zk,
            producer=producer,
            lease=lease,
            zk_sink=zk_sink,
            s=s,
            fence=fence,
            audit=audit_log(self.spark, s, store, fence.controller_epoch),
            on_fenced=self._on_fenced,
            on_batch_timed=self.on_batch_timed,
        )
        s = self.settings = resolve_buckets(self.spark, s, store)
        s = self.settings = with_query_source(self.spark, replace(s, query_source=asked), store, say=True)
        log.info("Spark UI: %s (query %s)", spark_ui_address(self.spark) or "disabled", s.query_name)
        opened.spark = self.spark
        opened.listeners = add_listeners(self.spark, dispatcher, self.observatory)

        # the snapshots of earlier controllers, for references a replayed batch may still meet
        failover.ship_snapshots(self.spark, store)
        resume_from = (
            FileSystemCheckpointStore.for_spark(self.spark, s.resume_from_checkpoint)
            if s.resume_from_checkpoint
            else None
        )
        resumes = resume_from is not None and not has_planned_batch(store)
        where = source_start(s, store, fence.controller_epoch, resume_from)

        def handed_off() -> Any:
            try:
                return hand_off(
                    self.spark,
                    zk,
                    producer,
                    s,
                    watcher=watcher,
                    store=store,
                    read=early.result if early else reader.read,
                    resumes=resumes,
                    after_read=(lambda: start_warmup(self.spark)) if warm_after_read and early is None else None,
                    topic_data=reader.topic_data,
                    state_texts=reader.state_texts,
                    outcomes=decider.outcomes if decider is not None else None,
                )
            finally:
                # only the files needed them: a string per partition state (~35 MB at 100k) need not stay
                reader.state_texts.clear()

        snapshot: Any = None
        if run_source(s) == "kafka" and where.barrier_epoch is not None:
            # Spark's Kafka source has no failover barrier: the reference is published before its query starts
            # (uncapped: kafka_options), after the replay, which the Python source runs held at the barrier
            if replay is None or self._replay_held(s, dispatcher, where, store, replay):
                snapshot = handed_off()
                self.query = start_query_when_free(self.spark, s, dispatcher, where, stop=self._stop)
        else:
            # nothing to replay: the hand-off (snapshot written, shipped, its reference published) runs beside
            # the query's start — the query's first trigger waits for the reference (the barrier), and the
            # source's start (``where``) is fixed above, before the reference, which it therefore reads
            # (docs/decisions/2026-11-24-warm-standby-read-ahead.md)
            handing = in_background(handed_off, "livectl-hand-off") if replay is None else None
            try:
                self.query = start_query_when_free(
                    self.spark, s, dispatcher, where, stop=self._stop, prepared=source_ahead.result()
                )
            except BaseException:
                if handing is not None:
                    handing.exception()  # not closed under it (the producer, the session): it ends first
                raise
            # the micro-batch the previous controller planned but did not commit is replayed first; the
            # snapshot must be read after it, or it would miss that batch's writes. A query that fails in the
            # replay goes straight to the outcome below, which says its error
            if replay is None or self._replayed(store, dispatcher, replay):
                snapshot = handing.result() if handing is not None else handed_off()
        if snapshot is not None:
            opened.bridge, opened.rebalancer = start_side_threads(
                zk, producer, s, watcher=watcher, dispatcher=dispatcher, snapshot=snapshot
            )
            if self.observatory is not None:
                self.observatory.leader_moves = opened.rebalancer.figures
                self.observatory.cordoned = lambda: watcher.cordoned
                self.observatory.draining = lambda: watcher.draining
                opened.log_dirs = log_dirs_watch(s, kafka_config, self.observatory)
            if ready is not None:
                ready.set()

            self._wait_until_stopped()
        stop_query(self.query)
        if self.query.exception() is not None and self.lost_reason is None and not dispatcher.fenced:
            # the query may fail *because* this controller was replaced (a paused process that resumed:
            # its next micro-batch meets the new controller's offset log in the shared checkpoint)
            fenced_if_replaced(fence_check(lease, zk_sink), self._on_fenced)
        raise_outcome(
            self.query,
            controller_id=s.controller_id,
            controller_epoch=fence.controller_epoch,
            fenced=dispatcher.fenced,
            lost_reason=self.lost_reason,
            stopped=self._stop.is_set(),
        )

    def _replay_held(
        self, s: Settings, dispatcher: Dispatcher, where: Any, store: CheckpointStore, replay: int
    ) -> bool:
        """Replay micro-batch ``replay`` (planned by the previous controller, not committed) before the failover
        reference, for Spark's Kafka source: with the Python source held at the barrier, which reads Spark's
        offsets and, held, reads no record past them; its run is stopped once the batch is committed. False
        when it did not complete (``self.query`` is that run, for the outcome)."""
        self.query = start_query_when_free(
            self.spark, replace(s, query_source="python"), dispatcher, where, stop=self._stop
        )
        if not self._replayed(store, dispatcher, replay):
            return False
        stop_query(self.query)
        return True

    def _replayed(self, store: CheckpointStore, dispatcher: Dispatcher, replay: int) -> bool:
        """:func:`~streaming.driver.wiring.wait_committed` for micro-batch ``replay`` on ``self.query``, bounded by
        ``replay_stall_timeout_ms`` without progress (:class:`~streaming.driver.replay_progress.ReplayWatch`)."""
        sinks = (dispatcher.zk_sink, dispatcher.request_sink)
        watch = ReplayWatch(self.spark, self.query, replay, dispatcher.activity, sinks)
        stall_s = self.settings.replay_stall_timeout_ms / 1000
        # said at least twice within a stall timeout, at most every 30 s
        every = min(30.0, stall_s / 2)
        return wait_committed(store, self.query, replay, self._stop, stall_s, progress=watch, report_every=every)

    def _start_spark(self, zk: Any) -> CheckpointStore:
        """The SparkSession (unless given) and the checkpoint's file system; returns the checkpoint."""
        s = self.settings
        if self.spark is None:
            # before the lease, so that a standby pays Spark's start-up (seconds to tens of seconds) while
            # it waits, not after the active controller has died
            self.spark = spark_session(
                s,
                self.master,
                worker_python=self.worker_python,
                spark_conf=self.spark_conf,
                app_name=spark_ui.app_name(s.query_name, s.controller_id, standby=other_controller(zk) is not None),
            )
        # refused here, before the lease, when the checkpoint's URI cannot be opened; from now on the
        # checkpoint is named by its qualified URI (the same string for Spark, the driver, source and executors)
        store = self.checkpoint = FileSystemCheckpointStore.for_spark(self.spark, s.checkpoint_dir)
        self.settings = replace(s, checkpoint_dir=store.root)
        return store

    def _await_lease(self, lease: Any, zk: Any) -> Any:
        """Wait as a standby until this controller holds the lease; its fence, or ``None`` when stopped first."""
        from streaming.monitoring.observatory import Role

        s = self.settings
        log.info("controller %d: waiting for the controller lease", s.controller_id)
        self._set_role(Role.STANDBY)
        holder = other_controller(zk)
        if holder is not None:
            spark_ui.announce(
                self.spark.sparkContext,
                f"livectl c{s.controller_id} standby: waiting for the controller lease (held by c{holder})",
            )
        fence = lease.acquire(stop=self._stop)
        if fence is None:
            return None
        self.fence = fence
        spark_ui.announce(
            self.spark.sparkContext,
            f"livectl c{s.controller_id} e{fence.controller_epoch} active: elected controller",
        )
        self._set_role(Role.ACTIVE, fence.controller_epoch)
        log.info(
            "controller %d elected: controller epoch %d (znode version %d)",
            s.controller_id,
            fence.controller_epoch,
            fence.epoch_zk_version,
        )
        return fence

    def _wait_until_stopped(self) -> None:
        """Until stopped, fenced, the lease lost, or the query ended."""
        assert self.dispatcher is not None
        while not self._stop.is_set():
            if self.lost_reason is not None or self.dispatcher.fenced:
                break
            if not self.query.isActive:
                break
            self._stop.wait(0.5)

    def _set_role(self, role: Any, controller_epoch: int | None = None) -> None:
        if self.observatory is not None:
            self.observatory.set_role(role, controller_epoch)

    def _on_lease_lost(self, reason: str) -> None:
        self._on_fenced(f"lease lost, {reason}")

    def _on_fenced(self, reason: str) -> None:
        """Once: remember why, let the entry point quiet the logs, then ask the main loop to stop."""
        if not self._fenced_once.acquire(blocking=False):
            # another thread is handling it: return only once the logs are quiet (the caller is about to
            # raise out of a micro-batch, which Spark would report)
            self._fence_handled.wait(10)
            return
        self.lost_reason = reason
        from streaming.monitoring.observatory import Role

        self._set_role(Role.FENCED)
        try:
            if self.on_fenced is not None:
                self.on_fenced(reason)
        finally:
            self._fence_handled.set()
        # the entry point prints the one line that says so, as the process exits with code 3
        log.debug("controller fenced: %s; stopping the query", reason)
        self._stop.set()
