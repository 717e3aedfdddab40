"""Draining a broker, planned (issue 44, item 1; :mod:`core.drain`): leaders first, then the replicas a batch at
a time, rack-aware, never onto a cordoned broker; repeated rounds over the cluster they leave end with nothing
on the broker."""

from __future__ import annotations

import pytest
from core_support import Cluster
from hypothesis import given, settings
from hypothesis import strategies as st

from core.decisions import AdminResult, AdminStatus
from core.drain import Blocked, PartitionView, plan_drain
from core.events import BrokerFailure, ReassignPartitions
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


def test_a_partition_whose_other_replica_is_dead_is_blocked_not_moved() -> None:
    # broker 3 is not alive (not registered): t-0 on 1 and 3 would move to (2?, 3) and never complete, as Kafka
    # completes a move only with every target replica in the ISR; t-1 and t-2 move, t-0 waits for broker 3
    live = [BrokerRack(b) for b in (1, 2, 4, 5)]
    parts = {
        T[0]: PartitionView((3, 1), 3, (3, 1)),
        T[1]: PartitionView((2, 1), 2, (2, 1)),
        T[2]: PartitionView((2, 1), 2, (2, 1)),
    }
    step = plan_drain(1, parts, live, (), 2)
    assert [TopicPartition(m.topic, m.partition) for m in step.replica_moves] == [T[1], T[2]]
    assert all(set(m.replicas) <= {2, 4, 5} for m in step.replica_moves), "only live brokers in any target"
    assert step.blocked == (Blocked(T[0], (3,), in_flight=False),) and step.stuck == ()
    assert not step.idle
    # the others moved: only the blocked one is left, nothing in flight can complete: the drain cannot go on
    parts = {T[0]: parts[T[0]]}
    step = plan_drain(1, parts, live, (), 2)
    assert step.idle and not step.done and step.replica_moves == () and step.blocked[0].not_alive == (3,)


def test_a_move_whose_new_broker_died_is_replanned_onto_a_live_one() -> None:
    # the drain moved t-0 off 1 onto 4 (origin 2,1; target 2,4; RS 2,4,1); broker 4 died before catching up
    racked = [BrokerRack(1, "a"), BrokerRack(2, "b"), BrokerRack(3, "c"), BrokerRack(5, "a")]
    moving = PartitionView((2, 4, 1), 2, (2, 1), reassigning=True, adding=(4,), removing=(1,))
    step = plan_drain(1, {T[0]: moving}, racked, (), 1)
    # broker 5 shares the drained broker's rack: it takes 4's place; a new target supersedes the move
    assert step.replans == (PartitionTarget("t", 0, (2, 5)),)
    assert step.blocked == () and step.in_flight == 1 and not step.idle
    # no live, uncordoned broker left to take its place: the move waits for broker 4, and the drain says so
    step = plan_drain(1, {T[0]: moving}, racked, {3, 5}, 1)
    assert step.replans == () and step.blocked == (Blocked(T[0], (4,), in_flight=True),) and step.idle


def test_a_move_whose_kept_replica_died_is_blocked_and_frees_its_batch_slot() -> None:
    # t-0 moves off 1 onto 4 keeping 2 (target 2,4): 2 dies; no other broker can stand in for a replica the
    # partition already had (its data is on 2), so the move waits for broker 2 and holds no batch slot
    live = [BrokerRack(b) for b in (1, 3, 4, 5)]
    moving = PartitionView((2, 4, 1), 4, (4, 1), reassigning=True, adding=(4,), removing=(1,))
    parts = {T[0]: moving, T[1]: PartitionView((3, 1), 3, (3, 1))}
    step = plan_drain(1, parts, live, (), 1)
    assert step.blocked == (Blocked(T[0], (2,), in_flight=True),) and step.replans == ()
    # the batch of 1 is not held by the blocked move; 5 holds nothing yet (4 holds the blocked move's replica)
    assert [m.replicas for m in step.replica_moves] == [(3, 5)]
    assert plan_drain(1, {T[0]: moving}, live, (), 1).idle
    # an operator's move that keeps broker 1 is not the drain's to re-plan
    theirs = PartitionView((1, 4, 2), 1, (1, 2), reassigning=True, adding=(4,), removing=(2,))
    step = plan_drain(1, {T[0]: theirs}, live, (), 1)
    assert step.blocked == () and step.replans == () and step.in_flight == 1 and not step.idle


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.permutations([1, 2, 3, 4, 5, 6]).map(lambda p: tuple(p[:3])), min_size=1, max_size=20),
    st.integers(1, 6),
    st.sets(st.sampled_from([2, 3, 4, 5, 6]), max_size=2),
)
def test_no_planned_target_holds_a_dead_broker(assignments: list[tuple[int, ...]], batch: int, dead: set[int]) -> None:
    """Whatever brokers are down, every target a drain starts or re-plans holds only live brokers, a partition
    is moved, blocked or stuck, and a step that starts nothing with nothing able to complete is idle."""
    live = [BrokerRack(b) for b in (1, 2, 3, 4, 5, 6) if b not in dead]
    parts = {TopicPartition("t", i): PartitionView(r, r[0], r) for i, r in enumerate(assignments)}
    step = plan_drain(1, parts, live, (), batch)
    ids = {b.id for b in live}
    for m in (*step.leader_moves, *step.replica_moves, *step.replans):
        if m in step.leader_moves:
            continue  # a reorder keeps the replicas (it completes at once, the ISR aside)
        assert set(m.replicas) <= ids, (m, dead)
    if not step.leader_moves:
        blocked = {b.tp for b in step.blocked}
        for tp, v in parts.items():
            if 1 in v.replicas and set(v.replicas) - {1} & dead:
                assert tp in blocked
        moved = {TopicPartition(m.topic, m.partition) for m in step.replica_moves}
        assert not moved & blocked and not set(step.stuck) & blocked
        assert step.idle == (not step.replica_moves)


def _view(c: Cluster, tp: TopicPartition) -> PartitionView:
    """The partition as the drain reads it from ZooKeeper, here from the controller's own context."""
    ra = c.ctx.assignment(tp)
    lai = c.ctx.leader_and_isr(tp)
    assert lai is not None
    return PartitionView(
        ra.replicas, lai.leader, lai.isr, ra.is_being_reassigned, ra.adding_replicas, ra.removing_replicas
    )


def test_the_controller_takes_a_replan_and_completes_it_without_the_dead_broker() -> None:
    # the drain of 3 moved t-0 (3,1) onto 4; 4 dies before catching up. The re-planned target supersedes the
    # move (the first request ends REASSIGNMENT_SUPERSEDED), and it completes once its live replicas catch up
    c = Cluster.start([1, 2, 3, 4])
    c.create_topic("t", ((3, 1),))
    tp = T[0]
    c.run(ReassignPartitions("drain-1", (PartitionTarget("t", 0, (4, 1)),)))
    c.run(BrokerFailure(4))
    live = [BrokerRack(b) for b in sorted(c.ctx.live_broker_ids)]
    step = plan_drain(3, {tp: _view(c, tp)}, live, {3}, 10)
    assert step.replans == (PartitionTarget("t", 0, (2, 1)),)
    c.run(ReassignPartitions("drain-2", step.replans))
    answers = {d.request_id: d for d in c.decisions if isinstance(d, AdminResult)}
    assert answers["drain-2"].status is AdminStatus.IN_PROGRESS
    assert answers["drain-1"].error == "REASSIGNMENT_SUPERSEDED"
    c.catch_up(tp)
    assert c.ctx.assignment(tp).replicas == (2, 1) and not c.ctx.assignment(tp).is_being_reassigned
    assert plan_drain(3, {tp: _view(c, tp)}, live, {3}, 10).done
