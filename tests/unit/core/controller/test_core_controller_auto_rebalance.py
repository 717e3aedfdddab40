"""Kafka 3.9's ``checkAndTriggerAutoLeaderRebalance`` while partitions are being reassigned: the tick elects
preferred leaders as at any other time (no ``partitionsBeingReassigned.isEmpty`` guard since Kafka 3.4,
KAFKA-10149), a partition being reassigned included: its preferred replica is the head of its full replica
set (the target's head), elected when it is live and in the ISR. The scenarios are those of Kafka's own
``testAutoPreferredReplicaLeaderElectionWithOtherReassigningPartitions`` and
``...WithSamePartitionBeingReassigned``."""

from __future__ import annotations

import pytest
from core_support import Cluster, startup

from core.controller import brokers_over_imbalance, imbalance
from core.events import AutoRebalanceTick, BrokerFailure, CreateTopic, ReassignPartitions
from core.kafka.requests import RequestApi
from core.model import PartitionTarget, TopicPartition

pytestmark = pytest.mark.unit

T0, T1, MOVED = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("m", 0)


def _imbalanced_with_a_reassignment_in_flight() -> Cluster:
    """Broker 1 prefers t-0 and t-1 but leads neither (it bounced); m-0 is moving from [2, 3] to [3, 4]
    and waits for 4 to join its ISR."""
    c = Cluster.start([1, 2, 3, 4])
    c.run(CreateTopic("c1", "t", replica_assignment=((1, 2), (1, 2)), partitions=2, replication_factor=2))
    c.run(CreateTopic("c2", "m", replica_assignment=((2, 3),), partitions=1, replication_factor=2))
    c.run(BrokerFailure(1))
    c.run(startup(1, epoch=500))
    for tp in (T0, T1):
        c.catch_up(tp)
    c.run(ReassignPartitions("r", (PartitionTarget("m", 0, (3, 4)),)))
    assert c.ctx.partitions_being_reassigned == {MOVED}
    return c


def _leader(c: Cluster, tp: TopicPartition) -> int:
    lai = c.ctx.leader_and_isr(tp)
    assert lai is not None
    return lai.leader


def test_a_reassignment_in_flight_does_not_stop_the_tick() -> None:
    c = _imbalanced_with_a_reassignment_in_flight()
    # during the move m-0's replica set is [3, 4, 2], led by 2: its preferred replica is 3, the target's
    # head, in the ISR: broker 3 is above the threshold too
    assert c.ctx.replicas(MOVED) == (3, 4, 2)
    over = brokers_over_imbalance(imbalance(c.state), 10)
    assert over == (1, 3)
    c.run(AutoRebalanceTick(over))
    assert [_leader(c, tp) for tp in (T0, T1, MOVED)] == [1, 1, 3]
    for b in (3, 4, 2):
        assert c.requests(RequestApi.LEADER_AND_ISR, broker=b), f"broker {b}, a replica of m-0, is told"
    # the election did not end or change the reassignment: 4 is still being added
    assert c.ctx.partitions_being_reassigned == {MOVED}
    assert c.ctx.assignment(MOVED).adding_replicas == (4,)
    assert brokers_over_imbalance(imbalance(c.state), 10) == ()
    c.catch_up(MOVED)  # 4 joins the ISR: the reassignment completes, 3 (in the target) keeps the lead
    assert c.ctx.partitions_being_reassigned == set()
    assert c.ctx.replicas(MOVED) == (3, 4) and _leader(c, MOVED) == 3


def test_an_adding_preferred_replica_is_elected_once_it_has_caught_up() -> None:
    """t-0 moves from [1, 2] to [3, 1, 2]: broker 3, the preferred replica from the start of the move, is
    not in the ISR, so the tick cannot elect it (``canPreferredReplicaBeLeader``); the completed
    reassignment keeps leader 1 (it is in the target), and the next tick elects 3."""
    c = Cluster.start([1, 2, 3])
    c.run(CreateTopic("c1", "t", replica_assignment=((1, 2),), partitions=1, replication_factor=2))
    c.run(ReassignPartitions("r", (PartitionTarget("t", 0, (3, 1, 2)),)))
    assert c.ctx.replicas(T0) == (3, 1, 2) and c.ctx.partitions_being_reassigned == {T0}
    assert brokers_over_imbalance(imbalance(c.state), 10) == (3,)
    c.run(AutoRebalanceTick((3,)))
    assert c.decisions == [], "no election, no write, no request: the preferred replica has not caught up"
    assert _leader(c, T0) == 1
    c.catch_up(T0)
    assert c.ctx.partitions_being_reassigned == set() and _leader(c, T0) == 1
    c.run(AutoRebalanceTick((3,)))
    assert _leader(c, T0) == 3
