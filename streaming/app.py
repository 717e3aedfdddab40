"""The controller process: lease, failover hand-off, liveness bridge, the query, and a clean stop.

:meth:`ControllerApp.run` does, in order:

1. connects to ZooKeeper, starts its SparkSession, opens the checkpoint through Hadoop's FileSystem for its
   URI (:mod:`streaming.checkpoint_fs`; a URI Spark cannot open is refused here, before the election),
   and takes the controller lease (Kafka's election: ephemeral ``/controller`` and ``/controller_epoch``
   + 1 in one multi-op). A second instance waits here as a standby, its SparkSession already up, until
   the active one's session ends;
2. makes sure the livectl topics exist;
3. on a cold start (no committed micro-batch in the checkpoint) clears the ZooKeeper sink's progress
   znode, so batch ids restarting at 0 are not mistaken for replays;
4. ships the failover snapshots the checkpoint holds to the executors (``SparkContext.addFile``), then
   starts the query with the fenced sinks. On a used checkpoint its source holds back every record past
   the checkpoint (the failover barrier, :meth:`ControllerApp._source_start`); the micro-batch the previous
   controller planned but did not commit is replayed, and waited for;
5. reads the ZooKeeper tree (Kafka's layout), writes and ships its snapshot, and hands it to every bucket
   as a failover reference on ``livectl.broker-events`` (:mod:`streaming.failover`): the reference opens
   the barrier, so the first micro-batch under the new epoch loads the snapshot before anything else;
6. starts the liveness bridge (``/brokers/ids`` → broker startup / failure events), the admin-path watcher
   (:mod:`streaming.admin_watch`, primed with the snapshot before its reference is published) and the auto
   leader rebalance schedule (:mod:`streaming.auto_rebalance`), and waits. It stops
   the query when the lease is lost (the ZooKeeper session expired) or a write is fenced, on SIGTERM/SIGINT,
   or when ``stop()`` is called.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from core.kafka.zkdata import CONTROLLER_EPOCH_PATH
from sinks.errors import ControllerFencedError
from sinks.ports import RequestSinkPort, ZkSinkPort
from streaming import failover, spark_ui
from streaming.audit_log import AuditLog, HadoopAuditFiles, default_audit_dir
from streaming.checkpoint_fs import CheckpointStore, HadoopCheckpointStore, batch_ids, child
from streaming.dispatch import BatchTiming, Dispatcher
from streaming.errors import StreamingError
from streaming.listener import MetricsListener
from streaming.resources import LOG4J2, SPARK_DEFAULTS, SPARK_JAR, conf_file, conf_path
from streaming.settings import Settings, SettingsError

if TYPE_CHECKING:
    from streaming.query import SourceStart

log = logging.getLogger("livectl.app")


class ControllerStoppedError(StreamingError):
    """The controller stopped because it lost its lease or was fenced (exit code 3)."""


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


def spark_session(
    settings: Settings,
    master: str | None = None,
    ui: bool = True,
    *,
    worker_python: str | None = None,
    spark_conf: Mapping[str, str] | None = None,
    app_name: str | None = None,
) -> Any:
    """The job's SparkSession.

    Spark properties, the first that sets a key wins: ``spark_conf`` (``livectl run --conf``), what was
    submitted (``spark-submit --conf`` / ``--properties-file``, read from the running JVM), the bucket count
    as ``spark.sql.shuffle.partitions``, then the shipped ``spark-defaults.conf`` (``streaming/conf/``).
    With ``master``, the shipped ``livectl-spark.jar`` is added to ``spark.jars`` (:mod:`streaming.spark_ui`).
    ``worker_python`` (the entry point passes the driver's own interpreter unless the user chose one) is
    set as ``spark.pyspark.python``, unless that is set. Without ``master`` the process runs under
    ``spark-submit`` and Spark's master is the submitted one; with it (``livectl run``), the driver's JVM
    is started here and takes the shipped ``log4j2.properties`` unless driver Java options are set."""
    from pyspark import SparkConf
    from pyspark.core.context import SparkContext
    from pyspark.sql import SparkSession

    if master is None:
        # under spark-submit the gateway is up: the SparkConf below then starts from the submitted properties
        SparkContext._ensure_initialized()
    conf = SparkConf()
    for key, value in (spark_conf or {}).items():
        conf.set(key, value)
    if master:
        conf.setMaster(master)
    # app_name: controller id and role (streaming.spark_ui.app_name); a name the user gave wins
    conf.setIfMissing("spark.app.name", app_name or f"livectl-{settings.query_name}")
    if settings.num_buckets > 0:
        conf.setIfMissing("spark.sql.shuffle.partitions", str(settings.num_buckets))
    if worker_python:
        conf.setIfMissing("spark.pyspark.python", worker_python)
    if master:
        log4j = conf_path(LOG4J2).as_uri()
        conf.setIfMissing("spark.driver.extraJavaOptions", f"-Dlog4j.configurationFile={log4j}")
        # the Spark UI's per-batch figures (streaming.spark_ui): on the driver's class path and the executors'
        jars = [j for j in (conf.get("spark.jars") or "").split(",") if j]
        conf.set("spark.jars", ",".join([*jars, str(conf_path(SPARK_JAR))]))
    for key, value in spark_defaults().items():
        conf.setIfMissing(key, value)
    if not ui:
        conf.set("spark.ui.enabled", "false")
    session = SparkSession.builder.config(conf=conf).getOrCreate()
    # Spark's INFO chatter buries the controller's own log lines (the shipped log4j2.properties has the same)
    session.sparkContext.setLogLevel("WARN")
    return session


def spark_defaults() -> dict[str, str]:
    """The shipped ``spark-defaults.conf`` as properties (Spark's properties-file form: ``key value``)."""
    out: dict[str, str] = {}
    for raw in conf_file(SPARK_DEFAULTS).read_text().splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition(" ")
            out[key] = value.strip()
    return out


def spark_ui_address(spark: Any) -> str | None:
    """The Spark UI's address as a user can open it, or ``None`` when the UI is off.

    Spark reports ``http://<spark.driver.host>:<port>`` (or ``SPARK_PUBLIC_DNS``), while its UI listens on
    ``SPARK_LOCAL_IP`` when that is set and on every interface otherwise. So: ``SPARK_PUBLIC_DNS`` set —
    Spark's address as it is; ``SPARK_LOCAL_IP`` set to one address — that address, the only one the UI
    answers on (loopback when Spark binds to loopback); else ``spark.driver.host`` (set by the user or
    chosen by Spark), on which the UI answers. The environment is read from the driver's JVM: what Spark
    itself saw."""
    url = spark.sparkContext.uiWebUrl
    if not url:
        return None
    port = url.rsplit(":", 1)[1]
    jvm = spark.sparkContext._jvm
    if jvm.System.getenv("SPARK_PUBLIC_DNS"):
        return str(url)
    local_ip = jvm.System.getenv("SPARK_LOCAL_IP")
    if local_ip and local_ip not in ("0.0.0.0", "::"):
        host = str(local_ip)
    else:
        host = str(spark.sparkContext.getConf().get("spark.driver.host") or url.split("//", 1)[1].rsplit(":", 1)[0])
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 literal
    return f"http://{host}:{port}"


CHECKPOINT_META = "livectl.json"


def resolve_buckets(spark: Any, settings: Settings, store: CheckpointStore) -> Settings:
    """Fix the bucket count: the setting, else ``spark.sql.shuffle.partitions``; then make the shuffle
    partitions equal to it and check it against the checkpoint (``livectl.json`` in it, through the
    checkpoint's file system), whose state is partitioned by it."""
    buckets = settings.num_buckets or int(spark.conf.get("spark.sql.shuffle.partitions"))
    meta = child(store.root, CHECKPOINT_META)
    if store.exists(meta):
        recorded = int(json.loads(store.read_text(meta))["num_buckets"])
        if settings.num_buckets and recorded != settings.num_buckets:
            raise SettingsError(
                "num_buckets",
                f"is {settings.num_buckets} but the checkpoint {store.root} was made with {recorded}; "
                "the bucket count is fixed for the life of a checkpoint (use a new checkpoint_dir to change it)",
            )
        buckets = recorded
    else:
        store.write_text(meta, json.dumps({"version": 1, "num_buckets": buckets}))
    spark.conf.set("spark.sql.shuffle.partitions", str(buckets))
    return replace(settings, num_buckets=buckets)


def query_failure_reason(text: str) -> str:
    """The line that says why the query failed: a livectl error raised inside Spark (e.g. the source's
    data-loss error) arrives wrapped in Spark's and Python's tracebacks; the last line naming it is the
    reason. Anything else is returned as it is."""
    found = re.findall(r"(?:KafkaSourceError|StreamingError|SinkError|\w+Error): (livectl-kafka .*)", text)
    return found[-1].strip() if found else text


def _other_controller(zk: Any) -> int | None:
    """The ``brokerid`` in ``/controller`` (Kafka's JSON), or ``None`` when no controller is elected."""
    from streaming.lease import LeaseError, read_controller_id

    try:
        return read_controller_id(zk)
    except LeaseError:  # not Kafka's JSON: no controller known
        return None


def _fence_check(lease: Any, zk_sink: Any) -> Callable[[], None]:
    """The dispatcher's check before each topic write: the lease still held (no ZooKeeper round trip
    needed to know it is lost), then ``/controller_epoch`` still at the fence's version."""

    def check() -> None:
        if lease.lost:
            raise ControllerFencedError(CONTROLLER_EPOCH_PATH, zk_sink.fence.epoch_zk_version, str(lease.lost_reason))
        zk_sink.check_fence()

    return check


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
    wrap_sinks: Callable[[ZkSinkPort, RequestSinkPort], tuple[ZkSinkPort, RequestSinkPort]] | None = None
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
        """Blocks until stopped; raises :class:`ControllerStoppedError` when the lease was lost or fenced."""
        from kafka import KafkaProducer
        from kazoo.client import KazooClient
        from kazoo.retry import KazooRetry

        from sinks.requests import RequestSink, ensure_topics
        from sinks.zookeeper import ZooKeeperSink
        from streaming.admin_watch import AdminPathWatcher
        from streaming.auto_rebalance import AutoRebalanceScheduler
        from streaming.lease import ControllerLease
        from streaming.liveness import LivenessBridge
        from streaming.metrics_http import progress_listener, start_endpoint
        from streaming.observability import Role
        from streaming.refresh import StatesRefresher
        from streaming.zk_snapshot import read_snapshot

        s = self.settings
        # first, so that a standby serves it while it waits (ActiveControllerCount 0)
        self.observatory, metrics_server = start_endpoint(s.controller_id, s.metrics_port, s.metrics_bind_address)
        zk_security = s.zookeeper_security()
        kafka_config = s.kafka_security().client_kwargs()
        zk = self.zk = KazooClient(
            hosts=s.zookeeper_connect,
            timeout=s.zookeeper_session_timeout_ms / 1000,
            # reconnect at least every second: kazoo's default backoff grows to a minute, so a ZooKeeper
            # restarted within the session timeout could be found only after the session expired
            connection_retry=KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=1.0),
            **zk_security.client_kwargs(),
        )
        try:
            zk.start(timeout=30)
        except BaseException:
            if metrics_server is not None:
                metrics_server.stop()
            raise
        lease = ControllerLease(zk, s.controller_id, on_lost=self._on_lease_lost, acl_for=zk_security.acl_for)
        bridge = None
        watcher = None
        rebalancer = None
        producer = None
        request_sink = None
        try:
            if self.spark is None:
                # before the lease, so that a standby pays Spark's start-up (seconds to tens of seconds) while
                # it waits, not after the active controller has died
                self.spark = spark_session(
                    s,
                    self.master,
                    worker_python=self.worker_python,
                    spark_conf=self.spark_conf,
                    app_name=spark_ui.app_name(
                        s.query_name, s.controller_id, standby=_other_controller(zk) is not None
                    ),
                )
            # refused here, before the lease, when Spark cannot open the checkpoint's URI; from now on the
            # checkpoint is named by its qualified URI (the same string on the driver, source and executors)
            store = self.checkpoint = HadoopCheckpointStore(self.spark, s.checkpoint_dir)
            s = self.settings = replace(s, checkpoint_dir=store.root)
            log.info("controller %d: waiting for the controller lease", s.controller_id)
            self._set_role(Role.STANDBY)
            holder = _other_controller(zk)
            if holder is not None:
                spark_ui.announce(
                    self.spark.sparkContext,
                    f"livectl c{s.controller_id} standby: waiting for the controller lease (held by c{holder})",
                )
            fence = lease.acquire(stop=self._stop)
            if fence is None:
                return
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

            ensure_topics(s.bootstrap_servers, livectl_topics(s), client_config=kafka_config)
            producer = KafkaProducer(**kafka_config, bootstrap_servers=s.bootstrap_servers, acks="all", linger_ms=0)
            # the admin paths of ZooKeeper-era tools (:mod:`streaming.admin_watch`); the controller configs of
            # /config/brokers/<default> and /<controller_id> as they stand now go into the query's buckets
            watcher = AdminPathWatcher(
                zk,
                producer,
                s.broker_events_topic,
                fence.controller_epoch,
                s.controller_id,
                static_configs=s.controller_configs(),
            )
            s = self.settings = s.with_controller_configs(watcher.read_configs())
            zk_sink = ZooKeeperSink(
                zk,
                fence,
                s.query_name,
                ops_per_transaction=s.zk_ops_per_transaction,
                acl_for=zk_security.acl_for,
                checkpoint_id=checkpoint_identity(store),
            )
            request_sink = RequestSink(
                s.bootstrap_servers,
                fence,
                requests_topic=s.requests_topic,
                admin_results_topic=s.admin_results_topic,
                rejected_topic=s.rejected_topic,
                client_config=kafka_config,
                # one id for every controller of this cluster: a successor's first write fences the rest
                transactional_id=f"livectl-{s.query_name}",
            )
            sinks: tuple[ZkSinkPort, RequestSinkPort] = (zk_sink, request_sink)
            if self.wrap_sinks is not None:
                sinks = self.wrap_sinks(*sinks)
            self.dispatcher = Dispatcher(
                *sinks,
                on_refused=StatesRefresher(zk, producer, s.broker_events_topic),
                on_fenced=lambda e: self._on_fenced(_fenced_reason(e)),
                fence_check=_fence_check(lease, zk_sink),
                retry_timeout_s=s.sink_retry_timeout_ms / 1000,
                audit=self._audit_log(s, store, fence.controller_epoch),
                controller_id=s.controller_id,
                controller_epoch=fence.controller_epoch,
                on_batch_timed=self.on_batch_timed,
            )
            s = self.settings = resolve_buckets(self.spark, s, store)
            ui = spark_ui_address(self.spark)
            log.info("Spark UI: %s (query %s)", ui or "disabled", s.query_name)
            self.spark.streams.addListener(MetricsListener())
            if self.observatory is not None:
                self.dispatcher.observer = self.observatory.record_batch
                self.spark.streams.addListener(progress_listener(self.observatory))
            from streaming.query import start_query

            replay = uncommitted_batch(store)
            # the snapshots of earlier controllers, for references a replayed batch may still meet
            failover.ship_snapshots(self.spark, store)
            self.query = self._start_query(start_query, self._source_start(s, store, fence.controller_epoch))
            if replay is not None:
                # the micro-batch the previous controller planned but did not commit is replayed first;
                # the snapshot must be read after it, or it would miss that batch's writes
                self._wait_committed(replay)

            started = time.monotonic()
            snapshot = read_snapshot(zk)
            watcher.prime(snapshot)
            ref = failover.write_snapshot(store, s.controller_id, snapshot, s.num_buckets)
            # the executors get the files before the reference that names them can reach a task
            failover.ship_snapshots(self.spark, store, str(ref["path"]))
            producer.send(s.broker_events_topic, key=b"controller", value=failover.ref_to_json(ref).encode())
            producer.flush()
            log.info(
                "failover snapshot: %d brokers, %d topics, %d partitions in %.1f s",
                len(snapshot.brokers),
                len(snapshot.topics),
                len(snapshot.partition_states),
                time.monotonic() - started,
            )

            # brokers already in the snapshot are known to every bucket: only changes are published
            known = {b.id: b.epoch for b in snapshot.brokers}
            bridge = LivenessBridge(zk, producer, s.broker_events_topic, known=known)
            bridge.start()
            dispatcher = self.dispatcher
            rebalancer = AutoRebalanceScheduler(
                producer,
                s.broker_events_topic,
                dispatcher.imbalance,
                watcher.configs,
                reassigning=lambda: dispatcher.metrics.get("ReassigningPartitions", 0),
            )
            watcher.on_configs = rebalancer.update
            watcher.start()
            rebalancer.start()
            if ready is not None:
                ready.set()
            while not self._stop.is_set():
                if self.lost_reason is not None or self.dispatcher.fenced:
                    break
                if not self.query.isActive:
                    break
                self._stop.wait(0.5)
            self._stop_query()
            if self.query.exception() is not None and self.lost_reason is None and not self.dispatcher.fenced:
                # the query may fail *because* this controller was replaced (a paused process that resumed:
                # its next micro-batch meets the new controller's offset log in the shared checkpoint)
                self._fenced_if_replaced(lease, zk_sink)
            if self.dispatcher.fenced or self.lost_reason is not None:
                raise ControllerStoppedError(
                    f"controller {s.controller_id} (epoch {fence.controller_epoch}) was fenced: "
                    f"{self.lost_reason or 'another controller was elected'}; it wrote nothing more"
                )
            exc = self.query.exception()
            if exc is not None and not self._stop.is_set():
                # the shipped log4j2.properties leaves Spark's own "terminated with error" report to us
                log.error("the controller query failed: %s\nJVM stack trace:\n%s", exc, _jvm_stack_trace(exc))
                raise StreamingError(f"the controller query failed: {query_failure_reason(str(exc))}")
        finally:
            self._stop_query()
            if bridge is not None:
                bridge.stop()
            if watcher is not None:
                watcher.stop()
            if rebalancer is not None:
                rebalancer.stop()
            if request_sink is not None:
                request_sink.close()
            if producer is not None:
                producer.close()
            lease.release()
            zk.stop()
            zk.close()
            if self.observatory is not None and self.observatory.role is not Role.FENCED:
                self._set_role(Role.STOPPED)
            if metrics_server is not None:
                metrics_server.stop()

    def _set_role(self, role: Any, controller_epoch: int | None = None) -> None:
        if self.observatory is not None:
            self.observatory.set_role(role, controller_epoch)

    def _audit_log(self, s: Settings, store: CheckpointStore, epoch: int) -> AuditLog | None:
        """The state-change log of this controller's batches (``audit_log`` setting), in ``audit_dir`` or
        beside the checkpoint, through Hadoop's FileSystem for its URI."""
        if not s.audit_log:
            return None
        files = HadoopAuditFiles(self.spark, s.audit_dir or default_audit_dir(store.root))
        log.info("state-change log: %s", files.root)
        return AuditLog(files, store, s.controller_id, epoch)

    @staticmethod
    def _source_start(s: Settings, store: CheckpointStore, epoch: int) -> SourceStart:
        """Where this run's query reads from, so that the failover reference it is about to publish is
        the first thing it handles under ``epoch``.

        On a checkpoint with planned micro-batches (a restart or a takeover) the source holds back every
        record past the checkpoint until the reference of ``epoch`` is on the topic (the failover
        barrier): the replayed batch, if any, runs first, then the snapshot is read, then the reference
        opens the barrier. Without it, batches run on the checkpoint's bucket state between the query's
        start and the reference would write what the snapshot then misses.

        On a new checkpoint the buckets hold nothing, and events before the reference are history (they
        are answered ``NOT_CONTROLLER``, :func:`streaming.failover_refs.applicable_events`); ``latest`` is
        resolved to the topics' ends now, before the reference is published, or the query (which asks
        for its first offsets only when it plans its first batch) could start past it and never load
        the cluster."""
        from streaming.query import SourceStart

        if batch_ids(store, child(store.root, "offsets")):
            return SourceStart(barrier_epoch=epoch, barrier_path=failover.failover_root(s.checkpoint_dir))
        if s.starting_offsets == "latest":
            from streaming.kafka_source import KafkaStreamReader, SourceOptions

            options = {
                "bootstrap_servers": s.bootstrap_servers,
                "topics": f"{s.admin_topic},{s.broker_events_topic}",
                "starting_offsets": "latest",
            }
            # the same consumer settings as the query's source (streaming.query.controller_frame)
            options.update({f"kafka.{k}": v for k, v in s.kafka_security().properties().items()})
            reader = KafkaStreamReader(SourceOptions.parse(options))
            try:
                ends = reader.initialOffset()
            finally:
                reader.stop()
            log.info("starting_offsets latest: reading from %s", ends)
            return SourceStart(starting_offsets=json.dumps(ends, sort_keys=True))
        return SourceStart()

    def _start_query(
        self, start: Callable[[Any, Settings, Dispatcher, SourceStart], Any], where: SourceStart, timeout: float = 60.0
    ) -> Any:
        """Start the query; a previous controller in the same driver may still be stopping its query on
        the shared checkpoint (Spark refuses two active runs of one query id), so wait for it."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return start(self.spark, self.settings, self.dispatcher, where)  # type: ignore[arg-type]
            except Exception as e:
                if "already active" not in str(e) or time.monotonic() > deadline or self._stop.is_set():
                    raise
                log.info("the previous run of query %s is still stopping; waiting", self.settings.query_name)
                time.sleep(0.5)

    def _wait_committed(self, batch_id: int, timeout: float = 300.0) -> None:
        deadline = time.monotonic() + timeout
        assert self.checkpoint is not None
        commits = child(self.checkpoint.root, "commits")
        while batch_id not in batch_ids(self.checkpoint, commits):
            if not self.query.isActive or self._stop.is_set() or time.monotonic() > deadline:
                raise StreamingError(f"the replay of micro-batch {batch_id} did not complete")
            time.sleep(0.1)
        log.info("micro-batch %d replayed", batch_id)

    def _stop_query(self, grace_s: float = 10.0) -> None:
        """Stop between micro-batches when one ends within ``grace_s`` (a stop inside a batch is safe, the
        batch is replayed, but Spark then logs the cancelled job at length)."""
        if self.query is None or not self.query.isActive:
            return
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and self.query.isActive and self.query.status.get("isTriggerActive"):
            time.sleep(0.05)
        if self.query.isActive:
            self.query.stop()

    def _fenced_if_replaced(self, lease: Any, zk_sink: Any, grace_s: float = 5.0) -> None:
        """After the query failed: if the fence check says this controller was replaced (given a few
        seconds for a resumed client to learn its session expired), treat the failure as fencing."""
        from sinks.errors import SinkUnavailableError

        check = _fence_check(lease, zk_sink)
        until = time.monotonic() + grace_s
        while True:
            try:
                check()
                return
            except ControllerFencedError as e:
                self._on_fenced(_fenced_reason(e))
                return
            except SinkUnavailableError:
                if time.monotonic() >= until:
                    return
                time.sleep(0.2)

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
        from streaming.observability import Role

        self._set_role(Role.FENCED)
        try:
            if self.on_fenced is not None:
                self.on_fenced(reason)
        finally:
            self._fence_handled.set()
        # the entry point prints the one line that says so, as the process exits with code 3
        log.debug("controller fenced: %s; stopping the query", reason)
        self._stop.set()


def _jvm_stack_trace(exc: object) -> str:
    """The JVM stack trace a failed query's exception carries (pyspark prints it only when
    ``spark.sql.pyspark.jvmStacktrace.enabled`` is set)."""
    return str(getattr(exc, "_stackTrace", None) or "(none)")


def _fenced_reason(e: ControllerFencedError) -> str:
    """One line for the exit message: a znode that moved on, or the producer a successor took over."""
    if e.expected_version < 0:
        return f"{e.path}: {e.reason}"
    return f"{e.path} moved past version {e.expected_version} ({e.reason})"
