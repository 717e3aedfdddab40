"""Kafka's ``ReplicaAssignment``: the full replica set of a partition and its KIP-455 reassignment.

During a reassignment from origin replicas ``ORS`` to target replicas ``TRS`` the partition holds
``RS = distinct(TRS ++ ORS)``, ``adding = RS - ORS`` and ``removing = RS - TRS``. ``RS`` is written to
ZooKeeper first; ``RS = TRS`` (nothing adding or removing) is written last, so that a controller that
fails over in between can recover the origin from ZooKeeper.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


def _diff(a: Sequence[int], b: Iterable[int]) -> tuple[int, ...]:
    drop = set(b)
    return tuple(x for x in a if x not in drop)


def _distinct(xs: Iterable[int]) -> tuple[int, ...]:
    seen: set[int] = set()
    out: list[int] = []
    for x in xs:
        if x not in seen:
            seen.add(x)
            out.append(x)
    return tuple(out)


@dataclass(frozen=True, slots=True)
class ReplicaAssignment:
    """``replicas`` in assignment order (the head is the preferred leader), plus the replicas being
    added and removed by an ongoing reassignment."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    @property
    def origin_replicas(self) -> tuple[int, ...]:
        """The replicas before the reassignment started (``RS - adding``)."""
        return _diff(self.replicas, self.adding_replicas)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        """The replicas once the reassignment completes (``RS - removing``)."""
        return _diff(self.replicas, self.removing_replicas)

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding_replicas) or bool(self.removing_replicas)

    def reassign_to(self, target: Sequence[int]) -> ReplicaAssignment:
        """The assignment while moving from this assignment's origin to ``target``."""
        origin = self.origin_replicas
        full = _distinct((*target, *origin))
        return ReplicaAssignment(full, _diff(full, origin), _diff(full, target))

    def remove_replica(self, replica: int) -> ReplicaAssignment:
        return ReplicaAssignment(
            _diff(self.replicas, (replica,)),
            _diff(self.adding_replicas, (replica,)),
            _diff(self.removing_replicas, (replica,)),
        )

    def completed(self) -> ReplicaAssignment:
        """``RS = TRS`` with nothing adding or removing."""
        return ReplicaAssignment(self.target_replicas)
