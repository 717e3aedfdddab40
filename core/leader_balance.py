"""Gentle leader balance: how many preferred-leader moves one pass makes, and where (issue 44, item 4).

Kafka's ZooKeeper-era auto leader rebalance elects, every ``leader.imbalance.check.interval.seconds``, the
preferred leader of *every* partition of the brokers above ``leader.imbalance.per.broker.percentage``, and
``kafka-leader-election --all-topic-partitions`` elects every one at once. livectl's
``leader.imbalance.max.leaders.per.interval`` bounds the leaders one pass moves (Kafka's default, the
largest int, keeps Kafka's behaviour); the rest move in the passes that follow, one interval apart.

The buckets each hold a share of the partitions, so the bound is split on the driver: each bucket reports,
per preferred broker, its partitions whose preferred replica could lead now but does not (its *movable*
partitions), and whether an ``elect-leaders --all`` waits in it (*queued*: then all its movable partitions
are wanted, whatever their broker's ratio). :func:`plan_leader_moves` turns the latest reports into a
:class:`LeaderMovePlan`: the brokers above the threshold, the moves wanted and, when bounded, each bucket's
limit (:func:`split_bound`, which never gives more than the bound in total nor more than a bucket wants).
A bucket picks its moves with :func:`pick_moves`, taking the brokers in turn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from core.model import TopicPartition

__all__ = ["UNBOUNDED", "LeaderMovePlan", "bucket_demands", "pick_moves", "plan_leader_moves", "split_bound"]

#: ``leader.imbalance.max.leaders.per.interval``'s default (Kafka's ``Integer.MAX_VALUE``): no bound
UNBOUNDED = 2**31 - 1


@dataclass(frozen=True)
class LeaderMovePlan:
    """One pass of preferred-leader moves, as the driver plans it from the buckets' latest reports."""

    #: the brokers whose imbalance ratio is above the threshold (auto rebalance on), ascending
    brokers: tuple[int, ...]
    #: per bucket (by bucket number), the most leaders it may move in this pass; ``None``: unbounded
    bucket_limits: tuple[int, ...] | None
    #: the preferred-leader moves wanted now (movable partitions of ``brokers``, every movable partition of a
    #: bucket where an ``elect-leaders --all`` is queued)
    wanted: int
    #: the moves this pass makes (``wanted`` or the bound, the smaller)
    moves: int

    @property
    def left(self) -> int:
        """The moves left for later passes."""
        return self.wanted - self.moves

    @property
    def empty(self) -> bool:
        return self.moves == 0 and not self.brokers


def bucket_demands(
    movable: Mapping[int, Mapping[int, int]], queued: Mapping[int, bool], brokers: Sequence[int]
) -> dict[int, int]:
    """Per bucket, the moves it wants: all its movable partitions where an ``elect-leaders --all`` is queued,
    else those of ``brokers``. Buckets wanting none are left out."""
    wanted = set(brokers)
    out: dict[int, int] = {}
    for bucket, per_broker in movable.items():
        n = sum(c for b, c in per_broker.items() if queued.get(bucket, False) or b in wanted)
        if n > 0:
            out[bucket] = n
    return dict(sorted(out.items()))


def split_bound(bound: int, demands: Mapping[int, int]) -> dict[int, int]:
    """``bound`` shared among the buckets' ``demands`` (water-filling: every bucket gets an equal share or
    what it wants, whichever is less; a share that does not divide evenly goes one each to the lowest
    buckets). The limits sum to ``min(bound, sum(demands))`` and none exceeds its demand."""
    if bound < 0:
        raise ValueError(f"bound must be at least 0, got {bound}")
    limits = dict.fromkeys(demands, 0)
    open_ = sorted((d, b) for b, d in demands.items() if d > 0)
    left = bound
    while open_ and left > 0:
        share = left // len(open_)
        if share == 0:
            for _, b in sorted(open_, key=lambda x: x[1])[:left]:
                limits[b] += 1
            break
        smallest, _ = open_[0]
        step = min(share, smallest - limits[open_[0][1]])
        for _, b in open_:
            limits[b] += step
        left -= step * len(open_)
        open_ = [(d, b) for d, b in open_ if limits[b] < d]
    return limits


def plan_leader_moves(
    imbalance: Mapping[int, tuple[int, int]],
    movable: Mapping[int, Mapping[int, int]],
    queued: Mapping[int, bool],
    *,
    enabled: bool,
    percentage: int,
    max_leaders: int,
) -> LeaderMovePlan:
    """The next pass: ``imbalance`` per preferred broker (not led by it, preferred by it; summed over the
    buckets), ``movable`` per bucket per preferred broker, ``queued`` per bucket; ``enabled`` is
    ``auto.leader.rebalance.enable`` (off: only queued ``elect-leaders --all`` moves), ``percentage``
    ``leader.imbalance.per.broker.percentage`` (Kafka's strict comparison), ``max_leaders``
    ``leader.imbalance.max.leaders.per.interval`` (at least 1; :data:`UNBOUNDED` for Kafka's behaviour)."""
    if max_leaders < 1:
        raise ValueError(f"max_leaders must be at least 1, got {max_leaders}")
    brokers = (
        tuple(b for b, (bad, total) in sorted(imbalance.items()) if total and bad / total > percentage / 100)
        if enabled
        else ()
    )
    demands = bucket_demands(movable, queued, brokers)
    wanted = sum(demands.values())
    if max_leaders >= UNBOUNDED:
        return LeaderMovePlan(brokers, None, wanted, wanted)
    limits = split_bound(max_leaders, demands)
    size = max([*movable, *queued, -1]) + 1
    return LeaderMovePlan(brokers, tuple(limits.get(b, 0) for b in range(size)), wanted, min(wanted, max_leaders))


def pick_moves(by_broker: Mapping[int, Sequence[TopicPartition]], limit: int | None) -> list[TopicPartition]:
    """At most ``limit`` (``None``: all) of the candidates, taking the preferred brokers in turn (ascending,
    each broker's partitions in their order), so that every imbalanced broker gets leaders back early."""
    if limit is None:
        return sorted(tp for tps in by_broker.values() for tp in tps)
    queues = [list(tps) for _, tps in sorted(by_broker.items()) if tps]
    out: list[TopicPartition] = []
    depth = 0
    while len(out) < limit and queues:
        queues = [q for q in queues if depth < len(q)]
        for q in queues:
            if len(out) >= limit:
                break
            out.append(q[depth])
        depth += 1
    return out
