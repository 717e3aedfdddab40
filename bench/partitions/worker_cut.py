"""A Spark worker cut off from the driver mid-batch (``worker-cut``, issue 41 item 5).

The controller runs as deployed on a standalone cluster: a master and two workers from the pyspark wheel's
``spark-class``, the controller under ``spark-submit`` (client mode) running the packed environment
(``livectl package-env``) in its driver and executors (:mod:`bench.harness.sparkcluster`, which the cluster test
uses too). **Each worker is on a test host of its own** (``spark-worker-1``, ``spark-worker-2``; the executors it
launches inherit its namespace), the master on another, the driver on the controller's host: whichever worker a
stateful task lands on, that worker alone can be cut off from the driver. So the cut does not depend on where
Spark's scheduler puts a task (the cluster test's step did, and in CI the task ran on the other worker three
micro-batches running).

The fault: a topic of ``partitions`` partitions is created; the micro-batch holding the command is found in the
checkpoint's offset log; the driver's REST API (``/jobs?status=running``: that batch's job, described
``… batch N: deciding``; its last stage, with adaptive execution off the one holding ``applyInPandasWithState``,
one task per bucket; that stage's ``taskList``) is polled until a task of it is ``RUNNING``, and the link between
the host of the worker running it (its ``host``) and the driver's host is cut, both ways. The worker, its
executor and the driver keep running; the worker still reaches the master, Kafka, ZooKeeper and the checkpoint's
file system, so only the driver's own heartbeat expiry can declare the executor lost. The driver gets
``spark.network.timeout`` of :data:`LOSS_TIMEOUT_S` and a 1 s heartbeat and check (Spark's defaults, 120 s checked
every 60 s, would take minutes).

Checked from real outputs: the driver declares the executor lost (``allexecutors``); the cut task never
succeeded there and its bucket succeeded on the other worker's executor; the batch is committed in the
checkpoint and its outputs appear once — each new partition in exactly one LeaderAndIsr per replica and one
UpdateMetadata per live broker of that batch and controller epoch, no request message twice on the requests
topic, one final admin result (``ok``, of that batch), the topic's znodes written once; the controller keeps its
lease and epoch; ZooKeeper and the simulated brokers' own views agree (the module's convergence check and the
brokers' views sampled throughout). Then the link heals, a new executor of the driver joins on the cut worker,
and the batch's outputs are read back unchanged. If the task's result reached the driver before the cut took
effect (nothing ran again), the try is recorded, the link healed, and the fault is tried again with a new
creation (up to :data:`TRIES`).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import harness as cm
from bench.harness import fencing, netns
from bench.harness.sparkcluster import (
    DriverSpec,
    SparkProcess,
    StandaloneCluster,
    api_url,
    app_id_of,
    discard_copies,
    executors_of,
    start_driver,
    start_master,
    start_worker,
    try_json,
)
from bench.partitions.common import Hosts, Row, Views, answered_once, repeated_requests
from core import events as ev
from core.codec.events import event_to_json

#: the driver's ``spark.network.timeout``: an executor silent this long is declared lost
LOSS_TIMEOUT_S = 15
#: the driver's Spark properties for this fault (see the module docstring)
EXECUTOR_LOSS_CONF = (
    ("spark.network.timeout", f"{LOSS_TIMEOUT_S}s"),
    ("spark.network.timeoutInterval", "1s"),
    ("spark.executor.heartbeatInterval", "1s"),
)
WORKERS = ("spark-worker-1", "spark-worker-2")
#: micro-batches tried when a cut task's result reached the driver before the cut
TRIES = 3
STEP_S = 300.0


@dataclass
class Standalone:
    """The standalone cluster on its hosts: ``workers[name]`` runs on ``hosts[name]``."""

    cluster: StandaloneCluster
    hosts: dict[str, netns.Host]
    run_dir: Path
    conf_dir: Path

    def worker_at(self, address: str) -> str | None:
        """The worker whose host has ``address`` (an executor's ``host``)."""
        return next((name for name, h in self.hosts.items() if h.address == address), None)


@contextlib.contextmanager
def standalone(h: Hosts, run_dir: Path) -> Iterator[Standalone]:
    """A master on host ``spark-master`` and the two workers on hosts of their own (one core each: one executor
    of the driver's on each); stopped, and what they unpacked deleted, on the way out."""
    conf_dir = run_dir / "spark-conf"
    conf_dir.mkdir(parents=True, exist_ok=True)
    master_host = h.host("spark-master")
    master = start_master(run_dir, conf_dir, address=master_host.address, prefix=master_host.exec_prefix)
    cluster = StandaloneCluster(master, {}, conf_dir)
    hosts = {name: h.host(name) for name in WORKERS}
    try:
        cm.wait_until("the Spark master's web UI", cluster.state, 120)
        for name, host in hosts.items():
            cluster.workers[name] = start_worker(
                run_dir, conf_dir, name, cluster.url, cores=1, memory="1g", address=host.address,
                prefix=host.exec_prefix,
            )  # fmt: skip
        cm.wait_until("two alive Spark workers", lambda: cluster.alive_workers() == 2, 120)
        yield Standalone(cluster, hosts, run_dir, conf_dir)
    finally:
        cluster.stop()
        discard_copies(run_dir)


@dataclass
class SubmittedController(cm.ControllerProcess):
    """A controller under ``spark-submit``: stopped as its group (the driver's JVM and its Python)."""

    spark: SparkProcess | None = None

    def stop(self) -> None:
        if self.spark is not None:
            self.spark.stop(timeout=60)
        else:
            super().stop()


def submit_controller(h: Hosts, m: cm.Matrix, sa: Standalone, archive: Path) -> SubmittedController:
    """The next controller of ``m``'s cluster under ``spark-submit`` on ``sa``, on host ``controller-<id>``."""
    cid = m.new_controller_id()
    host = h.host(f"controller-{cid}")
    args = tuple(a for k, v in m.controller_settings(cid).items() for a in ("--set", f"{k}={v}"))
    spec = DriverSpec(f"controller-{cid}", cid, args, conf=EXECUTOR_LOSS_CONF)
    p = start_driver(
        sa.run_dir, sa.conf_dir, sa.cluster.url, archive, spec, address=host.address, prefix=host.exec_prefix
    )
    c = SubmittedController(cid, p.proc, p.log, spark=p)
    m.controllers.append(c)
    return c


# ---------------------------------------------------------------------------- the driver's REST API


def executor_hosts(driver: SparkProcess, app: str, *, active: bool = True) -> dict[str, str]:
    """Executor id -> the address of its host, for ``app``'s executors (only the active ones when ``active``)."""
    return {
        str(e["id"]): str(e.get("hostPort", "")).rsplit(":", 1)[0]
        for e in executors_of(driver, app)
        if e.get("isActive") or not active
    }


def stateful_stage(driver: SparkProcess, app: str, batch: int, buckets: int) -> tuple[int, int] | None:
    """``(stage id, attempt id)`` of micro-batch ``batch``'s stateful stage while it runs: the last stage of the
    batch's job (described ``… batch N: deciding``), with one task per bucket."""
    jobs = try_json(f"{api_url(driver, app)}/jobs?status=running", timeout=5)
    job = next((j for j in jobs or [] if f" batch {batch}: deciding" in str(j.get("description", ""))), None)
    if job is None or not job.get("stageIds"):
        return None
    stage = max(int(s) for s in job["stageIds"])
    for attempt in try_json(f"{api_url(driver, app)}/stages/{stage}", timeout=5) or []:
        if attempt.get("status") == "ACTIVE" and int(attempt.get("numTasks", 0)) == buckets:
            return stage, int(attempt["attemptId"])
    return None


def stage_tasks(driver: SparkProcess, app: str, stage: int, attempt: int | None = None) -> list[dict[str, Any]]:
    """The tasks of ``stage``'s attempt ``attempt`` (every attempt's when ``None``)."""
    if attempt is None:
        attempts = [int(a["attemptId"]) for a in try_json(f"{api_url(driver, app)}/stages/{stage}") or []]
    else:
        attempts = [attempt]
    out: list[dict[str, Any]] = []
    for a in attempts:
        out += list(try_json(f"{api_url(driver, app)}/stages/{stage}/{a}/taskList?length=10000", timeout=5) or [])
    return out


# ---------------------------------------------------------------------------- the batch and its outputs


def send_create(m: cm.Matrix, rid: str, topic: str, assignment: dict[int, tuple[int, ...]]) -> tuple[int, int]:
    """Send the admin command ``rid`` creating ``topic``; its record's ``(partition, offset)``."""
    assert m.producer is not None
    replicas = tuple(assignment[p] for p in sorted(assignment))
    command = ev.CreateTopic(rid, topic, len(assignment), len(assignment[0]), replica_assignment=replicas)
    sent = m.producer.send(m.topics["admin"], key=rid.encode(), value=event_to_json(command).encode()).get(30)
    return int(sent.partition), int(sent.offset)


def batch_holding(checkpoint: Path, admin_topic: str, partition: int, offset: int, since: int) -> int | None:
    """The micro-batch planned after ``since`` (``offsets/N``, its last line the source's end offset
    ``{topic: {partition: next offset}}``) whose records include ``admin_topic``'s record at ``offset``: its
    end is past the record, the batch before it ended at or before it."""

    def end(n: int) -> int | None:
        try:
            last = json.loads((checkpoint / "offsets" / str(n)).read_text().splitlines()[-1])
        except (OSError, ValueError, IndexError):
            return None  # being written (or none)
        return int(last.get(admin_topic, {}).get(str(partition), 0)) if isinstance(last, dict) else None

    for n in sorted(b for b in fencing.batch_ids(checkpoint / "offsets") if b > since):
        this = end(n)
        if this is None:
            return None
        if this > offset:
            before = end(n - 1) if n > 0 else 0
            return n if before is not None and before <= offset else None
    return None


@dataclass(frozen=True)
class BatchOutputs:
    """What micro-batch ``batch`` of controller epoch ``epoch`` left, read back: its messages on the requests
    topic (sorted JSON texts), the admin results of its command and the (path, version, mzxid) of its topic's
    znodes."""

    batch: int
    epoch: int
    requests: tuple[str, ...]
    results: tuple[str, ...]
    znodes: tuple[tuple[str, int, int], ...]


def batch_outputs(m: cm.Matrix, *, batch: int, epoch: int, rid: str, topic: str, partitions: int) -> BatchOutputs:
    requests = [
        x
        for msgs in fencing.messages(m.bootstrap, m.topics["requests"]).values()
        for x in msgs
        if x.get("batchId") == batch and x.get("controllerEpoch") == epoch
    ]
    assert m.zk is not None
    paths = [f"/brokers/topics/{topic}"] + [f"/brokers/topics/{topic}/partitions/{p}/state" for p in range(partitions)]
    znodes = []
    for path in paths:
        stat = m.zk.exists(path)
        znodes.append((path, stat.version if stat else -1, stat.mzxid if stat else -1))
    return BatchOutputs(
        batch,
        epoch,
        tuple(sorted(json.dumps(x, sort_keys=True) for x in requests)),
        tuple(sorted(json.dumps(r, sort_keys=True) for r in m.results(rid))),
        tuple(znodes),
    )


def once_problems(out: BatchOutputs, topic: str, assignment: dict[int, tuple[int, ...]], live: set[int]) -> list[str]:
    """What is not "once" in ``out``: a request message written twice, a partition of ``topic`` not in exactly
    one LeaderAndIsr per replica and one UpdateMetadata per live broker, not exactly one final admin result
    (``ok``, of this batch), a znode of ``topic`` missing or written more than once."""
    problems = [f"request written {n} times: {x[:200]}" for x, n in Counter(out.requests).items() if n > 1]
    counts: dict[str, Counter[tuple[int, int]]] = {"LeaderAndIsr": Counter(), "UpdateMetadata": Counter()}
    for text in out.requests:
        x = json.loads(text)
        counter = counts.get(x.get("api", ""))
        if counter is None:
            continue
        addressees = [a["brokerId"] for a in x.get("addressees", [])] or [x["brokerId"]]
        for ts in x.get("body", {}).get("topicStates", []):
            if ts.get("topicName") == topic:
                for ps in ts.get("partitionStates", []):
                    for b in addressees:
                        counter[(b, ps["partitionIndex"])] += 1
    want = {
        "LeaderAndIsr": Counter({(b, p): 1 for p, replicas in assignment.items() for b in replicas}),
        "UpdateMetadata": Counter({(b, p): 1 for p in assignment for b in live}),
    }
    for api, have in counts.items():
        if have != want[api]:
            extra = {k: n for k, n in have.items() if n != want[api].get(k)}
            missing = sorted(set(want[api]) - set(have))
            problems.append(
                f"{api} of batch {out.batch}: (broker, partition) counts other than once {extra}, missing {missing[:5]}"
            )
    final = [json.loads(r) for r in out.results if json.loads(r).get("status") != "in_progress"]
    if [r.get("status") for r in final] != ["ok"]:
        problems.append(f"admin results {final}, want one ok")
    elif final[0].get("batch_id") != out.batch:
        problems.append(f"answered in batch {final[0].get('batch_id')}, not {out.batch}")
    problems += [f"{path}: version {v}" for path, v, _ in out.znodes if v != 0]
    return problems


# ---------------------------------------------------------------------------- the fault


@dataclass
class Cut:
    """One try: the batch, the stateful stage, the task seen running and what followed."""

    topic: str
    rid: str
    batch: int = -1
    stage: int = -1
    tasks: list[dict[str, Any]] = field(default_factory=list)
    worker: str = ""
    executor: str = ""
    cut_at: float = 0.0
    lost_s: float = 0.0
    lost_reason: str = ""


@dataclass
class Scene:
    """What the fault's steps share: the cluster, the submitted controller and its application, the topic's
    assignment, and the controller epoch and live brokers when the fault began."""

    h: Hosts
    m: cm.Matrix
    sa: Standalone
    d: SubmittedController
    driver: SparkProcess
    app: str
    driver_host: netns.Host
    buckets: int
    assignment: dict[int, tuple[int, ...]]
    epoch: int = -1
    live: set[int] = field(default_factory=set)
    #: executor id -> its host's address, as last read (a task's ``host`` names it too)
    addresses: dict[str, str] = field(default_factory=dict)

    def on_both_workers(self) -> dict[str, str] | None:
        """The driver's active executors (id -> address) once it has one on each worker."""
        hosts = executor_hosts(self.driver, self.app)
        return hosts if {self.sa.worker_at(a) for a in hosts.values()} >= set(WORKERS) else None

    def outputs(self, c: Cut) -> BatchOutputs:
        return batch_outputs(
            self.m, batch=c.batch, epoch=self.epoch, rid=c.rid, topic=c.topic, partitions=len(self.assignment)
        )


def worker_cut(
    h: Hosts,
    m: cm.Matrix,
    archive: Path,
    *,
    partitions: int = 2 * cm.LARGE_PARTITIONS,
    log: Callable[[str], None] = print,
) -> Row:
    """Item 5 (see the module docstring). The controller active before (a ``livectl run`` of the other faults)
    hands over to the submitted one; the submitted one is stopped at the end, so the next fault starts its own."""
    row = Row("worker-cut")
    assert m.zk is not None
    assignment: dict[int, tuple[int, ...]] = {
        p: (cm.BROKERS[p % 5], cm.BROKERS[(p + 1) % 5]) for p in range(partitions)
    }
    sampled: list[Views] = []
    with standalone(h, m.work / "spark-standalone") as sa, contextlib.ExitStack() as views:
        d = submit_controller(h, m, sa, archive)
        try:
            others = [x for x in m.controllers if x is not d and x.alive()]
            if others:
                m.wait_waiting(d, timeout=STEP_S)
                for x in others:
                    x.stop()
            m.wait_loaded(d, timeout=STEP_S)
            assert d.spark is not None
            driver = d.spark
            app = cm.wait_until("the driver's application id", lambda: app_id_of(driver), 180)
            buckets = int(m.controller_settings(d.controller_id)["num_buckets"])
            s = Scene(h, m, sa, d, driver, app, h.host(f"controller-{d.controller_id}"), buckets, assignment)
            s.addresses = cm.wait_until("an executor of the driver on each worker", s.on_both_workers, 180)
            s.epoch = int(m.zk.get("/controller_epoch")[0])
            s.live = set(m.registered_brokers())
            cut: Cut | None = None
            for attempt in range(1, TRIES + 1):
                topic = f"{m.name}-wcut{attempt}"
                sampled.append(views.enter_context(Views(m, topic)))
                c = Cut(topic, f"{topic}-c")
                if _cut_when_running(s, c):
                    _wait_lost(s, c)
                    cut_ids = {t["taskId"] for t in c.tasks}
                    after = stage_tasks(driver, app, c.stage)
                    if any(t["taskId"] in cut_ids and t["status"] != "SUCCESS" for t in after):
                        cut = c
                        break
                    log(f"worker-cut: try {attempt}: tasks {sorted(cut_ids)} had answered before the cut; again")
                    h.net.heal(sa.hosts[c.worker], s.driver_host)
                    s.addresses = cm.wait_until("an executor on each worker again", s.on_both_workers, STEP_S)
                else:
                    log(f"worker-cut: try {attempt}: batch {c.batch} committed before a stateful task was seen")
                cm.wait_converged(m, f"{topic} online", cm.Expect({topic: assignment}, request_id=c.rid), STEP_S)
            if cut is None:
                row.problems.append(f"no stateful task caught running in {TRIES} micro-batches")
                row.outcome = "not cut"
            else:
                _check_cut(s, cut, row)
        finally:
            d.stop()
            m.active = None
    for v in sampled:
        row.problems += v.problems()
    log(f"{row.fault}: {row.outcome}; problems {row.problems[:3]}")
    return row


def _cut_when_running(s: Scene, c: Cut) -> bool:
    """Create ``c.topic``, find the micro-batch holding the command and poll the driver until a task of that
    batch's stateful stage runs, then cut its worker's host off from the driver's; ``False`` when the batch was
    committed first."""
    m = s.m
    # a new controller's first micro-batch took over 60 s here at load average 16
    cm.wait_until("between micro-batches", lambda: fencing.between_batches(m.checkpoint), STEP_S, interval=0.2)
    since = max(fencing.batch_ids(m.checkpoint / "offsets"), default=-1)
    partition, offset = send_create(m, c.rid, c.topic, s.assignment)

    def planned() -> list[int] | None:
        b = batch_holding(m.checkpoint, m.topics["admin"], partition, offset, since)
        return None if b is None else [b]

    (c.batch,) = cm.wait_until(f"the micro-batch holding {c.rid} planned", planned, STEP_S, interval=0.02)
    deadline = time.monotonic() + STEP_S
    stage: tuple[int, int] | None = None
    while time.monotonic() < deadline and c.batch not in fencing.batch_ids(m.checkpoint / "commits"):
        if stage is None:
            stage = stateful_stage(s.driver, s.app, c.batch, s.buckets)
        if stage is not None:
            running = [t for t in stage_tasks(s.driver, s.app, *stage) if t.get("status") == "RUNNING"]
            if running:
                first = min(running, key=lambda t: int(t["taskId"]))
                executor = str(first["executorId"])
                worker = s.sa.worker_at(str(first.get("host"))) or s.sa.worker_at(s.addresses.get(executor, ""))
                if worker is None:
                    s.addresses = executor_hosts(s.driver, s.app, active=False)
                    worker = s.sa.worker_at(s.addresses.get(executor, ""))
                if worker is None:
                    raise cm.MatrixError(f"task {first['taskId']} runs on {first.get('host')}, no worker's host")
                s.h.net.cut(s.sa.hosts[worker], s.driver_host)
                c.cut_at = time.monotonic()
                c.stage, c.worker, c.executor = stage[0], worker, executor
                c.tasks = [t for t in running if str(t["executorId"]) == executor]
                return True
        time.sleep(0.02)
    return False


def _wait_lost(s: Scene, c: Cut) -> None:
    """Until the driver has declared the cut executor lost (``allexecutors``: not active, a reason)."""

    def lost() -> dict[str, Any] | None:
        e = next((x for x in executors_of(s.driver, s.app) if str(x["id"]) == c.executor), None)
        return e if e is not None and not e.get("isActive") else None

    e = cm.wait_until(f"the driver to declare executor {c.executor} lost", lost, LOSS_TIMEOUT_S + 120)
    c.lost_s = time.monotonic() - c.cut_at
    c.lost_reason = str(e.get("removeReason", ""))


def _check_cut(s: Scene, c: Cut, row: Row) -> None:
    """The checks of the module docstring on the try that cut a running stateful task; heals the link."""
    m = s.m
    assert m.zk is not None
    cm.wait_until(f"batch {c.batch} committed", lambda: c.batch in fencing.batch_ids(m.checkpoint / "commits"), STEP_S)
    committed_s = time.monotonic() - c.cut_at
    cm.wait_converged(m, f"{c.topic} created", cm.Expect({c.topic: s.assignment}, request_id=c.rid), STEP_S)
    converged_s = time.monotonic() - c.cut_at
    # the cut tasks never answered the driver: each of their buckets succeeded again, on the other worker
    (other,) = set(WORKERS) - {c.worker}
    where = executor_hosts(s.driver, s.app, active=False)
    tasks = stage_tasks(s.driver, s.app, c.stage)
    reran = []
    for t in c.tasks:
        if any(x["status"] == "SUCCESS" for x in tasks if x["taskId"] == t["taskId"]):
            continue  # answered before the cut took effect (another cut task did not)
        done = [x for x in tasks if x["index"] == t["index"] and x["status"] == "SUCCESS"]
        ran_on = {s.sa.worker_at(where.get(str(x["executorId"]), str(x.get("host")))) for x in done}
        if len(done) != 1 or ran_on != {other}:
            row.problems.append(f"bucket {t['index']} (task {t['taskId']} cut) succeeded {len(done)}x on {ran_on}")
        else:
            reran.append(f"bucket {t['index']} on executor {done[0]['executorId']}")
    outputs = s.outputs(c)
    row.problems += once_problems(outputs, c.topic, s.assignment, s.live)
    row.problems += answered_once(m, c.rid, s.epoch)
    row.problems += repeated_requests(m)
    holder = m.znode("/controller")[0] or {}
    epoch = int(m.zk.get("/controller_epoch")[0])
    if holder.get("brokerid") != s.d.controller_id or epoch != s.epoch or not s.d.alive():
        row.problems.append(f"the controller moved: /controller {holder}, epoch {s.epoch} -> {epoch}")
    # the link returns: a new executor of the driver joins on the cut worker; the batch's outputs stay as they were
    s.h.net.heal(s.sa.hosts[c.worker], s.driver_host)
    healed = time.monotonic()
    address = s.sa.hosts[c.worker].address

    def rejoined() -> str | None:
        return next((e for e, a in executor_hosts(s.driver, s.app).items() if a == address and e != c.executor), None)

    joined = cm.wait_until(f"a new executor of the driver on {c.worker}", rejoined, STEP_S)
    rejoin_s = time.monotonic() - healed
    if s.outputs(c) != outputs:
        row.problems.append(f"batch {c.batch}'s outputs changed after healing")
    row.outcome = (
        f"{c.worker} cut off from the driver while bucket task(s) {sorted(t['index'] for t in c.tasks)} of batch "
        f"{c.batch}'s stateful stage {c.stage} ran on its executor {c.executor}; executor lost {c.lost_s:.1f} s after "
        f"the cut ({c.lost_reason[:60]!r}); re-ran on {other} ({', '.join(reran)}); batch committed "
        f"{committed_s:.1f} s, converged {converged_s:.1f} s after the cut; healed, executor {joined} joined "
        f"{rejoin_s:.1f} s after"
    )
    row.seconds = round(committed_s, 1)
