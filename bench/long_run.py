"""A long run (issue 41, item 6): a cluster of ``--partitions`` partitions under a steady mix for ``--minutes``.

Every process is real, on the crash matrix's harness (:mod:`bench.harness`): ZooKeeper (Debian's) and Apache
Kafka, ``--brokers`` simulated broker processes (``python -m simbrokers``, one each) and two ``livectl run``
controllers on one checkpoint, the active one and a standby waiting for the lease. The partitions are written
in Kafka's layout before the first controller starts (``--per-topic`` partitions a topic, replication factor
``--replication-factor``); the first controller loads them from ZooKeeper and sends them to the brokers.

The mix, on a schedule from the start of the run:

- an admin command every ``--command-interval`` seconds, in turn: create a topic (3 partitions, replication
  factor 2, placed by the controller), alter a topic's config, add a partition, reassign a partition (one
  replica moved to a live broker), delete a topic. Each takes a created topic with no command in flight
  (the oldest for a deletion); with none, it creates one. Each command has a request id of its own.
- a fault every ``--fault-interval`` seconds, in turn: a simulated broker SIGKILLed (its session expires) and
  started again ``--broker-down-seconds`` later, the brokers in turn; then a controller takeover: the
  active controller's process group SIGKILLed, the standby elected once its session expires, and a new
  standby started (the next takeover waits until it waits for the lease).

Sampled every ``--sample-seconds``, per process, from ``/proc/PID/status`` (``VmRSS``, ``Threads``) and
``/proc/PID/fd`` (:mod:`bench.harness.procstat`): the active and the standby controller's Python, Spark JVM
(the driver; in ``local[2]`` the executors too) and Python workers (Spark's worker daemon and the workers it
forked), and every simulated broker process. Per window of ``--window-seconds``: each of those (memory: the
median of the window's samples; threads and descriptors: the most seen), and the admin latency (the command
sent → its final answer on the admin-results topic, read committed) p50 / p99 of the commands sent in it.
At each window's end, ZooKeeper's partition states, ``/controller_epoch`` and each broker's own view (its
status file) are read for the epoch checks.

Checked (each failure is a problem; the exit code is 1 with any):

- every admin command answered exactly once with its final result (the admin-results topic read back from the
  start, read committed: one ``ok`` per request id, at most one ``in_progress`` before it, nothing else);
- leader epochs only grow (each partition in ZooKeeper, window to window; each broker incarnation's own
  view), the controller epoch only grows and goes up at every takeover, and no two brokers lead one
  partition at one leader epoch in their views;
- at the end, every broker back and the commands drained: ZooKeeper and the brokers agree (every partition's
  leader and ISR live replicas, the ISR every replica; each replica's view at ZooKeeper's leader and leader
  epoch, the leader's at ZooKeeper's ISR; no broker hosting what is not assigned to it; no reassignment or
  deletion left; the created topics there with their partitions, the deleted ones gone).

Growth per hour: the least-squares slope of each per-window figure over the windows after the first
``--warmup-windows``, and, for memory, the slope within each process's life pooled over processes (a
takeover replaces the active controller's JVM and a broker's restart its process: the windows' figures then
jump, which the pooled slope leaves out; a process's first window of life, or of being active, is its
warm-up).

Run::

    .venv/bin/python -m bench long_run                                   # one hour at 100k partitions
    .venv/bin/python -m bench long_run --short                           # the CI short form: 75 s at 2,000

Prints a table per window and the growth per hour; writes ``bench/results/long_run-<UTC stamp>.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kafka import KafkaConsumer, TopicPartition
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from bench.harness import procstat
from bench.harness.matrix import ControllerProcess, Matrix, MatrixError, wait_until
from bench.harness.services import Layout, prepare_tree
from core import events as ev
from core.kafka import zkdata
from core.model import PartitionTarget
from core.placement import BrokerRack, assign_replicas
from streaming.settings import Settings

KINDS = ("create", "alter_config", "add_partitions", "reassign", "delete")
FAULTS = ("broker", "takeover")
#: the created topics kept at most: with one creation and one deletion in every five commands the count stays
#: near its start, and the fallbacks (nothing to act on: create) cannot grow it past this
MAX_POOL = 12
CREATED_PARTITIONS = 3
CREATED_RF = 2


@dataclass(frozen=True)
class Config:
    minutes: float = 60.0
    partitions: int = 100_000
    brokers: int = 5
    replication_factor: int = 3
    per_topic: int = 100
    window_seconds: float = 300.0
    warmup_windows: int = 1
    sample_seconds: float = 10.0
    command_interval: float = 3.0
    fault_interval: float = 150.0
    first_fault: float = 0.0  # seconds into the run; 0: half a fault interval
    broker_down_seconds: float = 30.0
    session_timeout_ms: int = 18_000
    produce_rate: float = 0.0
    # at 100k partitions a simulated broker process holds ~60,000 replicas: ticking them every 50 ms, fetching
    # every 50 ms and writing a 13 MB status file every second (simbrokers' defaults) would take a core each
    broker_tick_ms: int = 1000
    broker_fetch_interval_ms: int = 5000
    broker_status_interval_ms: int = 10_000
    replica_lag_time_max_ms: int = 30_000
    #: settings for both controllers over the shipped ones and the harness's
    controller_settings: tuple[tuple[str, str], ...] = ()
    #: how long the end may take: the commands answered, the cluster in agreement
    settle_seconds: float = 600.0

    def broker_args(self) -> list[str]:
        return [
            "--produce-rate",
            str(self.produce_rate),
            "--tick-ms",
            str(self.broker_tick_ms),
            "--fetch-interval-ms",
            str(self.broker_fetch_interval_ms),
            "--status-interval-ms",
            str(self.broker_status_interval_ms),
            "--replica-lag-time-max-ms",
            str(self.replica_lag_time_max_ms),
        ]

    def controller_extra(self) -> dict[str, Any]:
        """The shipped trigger interval and transaction size (the harness's are the crash matrix's), then ours."""
        shipped = Settings.load()
        return {
            "trigger_interval": shipped.trigger_interval,
            "zk_ops_per_transaction": shipped.zk_ops_per_transaction,
            **dict(self.controller_settings),
        }


#: the short form CI runs (tests/e2e/test_long_run.py): 2,000 partitions for 75 s, a command every 2 s (each kind
#: several times), a broker killed and back twice and one takeover, windows of 15 s, sessions of 6 s
SHORT = Config(
    minutes=1.25,
    partitions=2000,
    window_seconds=15.0,
    sample_seconds=2.5,
    command_interval=2.0,
    fault_interval=26.0,
    first_fault=5.0,
    broker_down_seconds=6.0,
    session_timeout_ms=6000,
    broker_tick_ms=50,
    broker_fetch_interval_ms=50,
    broker_status_interval_ms=1000,
    replica_lag_time_max_ms=10_000,
    settle_seconds=120.0,
)
#: how much the threads and open descriptors of a process role may be above the first window after the warm-up in
#: the last one, in the short form, as (share, plus). The Python processes hold theirs (15 / 25 for the driver's
#: Python, ~13 / ~27 a broker): a few more at most. The Spark driver JVM's thread pools were still growing
#: in its first minutes (218 -> 284 threads in 45 s, one JVM, measured), its ~400 descriptors were not: a
#: quarter more threads and a tenth more descriptors, each plus a few (a takeover also puts another JVM in the role)
SHORT_SLACK: dict[str, dict[str, tuple[float, int]]] = {
    "active_jvm": {"threads": (0.3, 16), "fds": (0.1, 32)},
    "active_python": {"threads": (0.0, 4), "fds": (0.0, 8)},
    "brokers": {"threads": (0.0, 8), "fds": (0.0, 16)},
}


def within_slack(role: str, metric: str, first: float, last: float) -> bool:
    """Whether ``last`` is no more than :data:`SHORT_SLACK` above ``first`` for ``role``'s ``metric``."""
    share, plus = SHORT_SLACK[role][metric]
    return last <= first * (1 + share) + plus


# ---------------------------------------------------------------------------- what is recorded


@dataclass
class Command:
    request_id: str
    kind: str
    topic: str
    sent: float  # seconds into the run
    answered: float | None = None
    status: str | None = None


@dataclass
class Sample:
    t: float  # seconds into the run
    #: role -> usage: ``active_python``, ``active_jvm``, ``active_workers``, ``standby_python``, ``standby_jvm``,
    #: ``standby_workers``, ``brokers`` (all broker processes together)
    roles: dict[str, procstat.Usage]
    #: (kind, pid, role) -> usage of each process on its own, for the growth within each process's life
    processes: dict[tuple[str, int, str], procstat.Usage]


@dataclass
class Window:
    index: int
    start: float
    end: float
    commands: int = 0
    answered: int = 0
    p50_s: float | None = None
    p99_s: float | None = None
    max_s: float | None = None
    events: list[str] = field(default_factory=list)
    #: role -> {"rss_mib", "threads", "fds", "processes"}
    roles: dict[str, dict[str, float]] = field(default_factory=dict)


@dataclass
class Report:
    config: dict[str, Any]
    started_at: str = ""
    setup_s: float = 0.0
    windows: list[Window] = field(default_factory=list)
    #: "role.metric" -> growth per hour over the windows after the warm-up
    growth_per_hour: dict[str, float | None] = field(default_factory=dict)
    #: kind -> pooled within-process memory growth (MiB per hour) and what it was fitted on
    memory_growth_within_process: dict[str, dict[str, Any]] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    commands: dict[str, int] = field(default_factory=dict)
    latency_s: dict[str, float | None] = field(default_factory=dict)
    controller_epochs: list[int] = field(default_factory=list)
    settle_s: float = 0.0
    problems: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------- the cluster's tree and views


def layout(cfg: Config, broker_ids: Sequence[int]) -> Layout:
    """The prepared partitions: ``cfg.partitions`` in topics of ``cfg.per_topic`` (Kafka's placement)."""
    racks = [BrokerRack(b) for b in broker_ids]
    per_topic = min(cfg.per_topic, cfg.partitions)
    topics: dict[str, dict[int, tuple[int, ...]]] = {}
    for t in range(max(1, cfg.partitions // per_topic)):
        placed = assign_replicas(racks, per_topic, cfg.replication_factor, start_index=t % len(racks))
        topics[f"base-{t:05d}"] = {p: tuple(r) for p, r in placed.items()}
    return Layout(topics)


@dataclass
class Tree:
    """ZooKeeper's view of every topic: replicas and state of each partition."""

    assignments: dict[str, dict[int, tuple[int, ...]]]
    #: topics with adding or removing replicas in their znode
    moving: list[str]
    #: (topic, partition) -> the state znode's JSON
    states: dict[tuple[str, int], dict[str, Any]]


def read_tree(zk: KazooClient, window: int = 5000) -> Tree:
    """Every topic znode and partition state, read with pipelined gets (a topic or state deleted meanwhile
    is left out)."""
    topics = zk.get_children(zkdata.BROKER_TOPICS) if zk.exists(zkdata.BROKER_TOPICS) else []
    assignments: dict[str, dict[int, tuple[int, ...]]] = {}
    moving: list[str] = []
    for i in range(0, len(topics), window):
        handles = [(t, zk.get_async(zkdata.topic_path(t))) for t in topics[i : i + window]]
        for t, h in handles:
            with contextlib.suppress(NoNodeError):
                data = json.loads(h.get(timeout=60)[0])
                assignments[t] = {int(p): tuple(r) for p, r in data.get("partitions", {}).items()}
                if data.get("adding_replicas") or data.get("removing_replicas"):
                    moving.append(t)
    keys = [(t, p) for t, parts in assignments.items() for p in parts]
    states: dict[tuple[str, int], dict[str, Any]] = {}
    for i in range(0, len(keys), window):
        handles2 = [(k, zk.get_async(zkdata.partition_state_path(*k))) for k in keys[i : i + window]]
        for k, h in handles2:
            with contextlib.suppress(NoNodeError):
                states[k] = json.loads(h.get(timeout=60)[0])
    return Tree(assignments, moving, states)


def split_tp(name: str) -> tuple[str, int]:
    topic, _, p = name.rpartition("-")
    return topic, int(p)


def agreement_problems(m: Matrix, tree: Tree, expected_topics: Mapping[str, int], gone: Sequence[str]) -> list[str]:
    """Where ZooKeeper and the brokers' own views disagree, every broker being registered (empty: they agree).
    ``expected_topics``: created topics that must be there with that many partitions; ``gone``: deleted ones."""
    out: list[str] = []
    assert m.zk is not None
    live = set(m.registered_brokers())
    out += [f"broker {b} not registered" for b in sorted(set(m.broker_ids) - live)]
    views = m.views()
    out += [f"broker {b} has no view (status file)" for b in sorted(live - set(views))]
    if m.zk.exists("/admin/reassign_partitions"):
        out.append("/admin/reassign_partitions still there")
    pending = m.zk.get_children("/admin/delete_topics") if m.zk.exists("/admin/delete_topics") else []
    out += [f"deletion of {t} pending" for t in pending[:5]]
    out += [f"{t}: adding or removing replicas" for t in tree.moving[:5]]
    for t, n in sorted(expected_topics.items()):
        have = len(tree.assignments.get(t, {}))
        if have != n:
            out.append(f"{t}: {have} partitions in ZooKeeper, want {n}")
    out += [f"{t} still in ZooKeeper" for t in gone if t in tree.assignments]
    hosted_by: dict[int, set[tuple[str, int]]] = {
        b: {split_tp(k) for k in v.get("partitions", {})} for b, v in views.items()
    }
    bad: list[str] = []
    for t, parts in tree.assignments.items():
        for p, replicas in parts.items():
            state = tree.states.get((t, p))
            if state is None:
                bad.append(f"{t}-{p}: no state znode")
                continue
            if state["leader"] not in replicas or state["leader"] not in live:
                bad.append(f"{t}-{p}: leader {state['leader']} of replicas {list(replicas)}")
            if set(state["isr"]) != set(replicas):
                bad.append(f"{t}-{p}: ISR {state['isr']}, replicas {list(replicas)}")
            for b in replicas:
                v = views.get(b, {}).get("partitions", {}).get(f"{t}-{p}")
                if v is None:
                    bad.append(f"broker {b} does not host {t}-{p}")
                elif (v["leader"], v["leader_epoch"]) != (state["leader"], state["leader_epoch"]):
                    bad.append(
                        f"broker {b} sees {t}-{p} led by {v['leader']} at {v['leader_epoch']}, "
                        f"ZooKeeper {state['leader']} at {state['leader_epoch']}"
                    )
                elif b == state["leader"] and set(v["isr"]) != set(state["isr"]):
                    bad.append(f"leader {b} of {t}-{p} has ISR {v['isr']}, ZooKeeper {state['isr']}")
    for b, hosted in sorted(hosted_by.items()):
        extra = sorted(tp for tp in hosted if b not in tree.assignments.get(tp[0], {}).get(tp[1], ()))
        if extra:
            bad.append(f"broker {b} hosts {len(extra)} partition(s) not assigned to it: {extra[:3]}")
    if bad:
        out.append(f"{len(bad)} disagreement(s): {bad[:8]}")
    return out


class Epochs:
    """What the epoch checks have seen so far: each partition's leader epoch in ZooKeeper, each broker
    incarnation's view of each partition (leader epoch, controller epoch), and the controller epoch."""

    def __init__(self) -> None:
        self.zk: dict[tuple[str, int], int] = {}
        self.views: dict[tuple[int, int, str], tuple[int, int]] = {}
        #: (partition, leader epoch) -> the broker seen leading it
        self.leaders: dict[tuple[str, int], int] = {}
        self.controller_epoch = 0
        self.problems: list[str] = []
        self._lock = threading.Lock()

    def controller(self, epoch: int, where: str) -> None:
        with self._lock:
            if epoch < self.controller_epoch:
                self.problems.append(f"{where}: controller epoch {epoch} after {self.controller_epoch}")
            self.controller_epoch = max(self.controller_epoch, epoch)

    def see(self, tree: Tree, views: Mapping[int, Mapping[str, Any]], where: str) -> None:
        with self._lock:
            for k, state in tree.states.items():
                before = self.zk.get(k, -1)
                if state["leader_epoch"] < before:
                    self.problems.append(f"{where}: {k[0]}-{k[1]} leader epoch {state['leader_epoch']} after {before}")
                self.zk[k] = max(before, state["leader_epoch"])
            for b, view in views.items():
                incarnation = int(view.get("broker_epoch", -1))
                for name, v in view.get("partitions", {}).items():
                    key = (b, incarnation, name)
                    now = (int(v["leader_epoch"]), int(view.get("controller_epoch", -1)))
                    was = self.views.get(key)
                    if was is not None and (now[0] < was[0] or now[1] < was[1]):
                        self.problems.append(f"{where}: broker {b} (epoch {incarnation}) {name} went {was} -> {now}")
                    self.views[key] = now if was is None else (max(now[0], was[0]), max(now[1], was[1]))
                    if v["role"] == "leader":
                        other = self.leaders.setdefault((name, now[0]), b)
                        if other != b:
                            self.problems.append(f"{where}: brokers {other} and {b} both lead {name} at {now[0]}")


# ---------------------------------------------------------------------------- the run


class LongRun:
    def __init__(self, m: Matrix, cfg: Config, log: Callable[[str], None] = print) -> None:
        self.m, self.cfg, self.log = m, cfg, log
        self.start = 0.0
        self.end = 0.0
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.commands: dict[str, Command] = {}
        #: created topic -> partitions, answered and not being deleted
        self.pool: dict[str, int] = {}
        #: topic -> the request id of its command in flight
        self.busy: dict[str, str] = {}
        self.deleted: list[str] = []
        self.down: set[int] = set()
        self.standby: ControllerProcess | None = None
        self.events: list[dict[str, Any]] = []
        self.samples: list[Sample] = []
        self.epochs = Epochs()
        self.errors: list[str] = []
        #: called after each window's checks (``python -m bench long_run`` writes the windows so far)
        self.on_window: Callable[[LongRun], None] | None = None
        self._n = 0

    def now(self) -> float:
        return time.monotonic() - self.start

    def event(self, what: str, **details: Any) -> None:
        e = {"t": round(self.now(), 1), "what": what, **details}
        with self.lock:
            self.events.append(e)
        self.log(f"[{e['t']:7.1f} s] {what} {details if details else ''}")

    # ------------------------------------------------------------------ admin commands

    def _results(self) -> None:
        """Tail the admin-results topic (read committed): when each command got its final answer."""
        c = KafkaConsumer(
            bootstrap_servers=self.m.bootstrap,
            enable_auto_commit=False,
            group_id=None,
            isolation_level="read_committed",
        )
        try:
            tps = [
                TopicPartition(self.m.topics["results"], p)
                for p in sorted(c.partitions_for_topic(self.m.topics["results"]) or {0})
            ]
            c.assign(tps)
            c.seek_to_beginning(*tps)
            while not self.stop.is_set() or self._unanswered():
                try:
                    polled = c.poll(timeout_ms=500)
                except Exception as e:  # Kafka busy: look again (the end reads the topic back anyway)
                    self.log(f"admin-results: {e!r}")
                    time.sleep(1)
                    continue
                for records in polled.values():
                    for r in records:
                        msg = json.loads(r.value)
                        with self.lock:
                            cmd = self.commands.get(msg.get("request_id", ""))
                            if cmd is None or msg.get("status") == "in_progress" or cmd.answered is not None:
                                continue
                            cmd.answered, cmd.status = self.now(), str(msg.get("status"))
                            self._settle(cmd)
                if self.stop.is_set() and time.monotonic() > self.end + self.cfg.settle_seconds:
                    return
        finally:
            c.close()

    def _unanswered(self) -> int:
        with self.lock:
            return sum(1 for c in self.commands.values() if c.answered is None)

    def _settle(self, cmd: Command) -> None:
        """Under the lock: what an answer changes in the pool."""
        if self.busy.get(cmd.topic) == cmd.request_id:
            del self.busy[cmd.topic]
        if cmd.status != "ok":
            return
        if cmd.kind == "create":
            self.pool[cmd.topic] = CREATED_PARTITIONS
        elif cmd.kind == "add_partitions" and cmd.topic in self.pool:
            self.pool[cmd.topic] += 1

    def _next_command(self) -> ev.AdminCommand | None:
        """The next command of the mix, marked in flight (under the lock)."""
        kind = KINDS[self._n % len(KINDS)]
        rid = f"lr-{self._n:06d}"
        self._n += 1
        idle = sorted(t for t in self.pool if t not in self.busy)
        if kind == "create" and len(self.pool) + len(self.busy) >= MAX_POOL:
            kind = "delete"
        if kind != "create" and not idle:
            kind = "create"
        if kind == "create":
            topic = f"lr-topic-{rid[3:]}"
            cmd: ev.AdminCommand = ev.CreateTopic(rid, topic, CREATED_PARTITIONS, CREATED_RF)
        elif kind == "delete":
            topic = idle[0]
            del self.pool[topic]
            self.deleted.append(topic)
            cmd = ev.DeleteTopic(rid, topic)
        else:
            topic = idle[self._n % len(idle)]
            if kind == "alter_config":
                cmd = ev.AlterTopicConfig(rid, topic, (("retention.ms", str(3_600_000 + self._n)),))
            elif kind == "add_partitions":
                cmd = ev.CreatePartitions(rid, topic, self.pool[topic] + 1)
            else:
                target = self._reassign_target(topic)
                if target is None:
                    return None
                cmd = ev.ReassignPartitions(rid, (PartitionTarget(topic, 0, target),))
        self.busy[topic] = rid
        self.commands[rid] = Command(rid, kind, topic, self.now())
        return cmd

    def _reassign_target(self, topic: str) -> tuple[int, ...] | None:
        """Partition 0's replicas with its last one replaced by a live broker that holds none of them."""
        znode, _ = self.m.znode(zkdata.topic_path(topic))
        if znode is None:
            return None
        current = tuple(znode["partitions"]["0"])
        spare = [b for b in self.m.broker_ids if b not in current and b not in self.down]
        if not spare:
            return None
        return (*current[:-1], spare[self._n % len(spare)])

    def _send_commands(self) -> None:
        due = 0.0
        while not self.stop.is_set():
            with self.lock:
                cmd = self._next_command()
            if cmd is not None:
                try:
                    self.m.send_admin(cmd)
                except Exception as e:  # Kafka did not take it: never sent, so never to be answered
                    with self.lock:
                        gone = self.commands.pop(cmd.request_id)
                        if self.busy.get(gone.topic) == gone.request_id:
                            del self.busy[gone.topic]
                    self.errors.append(f"{cmd.request_id} could not be sent: {e!r}")
            due += self.cfg.command_interval
            self.stop.wait(max(0.0, due - self.now()))

    # ------------------------------------------------------------------ faults

    def _faults(self) -> None:
        due = self.cfg.first_fault or self.cfg.fault_interval / 2
        n = 0
        while not self.stop.wait(max(0.0, due - self.now())):
            kind = FAULTS[n % len(FAULTS)]
            try:
                if kind == "broker":
                    self._broker_fault(self.m.broker_ids[(n // len(FAULTS)) % len(self.m.broker_ids)])
                else:
                    self._takeover()
            except Exception as e:  # said in the report; the run goes on
                self.errors.append(f"{kind} fault at {self.now():.0f} s: {e!r:.500}")
                self.log(f"fault failed: {e}")
            n += 1
            due = max(due + self.cfg.fault_interval, self.now())

    def _broker_fault(self, b: int) -> None:
        with self.lock:
            self.down.add(b)
        proc = self.m.brokers[b]
        proc.signal(signal.SIGKILL)
        with contextlib.suppress(Exception):
            proc.proc.wait(30)
        self.event("broker-kill", broker=b)
        wait_until(f"broker {b}'s registration gone", lambda: b not in self.m.registered_brokers(), 120)
        self.event("broker-gone", broker=b)
        self.stop.wait(max(0.0, self.cfg.broker_down_seconds))
        self.m.start_broker(b)
        wait_until(f"broker {b} registered again", lambda: b in self.m.registered_brokers(), 120)
        with self.lock:
            self.down.discard(b)
        self.event("broker-back", broker=b)

    def _takeover(self) -> None:
        m = self.m
        assert m.zk is not None and m.active is not None and self.standby is not None
        m.wait_waiting(self.standby, timeout=600)
        old, new = m.active, self.standby
        before = int(m.zk.get("/controller_epoch")[0])
        self.epochs.controller(before, "before a takeover")
        old.kill()
        killed = time.monotonic()
        self.event("takeover-kill", controller=old.controller_id, epoch=before)
        m.wait_loaded(new, timeout=600)
        after = int(m.zk.get("/controller_epoch")[0])
        self.epochs.controller(after, "after a takeover")
        if after <= before:
            self.epochs.problems.append(f"takeover at {self.now():.0f} s: controller epoch {before} -> {after}")
        self.event(
            "takeover-loaded", controller=new.controller_id, epoch=after, took_s=round(time.monotonic() - killed, 1)
        )
        self.standby = m.start_controller(self.cfg.controller_extra())
        self.event("standby-started", controller=self.standby.controller_id)

    # ------------------------------------------------------------------ sampling and windows

    def sample(self) -> Sample:
        parents = procstat.parents()
        roles: dict[str, procstat.Usage] = {}
        processes: dict[tuple[str, int, str], procstat.Usage] = {}
        for role, c in (("active", self.m.active), ("standby", self.standby)):
            if c is None or not c.alive() or (role == "standby" and c is self.m.active):
                continue
            tree = procstat.controller_tree(c.proc.pid, parents)
            if tree.driver_python is not None:
                roles[f"{role}_python"] = tree.driver_python
                processes[("controller_python", c.proc.pid, role)] = tree.driver_python
            if tree.jvm.processes:
                roles[f"{role}_jvm"] = tree.jvm
                processes[("controller_jvm", c.proc.pid, role)] = tree.jvm
            roles[f"{role}_workers"] = tree.workers
        brokers = procstat.NOTHING
        for b in self.m.broker_ids:
            proc = self.m.brokers.get(b)
            u = procstat.usage(proc.pid) if proc is not None and proc.running() else None
            if u is not None and proc is not None:
                brokers = brokers + u
                processes[("broker", proc.pid, str(b))] = u
        roles["brokers"] = brokers
        return Sample(self.now(), roles, processes)

    def _sampler(self) -> None:
        while not self.stop.wait(max(0.0, self.cfg.sample_seconds - self.now() % self.cfg.sample_seconds)):
            s = self.sample()
            with self.lock:
                self.samples.append(s)

    def check_epochs(self, where: str) -> None:
        assert self.m.zk is not None
        self.epochs.controller(int(self.m.zk.get("/controller_epoch")[0]), where)
        self.epochs.see(read_tree(self.m.zk), self.m.views(), where)

    def _window_checks(self) -> None:
        k = 1
        while not self.stop.wait(max(0.0, k * self.cfg.window_seconds - self.now())):
            try:
                self.check_epochs(f"window {k - 1}")
            except Exception as e:  # a read that failed is said, not a reason to stop the run
                self.errors.append(f"window {k - 1}'s epoch check: {e!r}")
            if self.on_window is not None:
                self.on_window(self)
            k += 1

    def windows(self, upto: float | None = None) -> list[Window]:
        """The windows of the run (``upto``: of its first ``upto`` seconds, while it runs)."""
        span = (self.end - self.start) if upto is None else upto
        n = max(1, round(span / self.cfg.window_seconds))
        w = self.cfg.window_seconds
        with self.lock:
            commands = [dataclasses.replace(c) for c in self.commands.values()]
            samples = list(self.samples)
            events = list(self.events)
        out = [Window(i, round(i * w, 1), round(min((i + 1) * w, span), 1)) for i in range(n)]
        for c in commands:
            if c.sent >= span:
                continue
            win = out[min(int(c.sent // w), n - 1)]
            win.commands += 1
            if c.answered is not None:
                win.answered += 1
        for win in out:
            lat = sorted(
                c.answered - c.sent
                for c in commands
                if c.answered is not None and win.start <= c.sent < (win.end if win.index < n - 1 else span + 1e9)
            )
            if lat:
                win.p50_s, win.p99_s, win.max_s = round(_pct(lat, 0.5), 2), round(_pct(lat, 0.99), 2), round(lat[-1], 2)
            in_window = [s for s in samples if win.start <= s.t < (win.end if win.index < n - 1 else span + 1e9)]
            roles = sorted({r for s in in_window for r in s.roles})
            for r in roles:
                us = [s.roles[r] for s in in_window if r in s.roles]
                win.roles[r] = {
                    "rss_mib": round(statistics.median(u.rss_kib for u in us) / 1024, 1),
                    "threads": max(u.threads for u in us),
                    "fds": max(u.fds for u in us),
                    "processes": max(u.processes for u in us),
                }
        for e in events:
            out[min(int(e["t"] // w), n - 1)].events.append(_short(e))
        return out

    # ------------------------------------------------------------------ the whole run

    def run(self, report: Report) -> None:
        cfg, m = self.cfg, self.m
        self.standby = m.start_controller(cfg.controller_extra())
        self.check_epochs("start")
        self.start = time.monotonic()
        self.end = self.start + cfg.minutes * 60
        threads = [
            threading.Thread(target=self._results, name="long-run-results", daemon=True),
            threading.Thread(target=self._send_commands, name="long-run-commands", daemon=True),
            threading.Thread(target=self._faults, name="long-run-faults", daemon=True),
            threading.Thread(target=self._sampler, name="long-run-sampler", daemon=True),
            threading.Thread(target=self._window_checks, name="long-run-windows", daemon=True),
        ]
        for t in threads:
            t.start()
        self.stop.wait(max(0.0, self.end - time.monotonic()))
        self.stop.set()
        self.end = time.monotonic()
        self.log(f"run over after {self.now():.0f} s: {len(self.commands)} commands sent; settling")
        for t in threads[1:]:
            t.join(cfg.settle_seconds)  # a fault in progress finishes: its broker back, its standby started
        settle_from = time.monotonic()
        settle_by = settle_from + cfg.settle_seconds
        threads[0].join(max(1.0, settle_by - time.monotonic()))
        report.windows = self.windows()
        self.finish(report, settle_by)
        report.settle_s = round(time.monotonic() - settle_from, 1)

    def finish(self, report: Report, settle_by: float) -> None:
        m = self.m
        assert m.zk is not None
        problems = report.problems
        problems += self.errors
        # every command answered exactly once: the topic read back from its start
        finals, in_progress, unknown = read_answers(m)
        for rid, c in sorted(self.commands.items()):
            got = finals.get(rid, [])
            if len(got) != 1:
                problems.append(f"{rid} ({c.kind} {c.topic}) answered {len(got)} times: {got}")
            elif got[0] != "ok":
                problems.append(f"{rid} ({c.kind} {c.topic}) answered {got[0]}")
            if in_progress.get(rid, 0) > 1:
                problems.append(f"{rid} got {in_progress[rid]} in_progress answers")
        problems += [f"an answer to {rid}, never sent" for rid in unknown[:5]]
        report.commands = {
            "sent": len(self.commands),
            "answered_once": sum(1 for rid in self.commands if len(finals.get(rid, [])) == 1),
            **{k: sum(1 for c in self.commands.values() if c.kind == k) for k in KINDS},
        }
        lat = sorted(c.answered - c.sent for c in self.commands.values() if c.answered is not None)
        report.latency_s = {
            "p50": round(_pct(lat, 0.5), 2) if lat else None,
            "p99": round(_pct(lat, 0.99), 2) if lat else None,
            "max": round(lat[-1], 2) if lat else None,
        }
        # ZooKeeper and the brokers agree
        with self.lock:
            expected = dict(self.pool)
            gone = list(self.deleted)
        expected.update({t: n for t, n in (self._created_partitions().items()) if t not in gone})
        last: list[str] = []

        def agreed() -> bool:
            assert m.zk is not None
            last[:] = agreement_problems(m, read_tree(m.zk), expected, gone)
            return not last

        try:
            wait_until("ZooKeeper and the brokers in agreement", agreed, max(30.0, settle_by - time.monotonic()), 5)
        except MatrixError:
            problems += [f"at the end: {p}" for p in last]
        try:
            self.check_epochs("end")
        except Exception as e:  # said, as the windows' checks are
            problems.append(f"the last epoch check: {e!r}")
        problems += self.epochs.problems
        report.controller_epochs = [e["epoch"] for e in self.events if e["what"] == "takeover-loaded"]
        report.events = list(self.events)
        report.growth_per_hour = window_growth(report.windows, self.cfg.warmup_windows, self.cfg.window_seconds)
        report.memory_growth_within_process = within_process_growth(self.samples, self.cfg.window_seconds)

    def _created_partitions(self) -> dict[str, int]:
        """Each created topic (answered ok) and its partitions after the additions answered ok."""
        out: dict[str, int] = {}
        for c in sorted(self.commands.values(), key=lambda c: c.request_id):
            if c.status != "ok":
                continue
            if c.kind == "create":
                out[c.topic] = CREATED_PARTITIONS
            elif c.kind == "add_partitions" and c.topic in out:
                out[c.topic] += 1
        return out


def read_answers(m: Matrix) -> tuple[dict[str, list[str]], dict[str, int], list[str]]:
    """The admin-results topic from its start (read committed): each request id's final statuses, its count
    of ``in_progress`` answers, and the request ids answered that are not of this run (none expected)."""
    c = KafkaConsumer(
        bootstrap_servers=m.bootstrap, enable_auto_commit=False, group_id=None, isolation_level="read_committed"
    )
    finals: dict[str, list[str]] = {}
    progress: dict[str, int] = {}
    try:
        topic = m.topics["results"]
        tps = [TopicPartition(topic, p) for p in sorted(c.partitions_for_topic(topic) or {0})]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        ends = c.end_offsets(tps)
        deadline = time.monotonic() + 120
        while any(c.position(tp) < ends[tp] for tp in tps) and time.monotonic() < deadline:
            for records in c.poll(timeout_ms=500).values():
                for r in records:
                    msg = json.loads(r.value)
                    rid = str(msg.get("request_id"))
                    if msg.get("status") == "in_progress":
                        progress[rid] = progress.get(rid, 0) + 1
                    else:
                        finals.setdefault(rid, []).append(str(msg.get("status")))
    finally:
        c.close()
    unknown = sorted(rid for rid in set(finals) | set(progress) if not rid.startswith("lr-"))
    return finals, progress, unknown


# ---------------------------------------------------------------------------- growth


def _pct(values: Sequence[float], q: float) -> float:
    s = sorted(values)
    k = (len(s) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def slope(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """The least-squares slope of ``ys`` over ``xs`` (``None`` with fewer than two distinct ``xs``)."""
    if len(xs) < 2:
        return None
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return None
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx


def window_growth(windows: Sequence[Window], warmup: int, window_seconds: float) -> dict[str, float | None]:
    """Per ``role.metric``: the slope per hour of the per-window figures over the windows after ``warmup``."""
    after = list(windows[warmup:])
    keys = sorted({(r, k) for w in after for r, v in w.roles.items() for k in v if k != "processes"})
    out: dict[str, float | None] = {}
    for r, k in keys:
        pts = [((w.start + w.end) / 2 / 3600, w.roles[r][k]) for w in after if r in w.roles]
        s = slope([p[0] for p in pts], [p[1] for p in pts])
        out[f"{r}.{k}"] = None if s is None else round(s, 1)
    for k in ("p50_s", "p99_s"):
        pts2 = [((w.start + w.end) / 2 / 3600, float(getattr(w, k))) for w in after if getattr(w, k) is not None]
        s = slope([p[0] for p in pts2], [p[1] for p in pts2])
        out[f"latency.{k}"] = None if s is None else round(s, 2)
    return out


def within_process_growth(samples: Sequence[Sample], warmup_s: float) -> dict[str, dict[str, Any]]:
    """Per process kind (and, for the controllers, role): the memory growth (MiB per hour) within each
    process's life, pooled: the least-squares slope with an intercept of each process's own, over the samples
    after the first ``warmup_s`` seconds of it (in that role)."""
    groups: dict[tuple[str, int, str], list[tuple[float, float]]] = {}
    for s in samples:
        for key, u in s.processes.items():
            groups.setdefault(key, []).append((s.t / 3600, u.rss_kib / 1024))
    by_kind: dict[str, list[list[tuple[float, float]]]] = {}
    for (kind, _, role), pts in groups.items():
        kept = [p for p in pts if p[0] - pts[0][0] >= warmup_s / 3600]
        if len(kept) >= 2:
            name = kind if kind == "broker" else f"{kind}_{role}"
            by_kind.setdefault(name, []).append(kept)
    out: dict[str, dict[str, Any]] = {}
    for name, series in sorted(by_kind.items()):
        sxy = sxx = 0.0
        for pts in series:
            mx = statistics.fmean(p[0] for p in pts)
            my = statistics.fmean(p[1] for p in pts)
            sxy += sum((x - mx) * (y - my) for x, y in pts)
            sxx += sum((x - mx) ** 2 for x, _ in pts)
        out[name] = {
            "mib_per_hour": round(sxy / sxx, 1) if sxx else None,
            "processes": len(series),
            "samples": sum(len(p) for p in series),
            "hours_fitted": round(sum(p[-1][0] - p[0][0] for p in series), 3),
        }
    return out


def _short(e: Mapping[str, Any]) -> str:
    what = str(e["what"])
    if "broker" in e:
        return f"{what} {e['broker']}"
    if "controller" in e:
        return f"{what} {e['controller']}"
    return what


# ---------------------------------------------------------------------------- entry points


@contextlib.contextmanager
def cluster(
    zk_root: str, bootstrap: str, work: Path, cfg: Config, log: Callable[[str], None] = print
) -> Iterator[Matrix]:
    """The brokers, the prepared partitions and the first controller, loaded and sent to every broker; every
    process stopped after."""
    ids = tuple(range(1, cfg.brokers + 1))
    m = Matrix(
        zk_root,
        bootstrap,
        work,
        session_timeout_ms=cfg.session_timeout_ms,
        broker_ids=ids,
        broker_args=cfg.broker_args(),
    )
    try:
        m.open()
        assert m.zk is not None
        started = time.monotonic()
        prepare_tree(m.zk, layout(cfg, ids))
        log(f"cluster {m.name}: {cfg.partitions:,} partitions written in {time.monotonic() - started:.1f} s")
        first = m.start_controller(cfg.controller_extra())
        m.wait_loaded(first, timeout=900)
        last: list[str] = []

        def agreed() -> bool:
            assert m.zk is not None
            last[:] = agreement_problems(m, read_tree(m.zk), {}, ())
            return not last

        try:
            wait_until("every partition on its brokers", agreed, 900, interval=5)
        except MatrixError:
            raise MatrixError(f"the cluster never came up in agreement: {last[:5]}") from None
        log(f"controller {first.controller_id} loaded, every broker in agreement ({time.monotonic() - started:.0f} s)")
        yield m
    finally:
        m.close(at_once=True)


def run(
    zk_root: str,
    bootstrap: str,
    work: Path,
    cfg: Config,
    *,
    log: Callable[[str], None] = print,
    on_window: Callable[[LongRun], None] | None = None,
) -> Report:
    """The whole long run on services already running (``zk_root``: ZooKeeper's connect string)."""
    import datetime as dt

    report = Report(config=asdict(cfg), started_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"))
    t0 = time.monotonic()
    with cluster(zk_root, bootstrap, work, cfg, log) as m:
        lr = LongRun(m, cfg, log)
        lr.on_window = on_window
        report.setup_s = round(time.monotonic() - t0, 1)
        lr.run(report)
    return report


def print_report(report: Report) -> None:
    from bench.harness import print_table

    roles = ("active_jvm", "active_python", "active_workers", "standby_jvm", "brokers")
    print_table(
        ["window", "min", "cmds", "p50 s", "p99 s", "max s", "events"],
        [
            [
                w.index,
                round(w.end / 60, 1),
                f"{w.answered}/{w.commands}",
                w.p50_s,
                w.p99_s,
                w.max_s,
                ", ".join(w.events),
            ]
            for w in report.windows
        ],
    )
    print()
    print_table(
        ["window", *(f"{r} MiB/thr/fd" for r in roles)],
        [
            [w.index]
            + [
                (
                    f"{w.roles[r]['rss_mib']:.0f}/{w.roles[r]['threads']:.0f}/{w.roles[r]['fds']:.0f}"
                    if r in w.roles
                    else "-"
                )
                for r in roles
            ]
            for w in report.windows
        ],
    )
    print()
    print("growth per hour after the warm-up (least-squares slope of the windows' figures):")
    for k, v in report.growth_per_hour.items():
        print(f"  {k:28} {v}")
    print("memory growth within each process's life, pooled (MiB per hour):")
    for k, fit in report.memory_growth_within_process.items():
        print(f"  {k:28} {fit}")
    print(f"commands: {report.commands}; latency: {report.latency_s}; controller epochs: {report.controller_epochs}")
    print(f"problems: {len(report.problems)}")
    for p in report.problems[:30]:
        print(f"  {p}")


def config_from(args: argparse.Namespace) -> Config:
    sets = []
    for s in args.set:
        k, sep, v = s.partition("=")
        if not sep or not k:
            raise SystemExit(f"--set: expected key=value, got {s!r}")
        sets.append((k, v))
    return Config(
        minutes=args.minutes,
        partitions=args.partitions,
        brokers=args.brokers,
        replication_factor=args.replication_factor,
        per_topic=args.per_topic,
        window_seconds=args.window_seconds,
        warmup_windows=args.warmup_windows,
        sample_seconds=args.sample_seconds,
        command_interval=args.command_interval,
        fault_interval=args.fault_interval,
        first_fault=args.first_fault,
        broker_down_seconds=args.broker_down_seconds,
        session_timeout_ms=args.session_timeout_ms,
        produce_rate=args.produce_rate,
        broker_tick_ms=args.broker_tick_ms,
        broker_fetch_interval_ms=args.broker_fetch_interval_ms,
        broker_status_interval_ms=args.broker_status_interval_ms,
        replica_lag_time_max_ms=args.replica_lag_time_max_ms,
        controller_settings=tuple(sets),
        settle_seconds=args.settle_seconds,
    )


def _positive(kind: type[Any]) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a {kind.__name__}, got {text!r}") from None
        if v <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
        return v

    return parse


def main() -> int:
    # --short: the CI short form's settings as the defaults (any option given still wins)
    d = SHORT if "--short" in sys.argv[1:] else Config()
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--short", action="store_true", help="the short form CI runs: 75 s at 2,000 partitions")
    f, i = _positive(float), _positive(int)
    ap.add_argument("--minutes", type=f, default=d.minutes, help="how long the mix runs (default: %(default)s)")
    ap.add_argument("--partitions", type=i, default=d.partitions, help="prepared partitions (default: %(default)s)")
    ap.add_argument("--brokers", type=i, default=d.brokers, help="simulated broker processes (default: %(default)s)")
    ap.add_argument("--replication-factor", type=i, default=d.replication_factor, help="(default: %(default)s)")
    ap.add_argument(
        "--per-topic", type=i, default=d.per_topic, help="partitions per prepared topic (default: %(default)s)"
    )
    ap.add_argument("--window-seconds", type=f, default=d.window_seconds, help="(default: %(default)s)")
    ap.add_argument(
        "--warmup-windows", type=int, default=d.warmup_windows, help="left out of the growth (default: %(default)s)"
    )
    ap.add_argument("--sample-seconds", type=f, default=d.sample_seconds, help="(default: %(default)s)")
    ap.add_argument(
        "--command-interval",
        type=f,
        default=d.command_interval,
        help="seconds between admin commands (default: %(default)s)",
    )
    ap.add_argument(
        "--fault-interval", type=f, default=d.fault_interval, help="seconds between faults (default: %(default)s)"
    )
    ap.add_argument(
        "--first-fault",
        type=float,
        default=d.first_fault,
        help="seconds into the run; 0: half a fault interval (default: %(default)s)",
    )
    ap.add_argument("--broker-down-seconds", type=f, default=d.broker_down_seconds, help="(default: %(default)s)")
    ap.add_argument(
        "--session-timeout-ms",
        type=i,
        default=d.session_timeout_ms,
        help="controllers' and brokers' ZooKeeper sessions (default: %(default)s)",
    )
    ap.add_argument(
        "--produce-rate",
        type=float,
        default=d.produce_rate,
        help="records/s per led partition; a producing broker's log grows by design (default: %(default)s)",
    )
    ap.add_argument(
        "--broker-tick-ms", type=i, default=d.broker_tick_ms, help="simbrokers --tick-ms (default: %(default)s)"
    )
    ap.add_argument(
        "--broker-fetch-interval-ms",
        type=i,
        default=d.broker_fetch_interval_ms,
        help="simbrokers --fetch-interval-ms (default: %(default)s)",
    )
    ap.add_argument(
        "--broker-status-interval-ms",
        type=i,
        default=d.broker_status_interval_ms,
        help="simbrokers --status-interval-ms (default: %(default)s)",
    )
    ap.add_argument(
        "--replica-lag-time-max-ms", type=i, default=d.replica_lag_time_max_ms, help="(default: %(default)s, Kafka's)"
    )
    ap.add_argument(
        "--settle-seconds",
        type=f,
        default=d.settle_seconds,
        help="the end's wait for answers and agreement (default: %(default)s)",
    )
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a controller setting (repeatable)")
    ap.add_argument("--zk-heap", default="1g", help="ZooKeeper's maximum heap (default: %(default)s)")
    ap.add_argument("--no-wait-quiet", action="store_true", help="do not wait for a quiet machine first")
    ap.add_argument("--keep", action="store_true", help="keep the run's folder (processes' logs) afterwards")
    args = ap.parse_args()
    if args.warmup_windows < 0:
        ap.error("--warmup-windows: must be >= 0")
    if args.first_fault < 0:
        ap.error("--first-fault: must be >= 0")
    cfg = config_from(args)
    from bench.harness import interruptible, machine_info, services, wait_quiet, write_results

    if not args.no_wait_quiet:
        wait_quiet()
    with interruptible(), services(keep=args.keep, zk_heap=args.zk_heap) as svc:
        work = Path(tempfile.mkdtemp(prefix="livectl-long-run-"))
        try:
            machine = machine_info(svc.zookeeper.port)

            def partial(lr: LongRun) -> None:
                # the windows so far, rewritten after each: a run cut short still leaves its figures
                windows = lr.windows(upto=lr.now() // cfg.window_seconds * cfg.window_seconds)
                progress = {"partial": True, "config": asdict(cfg), "windows": [asdict(w) for w in windows]}
                write_results("long_run", {"machine": machine, "command": " ".join(sys.argv), **progress})

            report = run(svc.zookeeper.connect, svc.broker.bootstrap, work, cfg, on_window=partial)
        finally:
            if not args.keep:
                shutil.rmtree(work, ignore_errors=True)
    print()
    print_report(report)
    path = write_results("long_run", {"machine": machine, "command": " ".join(sys.argv), **asdict(report)})
    print(f"results: {path}")
    return 0 if not report.problems else 1


if __name__ == "__main__":
    sys.exit(main())
