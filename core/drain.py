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

Kafka completes a reassignment only when every target replica is in the ISR, so a move whose target holds a
broker that is not alive waits for that broker, whatever the data moved. A drain therefore never starts one:

3. **A dead broker in the target.** A partition whose other replicas include a broker that is not alive is
   *blocked*: no move is planned for it (its target would keep the dead broker, and the move would never
   complete) until the broker is back or an operator moves that replica. A move in flight whose target has
   come to hold a dead broker is handled by where that broker is: an *adding* replica (the broker the drain
   chose died) is **re-planned**, its target given another live, uncordoned broker in its place by a new
   reassignment that supersedes the first (KIP-455: the origin replicas stay those before the first move);
   any other target replica (one the partition had before), or no broker to take the dead one's place, leaves
   the move blocked. Blocked moves in flight do
   not count against the batch size. The tool reports blocked partitions and, when nothing else can go on,
   ends naming them (:attr:`DrainStep.idle`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from core.model import PartitionTarget, TopicPartition
from core.placement import BrokerRack, replacement_broker

__all__ = ["Blocked", "DrainStep", "PartitionView", "plan_drain"]


@dataclass(frozen=True)
class PartitionView:
    """One partition as a drain round sees it: its replicas (assignment order; during a reassignment, the
    full set, target and origin), its leader, its ISR, whether it is being reassigned and, if so, the replicas
    it is adding and removing."""

    replicas: tuple[int, ...]
    leader: int
    isr: tuple[int, ...]
    reassigning: bool = False
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def target(self) -> tuple[int, ...]:
        """The replicas once its reassignment completes (its replicas when none is in progress)."""
        return tuple(r for r in self.replicas if r not in self.removing)


@dataclass(frozen=True)
class Blocked:
    """A partition holding the drained broker whose move waits for brokers that are not alive."""

    tp: TopicPartition
    #: the brokers of its target (or, not moving yet, its other replicas) that are not alive
    not_alive: tuple[int, ...]
    #: its move is in flight already (else none was started)
    in_flight: bool


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
    #: new targets for moves in flight whose adding replica's broker is not alive (each supersedes its move)
    replans: tuple[PartitionTarget, ...] = ()
    #: partitions whose move waits, or would wait, for brokers that are not alive
    blocked: tuple[Blocked, ...] = ()

    @property
    def done(self) -> bool:
        """Nothing is left on the broker: no replica, nothing in flight."""
        return self.remaining == 0

    @property
    def blocked_in_flight(self) -> int:
        return sum(1 for b in self.blocked if b.in_flight)

    @property
    def idle(self) -> bool:
        """Nothing to start and nothing in flight that can complete: the drain cannot go on by itself (what is
        left is stuck or blocked, or nothing is)."""
        starts = self.leader_moves or self.replica_moves or self.replans
        return not starts and self.in_flight == self.blocked_in_flight


def _leader_move(broker: int, view: PartitionView, live: Collection[int]) -> tuple[int, ...] | None:
    candidates = [r for r in view.replicas if r != broker and r in live and r in view.isr]
    if not candidates:
        return None
    first = candidates[0]
    return (first, *(r for r in view.replicas if r not in (first, broker)), broker)


def _destination(
    broker: int, view: PartitionView, brokers: Sequence[BrokerRack], cordoned: Collection[int], load: dict[int, int]
) -> int | None:
    return replacement_broker(broker, view.replicas, brokers, cordoned, load)


def plan_drain(
    broker: int,
    partitions: Mapping[TopicPartition, PartitionView],
    brokers: Sequence[BrokerRack],
    cordoned: Collection[int],
    batch_size: int,
) -> DrainStep:
    """The next step of draining ``broker`` (see the module docstring): ``partitions`` as ZooKeeper holds them,
    ``brokers`` the live ones with their racks (only they are ever placed on), ``cordoned`` the cordoned ones,
    ``batch_size`` (at least 1) the most partitions moved off the broker at once (blocked moves aside)."""
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
    moves: list[PartitionTarget] = []
    replans: list[PartitionTarget] = []
    stuck: list[TopicPartition] = []
    blocked: list[Blocked] = []
    for tp in in_flight:  # moves in flight off the broker whose target came to hold a dead broker
        view = partitions[tp]
        if broker not in view.removing:
            continue  # not a move off the broker (an operator's): left as it is
        dead = tuple(r for r in view.target if r not in live)
        if not dead:
            continue
        if any(r not in view.adding for r in dead):  # a replica it had before: only its broker's return helps
            blocked.append(Blocked(tp, dead, in_flight=True))
            continue
        target = list(view.target)
        for i, r in enumerate(target):
            if r in dead:  # the broker the move was adding died: another takes its place
                dest = _destination(broker, PartitionView((*view.replicas, *target), -1, ()), brokers, cordoned, load)
                if dest is None:
                    break
                target[i] = dest
                load[dest] = load.get(dest, 0) + 1
        if any(r in dead for r in target):  # no live, uncordoned broker to take its place: it waits for the dead
            blocked.append(Blocked(tp, dead, in_flight=True))
        else:
            replans.append(PartitionTarget(tp.topic, tp.partition, tuple(target)))
    room = max(0, batch_size - (len(in_flight) - sum(1 for b in blocked if b.in_flight)))
    for tp in holding:
        view = partitions[tp]
        if view.reassigning:
            continue
        dead = tuple(r for r in view.replicas if r != broker and r not in live)
        if dead:  # its target would keep them: the move could not complete while they are down
            blocked.append(Blocked(tp, dead, in_flight=False))
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
    return DrainStep(
        (), tuple(moves), len(in_flight), len(holding), tuple(stuck), tuple(replans), tuple(sorted(blocked, key=_tp))
    )


def _tp(b: Blocked) -> TopicPartition:
    return b.tp
