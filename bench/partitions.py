"""Network partitions and a ZooKeeper ensemble's failures (issue 41, items 1, 2, 3, 4 and 8).

Every process is real and runs on a test host of its own, a network namespace (``bench/harness/netns.py``):
Debian's ZooKeeper as an ensemble of three servers (one host each), Apache Kafka (one KRaft node), five
simulated broker processes (``python -m simbrokers``) and ``livectl run`` controllers on one checkpoint (the
crash matrix's harness, :mod:`bench.harness`). "Cut off from ZooKeeper" cuts a host from all three servers.
A cut is a pair of blackhole routes between two hosts: silent, both ways, nothing refused; healing deletes
them. The test process (the root namespace) still reaches every host, so it observes throughout.

Faults (``--faults``):

- ``zk-cut:idle``: the active controller cut off from ZooKeeper between micro-batches, its link to Kafka
  kept; input (a creation, an invalid command, a record that is not JSON) arrives meanwhile. The standby
  takes over once the cut-off one's session expires and answers it; the link returns.
- ``zk-cut:before-zk-writes``: the same, cut as the micro-batch holding a creation is planned in the
  checkpoint (``offsets/N``) and before its ZooKeeper writes.
- ``zk-cut:after-zk-writes``: the same, cut right after the first partition state of a 150-partition
  creation reached ZooKeeper: the batch's other transactions, requests and admin result still to go.
- ``broker-zk-cut``: a simulated broker that leads partitions cut off from ZooKeeper, not from Kafka: its
  registration expires while it still serves; the link returns.
- ``kafka-cut``: the active controller cut off from Kafka, not from ZooKeeper, while input waits; the link
  returns.
- ``kafka-cut:in-batch``: the same, cut as the micro-batch holding a creation is planned, a standby waiting,
  held past ``sink_retry_timeout_ms``; what the controller does is recorded, then the link returns.
- ``zk-leader-kill:reassign`` / ``zk-leader-kill:broker-failure``: the ensemble's leader SIGKILLed as a
  reassignment's RS is written / as a leading broker's registration goes after its SIGKILL; it is started
  again once the work is done.
- ``zk-minority-cut:reassign`` / ``zk-minority-cut:broker-failure``: the same moments, the server holding the
  active controller's session (a follower, or the leader when the session is there) cut off from the other
  two servers and from every other host; healed once the work is done. For these four the active
  controller must keep its lease and epoch (its session moves to another server) and finish the work, and
  every server's copy of the tree must be the same afterwards.
- ``zk-quorum-cut:reassign``: the server holding the active controller's session cut off from the other two
  servers only, its clients still reaching it, a standby waiting, as a reassignment is sent: the controller
  keeps its lease, or is fenced (exit 3, one line) and the standby finishes.

Checked for every fault (item 8): no message of the cut-off controller's epoch on the requests,
admin-results or rejected topics once it was cut off (and no znode written after the link returned but
by its successor), leader and controller epochs only grow, no two brokers leading one partition at one
leader epoch (the brokers' own views), every admin command answered once with its final result, no
acknowledged record lost (the simulated brokers' data plane, where records are produced), and ZooKeeper and
the brokers' views agreeing after healing (the crash matrix's convergence check).

Run (as root: namespaces and routes)::

    .venv/bin/python -m bench partitions                     # every fault
    .venv/bin/python -m bench partitions --faults zk-cut:idle

Prints the table (fault, what happened, seconds, problems) and writes
``bench/results/partitions-<UTC stamp>.json``. Exit code 1 when a fault broke an invariant.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

from bench import harness as cm
from bench.harness import fencing, netns
from livectl import local

FAULTS = (
    "zk-cut:idle",
    "zk-cut:before-zk-writes",
    "zk-cut:after-zk-writes",
    "broker-zk-cut",
    "kafka-cut",
    "kafka-cut:in-batch",
    "zk-leader-kill:reassign",
    "zk-leader-kill:broker-failure",
    "zk-minority-cut:reassign",
    "zk-minority-cut:broker-failure",
    "zk-quorum-cut:reassign",
)
#: the faults CI runs (tests/e2e/test_partitions.py); of the ensemble's, the leader killed mid-reassignment:
#: every session (the controller's, wherever it was) loses its server in the middle of the most ZooKeeper writes
CI_FAULTS = ("zk-cut:idle", "broker-zk-cut", "zk-leader-kill:reassign")
SESSION_TIMEOUT_MS = 6000
ZOOKEEPER_SERVERS = 3


@dataclass
class Row:
    fault: str
    outcome: str = ""
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    def cells(self) -> list[Any]:
        return [self.fault, self.outcome, self.seconds, "yes" if not self.problems else "NO"]


@dataclass
class Hosts:
    """The test hosts of one run: the ZooKeeper ensemble's (``zookeeper-1`` … ``zookeeper-3``), Kafka's, and one
    per process started (by its name)."""

    net: netns.Network
    ensemble: netns.Ensemble
    kafka: local.Service

    def host(self, name: str) -> netns.Host:
        return self.net.hosts.get(name) or self.net.add_host(name)

    def matrix(self, work: Path) -> cm.Matrix:
        """A crash-matrix cluster whose every controller and broker runs on a host of its own."""
        m = cm.Matrix(self.ensemble.connect, self.kafka.bootstrap, work, session_timeout_ms=SESSION_TIMEOUT_MS)
        m.prefix = lambda name: self.host(name).prefix
        m.address = lambda name: self.host(name).address
        return m

    def cut_from_zookeeper(self, host: netns.Host) -> None:
        """``host`` cut off from every server of the ensemble."""
        for z in self.ensemble.hosts:
            self.net.cut(host, z)

    def heal_from_zookeeper(self, host: netns.Host) -> None:
        for z in self.ensemble.hosts:
            self.net.heal(host, z)


@contextlib.contextmanager
def hosts(run_dir: Path) -> Iterator[Hosts]:
    """The network, a ZooKeeper ensemble of three and Kafka on hosts of their own; everything stopped and
    deleted after."""
    with netns.network() as net:
        zk_hosts = [net.add_host(f"zookeeper-{n}") for n in range(1, ZOOKEEPER_SERVERS + 1)]
        kafka_host = net.add_host("kafka")
        ensemble = netns.start_zookeeper_ensemble(zk_hosts, run_dir / "zookeeper")
        try:
            kafka = netns.start_kafka(kafka_host, run_dir / "kafka")
            try:
                yield Hosts(net, ensemble, kafka)
            finally:
                local.stop_kafka(kafka)
        finally:
            ensemble.stop()


def _controller_host(h: Hosts, c: cm.ControllerProcess) -> netns.Host:
    return h.host(f"controller-{c.controller_id}")


def _send_raw(m: cm.Matrix, value: str) -> None:
    assert m.producer is not None
    m.producer.send(m.topics["admin"], key=b"partition", value=value.encode()).get(10)


def _no_writes_of(m: cm.Matrix, epoch: int, before: dict[str, int], what: str) -> list[str]:
    now = fencing.epoch_counts(m.bootstrap, m.topics, epoch)
    return [f"{what}: {t} got {now[t] - before[t]} message(s) of epoch {epoch}" for t in now if now[t] != before[t]]


def _in_order(m: cm.Matrix, old: int, new: int) -> list[str]:
    out = []
    for name in ("requests", "results", "rejected"):
        late = fencing.old_epoch_after_new(fencing.messages(m.bootstrap, m.topics[name]), old, new)
        out += [f"{name}: epoch {old} after epoch {new}: {x}" for x in late[:3]]
    return out


def _answered_once(m: cm.Matrix, request_id: str, epoch: int | None = None) -> list[str]:
    final = [r for r in m.results(request_id) if r["status"] != "in_progress"]
    if len(final) != 1:
        return [f"{request_id} answered {len(final)} times: {[(r['status'], r['controller_epoch']) for r in final]}"]
    if epoch is not None and final[0]["controller_epoch"] != epoch:
        return [f"{request_id} answered by epoch {final[0]['controller_epoch']}, want {epoch}"]
    return []


def _exit_problems(c: cm.ControllerProcess, mark: int, timeout: float = 90) -> tuple[str, list[str]]:
    """How ``c`` ended after log offset ``mark``: exit 3 with one line saying it was fenced is right."""
    try:
        rc = c.proc.wait(timeout)
    except subprocess.TimeoutExpired:
        return "still running", [f"controller {c.controller_id} still runs {timeout:.0f} s after the link returned"]
    said = [line for line in c.text()[mark:].splitlines() if line.strip()]
    if rc == 3 and len(said) == 1 and "was fenced" in said[0]:
        return f"exit 3: {said[0][:90]}", []
    return f"exit {rc}", [f"controller {c.controller_id} exited {rc} saying {said[-5:]}"]


# ---------------------------------------------------------------------------- the controller cut off from ZooKeeper


def zk_cut(h: Hosts, m: cm.Matrix, when: str = "idle", log: Callable[[str], None] = print) -> Row:
    """Item 1: the active controller cut off from ZooKeeper (``when``: ``idle``, ``before-zk-writes``,
    ``after-zk-writes``), its link to Kafka kept; a standby is started first. See the module docstring."""
    row = Row(f"zk-cut:{when}")
    assert m.zk is not None and m.active is not None
    a = m.active
    b = m.start_controller()
    m.wait_waiting(b)
    epoch_a = int(m.zk.get("/controller_epoch")[0])
    cm.wait_until("A between micro-batches", lambda: fencing.between_batches(m.checkpoint), 60, interval=0.2)
    before = fencing.epoch_counts(m.bootstrap, m.topics, epoch_a)
    partitions = cm.LARGE_PARTITIONS if when == "after-zk-writes" else 3
    assignment = {p: (cm.BROKERS[p % 5], cm.BROKERS[(p + 1) % 5]) for p in range(partitions)}
    tag = f"zk{when[:2]}{len(m.controllers)}"
    topic = f"{m.name}-{tag}"
    a_host = _controller_host(h, a)
    cut_at: list[float] = []
    seen: list[str] = []

    def cut(what: str) -> None:
        if not cut_at:
            h.cut_from_zookeeper(a_host)
            cut_at.append(time.monotonic())
            seen.append(what)

    watcher: threading.Thread | None = None
    if when == "idle":
        cut("between micro-batches")
    elif when == "after-zk-writes":
        first = f"/brokers/topics/{topic}/partitions/0/state"

        def on_first(data: bytes | None, stat: Any) -> bool:
            if data is not None:
                cut("the first partition state written")
            return not cut_at

        m.zk.DataWatch(first, on_first)
    else:
        watcher = _cut_when_planned(m, lambda: cut("the micro-batch planned, before its ZooKeeper writes"))
    # input while A is (or is about to be) cut off: ZooKeeper writes, requests, an admin result, rejected
    cm.create_topic(m, f"{tag}-c", topic, assignment)
    _send_raw(m, f'{{"version":1,"type":"delete_topic","request_id":"{tag}-bad","topic":""}}')
    _send_raw(m, "not json at all")
    cm.wait_until("the cut", lambda: cut_at, 90, interval=0.05)
    if watcher is not None:
        watcher.join(5)
    after_cut = fencing.epoch_counts(m.bootstrap, m.topics, epoch_a)
    m.wait_loaded(b, timeout=120)  # A's session expired; B was elected and published its reference
    took_over = time.monotonic() - cut_at[0]
    epoch_b = int(m.zk.get("/controller_epoch")[0])
    if epoch_b != epoch_a + 1:
        row.problems.append(f"controller epoch {epoch_a} -> {epoch_b}")
    expect = cm.Expect({topic: assignment}, request_id=f"{tag}-c")
    cm.wait_converged(m, "B finishes the creation", expect, 180)
    cm.wait_until("B answers the invalid command", lambda: m.results(f"{tag}-bad"), 60)
    done = time.monotonic() - cut_at[0]
    if when != "after-zk-writes":
        # nothing of A's epoch since the cut (cut mid-batch, a write may already have been under way)
        row.problems += _no_writes_of(m, epoch_a, before, "while cut off")
    row.problems += _no_writes_of(m, epoch_a, after_cut, "after the cut")
    tree = fencing.tree(m.zk)
    mark = len(a.text())
    h.heal_from_zookeeper(a_host)
    outcome, problems = _exit_problems(a, mark)
    row.problems += problems
    row.problems += [f"after healing: {w}" for w in fencing.writes_not_by(m.zk, tree, epoch_b)]
    row.problems += _no_writes_of(m, epoch_a, after_cut, "after healing")
    row.problems += _in_order(m, epoch_a, epoch_b)
    row.problems += _answered_once(m, f"{tag}-bad", epoch_b) + _answered_once(m, f"{tag}-c")
    row.problems += m.problems(cm.Expect({topic: assignment}))
    row.outcome = f"cut {seen[0]}; B took over {took_over:.1f} s after; A: {outcome}"
    row.seconds = round(done, 1)
    log(f"{row.fault}: {row.outcome}; converged {done:.1f} s after the cut; problems {row.problems[:3]}")
    return row


def _cut_when_planned(m: cm.Matrix, cut: Callable[[], None], timeout: float = 90) -> threading.Thread:
    """A thread that calls ``cut`` as soon as a new micro-batch is planned in the checkpoint (``offsets/N``)."""
    planned = fencing.batch_ids(m.checkpoint / "offsets")

    def watch() -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if fencing.batch_ids(m.checkpoint / "offsets") - planned:
                cut()
                return
            time.sleep(0.005)

    t = threading.Thread(target=watch, name="partitions-cut-when-planned", daemon=True)
    t.start()
    return t


# ---------------------------------------------------------------------------- a broker cut off from ZooKeeper


class Views:
    """The brokers' own views of ``topic``, sampled from their status files on a thread: who claimed to
    lead each partition at each leader epoch, each replica's leader epochs in order, and the highest high
    watermark each leader epoch's leader reported."""

    def __init__(self, m: cm.Matrix, topic: str, interval: float = 0.25) -> None:
        self.m, self.topic, self.interval = m, topic, interval
        self.leaders: dict[tuple[str, int], set[int]] = {}
        self.epochs: dict[tuple[int, str], list[int]] = {}
        self.hw: dict[tuple[str, int], int] = {}
        #: the log end offset of each leader epoch's leader the first time it was seen leading
        self.first_leo: dict[tuple[str, int], int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="partitions-views", daemon=True)

    def __enter__(self) -> Views:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.is_set():
            for b, st in self.m.views().items():
                for tp, v in st.get("partitions", {}).items():
                    if tp.rsplit("-", 1)[0] != self.topic:
                        continue
                    seen = self.epochs.setdefault((b, tp), [])
                    if not seen or seen[-1] != v["leader_epoch"]:
                        seen.append(v["leader_epoch"])
                    if v["role"] == "leader":
                        key = (tp, v["leader_epoch"])
                        self.leaders.setdefault(key, set()).add(b)
                        self.hw[key] = max(self.hw.get(key, -1), v["hw"])
                        self.first_leo.setdefault(key, v["leo"])
            self._stop.wait(self.interval)

    def problems(self) -> list[str]:
        out = [f"{tp} led by {sorted(bs)} at leader epoch {e}" for (tp, e), bs in self.leaders.items() if len(bs) > 1]
        out += [
            f"broker {b} saw {tp}'s leader epoch go {es}" for (b, tp), es in self.epochs.items() if es != sorted(es)
        ]
        # acknowledged (acks=all) records are below the leader's high watermark: each later leader's log held
        # at least that many when it was first seen leading
        for (tp, e), hw in self.hw.items():
            later = sorted((e2, leo) for (tp2, e2), leo in self.first_leo.items() if tp2 == tp and e2 > e)
            if later and later[0][1] < hw:
                out.append(
                    f"{tp}: leader epoch {e} acknowledged up to {hw}, epoch {later[0][0]}'s log ended at {later[0][1]}"
                )
        return out


def broker_zk_cut(h: Hosts, m: cm.Matrix, log: Callable[[str], None] = print) -> Row:
    """Item 4: a simulated broker that leads partitions cut off from ZooKeeper, not from Kafka: its
    registration expires while it still serves; the controller treats it as failed and elects new leaders;
    the old leader's view moves on at the next epoch; the link returns and it rejoins every ISR."""
    row = Row("broker-zk-cut")
    assert m.zk is not None and m.active is not None
    broker = 2
    assignment = {0: (2, 3, 4), 1: (2, 4, 5)}
    topic = f"{m.name}-bcut"
    cm.create_topic(m, f"{topic}-c", topic, assignment)
    cm.wait_converged(m, f"{topic} online", cm.Expect({topic: assignment}), 120)
    states = {p: m.znode(f"/brokers/topics/{topic}/partitions/{p}/state")[0] or {} for p in assignment}
    b_host = h.host(f"broker-{broker}")
    with Views(m, topic) as views:
        time.sleep(1.5)  # records produced and acknowledged under broker 2 (the producers run at 10/s)
        h.cut_from_zookeeper(b_host)
        cut_at = time.monotonic()

        def moved() -> bool:
            now = {p: m.znode(f"/brokers/topics/{topic}/partitions/{p}/state")[0] or {} for p in assignment}
            return all(
                s.get("leader") != broker
                and s.get("leader_epoch", -1) > states[p]["leader_epoch"]
                and broker not in s["isr"]
                for p, s in now.items()
            )

        cm.wait_until(f"new leaders for broker {broker}'s partitions", moved, 60, interval=0.2)
        elected = time.monotonic() - cut_at
        registered_while_cut = broker in m.registered_brokers()
        # the followers fetch from the new leaders; the old one's view moves on only once it hears again
        time.sleep(1.5)
        h.heal_from_zookeeper(b_host)
        healed = time.monotonic()

        def back() -> list[str]:
            isr = [m.znode(f"/brokers/topics/{topic}/partitions/{p}/state")[0] or {} for p in assignment]
            missing = [
                f"{topic}-{p} ISR {s.get('isr')}"
                for p, s in zip(assignment, isr, strict=True)
                if broker not in s.get("isr", [])
            ]
            return missing + cm.view_problems(m, topic, assignment)

        last: list[str] = []

        def rejoined() -> bool:
            last[:] = back()
            return not last

        try:
            cm.wait_until(f"broker {broker} back in every ISR, views agreeing", rejoined, 120, interval=0.5)
        except cm.MatrixError:
            row.problems.append(f"after healing: {last[:3]}")
        rejoin = time.monotonic() - healed
        time.sleep(1.0)
    row.problems += views.problems()
    if registered_while_cut:
        row.problems.append(f"broker {broker} still registered when its partitions moved")
    for p in assignment:
        old = (f"{topic}-{p}", states[p]["leader_epoch"])
        if old not in views.leaders:
            row.problems.append(f"{topic}-{p}: never seen led at epoch {old[1]} (the views were not sampled)")
    row.outcome = f"new leaders {elected:.1f} s after the cut; rejoined {rejoin:.1f} s after healing"
    row.seconds = round(elected, 1)
    log(f"{row.fault}: {row.outcome}; problems {row.problems[:3]}")
    return row


# ---------------------------------------------------------------------------- the controller cut off from Kafka


def _repeated_requests(m: cm.Matrix) -> list[str]:
    """Requests written twice: one (controller epoch, batch, broker, api, part) pair more than once."""
    seen: dict[tuple[Any, ...], int] = {}
    for msgs in fencing.messages(m.bootstrap, m.topics["requests"]).values():
        for x in msgs:
            key = (
                x.get("controllerEpoch"),
                x.get("batchId"),
                x.get("brokerId"),
                x.get("api"),
                x.get("part"),
                json.dumps(x, sort_keys=True),
            )
            seen[key] = seen.get(key, 0) + 1
    return [f"request written {n} times: {k[:5]}" for k, n in seen.items() if n > 1][:5]


def kafka_cut(
    h: Hosts, m: cm.Matrix, *, hold_s: float = 2.5 * SESSION_TIMEOUT_MS / 1000, log: Callable[[str], None] = print
) -> Row:
    """Item 2: the active controller cut off from Kafka, not from ZooKeeper, for ``hold_s`` while commands
    wait (a creation and an invalid command). livectl keeps the lease and waits, as Kafka's ZooKeeper
    controller does: its session stays valid, no standby is elected, the epoch stays; when the link returns
    it reads the commands and answers each once, and no request is written twice."""
    row = Row("kafka-cut")
    assert m.zk is not None and m.active is not None
    c = m.active
    epoch = int(m.zk.get("/controller_epoch")[0])
    cm.wait_until(
        "the controller between micro-batches", lambda: fencing.between_batches(m.checkpoint), 60, interval=0.2
    )
    c_host, kafka_host = _controller_host(h, c), h.host("kafka")
    topic = f"{m.name}-kcut"
    assignment = {0: (1, 2, 3), 1: (3, 4, 5)}
    h.net.cut(c_host, kafka_host)
    cut_at = time.monotonic()
    cm.create_topic(m, f"{topic}-c", topic, assignment)
    _send_raw(m, f'{{"version":1,"type":"delete_topic","request_id":"{topic}-bad","topic":""}}')
    cm.wait_until("the cut held", lambda: time.monotonic() - cut_at >= hold_s, hold_s + 5, interval=0.2)
    holder = m.znode("/controller")[0] or {}
    if holder.get("brokerid") != c.controller_id or int(m.zk.get("/controller_epoch")[0]) != epoch:
        row.problems.append(f"the lease moved while cut off from Kafka: /controller {holder}")
    if not c.alive():
        row.problems.append(f"controller {c.controller_id} exited with {c.proc.returncode} while cut off from Kafka")
    h.net.heal(c_host, kafka_host)
    healed = time.monotonic()
    cm.wait_converged(m, "the creation after healing", cm.Expect({topic: assignment}, request_id=f"{topic}-c"), 180)
    cm.wait_until("the invalid command answered", lambda: m.results(f"{topic}-bad"), 60)
    answered = time.monotonic() - healed
    row.problems += _answered_once(m, f"{topic}-c", epoch) + _answered_once(m, f"{topic}-bad", epoch)
    row.problems += _repeated_requests(m)
    row.outcome = f"kept the lease {hold_s:.0f} s cut off (epoch {epoch}); answered {answered:.1f} s after healing"
    row.seconds = round(answered, 1)
    log(f"{row.fault}: {row.outcome}; problems {row.problems[:3]}")
    return row


def kafka_cut_in_batch(h: Hosts, m: cm.Matrix, *, hold_s: float = 100.0, log: Callable[[str], None] = print) -> Row:
    """Item 2 inside a micro-batch: the active controller cut off from Kafka as the batch holding a creation
    is planned (its records still to read, its requests to write), a standby waiting, for up to ``hold_s``
    (past ``sink_retry_timeout_ms``): what the controller does is recorded; then the link returns and
    everything must be answered once, with nothing written twice or out of epoch order."""
    row = Row("kafka-cut:in-batch")
    assert m.zk is not None and m.active is not None
    c = m.active
    s = m.start_controller()
    m.wait_waiting(s)
    epoch = int(m.zk.get("/controller_epoch")[0])
    cm.wait_until(
        "the controller between micro-batches", lambda: fencing.between_batches(m.checkpoint), 60, interval=0.2
    )
    c_host, kafka_host = _controller_host(h, c), h.host("kafka")
    topic = f"{m.name}-kbcut"
    assignment = {0: (1, 2, 3), 1: (3, 4, 5)}
    cut_at: list[float] = []

    def cut() -> None:
        h.net.cut(c_host, kafka_host)
        cut_at.append(time.monotonic())

    watcher = _cut_when_planned(m, cut)
    cm.create_topic(m, f"{topic}-c", topic, assignment)
    _send_raw(m, f'{{"version":1,"type":"delete_topic","request_id":"{topic}-bad","topic":""}}')
    cm.wait_until("the cut", lambda: cut_at, 90, interval=0.05)
    watcher.join(5)
    mark = len(c.text())

    def moved() -> bool:
        assert m.zk is not None
        return not c.alive() or int(m.zk.get("/controller_epoch")[0]) != epoch

    cm.wait_until("the hold", lambda: moved() or time.monotonic() - cut_at[0] >= hold_s, hold_s + 10, interval=0.5)
    held = time.monotonic() - cut_at[0]
    h.net.heal(c_host, kafka_host)
    if c.alive() and int(m.zk.get("/controller_epoch")[0]) == epoch:
        what = f"kept the lease {held:.0f} s, still running"
        new_epoch = epoch
    else:
        with contextlib.suppress(subprocess.TimeoutExpired):
            c.proc.wait(60)
        said = [line for line in c.text()[mark:].splitlines() if line.strip() and "WARN" not in line]
        what = f"exited {c.proc.returncode} {held:.0f} s after the cut ({said[-1][:80] if said else ''})"
        m.wait_loaded(s)
        new_epoch = int(m.zk.get("/controller_epoch")[0])
    cm.wait_converged(m, "the creation after healing", cm.Expect({topic: assignment}, request_id=f"{topic}-c"), 180)
    cm.wait_until("the invalid command answered", lambda: m.results(f"{topic}-bad"), 60)
    row.problems += _answered_once(m, f"{topic}-c") + _answered_once(m, f"{topic}-bad")
    row.problems += _repeated_requests(m)
    if new_epoch != epoch:
        row.problems += _in_order(m, epoch, new_epoch)
    else:
        s.stop()
    row.outcome = f"cut as the batch was planned; the controller {what}"
    row.seconds = round(time.monotonic() - cut_at[0], 1)
    log(f"{row.fault}: {row.outcome}; problems {row.problems[:3]}")
    return row


# ---------------------------------------------------------------------------- the ensemble's own faults


def _server_of(h: Hosts, address: str, but: local.Service | None = None) -> local.Service | None:
    """The ensemble server (other than ``but``) a client at ``address`` is connected to now (the servers'
    ``stat``; a server cut off still lists the connections it has not yet timed out)."""
    return next((s for s in h.ensemble.servers if s is not but and address in h.ensemble.clients(s)), None)


def _broker_sessions(m: cm.Matrix) -> dict[int, int]:
    """Each registered broker's registration's creation id (a new one: its session ended and it registered
    again)."""
    assert m.zk is not None
    out = {}
    for b in m.registered_brokers():
        stat = m.zk.exists(f"/brokers/ids/{b}")
        if stat is not None:
            out[b] = stat.czxid
    return out


def _replica_problems(h: Hosts, m: cm.Matrix) -> list[str]:
    """Where a server's copy of the cluster's tree differs from the first one's (each read after ``sync``)."""
    copies = []
    for s in h.ensemble.servers:
        c = KazooClient(hosts=f"{s.address}/{m.name}", timeout=10)
        c.start(timeout=30)
        try:
            c.sync("/")
            copies.append((s.name, fencing.tree(c)))
        finally:
            c.stop()
            c.close()
    first_name, first = copies[0]
    out = []
    for name, copy in copies[1:]:
        differ = sorted(set(first.items()) ^ set(copy.items()))
        if differ:
            out.append(f"{name}'s tree differs from {first_name}'s at {len(differ)} znode(s): {differ[:3]}")
    return out


def ensemble_fault(h: Hosts, m: cm.Matrix, fault: str, log: Callable[[str], None] = print) -> Row:
    """Item 3: ``zk-leader-kill`` (the ensemble's leader SIGKILLed) or ``zk-minority-cut`` (the server holding
    the active controller's session cut off from the other two servers and from every other host: a
    follower, or the leader when the session is there) during ``reassign`` (as the reassignment's RS is
    written) or ``broker-failure`` (as a leading broker's registration goes away after its SIGKILL).

    What carrying on means: a minority lost is ZooKeeper's to hide. Every session on the server that went
    away moves to another server within the session timeout (ZooKeeper's new leader keeps the sessions it
    finds), so the active controller keeps its lease and its epoch (no standby runs here to fail over to)
    and finishes the work; then the usual invariants, and every server's copy of the tree the same once the
    server is back."""
    kind, during = fault.split(":", 1)
    row = Row(fault)
    assert m.zk is not None and m.active is not None
    c = m.active
    epoch = int(m.zk.get("/controller_epoch")[0])
    c_address = _controller_host(h, c).address
    tag = f"e{kind[3]}{during[0]}{len(m.controllers)}{len(row.fault)}"
    point: cm.Reassign | cm.BrokerDown
    if during == "reassign":
        point = cm.Reassign(m, "reassign:rs-written", tag)
    else:
        point = cm.BrokerDown(m, "failure:first-state-write", tag)
    final = point.expect().assignments[point.topic]
    point.stage()
    leader_before = h.ensemble.leader()
    hit: list[str] = []
    done = threading.Event()
    at: list[float] = []
    victim: list[local.Service] = []
    cut_pairs: list[tuple[netns.Host, netns.Host]] = []

    def strike(what: str) -> None:
        leader = h.ensemble.leader()
        if kind == "zk-leader-kill":
            victim.append(leader)
            h.ensemble.kill(leader)
        else:
            # the server the active controller's session is on, so that its session must move: a follower,
            # or the leader when that is where it is (the other two then elect a new leader)
            held = _server_of(h, c_address)
            target = held or next(s for s in h.ensemble.servers if s is not leader)
            victim.append(target)
            t_host = h.ensemble.host_of(target)
            for other in list(h.net.hosts.values()):
                if other is not t_host:
                    h.net.cut(t_host, other)
                    cut_pairs.append((t_host, other))
        at.append(time.monotonic())
        hit.append(what)
        done.set()

    def arm(path: str, seen: Callable[[dict[str, Any] | None], str | None]) -> None:
        assert m.zk is not None

        def watch(data: bytes | None, stat: Any) -> bool:
            if hit or done.is_set():
                return False
            what = seen(json.loads(data) if data else ({} if stat is not None else None))
            if what is None:
                return True
            hit.append("armed")  # once: the strike runs on a thread of its own, not kazoo's
            threading.Thread(target=strike, args=(what,), name="partitions-ensemble-strike", daemon=True).start()
            return False

        m.zk.DataWatch(path, watch)

    with Views(m, point.topic) as views:
        held_before = _server_of(h, c_address)
        sessions = _broker_sessions(m)
        if during == "reassign":
            rs = [4, 5, 3, 1, 2]
            arm(
                f"/brokers/topics/{point.topic}",
                lambda d: f"RS {rs} written" if d and d.get("partitions", {}).get("0") == rs else None,
            )
        else:
            broker = cm.BrokerDown.BROKER
            seen_registered = [False]

            def gone(d: dict[str, Any] | None) -> str | None:
                if d is not None:
                    seen_registered[0] = True
                    return None
                return f"broker {broker}'s registration gone" if seen_registered[0] else None

            arm(f"/brokers/ids/{broker}", gone)
        time.sleep(1.0)  # records produced and acknowledged before the fault
        point.fire()
        if not done.wait(90):
            row.problems.append(f"the fault's moment never came ({fault})")
            return row
        hit.remove("armed")
        struck = at[0]
        moved: list[float] = []
        served_by: list[str] = []

        def session_moved() -> bool:
            # a server lists its clients only while it serves (a server without a quorum answers "not serving")
            server = _server_of(h, c_address, but=victim[0])
            if server is not None:
                moved.append(time.monotonic() - struck)
                served_by.append(server.name)
                return True
            return False

        with contextlib.suppress(cm.MatrixError):
            cm.wait_until("the controller's session on another server", session_moved, 60, interval=0.5)
        expect = point.expect()
        try:
            cm.wait_converged(m, f"{fault}: the work finished", expect, 180)
        except cm.MatrixError as e:
            row.problems.append(str(e)[:400])
        converged = time.monotonic() - struck
        # the server comes back; the ensemble is whole again for what follows
        if kind == "zk-leader-kill":
            h.ensemble.restart(victim[0])
        else:
            for a, b in cut_pairs:
                h.net.heal(a, b)
        h.ensemble.leader()
        cm.wait_until("the test's own session back", lambda: m.zk is not None and m.zk.connected, 60)
        now_sessions = _broker_sessions(m)
        expired = sorted(b for b, z in sessions.items() if now_sessions.get(b, z) != z and b != cm.BrokerDown.BROKER)
        if during == "broker-failure":
            try:
                point.after()  # broker 2 started again, back in every ISR, views agreeing
            except cm.MatrixError as e:
                row.problems.append(f"after the broker's return: {str(e)[:400]}")
        time.sleep(1.0)
    if not c.alive():
        row.problems.append(f"controller {c.controller_id} exited {c.proc.returncode}: {c.text().splitlines()[-3:]}")
    now = int(m.zk.get("/controller_epoch")[0])
    if now != epoch:
        row.problems.append(f"controller epoch {epoch} -> {now}: the lease moved")
    row.problems += views.problems()
    row.problems += _answered_once(m, f"{tag}-r" if during == "reassign" else f"{tag}-c", epoch)
    row.problems += _repeated_requests(m)
    if during == "reassign":
        row.problems += m.problems(cm.Expect({point.topic: final}))
    # after a broker failure the returned broker is back in every ISR with the views agreeing (checked by
    # ``after``); leadership goes back to it only with a preferred-replica election, which is not this fault's
    row.problems += _replica_problems(h, m)
    role = "leader" if victim[0] is leader_before else "follower"
    was_on = held_before.name if held_before else "?"
    session = (
        f"its session (on {was_on}) served by {served_by[0]} {moved[0]:.1f} s after"
        if moved
        else f"its session (on {was_on}) not seen on another server"
    )
    struck_how = "killed" if kind == "zk-leader-kill" else "cut off"
    row.outcome = (
        f"{victim[0].name} ({role}) {struck_how} at {hit[0]}; controller kept epoch {epoch}, {session}; "
        f"broker sessions expired: {expired or 'none'}"
    )
    row.seconds = round(converged, 1)
    log(f"{row.fault}: {row.outcome}; converged {converged:.1f} s after; problems {row.problems[:3]}")
    return row


def quorum_cut(h: Hosts, m: cm.Matrix, log: Callable[[str], None] = print) -> Row:
    """``zk-quorum-cut:reassign``: the server holding the active controller's session cut off from the other
    two servers only (its clients still reach it), a standby waiting, as a reassignment is sent. The server
    answers its clients' pings until it gives up on its quorum (``syncLimit × tickTime``, 10 s here) while
    the leader expires their sessions after the session timeout (6 s here): the controller may be fenced.
    Either it keeps its lease and finishes, or it exits with code 3 and one line and the standby finishes;
    nothing of its epoch after the standby's, every command answered once, every server's tree the same."""
    row = Row("zk-quorum-cut:reassign")
    assert m.zk is not None and m.active is not None
    a = m.active
    standby = m.start_controller()
    m.wait_waiting(standby)
    epoch = int(m.zk.get("/controller_epoch")[0])
    tag = f"eq{len(m.controllers)}"
    point = cm.Reassign(m, "reassign:rs-written", tag)
    point.stage()
    leader = h.ensemble.leader()
    held = _server_of(h, _controller_host(h, a).address)
    target = held or next(s for s in h.ensemble.servers if s is not leader)
    role = "leader" if target is leader else "follower"
    t_host = h.ensemble.host_of(target)
    others = [x for x in h.ensemble.hosts if x is not t_host]
    sessions = _broker_sessions(m)
    mark = len(a.text())
    with Views(m, point.topic) as views:
        time.sleep(1.0)
        for x in others:
            h.net.cut(t_host, x)
        cut_at = time.monotonic()
        point.fire()
        try:
            cm.wait_converged(m, "the reassignment finished", point.expect(), 240)
        except cm.MatrixError as e:
            row.problems.append(str(e)[:400])
        converged = time.monotonic() - cut_at
        for x in others:
            h.net.heal(t_host, x)
        h.ensemble.leader()
        cm.wait_until("the test's own session back", lambda: m.zk is not None and m.zk.connected, 60)
        time.sleep(1.0)
    now = int(m.zk.get("/controller_epoch")[0])
    if now == epoch:
        what = f"kept its lease (epoch {epoch})"
        if not a.alive():
            row.problems.append(f"controller {a.controller_id} exited {a.proc.returncode} with the epoch unchanged")
        standby.stop()
    else:
        # it ran batches while its server still answered, so it logged before its one last line
        try:
            rc = a.proc.wait(90)
        except subprocess.TimeoutExpired:
            rc = None
        said = [line for line in a.text()[mark:].splitlines() if line.strip()]
        last = said[-1] if said else ""
        outcome = f"exit {rc}: {last[:90]}"
        if rc != 3 or "was fenced" not in last or "Traceback" in a.text()[mark:]:
            row.problems.append(f"controller {a.controller_id} exited {rc} saying {said[-3:]}")
        m.wait_loaded(standby, 60)
        what = f"fenced ({outcome}); the standby took over at epoch {now} and finished"
        row.problems += _in_order(m, epoch, now)
    now_sessions = _broker_sessions(m)
    expired = sorted(b for b, z in sessions.items() if now_sessions.get(b, z) != z)
    row.problems += views.problems()
    row.problems += _answered_once(m, f"{tag}-r")
    row.problems += _repeated_requests(m)
    row.problems += m.problems(cm.Expect({point.topic: point.expect().assignments[point.topic]}))
    row.problems += _replica_problems(h, m)
    row.outcome = (
        f"{target.name} ({role}) cut off from the other two servers, not from its clients, as the reassignment "
        f"was sent; the controller {what}; broker sessions expired: {expired or 'none'}"
    )
    row.seconds = round(converged, 1)
    log(f"{row.fault}: {row.outcome}; converged {converged:.1f} s after; problems {row.problems[:3]}")
    return row


# ---------------------------------------------------------------------------- main


def run(faults: list[str], run_dir: Path, log: Callable[[str], None] = print) -> list[Row]:
    """``faults`` in order on one cluster (one Matrix: its controllers and brokers), on fresh hosts."""
    rows = []
    with hosts(run_dir) as h:
        m = h.matrix(run_dir / "cluster")
        try:
            m.open()
            first = m.start_controller()
            m.wait_loaded(first)
            for fault in faults:
                if fault.startswith("zk-cut:"):
                    rows.append(zk_cut(h, m, fault.split(":", 1)[1], log))
                elif fault == "broker-zk-cut":
                    rows.append(broker_zk_cut(h, m, log))
                elif fault == "kafka-cut":
                    rows.append(kafka_cut(h, m, log=log))
                elif fault == "kafka-cut:in-batch":
                    rows.append(kafka_cut_in_batch(h, m, log=log))
                elif fault == "zk-quorum-cut:reassign":
                    rows.append(quorum_cut(h, m, log))
                elif fault.split(":")[0] in ("zk-leader-kill", "zk-minority-cut") and fault in FAULTS:
                    rows.append(ensemble_fault(h, m, fault, log))
                else:
                    raise ValueError(f"unknown fault {fault!r}; known: {', '.join(FAULTS)}")
        finally:
            m.close()
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--faults", default=",".join(FAULTS), help="comma-separated faults (default: all)")
    args = ap.parse_args()
    faults = [f for f in args.faults.split(",") if f]
    for f in faults:
        if f not in FAULTS:
            ap.error(f"--faults: unknown fault {f!r}; known: {', '.join(FAULTS)}")
    if os.geteuid() != 0:
        ap.error("network namespaces need root")
    from bench.harness import machine_info, print_table, spark_scratch, write_results

    spark_scratch()
    run_dir = Path(tempfile.mkdtemp(prefix="livectl-partitions-"))
    rows = run(faults, run_dir)
    print()
    print_table(["fault", "what happened", "cut→converged s", "invariants held"], [r.cells() for r in rows])
    for r in rows:
        if r.problems:
            print(f"{r.fault}: {r.problems}")
    write_results("partitions", {"machine": machine_info(), "rows": [r.__dict__ for r in rows]})
    return 0 if all(not r.problems for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
