"""Draining a broker (issue 44, item 1): the next moves that take every replica off it, as plain values.

A drain runs in rounds over what ZooKeeper holds; each round asks :func:`plan_drain` for its next step, so a
drain that was interrupted (its tool, or the controller) resumes from the cluster as it is. The order is
Cruise Control's ``remove_broker`` with ``demote_broker`` first:

1. **Leaders first.** A partition the broker leads whose other replicas include one that is live and in the
   ISR is *reordered*: that replica first, the broker last (a reassignment that only reorders completes at
   once: every target replica is in the ISR), then given a preferred election. Clients move before any data
   does.
2. **Then the replicas, a batch at a time.** A partition holding the broker, not being reassigned already,
   gets a target with the broker replaced by another broker: live, not cordoned, not a replica of the
   partition; of the broker's rack when one such is free, else of a rack the partition has no replica on,
   else any; the one holding the fewest replicas (counting this round's moves), then the lowest id. At most
   ``batch_size`` partitions are being moved off the broker at once (those in flight count).

A partition no broker can take (too few live, uncordoned brokers) is *stuck*: the drain cannot finish until
one registers or is uncordoned.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from core.model import PartitionTarget, TopicPartition
from core.placement import BrokerRack

__all__ = ["DrainStep", "PartitionView", "plan_drain"]


@dataclass(frozen=True)
class PartitionView:
    """One partition as a drain round sees it: its replicas (assignment order; during a reassignment, the
    target), its leader, its ISR and whether it is being reassigned."""

    replicas: tuple[int, ...]
    leader: int
    isr: tuple[int, ...]
    reassigning: bool = False


@dataclass(frozen=True)
class DrainStep:
    """The next moves of a drain."""

    #: reorders putting a live in-ISR replica first and the drained broker last (each then gets a preferred
    #: election; one already in that order needs the election only): the broker's leaderships, moved before
    #: any replica
    leader_moves: tuple[PartitionTarget, ...]
    #: new replica sets without the drained broker, at most the batch size less those in flight
    replica_moves: tuple[PartitionTarget, ...]
    #: partitions holding the broker that are being reassigned now
    in_flight: int
    #: partitions holding the broker, in flight and moved by this step included
    remaining: int
    #: partitions holding the broker that no other broker can take now
    stuck: tuple[TopicPartition, ...]

    @property
    def done(self) -> bool:
        """Nothing is left on the broker: no replica, nothing in flight."""
        return self.remaining == 0


def _leader_move(broker: int, view: PartitionView, live: Collection[int]) -> tuple[int, ...] | None:
    candidates = [r for r in view.replicas if r != broker and r in live and r in view.isr]
    if not candidates:
        return None
    first = candidates[0]
    return (first, *(r for r in view.replicas if r not in (first, broker)), broker)


def _destination(
    broker: int, view: PartitionView, brokers: Sequence[BrokerRack], cordoned: Collection[int], load: dict[int, int]
) -> int | None:
    rack = {b.id: b.rack for b in brokers}
    free = [b.id for b in brokers if b.id != broker and b.id not in cordoned and b.id not in view.replicas]
    if not free:
        return None
    held = {rack.get(r) for r in view.replicas if r != broker}

    def preference(b: int) -> tuple[int, int, int]:
        same = rack.get(broker) is not None and rack.get(b) == rack.get(broker)
        new_rack = rack.get(b) not in held
        return (0 if same else 1 if new_rack else 2, load.get(b, 0), b)

    return min(free, key=preference)


def plan_drain(
    broker: int,
    partitions: Mapping[TopicPartition, PartitionView],
    brokers: Sequence[BrokerRack],
    cordoned: Collection[int],
    batch_size: int,
) -> DrainStep:
    """The next step of draining ``broker`` (see the module docstring): ``partitions`` as ZooKeeper holds them,
    ``brokers`` the live ones with their racks, ``cordoned`` the cordoned ones, ``batch_size`` (at least 1)
    the most partitions moved off the broker at once."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    live = {b.id for b in brokers}
    holding = sorted(tp for tp, v in partitions.items() if broker in v.replicas)
    in_flight = [tp for tp in holding if partitions[tp].reassigning]
    leader_moves = []
    for tp in holding:
        view = partitions[tp]
        if view.leader == broker and not view.reassigning:
            order = _leader_move(broker, view, live)
            if order is not None:
                leader_moves.append(PartitionTarget(tp.topic, tp.partition, order))
    if leader_moves:
        return DrainStep(tuple(leader_moves), (), len(in_flight), len(holding), ())
    load: dict[int, int] = {}
    for v in partitions.values():
        for r in v.replicas:
            load[r] = load.get(r, 0) + 1
    room = max(0, batch_size - len(in_flight))
    moves: list[PartitionTarget] = []
    stuck: list[TopicPartition] = []
    for tp in holding:
        view = partitions[tp]
        if view.reassigning:
            continue
        dest = _destination(broker, view, brokers, cordoned, load)
        if dest is None:
            stuck.append(tp)
            continue
        if len(moves) < room:
            moves.append(
                PartitionTarget(tp.topic, tp.partition, tuple(dest if r == broker else r for r in view.replicas))
            )
            load[dest] = load.get(dest, 0) + 1
    return DrainStep((), tuple(moves), len(in_flight), len(holding), tuple(stuck))
