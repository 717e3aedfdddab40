"""The crash matrix's points (``scenario:point``, listed in :mod:`bench.crash_matrix`): each sets its stage,
arms a ZooKeeper watch that SIGKILLs the active controller at its write, fires its trigger and says what a
converged cluster looks like; :func:`run_matrix` runs a plan of them on one cluster."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from kafka import KafkaConsumer, TopicPartition

from bench.harness.matrix import (
    BROKERS,
    LARGE_PARTITIONS,
    ControllerProcess,
    Expect,
    Matrix,
    MatrixError,
    Row,
    create_topic,
    wait_online,
    wait_until,
)
from core import events as ev
from core.model import PartitionTarget

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


#: the points CI runs (tests/e2e/test_crash_matrix.py), within CI's 30 minutes: a broker failed while no
#: controller ran (a standby finishing a half-written batch is the test's controlled-shutdown point, and
#: tests/e2e/test_fenced_controller.py); the others run in ``python -m bench crash_matrix``
CI_POINTS = (
    # a broker failed while no controller ran: the restarted controller's ISR writes meet leaders that
    # shrank their ISRs meanwhile; the broker must rejoin with every view in agreement
    ("failure:while-down", "restart"),
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
        create_topic(self.m, f"{self.tag}-c", self.topic, {0: self.ORIGIN})
        wait_online(self.m, self.topic, {0: self.ORIGIN})

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
        create_topic(self.m, f"{self.tag}-c", self.topic, self.assignment())

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
        create_topic(self.m, f"{self.tag}-c", self.topic, self.ASSIGNMENT)
        wait_online(self.m, self.topic, self.ASSIGNMENT)

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
        create_topic(self.m, f"{self.tag}-c", self.topic, self.ASSIGNMENT)
        wait_online(self.m, self.topic, self.ASSIGNMENT)
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
        wait_until(f"broker {self.BROKER} unregistered", lambda: self.BROKER not in m.registered_brokers(), 60)
        m.start_broker(self.BROKER)
        wait_until(f"broker {self.BROKER} registered again", lambda: self.BROKER in m.registered_brokers(), 60)
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


def view_problems(m: Matrix, topic: str, assignment: Mapping[int, tuple[int, ...]]) -> list[str]:
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
    killer: contextlib.AbstractContextManager[list[str]] = (
        m.kill_when(paths, seen, point.poll()) if mode != "clean" else contextlib.nullcontext([])
    )
    with killer as hits:
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
