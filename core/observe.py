"""What operators watch: a bucket's cluster summary, the elections of one step, and their cluster-wide sum.

Each bucket reports, after every step, a :class:`BucketSummary` of its state (partitions by state, leaders
and preferred leaders per broker, under-replicated / under-min-ISR / offline partitions, reassignments in
progress) and the leader elections the step made (:func:`elections`, comparing the state before and after
it). The driver sums the buckets' summaries with :func:`merge` into one :class:`ClusterSummary`, which the
Prometheus endpoint and the status page show.

The partition figures (under-replicated, under min ISR, offline, the preferred-leader imbalance per
broker) are :mod:`core.figures`', the one definition every view uses. A **leader election** is a partition
whose leader after the step is a live broker other than its leader before it (a new partition's first leader
counts too); **unclean** when the new leader was not in the ISR before the step (Kafka's
``UncleanLeaderElectionsPerSec``).

Lists (under-replicated, offline, reassignments) are capped at ``limit`` entries per bucket, smallest
topic-partition first; the counts are always complete.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from core import figures
from core.context import ControllerContext
from core.events import DeleteTopic, Event, StopReplicaResponse
from core.figures import DEFAULT_MIN_ISR
from core.model import NO_LEADER, TopicPartition
from core.states import PartitionState
from core.zk_path_events import ZkTopicDeletion

#: most partitions listed per bucket and list (the counts are complete)
LIST_LIMIT = 50


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    """One listed partition: its replicas (assignment order), leader (-1: none) and ISR."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    leader: int
    isr: tuple[int, ...]

    def to_list(self) -> list[Any]:
        return [self.topic, self.partition, list(self.replicas), self.leader, list(self.isr)]

    @classmethod
    def from_list(cls, v: list[Any]) -> PartitionInfo:
        return cls(str(v[0]), int(v[1]), tuple(int(x) for x in v[2]), int(v[3]), tuple(int(x) for x in v[4]))


@dataclass(frozen=True, slots=True)
class ReassignmentInfo:
    """A partition being reassigned: where it moves to, what is added and removed, and the ISR now."""

    topic: str
    partition: int
    target: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]
    isr: tuple[int, ...]
    #: the leader now (``NO_LEADER``: none): its log is what the adding replicas copy
    leader: int = NO_LEADER

    @property
    def progress(self) -> float:
        """The share of target replicas already in the ISR (1.0: the reassignment can complete)."""
        if not self.target:
            return 1.0
        return sum(1 for r in self.target if r in self.isr) / len(self.target)

    @property
    def percent(self) -> int:
        """:attr:`progress` in whole percent, rounded down, so at most 99 while a target replica is out of the ISR
        (200 of 201 is 99, where rounding to the nearest said 100), as :mod:`core.move_progress` rounds."""
        if not self.target:
            return 100
        return 100 * sum(1 for r in self.target if r in self.isr) // len(self.target)

    def to_list(self) -> list[Any]:
        return [
            self.topic,
            self.partition,
            list(self.target),
            list(self.adding),
            list(self.removing),
            list(self.isr),
            self.leader,
        ]

    @classmethod
    def from_list(cls, v: list[Any]) -> ReassignmentInfo:
        t, a, r, i = (tuple(int(x) for x in v[k]) for k in range(2, 6))
        # a summary written before the leader was part of it: no leader known
        return cls(str(v[0]), int(v[1]), t, a, r, i, int(v[6]) if len(v) > 6 else NO_LEADER)


@dataclass(frozen=True)
class BucketSummary:
    """A bucket's (or, merged, the cluster's) figures; see the module docstring for the definitions."""

    partitions_by_state: Mapping[str, int] = field(default_factory=dict)
    #: broker -> partitions it leads
    leaders_by_broker: Mapping[int, int] = field(default_factory=dict)
    #: broker -> (partitions it prefers but does not lead, partitions it prefers)
    preferred_by_broker: Mapping[int, tuple[int, int]] = field(default_factory=dict)
    under_replicated_count: int = 0
    under_min_isr_count: int = 0
    offline_count: int = 0
    reassigning_count: int = 0
    under_replicated: tuple[PartitionInfo, ...] = ()
    offline: tuple[PartitionInfo, ...] = ()
    reassignments: tuple[ReassignmentInfo, ...] = ()
    #: leader elections of the step (all, and unclean ones)
    leader_elections: int = 0
    unclean_leader_elections: int = 0
    #: broker -> partitions whose replica set names it (what a drain has left to move off it)
    replicas_by_broker: Mapping[int, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "partitions_by_state": dict(self.partitions_by_state),
            "leaders_by_broker": {str(b): n for b, n in self.leaders_by_broker.items()},
            "preferred_by_broker": {str(b): list(v) for b, v in self.preferred_by_broker.items()},
            "under_replicated_count": self.under_replicated_count,
            "under_min_isr_count": self.under_min_isr_count,
            "offline_count": self.offline_count,
            "reassigning_count": self.reassigning_count,
            "under_replicated": [p.to_list() for p in self.under_replicated],
            "offline": [p.to_list() for p in self.offline],
            "reassignments": [r.to_list() for r in self.reassignments],
            "leader_elections": self.leader_elections,
            "unclean_leader_elections": self.unclean_leader_elections,
            "replicas_by_broker": {str(b): n for b, n in self.replicas_by_broker.items()},
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BucketSummary:
        return cls(
            partitions_by_state={str(k): int(v) for k, v in d.get("partitions_by_state", {}).items()},
            leaders_by_broker={int(k): int(v) for k, v in d.get("leaders_by_broker", {}).items()},
            preferred_by_broker={int(k): (int(v[0]), int(v[1])) for k, v in d.get("preferred_by_broker", {}).items()},
            under_replicated_count=int(d.get("under_replicated_count", 0)),
            under_min_isr_count=int(d.get("under_min_isr_count", 0)),
            offline_count=int(d.get("offline_count", 0)),
            reassigning_count=int(d.get("reassigning_count", 0)),
            under_replicated=tuple(PartitionInfo.from_list(v) for v in d.get("under_replicated", [])),
            offline=tuple(PartitionInfo.from_list(v) for v in d.get("offline", [])),
            reassignments=tuple(ReassignmentInfo.from_list(v) for v in d.get("reassignments", [])),
            leader_elections=int(d.get("leader_elections", 0)),
            unclean_leader_elections=int(d.get("unclean_leader_elections", 0)),
            replicas_by_broker={int(k): int(v) for k, v in d.get("replicas_by_broker", {}).items()},
        )


def _key(tp: TopicPartition) -> tuple[str, int]:
    return (tp.topic, tp.partition)


def summarize(ctx: ControllerContext, limit: int = LIST_LIMIT, cluster_min_isr: int = DEFAULT_MIN_ISR) -> BucketSummary:
    """The figures of one bucket's context: :func:`core.figures.partition_figures` and the per-broker
    counts of :func:`core.figures.preferred_leader_counts`, with the partitions by state, the leaders per
    broker and the reassignments (``cluster_min_isr``: the cluster default ``min.insync.replicas``)."""
    fig = figures.partition_figures(ctx, cluster_min_isr, per_broker=True)
    by_state: dict[PartitionState, int] = {}
    leaders: dict[int, int] = {}
    moving: list[TopicPartition] = []
    states = ctx.partition_states
    leadership = ctx.partition_leadership
    online, nonexistent = PartitionState.ONLINE, PartitionState.NON_EXISTENT
    # one pass, the hot loop of a bucket's summary (10k partitions per micro-batch): no properties, no
    # enum attribute reads
    for tp, ra in ctx.partition_assignments.items():
        state = states.get(tp, nonexistent)
        by_state[state] = by_state.get(state, 0) + 1
        if ra.adding_replicas or ra.removing_replicas:
            moving.append(tp)
        li = leadership.get(tp)
        if li is not None and state is online and li.leader_and_isr.leader != NO_LEADER:
            leader = li.leader_and_isr.leader
            leaders[leader] = leaders.get(leader, 0) + 1

    def info(tp: TopicPartition) -> PartitionInfo:
        li = ctx.partition_leadership.get(tp)
        return PartitionInfo(
            tp.topic,
            tp.partition,
            ctx.partition_assignments[tp].replicas,
            li.leader_and_isr.leader if li is not None else NO_LEADER,
            li.leader_and_isr.isr if li is not None else (),
        )

    def reassignment(tp: TopicPartition) -> ReassignmentInfo:
        ra = ctx.partition_assignments[tp]
        li = ctx.partition_leadership.get(tp)
        return ReassignmentInfo(
            tp.topic,
            tp.partition,
            ra.target_replicas,
            ra.adding_replicas,
            ra.removing_replicas,
            li.leader_and_isr.isr if li is not None else (),
            li.leader_and_isr.leader if li is not None else NO_LEADER,
        )

    return BucketSummary(
        partitions_by_state=dict(sorted((st.value, n) for st, n in by_state.items())),
        leaders_by_broker=dict(sorted(leaders.items())),
        preferred_by_broker=dict(fig.preferred_by_broker),
        under_replicated_count=len(fig.under_replicated),
        under_min_isr_count=len(fig.under_min_isr),
        offline_count=len(fig.offline),
        reassigning_count=len(moving),
        under_replicated=tuple(info(tp) for tp in sorted(fig.under_replicated, key=_key)[:limit]),
        offline=tuple(info(tp) for tp in sorted(fig.offline, key=_key)[:limit]),
        reassignments=tuple(reassignment(tp) for tp in sorted(moving, key=_key)[:limit]),
        replicas_by_broker={b: len(ps) for b, ps in sorted(ctx.partitions_by_broker.items()) if ps},
    )


def elections(before: ControllerContext, after: ControllerContext) -> tuple[int, int]:
    """(leader elections, unclean ones) between two states of a bucket (see the module docstring).

    Unchanged partitions share their leadership value between the two contexts (``step`` copies the
    context once and replaces only what changes), so the identity check skips them cheaply."""
    elected = 0
    unclean = 0
    old = before.partition_leadership
    for tp, li in after.partition_leadership.items():
        prev = old.get(tp)
        if prev is li:
            continue
        leader = li.leader_and_isr.leader
        if leader == NO_LEADER:
            continue
        previous_leader = prev.leader_and_isr.leader if prev is not None else NO_LEADER
        if leader == previous_leader:
            continue
        elected += 1
        if prev is not None and prev.leader_and_isr.isr and leader not in prev.leader_and_isr.isr:
            unclean += 1
    return elected, unclean


def topic_deletion_events(before: ControllerContext, events: Iterable[Event]) -> int:
    """How many of a step's ``events`` Kafka's controller handles as ``ControllerState.TopicDeletion`` (the
    state whose ``TopicDeletionRateAndTimeMs`` timer counts them), judged on the context ``before`` the step:
    ``/admin/delete_topics/<t>`` appearing (``TopicDeletion``); a DeleteTopics request for a topic that exists
    (Kafka's broker writes that znode only then), not a dry run (it deletes nothing); a StopReplica answer
    naming a partition of a topic whose deletion has started (Kafka's channel raises
    ``TopicDeletionStopReplicaResponseReceived`` only then, not for the replicas a reassignment or a controlled
    shutdown stops)."""
    n = 0
    for e in events:
        if isinstance(e, ZkTopicDeletion):
            n += 1
        elif isinstance(e, DeleteTopic):
            n += not e.dry_run and e.topic in before.topic_partitions
        elif isinstance(e, StopReplicaResponse):
            n += any(p.topic in before.topics_with_deletion_started for p in e.partitions)
    return n


def bucket_summary(
    before: ControllerContext,
    after: ControllerContext,
    limit: int = LIST_LIMIT,
    cluster_min_isr: int = DEFAULT_MIN_ISR,
) -> BucketSummary:
    """:func:`summarize` of ``after`` with the step's :func:`elections`."""
    s = summarize(after, limit, cluster_min_isr)
    elected, unclean = elections(before, after)
    return BucketSummary(
        s.partitions_by_state,
        s.leaders_by_broker,
        s.preferred_by_broker,
        s.under_replicated_count,
        s.under_min_isr_count,
        s.offline_count,
        s.reassigning_count,
        s.under_replicated,
        s.offline,
        s.reassignments,
        elected,
        unclean,
        s.replicas_by_broker,
    )


def merge(summaries: Iterable[BucketSummary], limit: int = LIST_LIMIT) -> BucketSummary:
    """The cluster's summary: counts summed, lists joined in topic-partition order and capped at ``limit``."""
    by_state: dict[str, int] = {}
    leaders: dict[int, int] = {}
    preferred: dict[int, list[int]] = {}
    replicas: dict[int, int] = {}
    urp: list[PartitionInfo] = []
    offline: list[PartitionInfo] = []
    moving: list[ReassignmentInfo] = []
    totals = [0] * 6
    for s in summaries:
        for k, n in s.partitions_by_state.items():
            by_state[k] = by_state.get(k, 0) + n
        for b, n in s.leaders_by_broker.items():
            leaders[b] = leaders.get(b, 0) + n
        for b, (bad, total) in s.preferred_by_broker.items():
            c = preferred.setdefault(b, [0, 0])
            c[0] += bad
            c[1] += total
        for b, n in s.replicas_by_broker.items():
            replicas[b] = replicas.get(b, 0) + n
        urp.extend(s.under_replicated)
        offline.extend(s.offline)
        moving.extend(s.reassignments)
        for i, n in enumerate(
            (
                s.under_replicated_count,
                s.under_min_isr_count,
                s.offline_count,
                s.reassigning_count,
                s.leader_elections,
                s.unclean_leader_elections,
            )
        ):
            totals[i] += n

    def first(items: list[Any]) -> tuple[Any, ...]:
        return tuple(sorted(items, key=lambda p: (p.topic, p.partition))[:limit])

    return BucketSummary(
        partitions_by_state=dict(sorted(by_state.items())),
        leaders_by_broker=dict(sorted(leaders.items())),
        preferred_by_broker={b: (c[0], c[1]) for b, c in sorted(preferred.items())},
        under_replicated_count=totals[0],
        under_min_isr_count=totals[1],
        offline_count=totals[2],
        reassigning_count=totals[3],
        under_replicated=first(urp),
        offline=first(offline),
        reassignments=first(moving),
        leader_elections=totals[4],
        unclean_leader_elections=totals[5],
        replicas_by_broker=dict(sorted(replicas.items())),
    )


__all__ = [
    "DEFAULT_MIN_ISR",
    "LIST_LIMIT",
    "BucketSummary",
    "PartitionInfo",
    "ReassignmentInfo",
    "bucket_summary",
    "elections",
    "merge",
    "summarize",
    "topic_deletion_events",
]
