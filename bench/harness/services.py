"""Real services for a benchmark and what it prepares in them: ZooKeeper and Apache Kafka started with
:mod:`livectl.local` (free ports, stopped by PID), brokers registered with their own kazoo sessions (Kafka's
``/brokers/ids/<id>`` JSON), a ZooKeeper tree in Kafka's layout written with :mod:`core.kafka.zkdata`'s
encoders, what the request topic holds afterwards, and the peak memory of every process of a run."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafka import KafkaConsumer, TopicPartition
from kafka.record.memory_records import MemoryRecords
from kazoo.client import KazooClient
from kazoo.protocol.states import EventType, WatchedEvent

from bench.harness.spark import spark_scratch
from core.kafka import zkdata
from core.model import LeaderAndIsr, ReplicaAssignment
from core.placement import BrokerRack, assign_replicas
from livectl import local
from streaming.settings import Settings


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


class ZnodeDeletion:
    """A znode's deletion, seen through a one-shot ZooKeeper watch set when made (a ``RuntimeError`` when there is
    no such znode to watch): :meth:`wait` tells when the watch fired, e.g. the moment ``/controller`` went with
    the killed controller's session or a broker's registration with its own."""

    def __init__(self, client: KazooClient, path: str) -> None:
        self.path = path
        self._deleted = threading.Event()
        self._at: list[float] = []
        if client.exists(path, watch=self._seen) is None:
            raise RuntimeError(f"no {path} to watch the deletion of")

    def _seen(self, event: WatchedEvent | None) -> None:
        if event is not None and event.type == EventType.DELETED:
            self._at.append(time.time())
            self._deleted.set()

    def wait(self, timeout: float) -> float:
        """When the znode was seen deleted (wall clock, ``time.time()``); a ``RuntimeError`` when it was not within
        ``timeout`` seconds."""
        if not self._deleted.wait(timeout):
            raise RuntimeError(f"{self.path} was not deleted within {timeout:.0f} s")
        return self._at[0]


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

    MemoryRecords.next_batch = next_batch
    try:
        yield sizes
    finally:
        MemoryRecords.next_batch = original
