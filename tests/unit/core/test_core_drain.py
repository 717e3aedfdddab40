"""Draining a broker, planned (issue 44, item 1; :mod:`core.drain`): leaders first, then the replicas a batch at
a time, rack-aware, never onto a cordoned broker; repeated rounds over the cluster they leave end with nothing
on the broker."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.drain import PartitionView, plan_drain
from core.model import PartitionTarget, TopicPartition
from core.placement import BrokerRack

pytestmark = pytest.mark.unit

T = [TopicPartition("t", p) for p in range(4)]
FLAT = [BrokerRack(b) for b in (1, 2, 3, 4)]


def test_leaders_move_first() -> None:
    parts = {
        T[0]: PartitionView((1, 2, 3), 1, (1, 2, 3)),
        T[1]: PartitionView((2, 1), 1, (1,)),  # no other replica in the ISR: it cannot be moved yet
        T[2]: PartitionView((3, 1), 1, (1, 3)),  # already in order: the election only
        T[3]: PartitionView((2, 3), 2, (2, 3)),
    }
    step = plan_drain(1, parts, FLAT, (), 10)
    assert step.leader_moves == (PartitionTarget("t", 0, (2, 3, 1)), PartitionTarget("t", 2, (3, 1)))
    assert step.replica_moves == () and step.remaining == 3 and not step.done


def test_replicas_move_a_batch_at_a_time_onto_the_least_loaded() -> None:
    parts = {tp: PartitionView((2, 1), 2, (2, 1)) for tp in T}
    step = plan_drain(1, parts, FLAT, (), 3)
    assert step.leader_moves == () and len(step.replica_moves) == 3 and step.remaining == 4
    # 3 and 4 hold nothing: they take the moves in turn, the lower id first
    assert [m.replicas for m in step.replica_moves] == [(2, 3), (2, 4), (2, 3)]
    flying = {tp: PartitionView(v.replicas, v.leader, v.isr, reassigning=tp in T[:2]) for tp, v in parts.items()}
    step = plan_drain(1, flying, FLAT, (), 3)
    assert step.in_flight == 2 and len(step.replica_moves) == 1, "those in flight count against the batch"


def test_rack_aware_and_never_onto_a_cordoned_broker() -> None:
    racked = [BrokerRack(1, "a"), BrokerRack(2, "b"), BrokerRack(3, "a"), BrokerRack(4, "c"), BrokerRack(5, "a")]
    parts = {T[0]: PartitionView((2, 1), 2, (2, 1))}
    assert plan_drain(1, parts, racked, (), 5).replica_moves[0].replicas == (2, 3), "the same rack first"
    assert plan_drain(1, parts, racked, {3}, 5).replica_moves[0].replicas == (2, 5)
    assert plan_drain(1, parts, racked, {3, 5}, 5).replica_moves[0].replicas == (2, 4), "then a rack it lacks"
    stuck = plan_drain(1, parts, racked, {3, 4, 5}, 5)
    assert stuck.replica_moves == () and stuck.stuck == (T[0],) and stuck.remaining == 1
    with pytest.raises(ValueError, match="batch_size"):
        plan_drain(1, parts, racked, (), 0)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.permutations([1, 2, 3, 4, 5]).map(lambda p: tuple(p[:3])), min_size=1, max_size=25),
    st.integers(1, 6),
    st.sampled_from([(), (3,), (5,)]),  # three uncordoned brokers besides 1: room for every partition
)
def test_rounds_empty_the_broker(assignments: list[tuple[int, ...]], batch: int, cordoned: tuple[int, ...]) -> None:
    """Apply each round's moves as the controller would (a reorder and its election at once; a replica move
    completes by the next round): the broker ends with no replica and no leadership, no move lands on a
    cordoned broker, a batch never exceeds its size, and no partition loses a replica."""
    brokers = [BrokerRack(b) for b in (1, 2, 3, 4, 5)]
    parts = {TopicPartition("t", i): PartitionView(r, r[0], r) for i, r in enumerate(assignments)}
    for _ in range(2 * len(parts) + 2):
        step = plan_drain(1, parts, brokers, cordoned, batch)
        if step.done:
            break
        assert step.stuck == ()
        for m in step.leader_moves:
            tp = TopicPartition(m.topic, m.partition)
            parts[tp] = PartitionView(m.replicas, m.replicas[0], parts[tp].isr)
        assert len(step.replica_moves) <= batch
        assert step.leader_moves == () or step.replica_moves == ()
        for m in step.replica_moves:
            tp = TopicPartition(m.topic, m.partition)
            assert 1 not in m.replicas and not set(cordoned) & (set(m.replicas) - set(parts[tp].replicas))
            assert len(set(m.replicas)) == len(parts[tp].replicas)
            leader = parts[tp].leader if parts[tp].leader in m.replicas else m.replicas[0]
            parts[tp] = PartitionView(m.replicas, leader, m.replicas)
    assert all(1 not in v.replicas and v.leader != 1 for v in parts.values())
