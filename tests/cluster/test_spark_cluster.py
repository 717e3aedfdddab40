"""livectl as deployed: a Spark standalone cluster (master + two workers from the pyspark wheel's own
``spark-class``), the controller submitted to it with ``spark-submit`` as a separate process, a standby
controller as a second ``spark-submit`` on the same checkpoint, executors running the packed environment
(``livectl package-env``, ``spark.archives``) in their own JVMs and Python workers.

The scenario (each step waits for its effect in ZooKeeper *and* in the simulated brokers' own view):

1. both drivers start at once; the first elected is the active one, the other waits as a standby with its
   SparkSession and executors already up (``spark.cores.max=2`` each, the workers offer 2 slots each, so
   each application holds one executor on each worker);
2. create ``orders`` (6 partitions, RF 3) and ``payments`` (3, RF 3);
3. SIGKILL simulated broker 3: its session expires, no partition is led by it or keeps it in its ISR;
4. cut worker 1 off from the active driver mid-batch (issue 41, item 5): a topic is created and, as soon as
   the driver's REST API shows a task of that micro-batch's stateful stage running on worker 1's executor,
   the link between worker 1's host and the active driver's host is cut; the worker, its executor and the
   driver keep running. The driver declares the executor lost (its heartbeats stop), the stateful tasks
   run again on worker 2's executor from the checkpoint, and the batch's outputs (ZooKeeper writes,
   LeaderAndIsr / UpdateMetadata on the requests topic, the admin result) appear once; the link heals, a
   new executor on worker 1 joins, and the batch's outputs are read back unchanged (again at the end);
5. reassign ``payments`` onto other brokers and, right after, SIGKILL worker 1 with everything it launched
   (its executors and their Python workers): the stateful tasks re-run on worker 2's executor from the
   checkpoint and the reassignment completes;
6. make broker ``X`` a stuck follower, reassign ``orders`` so that ``X`` must join (the reassignment
   cannot finish while ``X`` is stuck), SIGKILL the active driver once the reassignment is under way,
   create ``audit`` while no controller is active; the standby is elected, resumes from the checkpoint and
   ZooKeeper, creates ``audit``; ``X`` is cleared and the standby finishes the reassignment;
7. the end state: ZooKeeper in Kafka's layout, every admin command answered ``ok``, the brokers' own view
   agreeing with ZooKeeper, every process stopped.

The machines are network namespaces (``bench/harness/netns.py``, so the test runs as root, as
``tests/e2e/test_partitions.py`` does): ZooKeeper and Kafka on a host ``services``, worker 1 on ``worker-1``
(the executors it launches inherit its namespace), each driver on a host of its own; the master, worker 2 and
the simulated brokers run in the root namespace, the master and worker 2 on an address of the root namespace
that every host reaches. The cut is between worker 1's host and the active driver's host only (the issue's
"cut off from the driver"): cutting worker 1's whole link would also cut it from the master, which then
declares the worker dead itself (step 5's SIGKILL covers that path); cut off from the driver only, the
master still sees a live worker, the executor still reaches Kafka, the checkpoint's file system and worker 2,
and only the driver's own heartbeat expiry can declare it lost. Both drivers get ``spark.network.timeout``
of LOSS_TIMEOUT_S, ``spark.network.timeoutInterval`` and ``spark.executor.heartbeatInterval`` of 1 s (the
test's own: Spark's defaults, 120 s checked every 60 s and 10 s, would take minutes).
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import tarfile
import time
import traceback
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kazoo.client import KazooClient
from sparkcluster import (
    DriverSpec,
    SparkProcess,
    StandaloneCluster,
    api_url,
    app_id_of,
    discard_copies,
    executor_dirs,
    executors_of,
    process_tree,
    python_workers,
    start_driver,
    start_master,
    start_worker,
    try_json,
)
from waiting import wait_until

from admin.cli import main as admin_main
from bench.harness import fencing, netns
from core import events as ev
from core.codec.events import event_to_json
from livectl import local
from livectl import scenario as sc
from livectl.demo import BrokerProcess, Observer, Timeline, start_broker_process
from simbrokers.ctl import main as simbrokers_main
from sinks.requests import ensure_topics

pytestmark = [pytest.mark.cluster]

BUCKETS = 4
ACTIVE_ID, STANDBY_ID = 1001, 1002
BROKERS = (1, 2, 3, 4, 5)
KILLED_BROKER = 3
#: ZooKeeper session of the controllers and brokers: a killed one is noticed after about this long
SESSION_MS = 10000
STEP_S = 300.0
#: the drivers' ``spark.network.timeout``: an executor silent this long is declared lost
LOSS_TIMEOUT_S = 15
#: the test's own Spark properties for both drivers (see the module docstring)
EXECUTOR_LOSS_CONF = (
    ("spark.network.timeout", f"{LOSS_TIMEOUT_S}s"),
    ("spark.network.timeoutInterval", "1s"),
    ("spark.executor.heartbeatInterval", "1s"),
)
#: the topic created in the micro-batch that is cut (``ledger-2``… when a try saw no stateful task on worker 1)
CUT_TOPIC = "ledger"
CUT_ASSIGNMENT = {0: (1, 2), 1: (2, 4), 2: (4, 5), 3: (5, 1)}
CUT_TRIES = 3
IP = shutil.which("ip") or "/usr/sbin/ip"


def test_env_archive_holds_livectl_non_editable(env_archive: Path) -> None:
    """The archive is a venv-pack'd environment: its own ``bin/python`` link and ``pyvenv.cfg``, livectl's
    packages installed from a wheel (no editable hook pointing into a checkout), its dependencies, and
    pyspark's Python modules without pyspark's jars (the executors' JVM is Spark's own)."""
    with tarfile.open(env_archive) as tar:
        members = {m.name: m for m in tar.getmembers()}
        sites = {
            m.group(1) for n in members if (m := re.fullmatch(r"(lib/python3\.\d+/site-packages)/streaming/.*", n))
        }
        assert len(sites) == 1, sites
        (site,) = sites
        for pkg in ("core", "streaming", "sinks", "admin", "livectl", "simbrokers"):
            assert f"{site}/{pkg}/__init__.py" in members, pkg
        # the configuration travels as package data (a non-editable install has no conf/ beside it)
        for data in ("livectl_conf/livectl-defaults.json", "livectl_conf/expectations/livectl-input.json"):
            assert f"{site}/{data}" in members, data
        for dep in ("pyspark", "pandas", "pyarrow", "great_expectations", "kazoo", "kafka", "orjson"):
            assert f"{site}/{dep}/__init__.py" in members, dep
        assert not [n for n in members if n.startswith(f"{site}/pyspark/jars/")]
        assert not [n for n in members if "__editable__" in n or n.endswith(".egg-link")]
        dist_info = [n for n in members if n.startswith(f"{site}/livectl-") and n.endswith(".dist-info/RECORD")]
        assert len(dist_info) == 1, dist_info
        direct = dist_info[0].replace("RECORD", "direct_url.json")
        if direct in members:  # installed from a wheel file: not editable
            extracted = tar.extractfile(members[direct])
            assert extracted is not None
            assert not json.loads(extracted.read()).get("dir_info", {}).get("editable", False)
        python = members["bin/python"]
        assert python.issym() or python.isfile()
        cfg = tar.extractfile(members["pyvenv.cfg"])
        assert cfg is not None and b"home = " in cfg.read()


# ================================================================================================ helpers


def _admin(common: list[str], *argv: str) -> int:
    return admin_main([*argv, *common])


def _read_results(bootstrap: str, topic: str) -> list[dict[str, Any]]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
    try:
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        out: list[dict[str, Any]] = []
        deadline = time.monotonic() + 30
        while any(consumer.position(tp) < ends[tp] for tp in tps) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=300).values():
                out.extend(json.loads(r.value) for r in records)
        return out
    finally:
        consumer.close()


def _move(assignment: dict[int, tuple[int, ...]], live: list[int]) -> dict[int, tuple[int, ...]]:
    """New replicas on live brokers only, same replication factor: the live brokers not holding the
    partition first (rotated by partition, so leaders spread), then its live replicas."""
    out = {}
    for p, replicas in sorted(assignment.items()):
        outside = [b for b in live if b not in replicas]
        k = p % len(outside) if outside else 0
        target = tuple((outside[k:] + outside[:k] + [b for b in replicas if b in live])[: len(replicas)])
        assert len(target) == len(replicas), (p, replicas, live)
        out[p] = target
    return out


def _reassignment_file(path: Path, topic: str, targets: dict[int, tuple[int, ...]]) -> Path:
    doc = {
        "version": 1,
        "partitions": [{"topic": topic, "partition": p, "replicas": list(r)} for p, r in targets.items()],
    }
    path.write_text(json.dumps(doc))
    return path


class Scenario:
    """What the steps share: the observer of ZooKeeper and the brokers, the processes to stop."""

    def __init__(self, observer: Observer, live: set[int]) -> None:
        self.observer = observer
        self.live = live

    def view(self) -> sc.ClusterView:
        return self.observer.snapshot()[0]

    def settled(self, topics: list[str], replicas: dict[str, dict[int, tuple[int, ...]]] | None = None) -> list[str]:
        """What is still wrong with ``topics``: missing, moving, leaderless, led by or in-ISR a dead broker,
        brokers disagreeing with ZooKeeper, a live replica missing from an ISR."""
        view, status = self.observer.snapshot()
        problems = [f"topic {t} missing" for t in topics if t not in view.topics]
        for t, want in (replicas or {}).items():
            have = {p: pv.replicas for p, pv in view.topics.get(t, {}).items()}
            if have != want:
                problems.append(f"{t} replicas {have}, expected {want}")
        dead = set(BROKERS) - self.live
        for name, pv in view.partitions().items():
            if pv.adding or pv.removing:
                problems.append(f"{name} still moving (adding {pv.adding}, removing {pv.removing})")
        if view.reassign_pending:
            problems.append("/admin/reassign_partitions still there")
        problems += sc.leadership_problems(view, not_on=dead)
        live_status = {b: s for b, s in status.items() if b in self.live}
        if sorted(live_status) != sorted(self.live):
            problems.append(f"status of brokers {sorted(self.live - set(live_status))} not written yet")
        problems += sc.brokers_disagree(view, live_status)
        for b in self.live:
            problems += sc.missing_from_isr(view, b)
        return problems

    def wait_settled(
        self,
        what: str,
        topics: list[str],
        replicas: dict[str, dict[int, tuple[int, ...]]] | None = None,
        timeout: float = STEP_S,
    ) -> None:
        """Wait until :meth:`settled` finds nothing wrong (and ``replicas`` are the topics' assignments)."""
        problems: list[str] = ["not checked"]

        def settled() -> bool:
            nonlocal problems
            problems = self.settled(topics, replicas)
            return not problems

        wait_until(f"{what} settled", settled, timeout, interval=0.5, detail=lambda: f"problems: {problems[:8]}")


@dataclass
class Machines:
    """The test's hosts (see the module docstring). ``root_address``: the root namespace's end of the
    services host's link, an address of the root namespace that every host reaches."""

    net: netns.Network
    services: netns.Host
    worker_1: netns.Host
    drivers: dict[str, netns.Host]

    @property
    def root_address(self) -> str:
        return self.services.addrs.gateway


def _in(host: netns.Host) -> list[str]:
    """What runs a command in ``host`` (``ip netns exec`` execs it: the PID started is the command's)."""
    return [IP, "netns", "exec", host.namespace]


@pytest.fixture()
def machines() -> Iterator[Machines]:
    with netns.network() as net:
        services, worker_1 = net.add_host("services"), net.add_host("worker-1")
        drivers = {name: net.add_host(name) for name in ("driver-a", "driver-b")}
        yield Machines(net, services, worker_1, drivers)


def _chroot(zookeeper: local.Service) -> str:
    ns = f"cluster-{uuid.uuid4().hex[:8]}"
    root = KazooClient(hosts=zookeeper.connect, timeout=10)
    root.start(timeout=15)
    root.ensure_path(f"/{ns}")
    root.stop()
    root.close()
    return ns


# ================================================================================================ step 4's helpers


def _running_job(driver: SparkProcess, app: str, batch: int) -> dict[str, Any] | None:
    """Micro-batch ``batch``'s own job (``livectl c… e… batch N: deciding``) while it runs."""
    jobs = try_json(f"{api_url(driver, app)}/jobs?status=running")
    return next((j for j in jobs or [] if f" batch {batch}: deciding" in str(j.get("description", ""))), None)


def _stage_attempts(driver: SparkProcess, app: str, stage: int) -> list[dict[str, Any]]:
    return list(try_json(f"{api_url(driver, app)}/stages/{stage}") or [])


def _tasks(driver: SparkProcess, app: str, stage: int, attempt: int) -> list[dict[str, Any]]:
    return list(try_json(f"{api_url(driver, app)}/stages/{stage}/{attempt}/taskList?length=1000") or [])


def _stateful_running_on(
    driver: SparkProcess, app: str, batch: int, executor: str
) -> tuple[int, list[dict[str, Any]]] | None:
    """``(stage id, tasks)`` when the driver's REST API shows tasks of ``batch``'s stateful stage (its
    ``applyInPandasWithState``: the stage of BUCKETS tasks, one per shuffle partition) running on ``executor``."""
    job = _running_job(driver, app, batch)
    if job is None:
        return None
    for stage in sorted(job.get("stageIds", []), reverse=True):
        for attempt in _stage_attempts(driver, app, stage):
            if attempt.get("status") != "ACTIVE" or int(attempt.get("numTasks", 0)) != BUCKETS:
                continue
            running = [
                t
                for t in _tasks(driver, app, stage, int(attempt["attemptId"]))
                if t.get("executorId") == executor and t.get("status") == "RUNNING"
            ]
            if running:
                return stage, running
    return None


def _active_executors_on(driver: SparkProcess, app: str, address: str) -> set[str]:
    """The ids of ``app``'s active executors on the host of ``address`` (the driver's REST API)."""
    return {
        str(e["id"])
        for e in executors_of(driver, app)
        if e.get("isActive") and str(e.get("hostPort", "")).rsplit(":", 1)[0] == address
    }


def _executor_pid(worker: SparkProcess, app: str, executor: str) -> int | None:
    """The PID of executor ``executor`` of ``app`` that ``worker`` launched (its command line names both)."""
    for pid, cmd in process_tree(worker).items():
        if "CoarseGrainedExecutorBackend" in cmd and f"--executor-id {executor} " in cmd and app in cmd:
            return pid
    return None


def _alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _send_create(
    bootstrap: str, admin_topic: str, rid: str, topic: str, assignment: dict[int, tuple[int, ...]]
) -> tuple[int, int]:
    """Send the admin command ``rid`` creating ``topic`` with ``assignment``, as ``livectl-admin`` writes it
    (with a request id of the test's own, to find its one result); its ``(partition, offset)``."""
    replicas = tuple(assignment[p] for p in sorted(assignment))
    command = ev.CreateTopic(rid, topic, len(assignment), len(assignment[0]), replica_assignment=replicas)
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        sent = producer.send(admin_topic, key=rid.encode(), value=event_to_json(command).encode()).get(30)
    finally:
        producer.close()
    return int(sent.partition), int(sent.offset)


def _batch_holding(checkpoint: Path, admin_topic: str, partition: int, offset: int, since: int) -> int | None:
    """The micro-batch planned after ``since`` (``offsets/N``, its last line the source's end offset
    ``{topic: {partition: next offset}}``) whose records include ``admin_topic``'s record at ``offset``."""
    for n in sorted(b for b in fencing.batch_ids(checkpoint / "offsets") if b > since):
        try:
            end = json.loads((checkpoint / "offsets" / str(n)).read_text().splitlines()[-1])
        except (OSError, ValueError, IndexError):
            return None  # being written
        if int(end.get(admin_topic, {}).get(str(partition), 0)) > offset:
            return n
    return None


@dataclass(frozen=True)
class BatchOutputs:
    """What micro-batch ``batch`` of controller epoch ``epoch`` left, read back: its messages on the requests
    topic (as sorted JSON texts), the admin results of ``rid`` and the (version, mzxid) of ``topic``'s znodes."""

    batch: int
    epoch: int
    requests: tuple[str, ...]
    results: tuple[str, ...]
    znodes: tuple[tuple[str, int, int], ...]

    def lasting(self) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, int, int]]:
        """What no later micro-batch may change: the batch's requests, the command's results, the topic's
        znode (the partitions' states change with their ISR)."""
        return self.requests, self.results, self.znodes[0]


def _batch_outputs(
    bootstrap: str, topics: dict[str, str], zk_connect: str, *, batch: int, epoch: int, rid: str, topic: str
) -> BatchOutputs:
    requests = [
        m
        for msgs in fencing.messages(bootstrap, topics["requests"]).values()
        for m in msgs
        if m.get("batchId") == batch and m.get("controllerEpoch") == epoch
    ]
    results = [r for r in _read_results(bootstrap, topics["results"]) if r.get("request_id") == rid]
    zk = KazooClient(hosts=zk_connect, timeout=10)
    zk.start(timeout=15)
    try:
        paths = [f"/brokers/topics/{topic}"] + [
            f"/brokers/topics/{topic}/partitions/{p}/state" for p in sorted(CUT_ASSIGNMENT)
        ]
        znodes = []
        for path in paths:
            stat = zk.exists(path)
            znodes.append((path, stat.version if stat else -1, stat.mzxid if stat else -1))
    finally:
        zk.stop()
        zk.close()
    return BatchOutputs(
        batch,
        epoch,
        tuple(sorted(json.dumps(m, sort_keys=True) for m in requests)),
        tuple(sorted(json.dumps(r, sort_keys=True) for r in results)),
        tuple(znodes),
    )


def _once_problems(out: BatchOutputs, topic: str, live: set[int]) -> list[str]:
    """What is not "once" in ``out``: a request message written twice, a partition of ``topic`` not in
    exactly one LeaderAndIsr per replica and one UpdateMetadata per live broker, not exactly one final admin
    result (``ok``), a znode of ``topic`` missing or written more than once."""
    problems = [f"request written {n} times: {m[:200]}" for m, n in Counter(out.requests).items() if n > 1]
    lisr: Counter[tuple[int, int]] = Counter()
    meta: Counter[tuple[int, int]] = Counter()
    for text in out.requests:
        m = json.loads(text)
        addressees = [a["brokerId"] for a in m.get("addressees", [])] or [m["brokerId"]]
        for ts in m.get("body", {}).get("topicStates", []):
            if ts.get("topicName") != topic:
                continue
            for ps in ts.get("partitionStates", []):
                for b in addressees:
                    counter = lisr if m["api"] == "LeaderAndIsr" else meta if m["api"] == "UpdateMetadata" else None
                    if counter is not None:
                        counter[(b, ps["partitionIndex"])] += 1
    want_lisr = Counter({(b, p): 1 for p, replicas in CUT_ASSIGNMENT.items() for b in replicas})
    want_meta = Counter({(b, p): 1 for p in CUT_ASSIGNMENT for b in live})
    if lisr != want_lisr:
        problems.append(
            f"LeaderAndIsr (broker, partition) counts {dict(lisr)}, each of {sorted(want_lisr)} once wanted"
        )
    if meta != want_meta:
        problems.append(
            f"UpdateMetadata (broker, partition) counts {dict(meta)}, each of {sorted(want_meta)} wanted once"
        )
    final = [json.loads(r) for r in out.results if json.loads(r).get("status") != "in_progress"]
    if [r.get("status") for r in final] != ["ok"]:
        problems.append(f"admin results {final}, want one ok")
    elif final[0].get("batch_id") != out.batch:
        problems.append(f"answered in batch {final[0].get('batch_id')}, not {out.batch}")
    problems += [f"{path}: version {v}" for path, v, _ in out.znodes if v != 0]
    return problems


# ================================================================================================ the test


def test_controller_on_a_spark_cluster(machines: Machines, env_archive: Path, tmp_path: Path) -> None:
    started = time.monotonic()
    # Kafka starts beside the Spark daemons (it is needed from the simulated brokers on); ZooKeeper first
    starting = ThreadPoolExecutor(1, thread_name_prefix="cluster-kafka")
    kafka_start = starting.submit(netns.start_kafka, machines.services, tmp_path / "kafka")
    starting.shutdown(wait=False)
    zookeeper = netns.start_zookeeper(machines.services, tmp_path / "zookeeper")
    kafka: local.Service | None = None
    ns = _chroot(zookeeper)
    zk_connect = f"{zookeeper.connect}/{ns}"
    bootstrap = f"{machines.services.address}:9092"
    topics = {
        "admin": f"{ns}.admin",
        "events": f"{ns}.broker-events",
        "requests": f"{ns}.requests",
        "results": f"{ns}.admin-results",
        "rejected": f"{ns}.rejected",
        "control": f"{ns}.simbrokers.control",
    }
    common = ["--zookeeper", zk_connect, "--bootstrap-server", bootstrap]
    write = [*common, "--admin-topic", topics["admin"], "--admin-results-topic", topics["results"]]
    # the checkpoint both drivers share, outside the repository, as a file: URI
    checkpoint = tmp_path / "checkpoint"
    conf_dir = tmp_path / "spark-conf"
    conf_dir.mkdir()
    driver_args = (
        "--zookeeper", zk_connect,
        "--bootstrap-server", bootstrap,
        "--buckets", str(BUCKETS),
        "--checkpoint-dir", checkpoint.as_uri(),
        "--set", f"zookeeper_session_timeout_ms={SESSION_MS}",
        "--set", "trigger_interval=500 milliseconds",
        "--set", f"admin_topic={topics['admin']}",
        "--set", f"broker_events_topic={topics['events']}",
        "--set", f"requests_topic={topics['requests']}",
        "--set", f"admin_results_topic={topics['results']}",
        "--set", f"rejected_topic={topics['rejected']}",
        "--set", f"query_name={ns}",
    )  # fmt: skip

    brokers: dict[int, BrokerProcess] = {}
    spark: list[SparkProcess] = []
    drivers: dict[int, SparkProcess] = {}
    observer: Observer | None = None
    timeline = (tmp_path / "timeline.log").open("w")
    try:
        # ------------------------------------------------------------------ cluster, brokers, controllers
        master = start_master(tmp_path, conf_dir, machines.root_address)
        spark.append(master)
        cluster = StandaloneCluster(master, {}, conf_dir)
        for name in ("worker-1", "worker-2"):
            # 2 scheduling slots each (not CPUs): the active and the standby application each get one executor
            # on each worker, so losing a worker leaves both with an executor. Worker 1 and its executors run
            # on their own host; worker 2 beside the master
            host = machines.worker_1 if name == "worker-1" else None
            w = start_worker(
                tmp_path, conf_dir, name, cluster.url, cores=2, memory="1280m",
                address=host.address if host else machines.root_address, prefix=_in(host) if host else (),
            )  # fmt: skip
            cluster.workers[name] = w
            spark.append(w)
        kafka = kafka_start.result(timeout=240)
        print(f"ZooKeeper and Kafka serving {time.monotonic() - started:.1f} s after the start")
        ensure_topics(bootstrap, list(topics.values()))
        for b in BROKERS:
            brokers[b] = start_broker_process(
                b, zookeeper=zk_connect, bootstrap=bootstrap, topics=topics, brokers_dir=tmp_path / "brokers",
                session_timeout_ms=SESSION_MS,
            )  # fmt: skip
        wait_until("the Spark master's web UI", cluster.state, timeout=90)
        wait_until("two alive workers", lambda: cluster.alive_workers() == 2, timeout=90)

        for cid, name in ((ACTIVE_ID, "driver-a"), (STANDBY_ID, "driver-b")):
            host = machines.drivers[name]
            spec = DriverSpec(name, cid, driver_args, conf=EXECUTOR_LOSS_CONF)
            drivers[cid] = start_driver(
                tmp_path, conf_dir, cluster.url, env_archive, spec, address=host.address, prefix=_in(host)
            )
        observer = Observer(
            zk_connect=zk_connect, bootstrap=bootstrap, requests_topic=topics["requests"],
            results_topic=topics["results"], status_dir=tmp_path / "brokers", timeline=Timeline(timeline), verbose=True,
        )  # fmt: skip
        observer.open()
        observer.start()
        run = Scenario(observer, set(BROKERS))

        def elected() -> int | None:
            for d in drivers.values():
                assert d.running(), f"{d.name} exited {d.proc.returncode}:\n{d.tail()}"
            return run.view().controller

        active_id = wait_until("a controller elected", elected, timeout=240)
        standby_id = STANDBY_ID if active_id == ACTIVE_ID else ACTIVE_ID
        active, standby = drivers[active_id], drivers[standby_id]
        first_epoch = run.view().controller_epoch
        assert first_epoch is not None

        def both_apps_have_two_executors() -> bool:
            apps = cluster.apps()
            return len(apps) == 2 and all(int(a.get("cores", 0)) == 2 for a in apps)

        wait_until("both applications holding 2 executors", both_apps_have_two_executors, timeout=180)
        active_app = wait_until("the active driver's application id", lambda: app_id_of(active), timeout=180)
        standby_app = wait_until("the standby driver's application id", lambda: app_id_of(standby), timeout=180)
        for app in (active_app, standby_app):
            for w in cluster.workers.values():
                assert executor_dirs(w, app), f"{app} has no executor on {w.name}"
                # the shipped spark-defaults.conf (given with --properties-file) sets no compiler option: the
                # executors' one is the test's own (tests/support/jvm_options.py); the worker logs each command
                for d in executor_dirs(w, app).values():
                    lines = (d / "stderr").read_text(errors="replace").splitlines()
                    command = next((ln for ln in lines if "Executor Command" in ln), "")
                    assert command, (d, lines[:20])
                    assert command.count("TieredStopAtLevel") == 1, (d, command[:2000])
        wait_until("every broker registered", lambda: sorted(run.view().brokers) == list(BROKERS), timeout=60)

        def first_batch_done() -> bool:
            # the controller's first micro-batch hands it the cluster state (the failover reference) and tells
            # every live broker so (UpdateMetadata); admin commands before it would be answered NOT_CONTROLLER
            return any(
                m.get("api") == "UpdateMetadata" and m.get("controllerEpoch") == first_epoch
                for m in observer.requests_since(0.0)
            )

        wait_until("the active controller's first micro-batch", first_batch_done, timeout=600)

        # ------------------------------------------------------------------ create topics
        assert _admin(write, "topics", "--create", "--topic", "orders", "--partitions", "6",
                      "--replication-factor", "3", "--wait", "--timeout", "300") == 0  # fmt: skip
        assert _admin(write, "topics", "--create", "--topic", "payments", "--partitions", "3",
                      "--replication-factor", "3", "--wait", "--timeout", str(STEP_S)) == 0  # fmt: skip
        run.wait_settled("topics created", ["orders", "payments"])

        # executors run the archive's Python, in their own folders under the workers' work dirs
        for w in cluster.workers.values():
            procs = python_workers(w)
            assert procs, f"no Python worker under {w.name}: {process_tree(w)}"
            for pid, cmd, cwd in procs:
                assert cmd.startswith("./environment/bin/python"), (pid, cmd)
                assert cwd.startswith(str(w.log.parent / "work")), (pid, cwd)

        # ------------------------------------------------------------------ hard-kill broker 3
        brokers[KILLED_BROKER].signal(signal.SIGKILL)
        run.live.discard(KILLED_BROKER)
        wait_until("broker 3's registration gone", lambda: KILLED_BROKER not in run.view().brokers, timeout=60)
        run.wait_settled("broker 3 failed over", ["orders", "payments"])

        def figures_in_the_stages_tab() -> dict[str, int] | None:
            # the driver's REST API: each micro-batch's figures job has a stage whose task (on an executor, in
            # another JVM: the jar reached it through --jars) added the figures to named accumulators
            stages = try_json(f"{api_url(active, active_app)}/stages")
            ours = [s for s in stages or [] if str(s.get("name", "")).startswith("livectl figures after batch ")]
            if not ours:
                return None
            newest = max(ours, key=lambda s: int(s["stageId"]))
            figures = {
                a["name"].removeprefix("livectl."): int(a["value"])
                for a in newest.get("accumulatorUpdates", [])
                if a["name"].startswith("livectl.")
            }
            return figures if figures.get("GlobalPartitionCount") == 9 else None

        figures = wait_until("the figures in the Stages tab", figures_in_the_stages_tab, timeout=60)
        assert figures["GlobalTopicCount"] == 2 and figures["OfflinePartitionsCount"] == 0, figures
        assert figures["ActiveControllerCount"] == 1, figures
        # livectl's Spark defaults reached the submitted application (--properties-file): a core property and an
        # SQL one, as Spark's Environment tab lists them
        env = try_json(f"{api_url(active, active_app)}/environment")
        props = dict(env["sparkProperties"]) if env else {}
        assert props.get("spark.python.daemon.module") == "streaming.warm.worker_daemon", props
        assert props.get("spark.sql.streaming.stateStore.providerClass", "").endswith("RocksDBStateStoreProvider")

        # ------------------------------------------------------------------ cut worker 1 off from the active driver
        step_started = time.monotonic()
        lost, kept = cluster.workers["worker-1"], cluster.workers["worker-2"]
        (cut_executor,) = _active_executors_on(active, active_app, machines.worker_1.address)
        kept_ids = set(executor_dirs(kept, active_app))
        (standby_on_1,) = _active_executors_on(standby, standby_app, machines.worker_1.address)
        driver_host = machines.drivers[active.name]
        epoch = first_epoch
        cut_topics: list[str] = []
        hit: tuple[int, list[dict[str, Any]]] | None = None
        cut_at = 0.0
        for attempt in range(1, CUT_TRIES + 1):
            topic = CUT_TOPIC if attempt == 1 else f"{CUT_TOPIC}-{attempt}"
            rid = f"{ns}-{topic}"
            cut_topics.append(topic)
            since = max(fencing.batch_ids(checkpoint / "offsets"), default=-1)
            partition, offset = _send_create(bootstrap, topics["admin"], rid, topic, CUT_ASSIGNMENT)
            batch = wait_until(
                f"the micro-batch holding {rid} planned",
                lambda: _batch_holding(checkpoint, topics["admin"], partition, offset, since),  # noqa: B023
                timeout=STEP_S, interval=0.02,
            )  # fmt: skip
            deadline = time.monotonic() + STEP_S
            while time.monotonic() < deadline and batch not in fencing.batch_ids(checkpoint / "commits"):
                # the signal: the driver's own status store shows a task of this batch's stateful stage running
                # on worker 1's executor (launched there, no result back yet); the cut follows at once
                hit = _stateful_running_on(active, active_app, batch, cut_executor)
                if hit is not None:
                    machines.net.cut(machines.worker_1, driver_host)
                    cut_at = time.monotonic()
                    break
                time.sleep(0.02)
            if hit is not None:
                break
            run.wait_settled(f"{topic} created (no stateful task seen on worker 1)", ["orders", "payments", topic])
        assert hit is not None, f"no stateful task seen running on worker 1 in {CUT_TRIES} micro-batches"
        stage, cut_tasks = hit
        zombie = _executor_pid(lost, active_app, cut_executor)
        assert _alive(zombie), f"executor {cut_executor} not running on worker 1 at the cut: {process_tree(lost)}"
        assert lost.running() and active.running()

        def executor_lost() -> dict[str, Any] | None:
            e = next((x for x in executors_of(active, active_app) if x["id"] == cut_executor), None)
            return e if e is not None and not e["isActive"] else None

        removed = wait_until("the driver to declare worker 1's executor lost", executor_lost, LOSS_TIMEOUT_S + 90)
        declared_lost_s = time.monotonic() - cut_at
        zombie_alive_then = _alive(zombie)
        # only the link to the active driver was cut: the standby's executor on worker 1 still heart-beats
        standby_execs = {e["id"]: e for e in executors_of(standby, standby_app)}
        assert standby_execs[standby_on_1]["isActive"], standby_execs
        wait_until(f"batch {batch} committed", lambda: batch in fencing.batch_ids(checkpoint / "commits"), STEP_S)
        committed_s = time.monotonic() - cut_at
        run.wait_settled(f"{topic} created in the cut micro-batch", ["orders", "payments", *cut_topics])
        assert {p: pv.replicas for p, pv in run.view().topics[topic].items()} == CUT_ASSIGNMENT
        # the driver never got the cut tasks' results: they failed with the executor and ran again, on worker 2's
        # executor, from the checkpoint (worker 1's executor held those buckets' state stores)
        attempts = [int(a["attemptId"]) for a in _stage_attempts(active, active_app, stage)]
        tasks = [t for a in attempts for t in _tasks(active, active_app, stage, a)]
        cut_ids = {t["taskId"] for t in cut_tasks}
        failed = [t for t in tasks if t["taskId"] in cut_ids]
        assert failed and all(t["status"] != "SUCCESS" for t in failed), failed
        for t in failed:
            done = [x for x in tasks if x["index"] == t["index"] and x["status"] == "SUCCESS"]
            assert done and all(x["executorId"] in kept_ids for x in done), (t, done)

        # the batch's outputs, once: its requests, the admin result, the topic's znodes
        def read_back() -> BatchOutputs:
            return _batch_outputs(bootstrap, topics, zk_connect, batch=batch, epoch=epoch, rid=rid, topic=topic)

        outputs = read_back()
        assert not _once_problems(outputs, topic, run.live), _once_problems(outputs, topic, run.live)
        assert run.view().controller == active_id and run.view().controller_epoch == epoch
        # the link returns: worker 1 gets a new executor of the active application (the one launched while the
        # link was down could not reach the driver); the batch's outputs are read back unchanged
        machines.net.heal(machines.worker_1, driver_host)
        healed_at = time.monotonic()

        def rejoined() -> str | None:
            return next(
                iter(_active_executors_on(active, active_app, machines.worker_1.address) - {cut_executor}), None
            )

        replacement = wait_until("a new executor of the active driver on worker 1", rejoined, STEP_S)
        rejoined_s = time.monotonic() - healed_at
        wait_until(f"executor {cut_executor}'s process gone", lambda: not _alive(zombie), 60)
        assert read_back() == outputs
        print(
            f"worker 1 cut off from {active.name} while tasks {sorted(cut_ids)} of stage {stage} (batch {batch}, "
            f"try {attempt}) ran on executor {cut_executor}; declared lost {declared_lost_s:.1f} s after the cut "
            f"({removed.get('removeReason')!r}; its process {'still running' if zombie_alive_then else 'gone'} then), "
            f"batch committed {committed_s:.1f} s after; healed, executor {replacement} joined "
            f"{rejoined_s:.1f} s after; the step took {time.monotonic() - step_started:.1f} s"
        )

        # ------------------------------------------------------------------ reassign payments, lose worker 1
        live = sorted(run.live)
        payments_before = {p: pv.replicas for p, pv in run.view().topics["payments"].items()}
        payments_targets = _move(payments_before, live)
        lost_executors = set(executor_dirs(lost, active_app))
        kept_executors = set(executor_dirs(kept, active_app))
        tasks_before = {e["id"]: int(e["totalTasks"]) for e in executors_of(active, active_app)}
        path = _reassignment_file(tmp_path / "payments.json", "payments", payments_targets)
        assert _admin(write, "reassign", "--execute", "--reassignment-json-file", str(path)) == 0
        lost.kill_group()
        run.wait_settled(
            "payments reassigned after losing worker 1",
            ["orders", "payments", *cut_topics],
            {"payments": payments_targets},
        )
        assert {p: pv.replicas for p, pv in run.view().topics["payments"].items()} == payments_targets
        wait_until("the master to see worker 1 dead", lambda: cluster.alive_workers() == 1, timeout=60)
        executors = {e["id"]: e for e in executors_of(active, active_app)}
        assert all(not executors[e]["isActive"] for e in lost_executors if e in executors), executors
        running = {e for e, x in executors.items() if x["isActive"]}
        assert running and running <= kept_executors, (running, kept_executors)
        # every micro-batch since runs its BUCKETS stateful tasks (and the rest) on worker 2's executors
        grown = sum(int(executors[e]["totalTasks"]) - tasks_before.get(e, 0) for e in running)
        assert grown >= BUCKETS, executors

        # ------------------------------------------------------------------ kill the active driver mid-reassignment
        orders_before = {p: pv.replicas for p, pv in run.view().topics["orders"].items()}
        orders_targets = _move(orders_before, live)
        adding = {b for p, t in orders_targets.items() for b in t if b not in orders_before[p]}
        stuck = min(adding)
        assert (
            simbrokers_main(["fault", str(stuck), "stuck-follower", "--control-topic", topics["control"], *common]) == 0
        )
        wait_until(
            f"broker {stuck} to report itself stuck",
            lambda: (observer.snapshot()[1].get(stuck) or {}).get("faults", {}).get("stuck"),
            timeout=30,
        )
        path = _reassignment_file(tmp_path / "orders.json", "orders", orders_targets)
        assert _admin(write, "reassign", "--execute", "--reassignment-json-file", str(path)) == 0

        def orders_moving() -> list[str]:
            view = run.view()
            return [
                f"orders-{p}" for p, pv in view.topics["orders"].items() if stuck in pv.adding and stuck in pv.replicas
            ]

        in_flight = wait_until(
            f"the orders reassignment under way (adding broker {stuck})", orders_moving, timeout=STEP_S
        )
        active.kill_group()
        # created while no controller is active: the standby must pick it up from the checkpointed offsets
        assert _admin(write, "topics", "--create", "--topic", "audit", "--replica-assignment", "1:2,2:4") == 0
        wait_until("the standby elected", lambda: run.view().controller == standby_id, timeout=STEP_S)
        assert run.view().controller_epoch == first_epoch + 1
        # the reassignment is still waiting for the stuck broker: the standby took it over in flight
        assert set(orders_moving()) & set(in_flight), run.view().topics["orders"]
        assert simbrokers_main(["fault", str(stuck), "clear", "--control-topic", topics["control"], *common]) == 0
        run.wait_settled(
            "orders reassigned and audit created by the standby",
            ["orders", "payments", "audit", *cut_topics],
            {"orders": orders_targets, "audit": {0: (1, 2), 1: (2, 4)}},
        )

        # ------------------------------------------------------------------ the end state
        view = run.view()
        assert view.controller == standby_id and view.controller_epoch == first_epoch + 1
        assert sorted(view.topics) == sorted(["audit", "orders", "payments", *cut_topics])
        assert {p: pv.replicas for p, pv in view.topics["orders"].items()} == orders_targets
        assert {p: pv.replicas for p, pv in view.topics["payments"].items()} == payments_targets
        assert {p: pv.replicas for p, pv in view.topics["audit"].items()} == {0: (1, 2), 1: (2, 4)}
        for name, pv in view.partitions().items():
            assert pv.leader in pv.isr and set(pv.isr) <= set(pv.replicas) and KILLED_BROKER not in pv.isr, name
            # a reassignment keeps a leader that is in the target and in sync (Kafka's rule), so the leader need
            # not be the preferred replica here; it must be a live one
            assert pv.leader in run.live, f"{name}: leader {pv.leader} is not live"
        zk = KazooClient(hosts=zk_connect, timeout=10)
        zk.start(timeout=15)
        try:
            for p in orders_targets:
                state = json.loads(zk.get(f"/brokers/topics/orders/partitions/{p}/state")[0])
                if p in {int(n.rsplit("-", 1)[1]) for n in in_flight}:
                    # finished by the standby: written under its controller epoch
                    assert state["controller_epoch"] == first_epoch + 1, (p, state)
            assert json.loads(zk.get("/controller")[0])["brokerid"] == standby_id
        finally:
            zk.stop()
            zk.close()
        results = _read_results(bootstrap, topics["results"])
        assert not [r for r in results if r.get("status") == "error"], results
        final = {r["command"]: r["status"] for r in results if r.get("status") == "ok"}
        assert {"create_topic", "reassign_partitions"} <= set(final), results
        created = {r["request_id"] for r in results if r.get("command") == "create_topic" and r.get("status") == "ok"}
        # orders, payments, the cut batch's topic (and any tried before it), and audit (answered by the standby)
        assert len(created) == 3 + len(cut_topics), results
        finals = Counter(r["request_id"] for r in results if r.get("status") != "in_progress")
        assert set(finals.values()) == {1}, finals  # every command answered exactly once
        # the cut micro-batch's outputs, read back once more at the end: nothing was added since
        assert read_back().lasting() == outputs.lasting()
        # the standby's application ran on the surviving worker only
        standby_execs = {e["id"]: e for e in executors_of(standby, standby_app)}
        standby_running = {e for e, x in standby_execs.items() if x["isActive"]}
        assert standby_running and standby_running <= set(executor_dirs(kept, standby_app)), standby_execs
        assert standby.running()
    except BaseException:
        traceback.print_exc()  # now: stopping the cluster below takes a while, pytest's report comes after
        for p in [*spark, *drivers.values()]:
            print(f"---- {p.name} (pid {p.pid}) log tail\n{p.tail(60)}")
        raise
    finally:
        if observer is not None:
            observer.stop()
        for d in drivers.values():
            d.stop()
        for p in reversed(spark):
            p.stop()
        for bp in brokers.values():
            bp.signal(signal.SIGKILL)
            bp.proc.wait(timeout=30)
        if kafka is not None:
            local.stop_kafka(kafka)
        local.stop_process(zookeeper.pid, zookeeper.marker)
        timeline.close()
        discard_copies(tmp_path)
        print(f"the scenario took {time.monotonic() - started:.1f} s")
    leftovers = {p.name: p.tree() for p in [*spark, *drivers.values()] if p.tree()}
    assert not leftovers, leftovers
    assert not [b for b, bp in brokers.items() if bp.running()]
