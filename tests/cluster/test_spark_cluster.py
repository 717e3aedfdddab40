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
4. reassign ``payments`` onto other brokers and, right after, SIGKILL worker 1 with everything it launched
   (its executors and their Python workers): the stateful tasks re-run on worker 2's executor from the
   checkpoint and the reassignment completes;
5. make broker ``X`` a stuck follower, reassign ``orders`` so that ``X`` must join (the reassignment
   cannot finish while ``X`` is stuck), SIGKILL the active driver once the reassignment is under way,
   create ``audit`` while no controller is active; the standby is elected, resumes from the checkpoint and
   ZooKeeper, creates ``audit``; ``X`` is cleared and the standby finishes the reassignment;
6. the end state: ZooKeeper in Kafka's layout, every admin command answered ``ok``, the brokers' own view
   agreeing with ZooKeeper, every process stopped.
"""

from __future__ import annotations

import json
import re
import signal
import tarfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jvm_options import SHORT_LIVED_JIT
from kafka import KafkaConsumer, TopicPartition
from kazoo.client import KazooClient
from waiting import wait_until

from admin.cli import main as admin_main
from bench.harness.sparkcluster import (
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


@pytest.fixture()
def namespace(zookeeper: local.Service) -> Iterator[str]:
    ns = f"cluster-{uuid.uuid4().hex[:8]}"
    root = KazooClient(hosts=zookeeper.connect, timeout=10)
    root.start(timeout=15)
    root.ensure_path(f"/{ns}")
    root.stop()
    root.close()
    yield ns


# ================================================================================================ the test


def test_controller_on_a_spark_cluster(
    zookeeper: local.Service, kafka_broker: local.Service, env_archive: Path, namespace: str, tmp_path: Path
) -> None:
    ns = namespace
    zk_connect = f"{zookeeper.connect}/{ns}"
    bootstrap = kafka_broker.bootstrap
    topics = {
        "admin": f"{ns}.admin",
        "events": f"{ns}.broker-events",
        "requests": f"{ns}.requests",
        "results": f"{ns}.admin-results",
        "rejected": f"{ns}.rejected",
        "control": f"{ns}.simbrokers.control",
    }
    ensure_topics(bootstrap, list(topics.values()))
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
        for b in BROKERS:
            brokers[b] = start_broker_process(
                b, zookeeper=zk_connect, bootstrap=bootstrap, topics=topics, brokers_dir=tmp_path / "brokers",
                session_timeout_ms=SESSION_MS,
            )  # fmt: skip
        master = start_master(tmp_path, conf_dir, jvm=SHORT_LIVED_JIT)
        spark.append(master)
        cluster = StandaloneCluster(master, {}, conf_dir)
        wait_until("the Spark master's web UI", cluster.state, timeout=90)
        for name in ("worker-1", "worker-2"):
            # 2 scheduling slots each (not CPUs): the active and the standby application each get one executor
            # on each worker, so losing a worker leaves both with an executor
            w = start_worker(tmp_path, conf_dir, name, cluster.url, cores=2, memory="1280m", jvm=SHORT_LIVED_JIT)
            cluster.workers[name] = w
            spark.append(w)
        wait_until("two alive workers", lambda: cluster.alive_workers() == 2, timeout=90)

        for cid, name in ((ACTIVE_ID, "driver-a"), (STANDBY_ID, "driver-b")):
            drivers[cid] = start_driver(
                tmp_path, conf_dir, cluster.url, env_archive, DriverSpec(name, cid, driver_args), jvm=SHORT_LIVED_JIT
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
        active_app = wait_until("the active driver's application id", lambda: app_id_of(active), timeout=60)
        standby_app = wait_until("the standby driver's application id", lambda: app_id_of(standby), timeout=60)
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

        # ------------------------------------------------------------------ reassign payments, lose worker 1
        live = sorted(run.live)
        payments_before = {p: pv.replicas for p, pv in run.view().topics["payments"].items()}
        payments_targets = _move(payments_before, live)
        lost, kept = cluster.workers["worker-1"], cluster.workers["worker-2"]
        lost_executors = set(executor_dirs(lost, active_app))
        kept_executors = set(executor_dirs(kept, active_app))
        tasks_before = {e["id"]: int(e["totalTasks"]) for e in executors_of(active, active_app)}
        path = _reassignment_file(tmp_path / "payments.json", "payments", payments_targets)
        assert _admin(write, "reassign", "--execute", "--reassignment-json-file", str(path)) == 0
        lost.kill_group()
        run.wait_settled(
            "payments reassigned after losing worker 1", ["orders", "payments"], {"payments": payments_targets}
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
        argv = ["topics", "--create", "--topic", "audit", "--replica-assignment", "1:2,2:4", "--no-wait"]
        assert _admin(write, *argv) == 0
        wait_until("the standby elected", lambda: run.view().controller == standby_id, timeout=STEP_S)
        assert run.view().controller_epoch == first_epoch + 1
        # the reassignment is still waiting for the stuck broker: the standby took it over in flight
        assert set(orders_moving()) & set(in_flight), run.view().topics["orders"]
        assert simbrokers_main(["fault", str(stuck), "clear", "--control-topic", topics["control"], *common]) == 0
        run.wait_settled(
            "orders reassigned and audit created by the standby",
            ["orders", "payments", "audit"],
            {"orders": orders_targets, "audit": {0: (1, 2), 1: (2, 4)}},
        )

        # ------------------------------------------------------------------ the end state
        view = run.view()
        assert view.controller == standby_id and view.controller_epoch == first_epoch + 1
        assert sorted(view.topics) == ["audit", "orders", "payments"]
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
        assert len(created) == 3, results  # orders, payments, and audit (answered by the standby)
        # the standby's application ran on the surviving worker only
        standby_execs = {e["id"]: e for e in executors_of(standby, standby_app)}
        standby_running = {e for e, x in standby_execs.items() if x["isActive"]}
        assert standby_running and standby_running <= set(executor_dirs(kept, standby_app)), standby_execs
        assert standby.running()
    except BaseException:
        for proc in [*spark, *drivers.values()]:
            print(f"---- {proc.name} (pid {proc.pid}) log tail\n{proc.tail(60)}")
        raise
    finally:
        if observer is not None:
            observer.stop()
        for driver in drivers.values():
            driver.stop()
        for proc in reversed(spark):
            proc.stop()
        for bp in brokers.values():
            bp.signal(signal.SIGKILL)
            bp.proc.wait(timeout=30)
        timeline.close()
        discard_copies(tmp_path)
    leftovers = {p.name: p.tree() for p in [*spark, *drivers.values()] if p.tree()}
    assert not leftovers, leftovers
    assert not [b for b, bp in brokers.items() if bp.running()]
