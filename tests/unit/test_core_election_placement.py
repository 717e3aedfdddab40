"""Leader selectors (Kafka's PartitionLeaderElectionAlgorithmsTest), election results, placement."""

from __future__ import annotations

import pytest

from core.election import (
    controlled_shutdown_leader,
    elect_controlled_shutdown,
    elect_offline,
    elect_preferred,
    elect_reassign,
    initial_leader_and_isr,
    offline_leader,
    preferred_leader,
    reassign_leader,
)
from core.model import LeaderAndIsr, ReplicaAssignment
from core.placement import (
    BrokerRack,
    PlacementError,
    assign_replicas,
    rack_alternated_brokers,
    stable_start_index,
    validate_manual_assignment,
)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("assignment", "isr", "live", "unclean", "expected"),
    [
        ((2, 4), (4,), {2, 4}, False, 4),
        ((2, 4), (), {4}, False, None),
        ((2, 4), (), {4}, True, 4),
        ((2, 4), (2, 4), {2, 4}, False, 2),
        ((2, 4), (2,), {4}, True, 4),
        ((2, 4), (2,), set(), True, None),
    ],
)
def test_offline_leader(
    assignment: tuple[int, ...], isr: tuple[int, ...], live: set[int], unclean: bool, expected: int | None
) -> None:
    assert offline_leader(assignment, isr, live, unclean) == expected


@pytest.mark.parametrize(
    ("target", "isr", "live", "expected"),
    [((2, 4), (2, 4), {2, 4}, 2), ((2, 4), (4,), {2, 4}, 4), ((2, 4), (2, 4), {4}, 4), ((2, 4), (3,), {2, 4}, None)],
)
def test_reassign_leader(target: tuple[int, ...], isr: tuple[int, ...], live: set[int], expected: int | None) -> None:
    assert reassign_leader(target, isr, live) == expected


@pytest.mark.parametrize(
    ("assignment", "isr", "live", "expected"),
    [((2, 4), (2, 4), {2, 4}, 2), ((2, 4), (4,), {2, 4}, None), ((2, 4), (2, 4), {4}, None), ((), (), set(), None)],
)
def test_preferred_leader(
    assignment: tuple[int, ...], isr: tuple[int, ...], live: set[int], expected: int | None
) -> None:
    assert preferred_leader(assignment, isr, live) == expected


@pytest.mark.parametrize(
    ("assignment", "isr", "live", "shutting", "expected"),
    [
        ((2, 4), (2, 4), {2, 4}, set(), 2),
        ((2, 4), (2, 4), {2, 4}, {2}, 4),
        ((2, 4), (2, 4), {2, 4}, {2, 4}, None),
        ((2, 4), (2,), {2, 4}, {2}, None),
    ],
)
def test_controlled_shutdown_leader(
    assignment: tuple[int, ...], isr: tuple[int, ...], live: set[int], shutting: set[int], expected: int | None
) -> None:
    assert controlled_shutdown_leader(assignment, isr, live, shutting) == expected


def test_election_results() -> None:
    cur = LeaderAndIsr(1, (1, 2, 3), 4, 9)
    r = elect_offline((1, 2, 3), cur, {2, 3}, False)
    assert r.leader_and_isr == LeaderAndIsr(2, (2, 3), 5, 9) and r.recipients == (2, 3) and not r.unclean
    r = elect_offline((1, 2, 3), LeaderAndIsr(1, (1,), 4), {3}, True)
    assert r.leader_and_isr == LeaderAndIsr(3, (3,), 5, 0, 1) and r.unclean
    assert elect_offline((1, 2), LeaderAndIsr(1, (1,)), {2}, False).leader_and_isr is None
    r = elect_reassign((3, 2), cur, {1, 2, 3})
    assert r.leader_and_isr == LeaderAndIsr(3, (1, 2, 3), 5, 9) and r.recipients == (3, 2)
    assert elect_reassign((5,), cur, {5}).leader_and_isr is None
    r = elect_preferred((2, 1), cur, {1, 2})
    assert r.leader_and_isr == LeaderAndIsr(2, (1, 2, 3), 5, 9) and r.recipients == (2, 1)
    assert elect_preferred((5, 1), cur, {1}).leader_and_isr is None
    r = elect_controlled_shutdown((1, 2, 3), cur, {1, 2, 3}, {1})
    assert r.leader_and_isr == LeaderAndIsr(2, (2, 3), 5, 9) and r.recipients == (1, 2, 3)
    assert elect_controlled_shutdown((1,), LeaderAndIsr(1, (1,)), {1}, {1}).leader_and_isr is None
    assert initial_leader_and_isr((3, 1, 2), {1, 2}) == LeaderAndIsr(1, (1, 2), 0, 0)
    assert initial_leader_and_isr((3,), set()) is None


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


def test_rack_unaware_placement_matches_kafka() -> None:
    brokers = [BrokerRack(i) for i in range(5)]
    expected = {
        0: (0, 1, 2),
        1: (1, 2, 3),
        2: (2, 3, 4),
        3: (3, 4, 0),
        4: (4, 0, 1),
        5: (0, 2, 3),
        6: (1, 3, 4),
        7: (2, 4, 0),
        8: (3, 0, 1),
        9: (4, 1, 2),
    }
    assert assign_replicas(brokers, 10, 3, start_index=0) == expected


def test_rack_aware_placement_matches_kafka() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated_brokers(racks) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated_brokers({b: r for b, r in racks.items() if b != 5}) == [0, 3, 1, 4, 2]
    brokers = [BrokerRack(b, r) for b, r in racks.items()]
    assert assign_replicas(brokers, 7, 3, start_index=0) == {
        0: (0, 3, 1),
        1: (3, 1, 5),
        2: (1, 5, 4),
        3: (5, 4, 2),
        4: (4, 2, 0),
        5: (2, 0, 3),
        6: (0, 4, 2),
    }


@pytest.mark.parametrize("start", range(6))
def test_rack_aware_spreads_racks(start: int) -> None:
    racks = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}
    placed = assign_replicas([BrokerRack(b, r) for b, r in racks.items()], 12, 3, start_index=start)
    for reps in placed.values():
        assert len({racks[b] for b in reps}) == 3
    leaders = [reps[0] for reps in placed.values()]
    assert all(leaders.count(b) == 2 for b in racks)


def test_placement_errors_and_helpers() -> None:
    brokers = [BrokerRack(1), BrokerRack(2)]
    with pytest.raises(PlacementError) as e:
        assign_replicas(brokers, 0, 1)
    assert e.value.error == "INVALID_PARTITIONS"
    with pytest.raises(PlacementError) as e:
        assign_replicas(brokers, 1, 0)
    assert e.value.error == "INVALID_REPLICATION_FACTOR"
    with pytest.raises(PlacementError) as e:
        assign_replicas(brokers, 1, 3)
    assert e.value.error == "INVALID_REPLICATION_FACTOR"
    with pytest.raises(PlacementError) as e:
        assign_replicas([BrokerRack(1, "a"), BrokerRack(2)], 1, 1)
    assert e.value.error == "INVALID_REPLICA_ASSIGNMENT"
    assert assign_replicas(brokers, 2, 1, start_index=1, start_partition_id=3) == {3: (1,), 4: (2,)}
    assert stable_start_index("t", 5) == stable_start_index("t", 5) and 0 <= stable_start_index("x", 3) < 3
    assert stable_start_index("t", 0) == 0
    assert validate_manual_assignment([(1, 2)], {1, 2}) is None
    assert "empty" in (validate_manual_assignment([()], {1}) or "")
    assert "Duplicate" in (validate_manual_assignment([(1, 1)], {1}) or "")
    assert "Inconsistent" in (validate_manual_assignment([(1,)], {1}, 2) or "")
    assert "Unknown broker" in (validate_manual_assignment([(1, 9)], {1}) or "")
