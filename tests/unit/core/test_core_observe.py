"""core.observe: the bucket summary, the elections of a step, and the cluster-wide merge."""

from __future__ import annotations

import pytest
from core_support import Cluster, startup

from core import observe
from core.controller import ControllerConfig
from core.events import AlterTopicConfig, BrokerFailure, DeleteTopic, Event, ReassignPartitions
from core.model import PartitionTarget

pytestmark = pytest.mark.unit


def make(brokers: tuple[int, ...] = (1, 2, 3, 4), config: ControllerConfig | None = None) -> Cluster:
    return Cluster.start(list(brokers), config)


def create(c: Cluster, topic: str, assignment: tuple[tuple[int, ...], ...], **configs: str) -> None:
    c.create_topic(topic, assignment, **configs)


def step_summary(c: Cluster, *events: Event) -> observe.BucketSummary:
    before = c.ctx
    c.run(*events)
    return observe.bucket_summary(before, c.ctx)


def test_healthy_cluster() -> None:
    c = make()
    before = c.ctx
    create(c, "t", ((1, 2, 3), (2, 3, 1), (3, 1, 2)))
    s = observe.bucket_summary(before, c.ctx)
    assert s.partitions_by_state == {"OnlinePartition": 3}
    assert s.leaders_by_broker == {1: 1, 2: 1, 3: 1}
    assert s.preferred_by_broker == {1: (0, 1), 2: (0, 1), 3: (0, 1)}
    assert (s.under_replicated_count, s.under_min_isr_count, s.offline_count, s.reassigning_count) == (0, 0, 0, 0)
    assert s.under_replicated == () and s.offline == () and s.reassignments == ()
    # a new partition's first leader is an election (three partitions); none unclean
    assert (s.leader_elections, s.unclean_leader_elections) == (3, 0)
    assert s.replicas_by_broker == {1: 3, 2: 3, 3: 3}


def test_replicas_by_broker_count_what_a_drain_has_left_and_sum_across_buckets() -> None:
    c = make((1, 2, 3, 4))
    create(c, "t", ((1, 2), (1, 3), (2, 3)))
    # during a move the full replica set (RS) counts: broker 1 still holds t-0 until the move ends
    s = step_summary(c, ReassignPartitions("r", (PartitionTarget("t", 0, (4, 2)),)))
    assert s.replicas_by_broker == {1: 2, 2: 2, 3: 2, 4: 1}
    merged = observe.merge([s, observe.BucketSummary(replicas_by_broker={1: 5, 9: 1})])
    assert merged.replicas_by_broker == {1: 7, 2: 2, 3: 2, 4: 1, 9: 1}
    assert observe.BucketSummary.from_dict(s.to_dict()) == s


def test_broker_failure_under_replicated_min_isr_and_imbalance() -> None:
    c = make()
    create(c, "t", ((1, 2, 3), (2, 3, 1)), min_insync_replicas="3")
    create(c, "solo", ((1,),))
    s = step_summary(c, BrokerFailure(1))
    assert s.partitions_by_state == {"OfflinePartition": 1, "OnlinePartition": 2}
    assert s.offline_count == 1
    assert [p.to_list() for p in s.offline] == [["solo", 0, [1], -1, [1]]]
    assert s.under_replicated_count == 2
    assert [(p.topic, p.partition, p.leader, p.isr) for p in s.under_replicated] == [
        ("t", 0, 2, (2, 3)),
        ("t", 1, 2, (2, 3)),
    ]
    # t: min.insync.replicas=3, ISR of 2; solo-0: no live leader (kafka-topics --under-min-isr-partitions)
    assert s.under_min_isr_count == 3
    assert s.leaders_by_broker == {2: 2}
    # broker 1 prefers t-0 and solo-0, leads neither now
    assert s.preferred_by_broker == {1: (2, 2), 2: (0, 1)}
    assert (s.leader_elections, s.unclean_leader_elections) == (1, 0)  # t-0 moved from 1 to 2


def test_unclean_election_is_counted() -> None:
    c = make()
    create(c, "t", ((1, 2),))
    c.run(BrokerFailure(2))
    c.run(BrokerFailure(1))
    c.run(startup(2, epoch=300))
    s = step_summary(c, AlterTopicConfig("a", "t", (("unclean.leader.election.enable", "true"),)))
    assert (s.leader_elections, s.unclean_leader_elections) == (1, 1)
    assert s.offline_count == 0 and s.leaders_by_broker == {2: 1}


def test_reassignment_progress() -> None:
    c = make((1, 2, 3, 4, 5, 6))
    create(c, "t", ((1, 2, 3),))
    s = step_summary(c, ReassignPartitions("r", (PartitionTarget("t", 0, (4, 5, 3)),)))
    assert s.reassigning_count == 1
    (r,) = s.reassignments
    assert (r.target, r.adding, r.removing, r.isr) == ((4, 5, 3), (4, 5), (1, 2), (1, 2, 3))
    assert r.progress == pytest.approx(1 / 3)
    # during a reassignment the replication factor is the origin's: an ISR of the 3 origin replicas is full
    assert s.under_replicated_count == 0
    assert observe.ReassignmentInfo("t", 0, (), (), (), ()).progress == 1.0
    assert (r.percent, observe.ReassignmentInfo("t", 0, (), (), (), ()).percent) == (33, 100)
    assert observe.BucketSummary.from_dict(s.to_dict()) == s


def test_deleting_topic_is_not_offline_nor_imbalanced() -> None:
    c = make()
    create(c, "gone", ((1,),))
    c.run(BrokerFailure(1))
    s = step_summary(c, DeleteTopic("d", "gone"))
    assert 1 not in s.preferred_by_broker


def test_lists_are_capped_and_round_trip() -> None:
    c = make()
    create(c, "t", tuple((1, 2) for _ in range(5)))
    before = c.ctx
    c.run(BrokerFailure(2))
    s = observe.bucket_summary(before, c.ctx, limit=2)
    assert s.under_replicated_count == 5 and len(s.under_replicated) == 2
    assert observe.BucketSummary.from_dict(s.to_dict()) == s
    assert observe.BucketSummary.from_dict({}) == observe.BucketSummary()


def test_partition_without_leadership_counts_as_leaderless() -> None:
    c = make()
    create(c, "t", ((1, 2),))
    ctx = c.ctx
    del ctx.partition_leadership[next(iter(ctx.partition_leadership))]
    s = observe.summarize(ctx)
    # Kafka's auto rebalance counts a partition as led by another only from its leadership information
    assert s.leaders_by_broker == {} and s.preferred_by_broker == {1: (0, 1)}


def test_bad_min_isr_config_reads_as_the_default() -> None:
    c = make()
    create(c, "t", ((1, 2),))
    c.ctx.topic_configs["t"] = {"min.insync.replicas": "many"}
    assert observe.summarize(c.ctx).under_min_isr_count == 0


def test_merge_sums_counts_and_orders_lists() -> None:
    a = observe.BucketSummary(
        {"OnlinePartition": 2},
        {1: 2},
        {1: (0, 2)},
        1,
        1,
        0,
        1,
        (observe.PartitionInfo("z", 0, (1, 2), 1, (1,)),),
        (),
        (observe.ReassignmentInfo("z", 1, (3,), (3,), (1,), (1,)),),
        2,
        0,
    )
    b = observe.BucketSummary(
        {"OnlinePartition": 1, "OfflinePartition": 1},
        {1: 1, 2: 1},
        {1: (1, 1), 2: (0, 1)},
        1,
        0,
        1,
        0,
        (observe.PartitionInfo("a", 3, (2, 1), 2, (2,)),),
        (observe.PartitionInfo("b", 0, (4,), -1, (4,)),),
        (),
        1,
        1,
    )
    m = observe.merge([a, b])
    assert m.partitions_by_state == {"OfflinePartition": 1, "OnlinePartition": 3}
    assert m.leaders_by_broker == {1: 3, 2: 1}
    assert m.preferred_by_broker == {1: (1, 3), 2: (0, 1)}
    assert (m.under_replicated_count, m.under_min_isr_count, m.offline_count, m.reassigning_count) == (2, 1, 1, 1)
    assert [p.topic for p in m.under_replicated] == ["a", "z"]
    assert (m.leader_elections, m.unclean_leader_elections) == (3, 1)
    assert len(observe.merge([a, b], limit=1).under_replicated) == 1
