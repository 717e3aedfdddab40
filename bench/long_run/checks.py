"""The cluster's tree and views read back, and the checks on them: agreement, epochs, answers."""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kafka import KafkaConsumer, TopicPartition
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from bench.harness.matrix import Matrix, broker_view_problems
from bench.harness.services import Layout
from bench.long_run.config import Config
from core.kafka import zkdata
from core.placement import BrokerRack, assign_replicas


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
            bad += broker_view_problems(views, f"{t}-{p}", state, replicas)
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


def _read_to_end(m: Matrix, topic: str, each: Callable[[Any], None], budget_s: float, **options: Any) -> bool:
    """Hand ``each`` every record of ``topic`` from its start to the end it had when the read began (a consumer
    of no group, ``options`` added); False when ``budget_s`` ran out first."""
    c = KafkaConsumer(bootstrap_servers=m.bootstrap, enable_auto_commit=False, group_id=None, **options)
    try:
        tps = [TopicPartition(topic, p) for p in sorted(c.partitions_for_topic(topic) or {0})]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        ends = c.end_offsets(tps)
        deadline = time.monotonic() + budget_s
        while any(c.position(tp) < ends[tp] for tp in tps):
            if time.monotonic() > deadline:
                return False
            for records in c.poll(timeout_ms=500, max_records=10_000).values():
                for r in records:
                    each(r)
        return True
    finally:
        c.close()


def read_answers(m: Matrix) -> tuple[dict[str, list[str]], dict[str, int], list[str]]:
    """The admin-results topic from its start (read committed): each request id's final statuses, its count
    of ``in_progress`` answers, and the request ids answered that are not of this run (none expected)."""
    finals: dict[str, list[str]] = {}
    progress: dict[str, int] = {}

    def answer(r: Any) -> None:
        msg = json.loads(r.value)
        rid = str(msg.get("request_id"))
        if msg.get("status") == "in_progress":
            progress[rid] = progress.get(rid, 0) + 1
        else:
            finals.setdefault(rid, []).append(str(msg.get("status")))

    _read_to_end(m, m.topics["results"], answer, 120, isolation_level="read_committed")
    unknown = sorted(rid for rid in set(finals) | set(progress) if not rid.startswith("lr-"))
    return finals, progress, unknown


_TYPE = re.compile(rb'"type":"([a-z_]+)"')
_CORRELATION = re.compile(rb'"correlation_id":(-?[0-9]+)')


def count_broker_events(m: Matrix, budget_s: float = 300.0) -> dict[str, int]:
    """The broker-events topic from its start: its records by event type, and for AlterPartition the proposals
    sent (``alter_partition_sent``: a record of each per partition, or a request's partitions) and the distinct
    ones (broker, correlation id) among them, so ``alter_partition_sent - alter_partition_proposals`` copies
    were sent again. ``complete`` 0 when ``budget_s`` ran out first (a topic of millions of records). The type
    is read from the compact JSON the simulated brokers write, not decoded: a few seconds per million."""
    counts: dict[str, int] = {}
    proposals: set[tuple[bytes | None, bytes]] = set()
    sent = 0

    def count(r: Any) -> None:
        nonlocal sent
        t = _TYPE.search(r.value)
        kind = t.group(1).decode() if t else "?"
        counts[kind] = counts.get(kind, 0) + 1
        if kind in ("alter_partition", "alter_partition_request"):
            corrs = _CORRELATION.findall(r.value)
            sent += len(corrs)
            proposals.update((r.key, c) for c in corrs)

    complete = int(_read_to_end(m, m.topics["events"], count, budget_s))
    return {
        "records": sum(counts.values()),
        **dict(sorted(counts.items())),
        "alter_partition_sent": sent,
        "alter_partition_proposals": len(proposals),
        "complete": complete,
    }
