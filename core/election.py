"""Leader election (Kafka's ``PartitionLeaderElectionAlgorithms`` and ``Election``).

The four selectors return the new leader's broker id or ``None``; they always walk the replicas in
assignment order:

* :func:`offline_leader` — first live replica in the ISR; if none and unclean election is allowed,
  the first live replica.
* :func:`reassign_leader` — first target replica that is live and in the ISR.
* :func:`preferred_leader` — the assignment's head, only if it is live and in the ISR.
* :func:`controlled_shutdown_leader` — first replica that is live (shutting-down brokers count as
  live here), in the ISR and not shutting down.

The ``elect_*`` functions compute the resulting :class:`ElectionResult` for one partition: the new
:class:`LeaderAndIsr` (leader epoch + 1) or ``None``, and the brokers that receive the LeaderAndIsr
request, exactly as ``Election.scala``:

============================  =====================================================  =====================
strategy                      new ISR                                                 recipients
============================  =====================================================  =====================
offline (clean)               live members of the current ISR                         live assigned replicas
offline (unclean)             ``[leader]``, recovery state ``RECOVERING`` (KIP-704)   live assigned replicas
reassign                      unchanged                                               target replicas
preferred                     unchanged                                               assigned replicas
controlled shutdown           current ISR minus shutting-down brokers                 live-or-shutting-down
                                                                                      assigned replicas
============================  =====================================================  =====================
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from enum import Enum

from core.model import LeaderAndIsr


class ElectionStrategy(Enum):
    """Kafka's ``PartitionLeaderElectionStrategy``; ``OFFLINE_UNCLEAN`` is
    ``OfflinePartitionLeaderElectionStrategy(allowUnclean = true)``."""

    OFFLINE = "OfflinePartitionLeaderElectionStrategy"
    OFFLINE_UNCLEAN = "OfflinePartitionLeaderElectionStrategy(allowUnclean)"
    REASSIGN = "ReassignPartitionLeaderElectionStrategy"
    PREFERRED = "PreferredReplicaPartitionLeaderElectionStrategy"
    CONTROLLED_SHUTDOWN = "ControlledShutdownPartitionLeaderElectionStrategy"


def offline_leader(
    assignment: Sequence[int], isr: Collection[int], live: Collection[int], allow_unclean: bool
) -> int | None:
    for r in assignment:
        if r in live and r in isr:
            return r
    if allow_unclean:
        for r in assignment:
            if r in live:
                return r
    return None


def reassign_leader(target: Sequence[int], isr: Collection[int], live: Collection[int]) -> int | None:
    for r in target:
        if r in live and r in isr:
            return r
    return None


def preferred_leader(assignment: Sequence[int], isr: Collection[int], live: Collection[int]) -> int | None:
    if assignment and assignment[0] in live and assignment[0] in isr:
        return assignment[0]
    return None


def controlled_shutdown_leader(
    assignment: Sequence[int], isr: Collection[int], live: Collection[int], shutting_down: Collection[int]
) -> int | None:
    for r in assignment:
        if r in live and r in isr and r not in shutting_down:
            return r
    return None


@dataclass(frozen=True, slots=True)
class ElectionResult:
    """``leader_and_isr`` is ``None`` when no leader could be elected; ``recipients`` are the brokers
    that receive LeaderAndIsr for the partition (non-live ones are dropped when the batch is sent)."""

    leader_and_isr: LeaderAndIsr | None
    recipients: tuple[int, ...]
    unclean: bool = False


def elect_offline(
    assignment: Sequence[int], current: LeaderAndIsr, live: Collection[int], allow_unclean: bool
) -> ElectionResult:
    live_replicas = tuple(r for r in assignment if r in live)
    leader = offline_leader(assignment, current.isr, live, allow_unclean)
    if leader is None:
        return ElectionResult(None, live_replicas)
    if leader in current.isr:
        return ElectionResult(
            current.new_leader_and_isr(leader, tuple(r for r in current.isr if r in live)), live_replicas
        )
    return ElectionResult(current.new_recovering_leader_and_isr(leader, (leader,)), live_replicas, unclean=True)


def elect_reassign(target: Sequence[int], current: LeaderAndIsr, live: Collection[int]) -> ElectionResult:
    leader = reassign_leader(target, current.isr, live)
    return ElectionResult(current.new_leader(leader) if leader is not None else None, tuple(target))


def elect_preferred(assignment: Sequence[int], current: LeaderAndIsr, live: Collection[int]) -> ElectionResult:
    leader = preferred_leader(assignment, current.isr, live)
    return ElectionResult(current.new_leader(leader) if leader is not None else None, tuple(assignment))


def elect_controlled_shutdown(
    assignment: Sequence[int],
    current: LeaderAndIsr,
    live_or_shutting_down: Collection[int],
    shutting_down: Collection[int],
) -> ElectionResult:
    recipients = tuple(r for r in assignment if r in live_or_shutting_down)
    leader = controlled_shutdown_leader(assignment, current.isr, live_or_shutting_down, shutting_down)
    if leader is None:
        return ElectionResult(None, recipients)
    new_isr = tuple(r for r in current.isr if r not in shutting_down)
    return ElectionResult(current.new_leader_and_isr(leader, new_isr), recipients)


def initial_leader_and_isr(assignment: Sequence[int], live: Collection[int]) -> LeaderAndIsr | None:
    """New partition: leader = first live replica, ISR = the live replicas, leader epoch 0."""
    live_replicas = tuple(r for r in assignment if r in live)
    if not live_replicas:
        return None
    return LeaderAndIsr(live_replicas[0], live_replicas, 0, 0)
