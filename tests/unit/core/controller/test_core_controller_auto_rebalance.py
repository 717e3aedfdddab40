"""Kafka's ``checkAndTriggerAutoLeaderRebalance``: the tick elects preferred leaders only while no
partition is being reassigned (``controllerContext.partitionsBeingReassigned.isEmpty``), and again once the
reassignment has completed."""

from __future__ import annotations

import pytest
from core_support import Cluster, startup

from core.controller import brokers_over_imbalance, imbalance
from core.events import AutoRebalanceTick, BrokerFailure, CreateTopic, ReassignPartitions
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


def _leaders(c: Cluster) -> list[int]:
    return [c.ctx.leader_and_isr(tp).leader for tp in (T0, T1)]  # type: ignore[union-attr]


def test_a_reassignment_in_flight_stops_the_tick_from_electing() -> None:
    c = _imbalanced_with_a_reassignment_in_flight()
    # during the move m-0's replica set is [3, 4, 2], led by 2: broker 3 is above the threshold too
    over = brokers_over_imbalance(imbalance(c.state), 10)
    assert over == (1, 3)
    c.run(AutoRebalanceTick(over))
    assert c.decisions == [], "no election, no write, no request while m-0 is being reassigned"
    assert _leaders(c) == [2, 2]


def test_the_next_tick_after_the_reassignment_completed_elects() -> None:
    c = _imbalanced_with_a_reassignment_in_flight()
    c.run(AutoRebalanceTick((1,)))
    assert _leaders(c) == [2, 2]
    c.catch_up(MOVED)  # 4 joins the ISR: the reassignment completes
    assert c.ctx.partitions_being_reassigned == set()
    assert c.ctx.replicas(MOVED) == (3, 4)
    c.run(AutoRebalanceTick((1,)))
    assert _leaders(c) == [1, 1]
    assert brokers_over_imbalance(imbalance(c.state), 10) == ()
