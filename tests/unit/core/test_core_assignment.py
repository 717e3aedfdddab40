"""A partition's replica assignment under reassignment (KIP-455): RS, adding, removing, origin and target."""

from __future__ import annotations

import pytest

from core.model import ReplicaAssignment

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("assignment", "target", "rs", "adding", "removing"),
    [
        ((1, 2, 3), (4, 5, 6), (4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3)),
        ((1, 2, 3), (1, 2, 4), (1, 2, 4, 3), (4,), (3,)),
        ((1, 2, 3), (3, 2, 1), (3, 2, 1), (), ()),
    ],
)
def test_reassignment_arithmetic(
    assignment: tuple[int, ...],
    target: tuple[int, ...],
    rs: tuple[int, ...],
    adding: tuple[int, ...],
    removing: tuple[int, ...],
) -> None:
    ra = ReplicaAssignment(assignment).reassign_to(target)
    assert (ra.replicas, ra.adding_replicas, ra.removing_replicas) == (rs, adding, removing)
    assert ra.target_replicas == target
    assert ra.is_being_reassigned == bool(adding or removing)
    if ra.is_being_reassigned:
        assert ra.origin_replicas == assignment
        # superseding keeps the origin; cancelling goes back to it
        again = ra.reassign_to((7,))
        assert again.origin_replicas == assignment and again.target_replicas == (7,)
        assert ra.reassign_to(ra.origin_replicas) == ReplicaAssignment(assignment)
    assert ra.completed() == ReplicaAssignment(target)
    assert ra.remove_replica(rs[0]).replicas == rs[1:]
