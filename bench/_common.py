"""Shared pieces of the end-to-end benchmarks (``bench/broker_failure.py``, ``failover.py``, ``admin_latency.py``).

Everything here is the benchmark's own scaffolding: it starts real services with :mod:`livectl.local`
(free ports, stopped by PID), one local SparkSession, registers brokers with their own kazoo sessions
(Kafka's ``/brokers/ids/<id>`` JSON), prepares a ZooKeeper tree in Kafka's layout with
:mod:`core.kafka.zkdata`'s encoders, runs :class:`streaming.driver.app.ControllerApp` on a thread, and times the
ZooKeeper sink and the request sink inside ``foreachBatch`` through the app's ``wrap_sinks`` hook.
Nothing here changes product behaviour: the wrappers call the real sinks and only record times.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kafka import KafkaConsumer, TopicPartition  # noqa: E402
from kafka.record.memory_records import MemoryRecords  # noqa: E402
from kazoo.client import KazooClient  # noqa: E402

from core.decisions import BrokerRequest, ZkWrite  # noqa: E402
from core.kafka import zkdata  # noqa: E402
from core.kafka.requests import RequestApi  # noqa: E402
from core.model import LeaderAndIsr, ReplicaAssignment  # noqa: E402
from core.placement import BrokerRack, assign_replicas  # noqa: E402
from livectl import local  # noqa: E402
from sinks.ports import RequestBatchResult, RequestSinkPort, ZkBatchResult, ZkSinkPort  # noqa: E402
from streaming.driver.app import ControllerApp  # noqa: E402
from streaming.query.dispatch import BatchTiming  # noqa: E402
from streaming.resources import SPARK_DEFAULTS, SPARK_JAR, conf_file, conf_path  # noqa: E402
from streaming.settings import Settings  # noqa: E402

RESULTS_DIR = ROOT / "bench" / "results"


# ---------------------------------------------------------------------------- machine and results


def _cmd(args: list[str]) -> str:
    try:
        return subprocess.run(args, check=False, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def zookeeper_version(port: int | None = None) -> str:
    if port is not None:
        import socket

        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(b"srvr")
            text = s.recv(4096).decode(errors="replace")
            for line in text.splitlines():
                if line.startswith("Zookeeper version:"):
                    server = line.split(":", 1)[1].strip().split(",")[0].split("-")[0]
                    return f"{server} (Debian package {_cmd(['dpkg-query', '-W', '-f', '${Version}', 'zookeeper'])})"
    return _cmd(["dpkg-query", "-W", "-f", "${Version}", "zookeeper"]) or "unknown"


def machine_info(zk_port: int | None = None, spark: Any = None) -> dict[str, Any]:
    mem_kib = 0
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kib = int(line.split()[1])
    cpu_model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    import kafka
    import kazoo
    import pyspark

    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "cores": os.cpu_count(),
        "cpu": cpu_model,
        "memory_gib": round(mem_kib / 1024 / 1024, 1),
        "load_average_at_start": list(os.getloadavg()),
        "os": platform.platform(),
        "python": platform.python_version(),
        "spark": spark.version if spark is not None else pyspark.__version__,
        "spark_master": spark.sparkContext.master if spark is not None else None,
        "zookeeper": zookeeper_version(zk_port),
        "kazoo": getattr(kazoo, "__version__", _pip_version("kazoo")),
        "kafka_python": kafka.__version__,
        "broker": f"Apache Kafka {local.kafka_version()} (one KRaft node)",
        "git_commit": _cmd(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"]),
        "git_dirty_files": _cmd(["git", "-C", str(ROOT), "status", "--short", "--untracked-files=no"]).splitlines(),
    }


def _pip_version(dist: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "unknown"


#: one results file per run of a script (rewritten as the run goes)
RUN_STAMP = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")


def write_results(name: str, payload: dict[str, Any]) -> Path:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stamp = RUN_STAMP
    path = RESULTS_DIR / f"{name}-{stamp}.json"
    text = json.dumps(payload, indent=2, sort_keys=False, default=str)
    path.write_text(text + "\n")
    (RESULTS_DIR / f"{name}-latest.json").write_text(text + "\n")
    return path


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    cells = [[str(h) for h in headers]] + [[_fmt(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for n, r in enumerate(cells):
        print("  ".join(c.rjust(w) if n else c.ljust(w) for c, w in zip(r, widths, strict=True)))
        if n == 0:
            print("  ".join("-" * w for w in widths))


def _fmt(c: Any) -> str:
    if isinstance(c, float):
        return f"{c:,.2f}" if abs(c) < 100 else f"{c:,.0f}"
    if isinstance(c, int):
        return f"{c:,}"
    return "-" if c is None else str(c)


def wait_quiet(max_load: float = 1.5, max_wait_s: float = 600.0) -> float:
    """Wait (up to ``max_wait_s``) for the 1-minute load average to drop below ``max_load``."""
    deadline = time.monotonic() + max_wait_s
    load = os.getloadavg()[0]
    while load > max_load and time.monotonic() < deadline:
        print(f"load average {load:.2f} > {max_load}: waiting for a quiet machine", flush=True)
        time.sleep(30)
        load = os.getloadavg()[0]
    return load


# ---------------------------------------------------------------------------- services and Spark


@dataclass
class Services:
    zookeeper: local.Service
    broker: local.Service
    run_dir: Path

    def stop(self) -> None:
        local.stop_kafka(self.broker)
        local.stop_process(self.zookeeper.pid, self.zookeeper.marker)


@contextlib.contextmanager
def services(keep: bool = False, zk_heap: str = "512m") -> Iterator[Services]:
    run_dir = Path(tempfile.mkdtemp(prefix="livectl-bench-"))
    spark_scratch()  # before any JVM: the controllers a benchmark starts in processes of their own inherit it
    zk = local.start_zookeeper(run_dir / "zookeeper", local.free_port(), heap=zk_heap)
    try:
        broker = local.start_kafka(run_dir / "broker")
    except BaseException:
        local.stop_process(zk.pid, zk.marker)
        raise
    svc = Services(zk, broker, run_dir)
    print(f"services: ZooKeeper {zk.connect} (pid {zk.pid}), Kafka {broker.bootstrap} (pid {broker.pid})", flush=True)
    try:
        yield svc
    finally:
        svc.stop()
        if not keep:
            import shutil

            shutil.rmtree(run_dir, ignore_errors=True)


def add_scale_options(ap: Any) -> None:
    """``--conf`` (Spark settings over the shipped ones) and ``--zk-heap``, for runs past 100k partitions."""
    ap.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting over the shipped spark-defaults.conf, e.g. spark.driver.memory=6g (repeatable)",
    )
    ap.add_argument("--zk-heap", default="512m", help="ZooKeeper's maximum heap (-Xmx); 1M partitions: 4g")


def add_source_option(ap: Any) -> None:
    """``--source``: the query's source (``query_source``: docs/spark-kafka-source.md), for side-by-side runs."""
    ap.add_argument(
        "--source",
        choices=("auto", "kafka", "python"),
        default="auto",
        help="the query's source: Spark's format(kafka) or livectl's Python source (auto: kafka when its jar is there)",
    )


def parse_confs(items: Sequence[str]) -> dict[str, str]:
    """``--conf key=value`` texts (as given to a bench script) as a mapping; a text without ``=`` is an error."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"--conf {item!r}: must look like key=value")
        out[key.strip()] = value.strip()
    return out


#: the benchmarks' Spark master, and the bucket count livectl gives a new checkpoint on it (one per core)
MASTER = "local[2]"


def shipped_buckets() -> int:
    """What ``num_buckets`` = 0 (the shipped default) makes of a new checkpoint on :data:`MASTER`."""
    from streaming.driver.startup import executor_cores

    return executor_cores({"spark.master": MASTER}, default_parallelism=2)[0]


@functools.cache
def spark_scratch() -> Path:
    """This process's folder for Spark's scratch (``SPARK_LOCAL_DIRS``: block manager, added files, shuffle
    spills; ``java.io.tmpdir``: RocksDB's and lz4's native libraries; the SQL warehouse), made on first use
    and removed when the process exits, as ``tests/conftest.py`` does for the tests: left in ``/tmp``, every
    benchmark run left its ``spark-*`` folders behind. The JVMs the benchmark starts later (its session, an
    active controller's process) inherit it through the environment."""
    import atexit
    import shutil

    scratch = Path(tempfile.mkdtemp(prefix="livectl-bench-spark-"))
    os.environ["SPARK_LOCAL_DIRS"] = str(scratch)
    os.environ["SPARK_SUBMIT_OPTS"] = " ".join(
        filter(None, (os.environ.get("SPARK_SUBMIT_OPTS"), f"-Djava.io.tmpdir={scratch}"))
    )
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    return scratch


def work_dir(prefix: str) -> Path:
    """A benchmark's own folder (checkpoints, logs of the processes it starts), removed when the process
    exits unless ``LIVECTL_KEEP_BENCH_DIRS`` is set (to read those logs after a failure)."""
    import atexit
    import shutil

    work = Path(tempfile.mkdtemp(prefix=prefix))
    if not os.environ.get("LIVECTL_KEEP_BENCH_DIRS"):
        atexit.register(shutil.rmtree, work, ignore_errors=True)
    return work


def bench_python() -> str:
    """The interpreter Spark's Python processes run, as ``livectl run`` chooses it
    (:func:`streaming.driver.entry.worker_python`): this one."""
    from streaming.driver.entry import worker_python

    return worker_python({}, {}) or sys.executable


def spark_session(num_buckets: int, conf: Mapping[str, str] | None = None, source: str = "auto") -> tuple[Any, float]:
    """A local[2] SparkSession configured like the shipped ``spark-defaults.conf``, then ``conf`` (a bench
    script's ``--conf key=value`` options; they win over the file); returns (session, start-up s). Its
    scratch goes to :func:`spark_scratch`. As ``livectl run``, Spark's Kafka connector is on ``spark.jars``
    when ``scripts/setup`` resolved it, unless ``source`` (``query_source``) is ``python``."""
    from pyspark.sql import SparkSession

    from streaming.source.query_source import connector_jars

    python = bench_python()
    os.environ["PYSPARK_PYTHON"] = python
    scratch = spark_scratch()
    started = time.monotonic()
    builder = SparkSession.builder.master(MASTER).appName("livectl-bench")
    for raw in conf_file(SPARK_DEFAULTS).read_text().splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition(" ")
            if key != "spark.app.name":
                builder = builder.config(key, value.strip())
    builder = (
        builder.config("spark.sql.shuffle.partitions", str(num_buckets))
        .config("spark.pyspark.python", python)
        # as livectl run: the Spark UI's figures job, and Spark's Kafka connector
        .config(
            "spark.jars", ",".join([str(conf_path(SPARK_JAR)), *(connector_jars("") if source != "python" else [])])
        )
        .config("spark.ui.enabled", "false")
        # profiling: LIVECTL_BENCH_EVENT_LOG=<dir> keeps Spark's event log (every task's metrics: run time,
        # deserialisation, JVM GC, result size) for bench/task_metrics.py
        .config("spark.eventLog.enabled", "true" if os.environ.get("LIVECTL_BENCH_EVENT_LOG") else "false")
        .config("spark.eventLog.dir", os.environ.get("LIVECTL_BENCH_EVENT_LOG", tempfile.gettempdir()))
        .config("spark.eventLog.compress", "false")
        .config("spark.eventLog.rolling.enabled", "false")
        .config("spark.sql.warehouse.dir", str(scratch / "warehouse"))
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session, time.monotonic() - started


def settings_for(svc: Services, name: str, checkpoint_dir: Path, *, num_buckets: int = 8, **overrides: Any) -> Settings:
    """The shipped defaults (``conf/livectl-defaults.json``) with this run's chroot, topics and checkpoint."""
    base = Settings.load()
    values = base.to_dict()
    values.update(
        {
            "zookeeper_connect": f"{svc.zookeeper.connect}/{name}",
            "bootstrap_servers": svc.broker.bootstrap,
            "admin_topic": f"{name}.admin",
            "broker_events_topic": f"{name}.broker-events",
            "requests_topic": f"{name}.requests",
            "admin_results_topic": f"{name}.admin-results",
            "rejected_topic": f"{name}.rejected",
            "num_buckets": num_buckets,
            "checkpoint_dir": str(checkpoint_dir),
            "query_name": name,
        }
    )
    values.update(overrides)
    return Settings.from_mapping(values)


def topic_settings(prefix: str) -> dict[str, str]:
    """Topic names and query name of one run (a fresh prefix: no history of an earlier run in the topics)."""
    return {
        "admin_topic": f"{prefix}.admin",
        "broker_events_topic": f"{prefix}.broker-events",
        "requests_topic": f"{prefix}.requests",
        "admin_results_topic": f"{prefix}.admin-results",
        "rejected_topic": f"{prefix}.rejected",
        "query_name": prefix,
    }


def make_chroot(svc: Services, name: str) -> None:
    root = KazooClient(hosts=svc.zookeeper.connect, timeout=10)
    root.start(timeout=10)
    root.ensure_path(f"/{name}")
    root.stop()
    root.close()


def zk_client(connect: str, timeout: float = 10.0) -> KazooClient:
    c = KazooClient(hosts=connect, timeout=timeout)
    c.start(timeout=30)
    return c


def close(c: KazooClient) -> None:
    with contextlib.suppress(Exception):
        c.stop()
    with contextlib.suppress(Exception):
        c.close()


# ---------------------------------------------------------------------------- brokers and the ZooKeeper tree


def registration(broker_id: int, port: int, rack: str | None = None) -> bytes:
    """Kafka's ``/brokers/ids/<id>`` v5 JSON."""
    return zkdata.encode_broker_registration("127.0.0.1", port, rack, int(time.time() * 1000)).encode()


def register_brokers(connect: str, ids: Sequence[int]) -> dict[int, KazooClient]:
    """One kazoo session per broker, each holding its ephemeral registration."""
    out: dict[int, KazooClient] = {}
    for b in ids:
        c = zk_client(connect)
        c.ensure_path(zkdata.BROKER_IDS)
        c.create(zkdata.broker_path(b), registration(b, 9000 + b), ephemeral=True)
        out[b] = c
    return out


@dataclass(frozen=True)
class Layout:
    """The prepared cluster: topic -> partition -> replicas (leader = first, ISR = all)."""

    topics: dict[str, dict[int, tuple[int, ...]]]

    @property
    def partitions(self) -> int:
        return sum(len(p) for p in self.topics.values())

    def hosted_by(self, broker: int) -> list[tuple[str, int]]:
        return [(t, p) for t, parts in self.topics.items() for p, reps in parts.items() if broker in reps]

    def led_by(self, broker: int) -> list[tuple[str, int]]:
        return [(t, p) for t, parts in self.topics.items() for p, reps in parts.items() if reps[0] == broker]


def plan_layout(n_partitions: int, n_brokers: int, rf: int, per_topic: int = 100, prefix: str = "topic") -> Layout:
    brokers = [BrokerRack(b) for b in range(n_brokers)]
    per_topic = min(per_topic, n_partitions)
    n_topics = max(1, n_partitions // per_topic)
    topics: dict[str, dict[int, tuple[int, ...]]] = {}
    for t in range(n_topics):
        placed = assign_replicas(brokers, per_topic, rf, start_index=t % n_brokers)
        topics[f"{prefix}-{t:05d}"] = {p: tuple(reps) for p, reps in placed.items()}
    return Layout(topics)


def prepare_tree(
    client: KazooClient, layout: Layout, controller_epoch: int = 1, ops_per_txn: int = 100, in_flight: int = 16
) -> float:
    """Create the topics in Kafka's layout (topic znode, ``partitions``, ``<p>``, ``<p>/state``) with
    pipelined multi-op creates. Returns the seconds it took."""
    started = time.monotonic()
    client.ensure_path(zkdata.BROKER_TOPICS)
    ops: list[tuple[str, bytes]] = []
    for topic, parts in layout.topics.items():
        assignment = {p: ReplicaAssignment(reps) for p, reps in parts.items()}
        ops.append((zkdata.topic_path(topic), zkdata.encode_topic_znode(assignment, None).encode()))
        ops.append((f"{zkdata.topic_path(topic)}/partitions", b""))
        for p, reps in parts.items():
            ops.append((f"{zkdata.topic_path(topic)}/partitions/{p}", b""))
            state = zkdata.encode_partition_state(LeaderAndIsr(reps[0], reps, 0, 0), controller_epoch)
            ops.append((zkdata.partition_state_path(topic, p), state.encode()))
    pending: list[Any] = []
    for i in range(0, len(ops), ops_per_txn):
        t = client.transaction()
        for path, data in ops[i : i + ops_per_txn]:
            t.create(path, data)
        pending.append(t.commit_async())
        if len(pending) >= in_flight:
            _check_txn(pending.pop(0).get(timeout=60))
    for h in pending:
        _check_txn(h.get(timeout=60))
    return time.monotonic() - started


def rewrite_states(client: KazooClient, layout: Layout, n: int, leader_epoch: int) -> None:
    """Rewrite the first ``n`` partition-state znodes of ``layout`` (leader 1, ISR [1], ``leader_epoch``), as an
    active controller's last writes would change them; pipelined, 1,000 in flight."""
    paths = [zkdata.partition_state_path(t, p) for t, parts in layout.topics.items() for p in parts][:n]
    body = json.dumps(
        {"version": 1, "leader": 1, "leader_epoch": leader_epoch, "controller_epoch": 1, "isr": [1]}
    ).encode()
    for i in range(0, len(paths), 1000):
        for h in [client.set_async(p, body) for p in paths[i : i + 1000]]:
            h.get()


def _check_txn(results: list[Any]) -> None:
    bad = [r for r in results if isinstance(r, Exception)]
    if bad:
        raise RuntimeError(f"preparing the ZooKeeper tree failed: {bad[0]!r}")


def read_states(client: KazooClient, paths: Sequence[str], window: int = 5000) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for i in range(0, len(paths), window):
        handles = [(p, client.get_async(p)) for p in paths[i : i + window]]
        for p, h in handles:
            data, _ = h.get(timeout=60)
            out[p] = json.loads(data)
    return out


# ---------------------------------------------------------------------------- timing the sinks


@dataclass
class SinkCall:
    batch_id: int
    start: float  # time.time()
    end: float
    n: int
    ok: bool = True
    error: str = ""


@dataclass
class SinkClock:
    """What the timing wrappers saw, per micro-batch (wall-clock ``time.time()``)."""

    zk: list[SinkCall] = field(default_factory=list)
    requests: list[SinkCall] = field(default_factory=list)
    #: state-znode paths each ZooKeeper sink call wrote (successfully), by batch id
    zk_paths: dict[int, set[str]] = field(default_factory=dict)
    #: (topic, partition) of LeaderAndIsr entries each request sink call wrote, by batch id
    lisr_partitions: dict[int, set[tuple[str, int]]] = field(default_factory=dict)
    #: callbacks run after each completed call (e.g. to wake a waiter)
    changed: threading.Condition = field(default_factory=threading.Condition)
    #: when set, only record (don't decode) — cheap for idle runs
    track_paths: bool = True

    #: applied before the timing wrappers (e.g. :func:`large_request_sinks`)
    inner_wrap: Callable[[Any, Any], tuple[Any, Any]] | None = None

    def wrap(self, zk_sink: ZkSinkPort, request_sink: RequestSinkPort) -> tuple[ZkSinkPort, RequestSinkPort]:
        if self.inner_wrap is not None:
            zk_sink, request_sink = self.inner_wrap(zk_sink, request_sink)
        return _TimedZk(zk_sink, self), _TimedRequests(request_sink, self)

    def notify(self) -> None:
        with self.changed:
            self.changed.notify_all()

    def wait(self, what: str, check: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self.changed:
            while not check():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
                self.changed.wait(min(left, 0.5))


class _TimedZk:
    def __init__(self, inner: ZkSinkPort, clock: SinkClock) -> None:
        self.inner = inner
        self.clock = clock

    def write_batch(self, batch_id: int, writes: Sequence[ZkWrite]) -> ZkBatchResult:
        t0 = time.time()
        try:
            result = self.inner.write_batch(batch_id, writes)
        except BaseException as e:
            self.clock.zk.append(SinkCall(batch_id, t0, time.time(), len(writes), False, repr(e)[:300]))
            self.clock.notify()
            raise
        t1 = time.time()
        if self.clock.track_paths and writes:
            refused = {f.index for f in result.failed}
            done = {w.path for i, w in enumerate(writes) if i not in refused and w.path.endswith("/state")}
            self.clock.zk_paths.setdefault(batch_id, set()).update(done)
        self.clock.zk.append(SinkCall(batch_id, t0, t1, len(writes)))
        self.clock.notify()
        return result


class _TimedRequests:
    def __init__(self, inner: RequestSinkPort, clock: SinkClock) -> None:
        self.inner = inner
        self.clock = clock

    def write_requests(self, batch_id: int, requests: Sequence[BrokerRequest]) -> RequestBatchResult:
        t0 = time.time()
        try:
            result = self.inner.write_requests(batch_id, requests)
        except BaseException as e:
            self.clock.requests.append(SinkCall(batch_id, t0, time.time(), len(requests), False, repr(e)[:300]))
            self.clock.notify()
            raise
        t1 = time.time()
        if self.clock.track_paths and requests:
            got: set[tuple[str, int]] = set()
            for r in requests:
                if r.api is RequestApi.LEADER_AND_ISR:
                    for ts in r.body_json().get("topicStates", []):
                        got.update((ts["topicName"], int(ps["partitionIndex"])) for ps in ts["partitionStates"])
            self.clock.lisr_partitions.setdefault(batch_id, set()).update(got)
        self.clock.requests.append(SinkCall(batch_id, t0, t1, len(requests)))
        self.clock.notify()
        return result

    def write_admin_results(self, batch_id: int, results: Any) -> RequestBatchResult:
        return self.inner.write_admin_results(batch_id, results)

    def write_rejected(self, batch_id: int, rejected: Any) -> RequestBatchResult:
        return self.inner.write_rejected(batch_id, rejected)


#: every foreachBatch call of the controllers :func:`start_controller` started in this process: when the
#: micro-batch's Spark job (``toPandas()``) and then its dispatch (decode + sinks) ended
#: (:class:`streaming.query.dispatch.BatchTiming`, from the dispatcher's ``on_batch_timed`` hook)
DISPATCH_CALLS: list[BatchTiming] = []


# ---------------------------------------------------------------------------- prototype: requests over 1 MB


def large_request_sinks(max_bytes: int = 256 * 1024 * 1024) -> Callable[[Any, Any], tuple[Any, Any]]:
    """A ``wrap_sinks`` step that swaps the product's request sink for the same class with a producer that
    accepts messages up to ``max_bytes`` (kafka-python's default ``max_request_size`` is 1 MB, and a
    LeaderAndIsr / UpdateMetadata for tens of thousands of partitions is larger). A measurement
    prototype only: Apache Kafka's brokers refuse messages over ``message.max.bytes`` (1 MB by default),
    so the product fix is to split such requests into several messages."""
    from sinks.requests import RequestSink

    def wrap(zk_sink: Any, request_sink: Any) -> tuple[Any, Any]:
        big = RequestSink(
            request_sink.bootstrap_servers,
            request_sink.fence,
            requests_topic=request_sink.requests_topic,
            admin_results_topic=request_sink.admin_results_topic,
            rejected_topic=request_sink.rejected_topic,
            max_request_size=max_bytes,
        )
        return zk_sink, big

    return wrap


# ---------------------------------------------------------------------------- the controller on a thread


@dataclass
class RunningController:
    app: ControllerApp
    thread: threading.Thread
    errors: list[BaseException]
    started: float  # time.time() when run() was called
    ready_at: float | None = None  # time.time() when run() signalled ready (failover ref sent)

    def stop(self, timeout: float = 120) -> None:
        self.app.stop()
        self.thread.join(timeout)

    @property
    def failed(self) -> BaseException | None:
        return self.errors[0] if self.errors else None


def start_controller(
    spark: Any, settings: Settings, clock: SinkClock | None = None, wait_ready: float | None = 600
) -> RunningController:
    app = ControllerApp(
        settings,
        spark=spark,
        wrap_sinks=clock.wrap if clock is not None else None,
        on_batch_timed=DISPATCH_CALLS.append,
    )
    ready = threading.Event()
    errors: list[BaseException] = []
    rc = RunningController(app, threading.Thread(), errors, time.time())

    def target() -> None:
        try:
            app.run(ready=ready)
        except BaseException as e:  # reported by the benchmark
            errors.append(e)
        finally:
            if rc.ready_at is None:
                rc.ready_at = time.time()
            ready.set()

    def mark() -> None:
        ready.wait()
        if rc.ready_at is None:
            rc.ready_at = time.time()

    rc.thread = threading.Thread(target=target, name="livectl-controller", daemon=True)
    rc.thread.start()
    threading.Thread(target=mark, daemon=True).start()
    if wait_ready is not None:
        ready.wait(wait_ready)
    return rc


def progress_list(query: Any) -> list[dict[str, Any]]:
    """``query.recentProgress`` as plain dicts (it may be a list of dicts or of progress objects)."""
    out = []
    for p in query.recentProgress if query is not None else []:
        d = json.loads(p.json) if hasattr(p, "json") and isinstance(p.json, str) else dict(p)
        observed = d.get("observedMetrics") or {}
        d["observedMetrics"] = {k: (v.asDict() if hasattr(v, "asDict") else dict(v)) for k, v in observed.items()}
        out.append(d)
    return out


def batch_end(progress: dict[str, Any]) -> float:
    """Wall-clock end of a micro-batch: its trigger timestamp + triggerExecution."""
    ts = dt.datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00")).timestamp()
    return ts + float(progress["durationMs"].get("triggerExecution", 0)) / 1000.0


def percentile(values: Sequence[float], q: float) -> float:
    s = sorted(values)
    if not s:
        return float("nan")
    k = (len(s) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


@contextlib.contextmanager
def batch_sizes() -> Iterator[list[int]]:
    """While open, the size of every record batch a consumer of this process takes from a fetch (each stored
    batch's size as the broker returns it: compressed, as it sits on the topic)."""
    sizes: list[int] = []
    original = MemoryRecords.next_batch

    def next_batch(self: MemoryRecords, *args: Any, **kwargs: Any) -> Any:
        batch = original(self, *args, **kwargs)
        if batch is not None:
            sizes.append(int(batch.size_in_bytes))  # a property of the v2 batch: length field + header
        return batch

    MemoryRecords.next_batch = next_batch  # type: ignore[method-assign]
    try:
        yield sizes
    finally:
        MemoryRecords.next_batch = original  # type: ignore[method-assign]


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """Each partition of ``topic`` and its end offset now."""
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in sorted(c.partitions_for_topic(topic) or ())]
        return {tp.partition: int(off) for tp, off in c.end_offsets(tps).items()}
    finally:
        c.close()


def read_back(
    bootstrap: str, topic: str, expected: int | None = None, since: Mapping[int, int] | None = None
) -> tuple[list[Any], int]:
    """Every committed record of ``topic`` (from the offsets ``since``, else the start; until ``expected``
    records, else until the topic is drained) and the bytes of the record batches they came in."""
    with batch_sizes() as sizes:
        c = KafkaConsumer(
            bootstrap_servers=bootstrap,
            enable_auto_commit=False,
            isolation_level="read_committed",
            fetch_max_bytes=64 * 1024 * 1024,
            max_partition_fetch_bytes=16 * 1024 * 1024,
        )
        try:
            tps = [TopicPartition(topic, p) for p in sorted(c.partitions_for_topic(topic))]
            c.assign(tps)
            for tp in tps:
                c.seek(tp, (since or {}).get(tp.partition, 0))
            records: list[Any] = []
            idle = 0
            while (expected is None or len(records) < expected) and idle < (4 if expected is None else 20):
                got = c.poll(timeout_ms=500, max_records=1000)
                idle = 0 if got else idle + 1
                for rs in got.values():
                    records.extend(rs)
        finally:
            c.close()
    return records, sum(sizes)


def request_bytes(bootstrap: str, topic: str, since: Mapping[int, int]) -> dict[str, Any]:
    """What a controller wrote to the request topic after ``since``: messages, the bytes of their record
    batches on the topic (compressed with the ``request_compression`` setting) and of their values."""
    records, on_topic = read_back(bootstrap, topic, since=since)
    return {
        "request_messages": len(records),
        "request_topic_mb": round(on_topic / 1e6, 2),
        "request_values_mb": round(sum(len(r.value or b"") for r in records) / 1e6, 2),
    }


def _rss_kib(pid: int) -> int:
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def _descendants(root: int) -> list[tuple[int, str]]:
    """(pid, command line) of every process below ``root`` (from /proc's parent links)."""
    parent: dict[int, int] = {}
    cmd: dict[int, str] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            stat = (d / "stat").read_text()
            parent[int(d.name)] = int(stat[stat.rindex(")") + 2 :].split()[1])
            cmd[int(d.name)] = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        for child, ppid in parent.items():
            if ppid == p:
                out.append((child, cmd.get(child, "")))
                todo.append(child)
    return out


class MemoryPeaks:
    """Peak resident memory, sampled every ``interval`` s while open, of: this process (the benchmark *and*
    the controller's driver Python, which share it), the Spark driver JVM, the Python workers (all of them
    together), ZooKeeper (``zk_pid``), and each process of ``trees`` with everything below it (a controller
    run as its own process: its driver Python, JVM and Python workers together)."""

    def __init__(
        self, zk_pid: int | None = None, interval: float = 0.5, trees: Mapping[str, int] | None = None
    ) -> None:
        self.zk_pid, self.interval, self.trees = zk_pid, interval, dict(trees or {})
        self.peaks_kib: dict[str, int] = {"bench_and_driver_python": 0, "spark_jvm": 0, "python_workers": 0}
        if zk_pid is not None:
            self.peaks_kib["zookeeper"] = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memory-peaks", daemon=True)

    def sample(self) -> None:
        now = {"bench_and_driver_python": _rss_kib(os.getpid()), "spark_jvm": 0, "python_workers": 0}
        for pid, cmd in _descendants(os.getpid()):
            if "java" in cmd.split(" ", 1)[0]:
                now["spark_jvm"] += _rss_kib(pid)
            elif "pyspark" in cmd or "worker" in cmd:
                now["python_workers"] += _rss_kib(pid)
        if self.zk_pid is not None:
            now["zookeeper"] = _rss_kib(self.zk_pid)
        for name, root in self.trees.items():
            now[name] = _rss_kib(root) + sum(_rss_kib(pid) for pid, _ in _descendants(root))
        for k, v in now.items():
            self.peaks_kib[k] = max(self.peaks_kib.get(k, 0), v)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def __enter__(self) -> MemoryPeaks:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def gib(self) -> dict[str, float]:
        return {k: round(v / 1024 / 1024, 2) for k, v in self.peaks_kib.items()}
