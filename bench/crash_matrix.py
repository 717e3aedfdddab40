"""Crash matrix: the controller process SIGKILLed at points taken from ZooKeeper watches; every point must
converge to the tree a clean run leaves.

Real services on free loopback ports (Debian's ZooKeeper, Apache Kafka), five simulated broker
*processes* (``python -m simbrokers``, one each), and the controller as real ``livectl run`` processes (each
its own Spark driver, ``local[2]``) on one shared checkpoint. For each point, on topics of its own:

1. the stage is set (topics created and online in ZooKeeper and in the brokers' own view);
2. in ``standby`` mode a second ``livectl run`` is started and waits for the lease; a watch is armed on
   ZooKeeper (``kazoo`` DataWatch) that SIGKILLs the active controller's process group (its Python and its
   Spark JVM) the moment the point's write is seen;
3. the scenario's trigger is fired (an admin command, a broker SIGTERMed or SIGKILLed);
4. after the kill the standby takes over (``standby``) once the dead one's ZooKeeper session ends, or a new
   ``livectl run`` is started on the same checkpoint (``restart``); ``clean`` kills nothing;
5. convergence is awaited and checked against the tree a clean run leaves: each topic's assignment with no
   adding/removing replicas, leader = the first live replica of the assignment, ISR = the live replicas,
   no ``/admin`` leftovers (``/admin/reassign_partitions``, ``/admin/delete_topics/<t>``), a deleted topic
   gone with its config; each live broker's own view (``--status-file``) at ZooKeeper's leader and leader
   epoch, the leader at ZooKeeper's ISR; the admin command answered exactly once with its final result.

Points (``scenario:point``): reassignment ``reassign:rs-written`` (target+origin written),
``reassign:new-in-isr`` (first new replica in the ISR), ``reassign:leader-moved``,
``reassign:target-written``, ``reassign:admin-path-removed`` (Kafka's legacy ``/admin/reassign_partitions``,
read by the controller at failover); creation ``create:topic-written``, ``create:partial`` (a 150-partition
topic killed after its first transactions, ``zk_ops_per_transaction`` = 20); deletion
``delete:marker-created``, ``delete:topic-removed``; ``shutdown:first-leader-moved`` (controlled shutdown,
SIGTERM to a broker), ``shutdown:batch-planned`` (the micro-batch holding the broker's ControlledShutdown
planned in the checkpoint's ``offsets/`` and not committed: polled, not watched); ``failure:first-state-write``
(broker SIGKILLed, its session ends);
``failure:while-down`` (the controller killed first, then the broker, while no controller runs).

One controller start per point (the next point's active is the one that converged the previous one).

Run::

    .venv/bin/python bench/crash_matrix.py                                   # every point, both modes
    .venv/bin/python bench/crash_matrix.py --points reassign:rs-written,delete:marker-created --modes restart

Prints the table (point, mode, what the watch saw, seconds to converge, problems) and writes
``bench/results/crash-matrix-<UTC stamp>.json``. Exit code 1 when a point did not converge.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
from kazoo.client import KazooClient  # noqa: E402
from kazoo.exceptions import NoNodeError  # noqa: E402

from core import events as ev  # noqa: E402
from core.codec.events import event_to_json  # noqa: E402
from core.model import PartitionTarget  # noqa: E402
from livectl.demo import BrokerProcess, start_broker_process  # noqa: E402
from sinks.requests import ensure_topics  # noqa: E402

BROKERS = (1, 2, 3, 4, 5)
MODES = ("restart", "standby", "clean")
POINTS = (
    "reassign:rs-written",
    "reassign:new-in-isr",
    "reassign:leader-moved",
    "reassign:target-written",
    "reassign:admin-path-removed",
    "create:topic-written",
    "create:partial",
    "delete:marker-created",
    "delete:topic-removed",
    "shutdown:first-leader-moved",
    "shutdown:batch-planned",
    "failure:first-state-write",
    "failure:while-down",
)
#: the points CI runs (tests/e2e/test_crash_matrix.py): the most distinct recovery paths — the replay of a
#: micro-batch cut inside its ZooKeeper transactions, a reassignment resumed from its topic znode, a
#: deletion resumed from its marker, and a broker failure whose ISR writes meet a new controller
CI_POINTS = (
    ("create:partial", "restart"),
    ("reassign:rs-written", "standby"),
    ("delete:marker-created", "restart"),
    ("failure:first-state-write", "standby"),
    # a broker failed while no controller ran: the restarted controller's ISR writes meet leaders that
    # shrank their ISRs meanwhile; the broker must rejoin with every view in agreement
    ("failure:while-down", "restart"),
)
LARGE_PARTITIONS = 150


class MatrixError(RuntimeError):
    pass


def wait_until(what: str, check: Callable[[], Any], timeout: float, interval: float = 0.3) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise MatrixError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r:.300})")


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

    assignments: dict[str, dict[int, tuple[int, ...]]] = field(default_factory=dict)
    deleted: tuple[str, ...] = ()
    request_id: str | None = None
    #: brokers down at the end of the point (restarted after the check)
    down: tuple[int, ...] = ()


class Matrix:
    """One cluster (a ZooKeeper chroot, topic names, a checkpoint), its brokers and its controllers."""

    def __init__(self, zk_root: str, bootstrap: str, work: Path, *, session_timeout_ms: int = 6000) -> None:
        self.name = f"cm{uuid.uuid4().hex[:6]}"
        self.bootstrap = bootstrap
        self.work = work
        self.session_timeout_ms = session_timeout_ms
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
        root = KazooClient(hosts=self.zk_connect.rsplit("/", 1)[0], timeout=10)
        root.start(timeout=15)
        root.ensure_path(f"/{self.name}")
        root.stop()
        root.close()
        self.zk = KazooClient(hosts=self.zk_connect, timeout=10)
        self.zk.start(timeout=15)
        ensure_topics(self.bootstrap, list(self.topics.values()))
        self.producer = KafkaProducer(bootstrap_servers=self.bootstrap, acks="all", linger_ms=0)
        for b in BROKERS:
            self.start_broker(b)
        wait_until("brokers registered", lambda: set(self._registered()) >= set(BROKERS), 60)

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
        )

    def _registered(self) -> list[int]:
        assert self.zk is not None
        return [int(c) for c in self.zk.get_children("/brokers/ids")] if self.zk.exists("/brokers/ids") else []

    def start_controller(self, extra: dict[str, Any] | None = None) -> ControllerProcess:
        """A ``livectl run`` process on this cluster; ``extra`` settings are added to its ``--set``s."""
        cid = self._next_id
        self._next_id += 1
        sets = {
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
        cmd = [*self.prefix(f"controller-{cid}"), sys.executable, "-m", "livectl", "run", "--master", "local[2]"]
        for k, v in sets.items():
            cmd += ["--set", f"{k}={v}"]
        log = self.work / f"controller-{cid}.log"
        # livectl run chooses the Python processes' interpreter itself (streaming.entry.worker_python)
        env = {k: v for k, v in os.environ.items() if k != "PYSPARK_PYTHON"}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
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
        registered = set(self._registered())
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
                for b in alive:
                    v = views.get(b, {}).get("partitions", {}).get(f"{topic}-{p}")
                    if v is None:
                        out.append(f"broker {b} does not host {topic}-{p}")
                    elif (v["leader"], v["leader_epoch"]) != (state["leader"], state["leader_epoch"]):
                        out.append(
                            f"broker {b} sees {topic}-{p} led by {v['leader']} at epoch {v['leader_epoch']}, "
                            f"ZooKeeper {state['leader']} at {state['leader_epoch']}"
                        )
                    elif b == state["leader"] and set(v["isr"]) != set(state["isr"]):
                        out.append(f"leader {b} of {topic}-{p} has ISR {v['isr']}, ZooKeeper {state['isr']}")
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


# ---------------------------------------------------------------------------- the scenarios


def _online(m: Matrix, topic: str, assignment: dict[int, tuple[int, ...]]) -> None:
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


def _create(m: Matrix, rid: str, topic: str, assignment: dict[int, tuple[int, ...]]) -> None:
    m.send_admin(
        ev.CreateTopic(
            rid,
            topic,
            len(assignment),
            len(assignment[0]),
            replica_assignment=tuple(assignment[p] for p in sorted(assignment)),
        )
    )


class Point:
    """One crash point: ``stage`` sets it up, ``watch`` names the znodes and the condition, ``fire``
    triggers the scenario; ``expect`` is the clean run's end."""

    def __init__(self, m: Matrix, name: str, tag: str) -> None:
        self.m = m
        self.name = name
        self.tag = tag
        self.topic = f"{tag}-{name.split(':', maxsplit=1)[0]}"

    def stage(self) -> None: ...

    def watch(self) -> tuple[list[str], Callable[[str, dict[str, Any] | None, int], str | None]]:
        raise NotImplementedError

    def fire(self) -> None:
        raise NotImplementedError

    def expect(self) -> Expect:
        raise NotImplementedError

    def after(self) -> None:
        """Bring the cluster back to every broker live for the next point."""

    def at_kill(self) -> str:
        """What the tree holds right after the kill (read before any successor is elected)."""
        return ""

    def poll(self) -> Callable[[], str | None] | None:
        """A kill condition no znode shows (see :meth:`Matrix.kill_when`), armed once ``fire`` may follow."""
        return None


class Reassign(Point):
    ORIGIN = (1, 2, 3)
    TARGET = (4, 5, 3)

    def stage(self) -> None:
        _create(self.m, f"{self.tag}-c", self.topic, {0: self.ORIGIN})
        _online(self.m, self.topic, {0: self.ORIGIN})

    def watch(self) -> tuple[list[str], Callable[[str, dict[str, Any] | None, int], str | None]]:
        topic_path = f"/brokers/topics/{self.topic}"
        state_path = f"{topic_path}/partitions/0/state"
        rs = [4, 5, 3, 1, 2]
        point = self.name.split(":")[1]

        def seen(path: str, d: dict[str, Any] | None, version: int) -> str | None:
            if d is None:
                return None
            if point == "rs-written" and path == topic_path and d["partitions"]["0"] == rs:
                return f"RS {rs} written"
            if point == "target-written" and path == topic_path and d["partitions"]["0"] == list(self.TARGET):
                return "target written"
            if point == "new-in-isr" and path == state_path and {4, 5} & set(d["isr"]):
                return f"ISR {d['isr']}"
            if point == "leader-moved" and path == state_path and d["leader"] == 4:
                return f"leader 4 (epoch {d['leader_epoch']})"
            return None

        return [topic_path, state_path], seen

    def fire(self) -> None:
        self.m.send_admin(ev.ReassignPartitions(f"{self.tag}-r", (PartitionTarget(self.topic, 0, self.TARGET),)))

    def expect(self) -> Expect:
        return Expect({self.topic: {0: self.TARGET}}, request_id=f"{self.tag}-r")


class LegacyReassign(Reassign):
    """Kafka's legacy path: ``/admin/reassign_partitions`` is written by a tool; a controller reads it when
    it is elected, and deletes it once the reassignments it names are done. The point is that deletion:
    the stage writes the znode and stops the active controller (a clean stop), so its successor starts
    the reassignment; the successor is SIGKILLed when the znode goes."""

    def stage(self) -> None:
        super().stage()
        m = self.m
        assert m.zk is not None and m.active is not None
        data = {"version": 1, "partitions": [{"topic": self.topic, "partition": 0, "replicas": list(self.TARGET)}]}
        m.zk.create("/admin/reassign_partitions", json.dumps(data).encode(), makepath=True)

    def watch(self) -> tuple[list[str], Callable[[str, dict[str, Any] | None, int], str | None]]:
        present = [False]

        def seen(path: str, d: dict[str, Any] | None, version: int) -> str | None:
            if d is not None:
                present[0] = True
                return None
            return "/admin/reassign_partitions deleted" if present[0] else None

        return ["/admin/reassign_partitions"], seen

    def expect(self) -> Expect:
        return Expect({self.topic: {0: self.TARGET}})


class Create(Point):
    def assignment(self) -> dict[int, tuple[int, ...]]:
        if self.name.endswith("partial"):
            return {p: (BROKERS[p % 5], BROKERS[(p + 1) % 5]) for p in range(LARGE_PARTITIONS)}
        return {0: (1, 2, 3), 1: (2, 3, 4), 2: (3, 4, 5)}

    def watch(self) -> tuple[list[str], Callable[[str, dict[str, Any] | None, int], str | None]]:
        if self.name.endswith("partial"):
            # the first partition's state is in the first transactions; the last one in the last
            first = f"/brokers/topics/{self.topic}/partitions/0/state"

            def seen_first(path: str, d: dict[str, Any] | None, version: int) -> str | None:
                return "the first partition state written" if d is not None else None

            return [first], seen_first
        path = f"/brokers/topics/{self.topic}"

        def seen(p: str, d: dict[str, Any] | None, version: int) -> str | None:
            return "topic znode written" if d is not None else None

        return [path], seen

    def fire(self) -> None:
        _create(self.m, f"{self.tag}-c", self.topic, self.assignment())

    def at_kill(self) -> str:
        assert self.m.zk is not None
        path = f"/brokers/topics/{self.topic}/partitions"
        written = sum(1 for p in self.assignment() if self.m.zk.exists(f"{path}/{p}/state"))
        return f"; {written}/{len(self.assignment())} partition states written"

    def expect(self) -> Expect:
        return Expect({self.topic: self.assignment()}, request_id=f"{self.tag}-c")


class Delete(Point):
    ASSIGNMENT: ClassVar[dict[int, tuple[int, ...]]] = {0: (1, 2), 1: (2, 3)}

    def stage(self) -> None:
        _create(self.m, f"{self.tag}-c", self.topic, self.ASSIGNMENT)
        _online(self.m, self.topic, self.ASSIGNMENT)

    def watch(self) -> tuple[list[str], Callable[[str, dict[str, Any] | None, int], str | None]]:
        marker = f"/admin/delete_topics/{self.topic}"
        topic_path = f"/brokers/topics/{self.topic}"
        had = [False]

        def seen(path: str, d: dict[str, Any] | None, version: int) -> str | None:
            if self.name.endswith("marker-created"):
                return "deletion marker created" if path == marker and d is not None else None
            if path == topic_path:
                if d is not None:
                    had[0] = True
                elif had[0]:
                    return "topic znode removed"
            return None

        return [marker, topic_path], seen

    def fire(self) -> None:
        self.m.send_admin(ev.DeleteTopic(f"{self.tag}-d", self.topic))

    def expect(self) -> Expect:
        return Expect(deleted=(self.topic,), request_id=f"{self.tag}-d")


class BrokerDown(Point):
    """Controlled shutdown (SIGTERM) or hard failure (SIGKILL) of broker 2, which leads both partitions."""

    BROKER = 2
    ASSIGNMENT: ClassVar[dict[int, tuple[int, ...]]] = {0: (2, 3, 4), 1: (2, 4, 5)}

    def stage(self) -> None:
        _create(self.m, f"{self.tag}-c", self.topic, self.ASSIGNMENT)
        _online(self.m, self.topic, self.ASSIGNMENT)
        self.versions = {
            p: self.m.znode(f"/brokers/topics/{self.topic}/partitions/{p}/state")[1] for p in self.ASSIGNMENT
        }
        self._consumer: KafkaConsumer | None = None
        if self.name.endswith("batch-planned"):
            # the broker's ControlledShutdown is a record after this one on the broker-events topic
            c = self._consumer = KafkaConsumer(bootstrap_servers=self.m.bootstrap, enable_auto_commit=False)
            tp = TopicPartition(self.m.topics["events"], 0)
            c.assign([tp])
            c.seek_to_end(tp)
            c.position(tp)
            self._request_offset: int | None = None

    def poll(self) -> Callable[[], str | None] | None:
        if not self.name.endswith("batch-planned"):
            return None
        checkpoint = self.m.checkpoint
        events_topic = self.m.topics["events"]

        def batches(folder: str) -> set[int]:
            d = checkpoint / folder
            return {int(f.name) for f in d.iterdir() if f.name.isdigit()} if d.is_dir() else set()

        def planned_not_committed() -> str | None:
            consumer = self._consumer
            assert consumer is not None
            if self._request_offset is None:
                for records in consumer.poll(timeout_ms=20).values():
                    for r in records:
                        with contextlib.suppress(ValueError, TypeError):
                            v = json.loads(r.value)
                            if v.get("type") == "controlled_shutdown" and v.get("broker_id") == self.BROKER:
                                self._request_offset = r.offset
                                break
                if self._request_offset is None:
                    return None
            for b in sorted(batches("offsets") - batches("commits")):
                try:
                    ends = json.loads((checkpoint / "offsets" / str(b)).read_text().splitlines()[2])
                except (OSError, ValueError, IndexError):
                    continue  # being written
                if int(ends.get(events_topic, {}).get("0", -1)) > self._request_offset:
                    return f"micro-batch {b} holding the ControlledShutdown planned, not committed"
            return None

        return planned_not_committed

    def at_kill(self) -> str:
        if not self.name.endswith("batch-planned"):
            return ""
        moved = [
            p
            for p in self.ASSIGNMENT
            if (self.m.znode(f"/brokers/topics/{self.topic}/partitions/{p}/state")[0] or {}).get("leader")
            != self.BROKER
        ]
        return f"; {len(moved)}/{len(self.ASSIGNMENT)} leaders moved"

    def watch(self) -> tuple[list[str], Callable[[str, dict[str, Any] | None, int], str | None]]:
        if self.name.endswith("batch-planned"):
            return [], lambda path, d, version: None  # polled: see poll
        if self.name.endswith("while-down"):
            # the controller dies first; the broker fails while no controller runs, and its successor
            # starts on the checkpoint (the leaders have shrunk their ISRs meanwhile)
            return ["/controller"], lambda path, d, version: "the controller, before the broker" if d else None
        paths = [f"/brokers/topics/{self.topic}/partitions/{p}/state" for p in self.ASSIGNMENT]

        def seen(path: str, d: dict[str, Any] | None, version: int) -> str | None:
            if d is None:
                return None
            p = int(path.split("/")[-2])
            if self.name.startswith("shutdown") and d["leader"] != self.BROKER:
                return f"{self.topic}-{p} leader moved to {d['leader']}"
            if self.name.endswith("first-state-write") and version != self.versions[p]:
                return f"{self.topic}-{p} state written (leader {d['leader']}, ISR {d['isr']})"
            return None

        return paths, seen

    def fire(self) -> None:
        b = self.m.brokers[self.BROKER]
        b.signal(signal.SIGTERM if self.name.startswith("shutdown") else signal.SIGKILL)

    def expect(self) -> Expect:
        return Expect({self.topic: self.ASSIGNMENT}, down=(self.BROKER,))

    def after(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
        m = self.m
        b = m.brokers[self.BROKER]
        with contextlib.suppress(subprocess.TimeoutExpired):
            b.proc.wait(60)
        if b.running():
            b.signal(signal.SIGKILL)
            b.proc.wait(10)
        wait_until(f"broker {self.BROKER} unregistered", lambda: self.BROKER not in m._registered(), 60)
        m.start_broker(self.BROKER)
        wait_until(f"broker {self.BROKER} registered again", lambda: self.BROKER in m._registered(), 60)
        # back in the ISRs before the next point (its absence is this point's business only); leadership
        # goes back to it only with the next preferred-replica election, so the leader is not checked

        def back() -> bool:
            for p in self.ASSIGNMENT:
                state, _ = m.znode(f"/brokers/topics/{self.topic}/partitions/{p}/state")
                if state is None or self.BROKER not in state["isr"]:
                    return False
            return True

        wait_until(f"broker {self.BROKER} back in the ISRs of {self.topic}", back, 180, interval=1.0)
        # and every replica, the returned one too, sees ZooKeeper's leader at ZooKeeper's leader epoch (the
        # issue's finding: brokers at leader epoch 1 while ZooKeeper held 0, the broker never back)
        last: list[str] = []

        def agree() -> bool:
            last[:] = view_problems(m, self.topic, self.ASSIGNMENT)
            return not last

        try:
            wait_until(f"the brokers' views of {self.topic} agree with ZooKeeper", agree, 120, interval=1.0)
        except MatrixError:
            raise MatrixError(f"the brokers' views of {self.topic} never agreed with ZooKeeper: {last[:5]}") from None


def view_problems(m: Matrix, topic: str, assignment: dict[int, tuple[int, ...]]) -> list[str]:
    """Where a replica's own view of ``topic`` differs from ZooKeeper (leader, leader epoch; the leader's
    ISR), for every replica in ZooKeeper's ISR."""
    out: list[str] = []
    views = m.views()
    for p in sorted(assignment):
        state, _ = m.znode(f"/brokers/topics/{topic}/partitions/{p}/state")
        if state is None:
            out.append(f"{topic}-{p}: no state znode")
            continue
        for b in state["isr"]:
            v = views.get(b, {}).get("partitions", {}).get(f"{topic}-{p}")
            if v is None or (v["leader"], v["leader_epoch"]) != (state["leader"], state["leader_epoch"]):
                seen = None if v is None else (v["leader"], v["leader_epoch"])
                zk = (state["leader"], state["leader_epoch"])
                out.append(f"broker {b} sees {topic}-{p} at (leader, epoch) {seen}, ZooKeeper {zk}")
            elif b == state["leader"] and set(v["isr"]) != set(state["isr"]):
                out.append(f"leader {b} of {topic}-{p} has ISR {v['isr']}, ZooKeeper {state['isr']}")
    return out


def make_point(m: Matrix, name: str, tag: str) -> Point:
    kind, what = name.split(":")
    if kind == "reassign":
        return LegacyReassign(m, name, tag) if what == "admin-path-removed" else Reassign(m, name, tag)
    if kind == "create":
        return Create(m, name, tag)
    if kind == "delete":
        return Delete(m, name, tag)
    if kind in ("shutdown", "failure"):
        return BrokerDown(m, name, tag)
    raise ValueError(f"unknown point {name!r}; known: {', '.join(POINTS)}")


def run_point(m: Matrix, name: str, mode: str, tag: str, *, converge_timeout: float = 180) -> Row:
    """One point in one mode (see the module docstring); the cluster is left with every broker live and a
    loaded active controller."""
    row = Row(name, mode)
    point = make_point(m, name, tag)
    assert m.active is not None
    point.stage()
    legacy = isinstance(point, LegacyReassign)
    standbys: list[ControllerProcess] = []
    if mode == "standby":
        # the legacy point kills the successor that read the znode: a second standby takes over from it
        for _ in range(2 if legacy else 1):
            standbys.append(m.start_controller())
        for s in standbys:
            m.wait_waiting(s)
    paths, seen = point.watch()
    with m.kill_when(paths, seen, point.poll()) if mode != "clean" else contextlib.nullcontext([]) as hits:
        if legacy:
            # a clean stop: the successor reads /admin/reassign_partitions when it is elected
            old = m.active
            # either waiting standby may win the lease: the kill takes whichever holds /controller
            successor = standbys[0] if standbys else m.start_controller()
            old.stop()
            if mode == "clean":
                m.wait_loaded(successor)
        else:
            point.fire()
        if mode != "clean":
            try:
                wait_until(f"{name}: the watch to fire", lambda: hits, 240 if legacy else 90, interval=0.05)
            except MatrixError:
                row.seen = "not reached"
        started = time.monotonic()
        row.seen = row.seen or (hits[0] + point.at_kill() if hits else "-")
    if mode != "clean" and row.seen != "not reached":
        alive = [s for s in standbys if s.alive()]
        successor = alive[0] if alive else m.start_controller()
        if successor in standbys:
            standbys.remove(successor)
        m.wait_loaded(successor)
    expect = point.expect()
    try:
        wait_until(f"{name} ({mode}) converged", lambda: not m.problems(expect), converge_timeout, interval=1.0)
        row.converged = True
    except MatrixError:
        row.problems = m.problems(expect)
    row.kill_to_converged_s = round(time.monotonic() - started, 1)
    for s in standbys:
        s.stop()
    point.after()
    return row


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """While inside, Ctrl-C (SIGINT) raises :class:`KeyboardInterrupt` in the main thread, so that the
    matrix stops and its ``finally`` stops every process it started — even when the process inherited
    SIGINT ignored (a job started in the background by a non-interactive shell, or under ``nohup``: Python
    then leaves it ignored, and the matrix went on killing and restarting controllers until SIGTERM)."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) != signal.SIG_IGN:
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def run_matrix(
    zk_root: str, bootstrap: str, work: Path, plan: Sequence[tuple[str, str]], *, log: Callable[[str], None] = print
) -> list[Row]:
    """Run ``plan`` ((point, mode) pairs) in order on one fresh cluster; returns one row per pair. Ctrl-C
    stops it (:func:`interruptible`), with every controller and broker it started."""
    work.mkdir(parents=True, exist_ok=True)
    m = Matrix(zk_root, bootstrap, work)
    rows: list[Row] = []
    with interruptible():
        _run_plan(m, plan, rows, log)
    return rows


def _run_plan(m: Matrix, plan: Sequence[tuple[str, str]], rows: list[Row], log: Callable[[str], None]) -> None:
    interrupted = False
    try:
        m.open()
        first = m.start_controller()
        m.wait_loaded(first)
        log(f"cluster {m.name}: brokers {list(BROKERS)}, controller {first.controller_id} loaded")
        for i, (name, mode) in enumerate(plan):
            started = time.monotonic()
            row = run_point(m, name, mode, f"p{i}")
            rows.append(row)
            log(
                f"{name:32} {mode:8} seen: {row.seen:45.45} converged: {row.converged} "
                f"({row.kill_to_converged_s} s; point {time.monotonic() - started:.0f} s) {row.problems[:3]}"
            )
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        # after Ctrl-C, no minute-long clean stops that a second Ctrl-C would cut short
        m.close(at_once=interrupted)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--points", default=",".join(POINTS), help="comma-separated points (default: all)")
    ap.add_argument("--modes", default="restart,standby", help=f"comma-separated, of {', '.join(MODES)}")
    ap.add_argument("--keep", action="store_true", help="keep the run folder (logs of every process)")
    args = ap.parse_args()
    points = [p for p in args.points.split(",") if p]
    modes = [x for x in args.modes.split(",") if x]
    for p in points:
        if p not in POINTS:
            ap.error(f"--points: unknown point {p!r}; known: {', '.join(POINTS)}")
    for x in modes:
        if x not in MODES:
            ap.error(f"--modes: unknown mode {x!r}; known: {', '.join(MODES)}")
    sys.path.insert(0, str(ROOT / "bench"))
    from _common import machine_info, print_table, services, write_results

    plan = [(p, x) for x in modes for p in points]
    with services(keep=args.keep) as svc:
        rows = run_matrix(svc.zookeeper.connect, svc.broker.bootstrap, svc.run_dir / "matrix", plan)
        print()
        print_table(["point", "mode", "seen at the kill", "kill→converged s", "converged"], [r.cells() for r in rows])
        for r in rows:
            if r.problems:
                print(f"{r.point} ({r.mode}): {r.problems}")
        write_results("crash-matrix", {"machine": machine_info(), "rows": [r.__dict__ for r in rows]})
    return 0 if all(r.converged for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
