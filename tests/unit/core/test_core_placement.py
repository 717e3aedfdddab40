"""Replica placement as Kafka's ``AdminUtils.assignReplicasToBrokers``: rack-unaware and rack-aware."""

from __future__ import annotations

import pytest

from core.placement import (
    BrokerRack,
    PlacementError,
    assign_replicas,
    rack_alternated_brokers,
    stable_start_index,
    validate_manual_assignment,
)

pytestmark = pytest.mark.unit


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
