"""The crash matrix's cluster (:mod:`bench.crash_matrix`): real services, five simulated broker processes
(``python -m simbrokers``) and the controller as ``livectl run`` processes on one shared checkpoint, with the
checks of a converged tree (ZooKeeper's and each broker's own view) and the admin command's answers."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss, NoNodeError

from bench.harness.results import ROOT
from core import events as ev
from core.codec.events import event_to_json
from livectl.demo import BrokerProcess, start_broker_process
from sinks.requests import ensure_topics

BROKERS = (1, 2, 3, 4, 5)


LARGE_PARTITIONS = 150


def broker_view_problems(
    views: Mapping[int, Mapping[str, Any]], name: str, state: Mapping[str, Any], brokers: Sequence[int]
) -> list[str]:
    """How the status views of ``brokers`` (the simulated brokers' ``{"partitions": {name: …}}``) disagree
    with partition ``name``'s ZooKeeper state: not hosted, another leader or epoch, or (its leader) another ISR."""
    out: list[str] = []
    for b in brokers:
        v = views.get(b, {}).get("partitions", {}).get(name)
        if v is None:
            out.append(f"broker {b} does not host {name}")
        elif (v["leader"], v["leader_epoch"]) != (state["leader"], state["leader_epoch"]):
            out.append(
                f"broker {b} sees {name} led by {v['leader']} at epoch {v['leader_epoch']}, "
                f"ZooKeeper {state['leader']} at {state['leader_epoch']}"
            )
        elif b == state["leader"] and set(v["isr"]) != set(state["isr"]):
            out.append(f"leader {b} of {name} has ISR {v['isr']}, ZooKeeper {state['isr']}")
    return out


class MatrixError(RuntimeError):
    pass


def wait_until(what: str, check: Callable[[], Any], timeout: float, interval: float = 0.3) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except ConnectionLoss as e:  # the test's own session moving between ensemble servers: look again
            last = e
            time.sleep(interval)
            continue
        if last:
            return last
        time.sleep(interval)
    raise MatrixError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r:.300})")


#: a line that names an exception as a traceback ends (``...Error: why``, ``pkg.SomeException``)
_RAISED = re.compile(r"^\s*(?:[\w.]+\.)?\w*(?:Error|Exception)\b(?::|$)")


@dataclass
class ControllerProcess:
    """One ``livectl run`` in its own process group (its Python and its Spark JVM)."""

    controller_id: int
    proc: subprocess.Popen[bytes]
    log: Path

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def why_stopped(self) -> str:
        """For a failed check: its exit code, its own ``livectl run:`` lines and the first lines naming an
        error or exception in its log (a query failure's reason comes before Spark's plan, which fills the tail)."""
        lines = self.text().splitlines()
        said = [x for x in lines if x.startswith("livectl run:")]
        # a traceback's own lines ("  ...Error: why"), not the Kafka client's log records of refused connections
        errors = [x for x in lines if _RAISED.match(x) and x not in said][:12]
        return "\n".join([f"controller {self.controller_id}: exit code {self.proc.poll()}", *said, *errors])[:6000]

    def kill(self) -> None:
        """SIGKILL the process group this harness created for it."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(30)

    def stop(self) -> None:
        """SIGTERM (a clean stop), then SIGKILL if it does not end."""
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(60)
        self.kill()


@dataclass
class Row:
    point: str
    mode: str
    seen: str = ""
    kill_to_converged_s: float | None = None
    converged: bool = False
    problems: list[str] = field(default_factory=list)

    def cells(self) -> list[Any]:
        return [self.point, self.mode, self.seen, self.kill_to_converged_s, "yes" if self.converged else "NO"]


@dataclass
class Expect:
    """What the point's topics must look like once converged."""

    assignments: Mapping[str, Mapping[int, tuple[int, ...]]] = field(default_factory=dict)
    deleted: tuple[str, ...] = ()
    request_id: str | None = None
    #: brokers down at the end of the point (restarted after the check)
    down: tuple[int, ...] = ()


class Matrix:
    """One cluster (a ZooKeeper chroot, topic names, a checkpoint), its brokers and its controllers."""

    def __init__(
        self,
        zk_root: str,
        bootstrap: str,
        work: Path,
        *,
        session_timeout_ms: int = 6000,
        broker_ids: Sequence[int] = BROKERS,
        broker_args: Sequence[str] = (),
    ) -> None:
        self.name = f"cm{uuid.uuid4().hex[:6]}"
        self.bootstrap = bootstrap
        self.work = work
        self.session_timeout_ms = session_timeout_ms
        #: the simulated brokers :meth:`open` starts (one process each) and more ``python -m simbrokers``
        #: options for each
        self.broker_ids = tuple(broker_ids)
        self.broker_args = tuple(broker_args)
        self.zk_connect = f"{zk_root}/{self.name}"
        self.topics = {
            "admin": f"{self.name}.admin",
            "events": f"{self.name}.broker-events",
            "requests": f"{self.name}.requests",
            "results": f"{self.name}.admin-results",
            "rejected": f"{self.name}.rejected",
            "control": f"{self.name}.simbrokers.control",
        }
        self.checkpoint = work / "checkpoint"
        self.brokers: dict[int, BrokerProcess] = {}
        self.controllers: list[ControllerProcess] = []
        self.active: ControllerProcess | None = None
        self.zk: KazooClient | None = None
        self.producer: KafkaProducer | None = None
        self._next_id = 1001
        #: what goes before a process's command, by its name (``controller-<id>``, ``broker-<id>``): the
        #: partition tests run each in a network namespace (``ip netns exec``); nothing by default
        self.prefix: Callable[[str], Sequence[str]] = lambda name: ()
        #: the address a broker registers and serves fetches on, by its name (``broker-<id>``)
        self.address: Callable[[str], str] = lambda name: "127.0.0.1"

    # ------------------------------------------------------------------ set-up and tear-down

    def open(self) -> None:
        self.open_services()
        for b in self.broker_ids:
            self.start_broker(b)
        wait_until("brokers registered", lambda: set(self.registered_brokers()) >= set(self.broker_ids), 60)

    def open_services(self) -> None:
        """The cluster's ZooKeeper chroot and session, its topics and the harness's producer (no broker)."""
        root = KazooClient(hosts=self.zk_connect.rsplit("/", 1)[0], timeout=10)
        root.start(timeout=15)
        root.ensure_path(f"/{self.name}")
        root.stop()
        root.close()
        self.zk = KazooClient(hosts=self.zk_connect, timeout=10)
        self.zk.start(timeout=15)
        ensure_topics(self.bootstrap, list(self.topics.values()))
        self.producer = KafkaProducer(bootstrap_servers=self.bootstrap, acks="all", linger_ms=0)

    def close(self, *, at_once: bool = False) -> None:
        """Stop every controller (SIGTERM, or SIGKILL ``at_once``) and broker, then the clients."""
        for c in self.controllers:
            if at_once:
                c.kill()
            else:
                c.stop()
        for b in self.brokers.values():
            b.signal(signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                b.proc.wait(10)
        if self.producer is not None:
            self.producer.close()
        if self.zk is not None:
            self.zk.stop()
            self.zk.close()

    def start_broker(self, broker_id: int) -> None:
        self.brokers[broker_id] = start_broker_process(
            broker_id,
            zookeeper=self.zk_connect,
            bootstrap=self.bootstrap,
            topics={
                "requests": self.topics["requests"],
                "events": self.topics["events"],
                "control": self.topics["control"],
            },
            brokers_dir=self.work / "brokers",
            session_timeout_ms=self.session_timeout_ms,
            prefix=self.prefix(f"broker-{broker_id}"),
            host=self.address(f"broker-{broker_id}"),
            extra_args=self.broker_args,
        )

    def registered_brokers(self) -> list[int]:
        """The broker ids registered in ZooKeeper now (``/brokers/ids``)."""
        assert self.zk is not None
        return [int(c) for c in self.zk.get_children("/brokers/ids")] if self.zk.exists("/brokers/ids") else []

    def start_controller(
        self, extra: dict[str, Any] | None = None, env_extra: dict[str, str] | None = None
    ) -> ControllerProcess:
        """A ``livectl run`` process on this cluster; ``extra`` settings are added to its ``--set``s,
        ``env_extra`` to its environment."""
        cid = self.new_controller_id()
        sets = self.controller_settings(cid, extra)
        cmd = [*self.prefix(f"controller-{cid}"), sys.executable, "-m", "livectl", "run", "--master", "local[2]"]
        for k, v in sets.items():
            cmd += ["--set", f"{k}={v}"]
        log = self.work / f"controller-{cid}.log"
        # livectl run chooses the Python processes' interpreter itself (streaming.driver.entry.worker_python)
        env = {k: v for k, v in os.environ.items() if k != "PYSPARK_PYTHON"}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
        env.update(env_extra or {})
        with log.open("ab") as out:
            proc = subprocess.Popen(
                cmd,
                cwd=str(ROOT),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        c = ControllerProcess(cid, proc, log)
        self.controllers.append(c)
        return c

    def new_controller_id(self) -> int:
        """The next controller's id (1001, 1002, …): one per controller started on this cluster."""
        cid = self._next_id
        self._next_id += 1
        return cid

    def controller_settings(self, cid: int, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """The settings (``--set``) of controller ``cid`` on this cluster, with ``extra`` added."""
        return {
            "zookeeper_connect": self.zk_connect,
            "bootstrap_servers": self.bootstrap,
            "admin_topic": self.topics["admin"],
            "broker_events_topic": self.topics["events"],
            "requests_topic": self.topics["requests"],
            "admin_results_topic": self.topics["results"],
            "rejected_topic": self.topics["rejected"],
            "query_name": self.name,
            "checkpoint_dir": str(self.checkpoint),
            "num_buckets": 2,
            "controller_id": cid,
            "zookeeper_session_timeout_ms": self.session_timeout_ms,
            "trigger_interval": "500 milliseconds",
            # small transactions: a large creation spans many of them, so a crash can fall between two
            "zk_ops_per_transaction": 20,
            **(extra or {}),
        }

    def wait_waiting(self, c: ControllerProcess, timeout: float = 240) -> None:
        """Until ``c`` has its SparkSession and waits for the lease (a standby)."""
        wait_until(
            f"controller {c.controller_id} waiting for the lease",
            lambda: self._check(c, "waiting for the controller lease"),
            timeout,
        )

    def wait_loaded(self, c: ControllerProcess, timeout: float = 240) -> None:
        """Until ``c`` is elected and has published its failover reference."""
        wait_until(f"controller {c.controller_id} loaded", lambda: self._check(c, "failover snapshot:"), timeout)
        self.active = c

    def _check(self, c: ControllerProcess, line: str) -> bool:
        if not c.alive() and c.proc.returncode != 0:
            raise MatrixError(f"controller {c.controller_id} exited with {c.proc.returncode}; see {c.log}")
        return line in c.text()

    # ------------------------------------------------------------------ input and observation

    def send_admin(self, command: ev.Event) -> None:
        assert self.producer is not None
        self.producer.send(self.topics["admin"], key=b"crash-matrix", value=event_to_json(command).encode()).get(10)

    def znode(self, path: str) -> tuple[dict[str, Any] | None, int]:
        assert self.zk is not None
        try:
            data, stat = self.zk.get(path)
        except NoNodeError:  # absent, or deleted while looked at (a topic deletion converging)
            return None, -1
        return (json.loads(data) if data else {}), stat.version

    def views(self) -> dict[int, dict[str, Any]]:
        out: dict[int, dict[str, Any]] = {}
        for path in sorted((self.work / "brokers").glob("broker-*.json")):
            with contextlib.suppress(ValueError, OSError):
                for bid, st in json.loads(path.read_text())["brokers"].items():
                    out[int(bid)] = st
        return out

    def results(self, request_id: str) -> list[dict[str, Any]]:
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False, group_id=None)
        try:
            tp = TopicPartition(self.topics["results"], 0)
            consumer.assign([tp])
            consumer.seek_to_beginning(tp)
            end = consumer.end_offsets([tp])[tp]
            out: list[dict[str, Any]] = []
            deadline = time.monotonic() + 15
            while consumer.position(tp) < end and time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=300).values():
                    out.extend(m for r in records if (m := json.loads(r.value)).get("request_id") == request_id)
            return out
        finally:
            consumer.close()

    def problems(self, expect: Expect) -> list[str]:
        """What still differs from the tree a clean run leaves (empty: converged)."""
        out: list[str] = []
        registered = set(self.registered_brokers())
        live = registered - set(expect.down)
        out += [f"broker {b} still registered" for b in sorted(registered & set(expect.down))]
        views = self.views()
        for topic, assignment in expect.assignments.items():
            znode, _ = self.znode(f"/brokers/topics/{topic}")
            if znode is None:
                out.append(f"{topic}: no topic znode")
                continue
            parts = {int(p): tuple(r) for p, r in znode.get("partitions", {}).items()}
            if parts != assignment:
                out.append(f"{topic}: assignment {parts} != {assignment}")
            if znode.get("adding_replicas") or znode.get("removing_replicas"):
                out.append(f"{topic}: adding {znode.get('adding_replicas')} removing {znode.get('removing_replicas')}")
            for p, replicas in sorted(assignment.items()):
                state, _ = self.znode(f"/brokers/topics/{topic}/partitions/{p}/state")
                if state is None:
                    out.append(f"{topic}-{p}: no state znode")
                    continue
                alive = [r for r in replicas if r in live]
                leader = alive[0] if alive else -1
                if state["leader"] != leader or set(state["isr"]) != set(alive):
                    out.append(
                        f"{topic}-{p}: leader {state['leader']} isr {state['isr']}, want {leader} {sorted(alive)}"
                    )
                out += broker_view_problems(views, f"{topic}-{p}", state, alive)
        for topic in expect.deleted:
            for path in (f"/brokers/topics/{topic}", f"/admin/delete_topics/{topic}", f"/config/topics/{topic}"):
                if self.znode(path)[0] is not None:
                    out.append(f"{path} still there")
            for b in live:
                hosted = [k for k in views.get(b, {}).get("partitions", {}) if k.rsplit("-", 1)[0] == topic]
                if hosted:
                    out.append(f"broker {b} still hosts {hosted}")
        if self.znode("/admin/reassign_partitions")[0] is not None:
            out.append("/admin/reassign_partitions still there")
        if expect.request_id is not None and not out:
            final = [r for r in self.results(expect.request_id) if r["status"] != "in_progress"]
            if [r["status"] for r in final] != ["ok"]:
                out.append(
                    f"{expect.request_id} answered {[(r['status'], r.get('error')) for r in final]}, want one ok"
                )
        return out

    # ------------------------------------------------------------------ the kill switch

    @contextlib.contextmanager
    def kill_when(
        self,
        paths: Sequence[str],
        seen: Callable[[str, dict[str, Any] | None, int], str | None],
        poll: Callable[[], str | None] | None = None,
    ) -> Iterator[list[str]]:
        """While inside: the first time ``seen(path, data, version)`` says what it saw for one of ``paths``
        (a DataWatch: called at once and on every change), or ``poll()`` (called every 20 ms on a thread of
        its own, for what no znode shows) says what it saw, SIGKILL the process of the controller that holds
        ``/controller`` then (followed by a DataWatch of its own, so no read happens in the callback)."""
        assert self.zk is not None
        hits: list[str] = []
        lock = threading.Lock()
        armed = [True]
        holder: list[int] = [-1]

        def on_controller(data: bytes | None, stat: Any) -> bool:
            holder[0] = int(json.loads(data)["brokerid"]) if data else -1
            return armed[0]

        def kill(what: str) -> bool:
            """Kill the holder for ``what``; whether it was done (now or before)."""
            with lock:
                victim = next((c for c in self.controllers if c.controller_id == holder[0]), None)
                if victim is None or hits:
                    return bool(hits)
                victim.kill()
                hits.append(f"{what} (controller {victim.controller_id} killed)")
                armed[0] = False
            return True

        def make(path: str) -> Callable[[Any, Any], bool]:
            def watch(data: bytes | None, stat: Any) -> bool:
                if not armed[0]:
                    return False
                parsed = json.loads(data) if data else ({} if stat is not None else None)
                what = seen(path, parsed, stat.version if stat is not None else -1)
                return what is None or not kill(what)

            return watch

        def polling() -> None:
            assert poll is not None
            while armed[0]:
                what = poll()
                if what is not None and kill(what):
                    return
                time.sleep(0.02)

        self.zk.DataWatch("/controller", on_controller)
        for path in paths:
            self.zk.DataWatch(path, make(path))
        poller = threading.Thread(target=polling, name="crash-matrix-poll", daemon=True) if poll else None
        if poller is not None:
            poller.start()
        try:
            yield hits
        finally:
            armed[0] = False
            if poller is not None:
                poller.join(30)


def wait_online(m: Matrix, topic: str, assignment: dict[int, tuple[int, ...]]) -> None:
    """Wait until ``topic`` has ``assignment`` with every partition online (up to 180 s)."""
    wait_converged(m, f"{topic} online", Expect({topic: assignment}), 180)


def wait_converged(m: Matrix, what: str, expect: Expect, timeout: float) -> None:
    """Until :meth:`Matrix.problems` is empty; the error lists what still differed."""
    last: list[str] = []

    def check() -> bool:
        last[:] = m.problems(expect)
        return not last

    try:
        wait_until(what, check, timeout, interval=1.0)
    except MatrixError:
        raise MatrixError(f"timed out after {timeout:.0f} s waiting for {what}: {last[:5]}") from None


def create_topic(m: Matrix, rid: str, topic: str, assignment: Mapping[int, tuple[int, ...]]) -> None:
    """Send the admin command ``rid`` creating ``topic`` with ``assignment`` (partition → replicas)."""
    m.send_admin(
        ev.CreateTopic(
            rid,
            topic,
            len(assignment),
            len(assignment[0]),
            replica_assignment=tuple(assignment[p] for p in sorted(assignment)),
        )
    )
