"""The pure rules behind ``livectl demo`` (:mod:`livectl.scenario`): plain values, no services.

They live beside the end-to-end test that depends on them; the marker is ``unit``.
"""

from __future__ import annotations

from typing import Any

import pytest

from livectl import scenario as sc

pytestmark = pytest.mark.unit


def view(**topics: dict[int, sc.PartitionView]) -> sc.ClusterView:
    return sc.ClusterView(brokers={1: 10, 2: 11, 3: 12, 4: 13}, topics=topics)


def test_reassignment_targets_move_onto_other_brokers() -> None:
    current = {0: (1, 2, 3), 1: (2, 3, 4), 2: (3, 4, 1)}
    targets = sc.reassignment_targets(current, [1, 2, 3, 4, 5])
    assert targets == {0: (4, 5, 1), 1: (5, 1, 2), 2: (2, 5, 3)}
    for p, t in targets.items():
        assert len(set(t)) == 3 and t != current[p]
    # no broker outside the assignment: the same replicas (nothing to move to)
    assert sc.reassignment_targets({0: (1, 2)}, [1, 2]) == {0: (1, 2)}


def test_diff_views_names_leader_isr_and_topic_changes() -> None:
    old = view(t={0: sc.PartitionView((1, 2, 3), leader=1, leader_epoch=0, isr=(1, 2, 3))})
    new = sc.ClusterView(
        brokers={1: 10, 2: 11, 4: 13, 5: 20},
        topics={
            "t": {0: sc.PartitionView((1, 2, 3), leader=2, leader_epoch=1, isr=(2, 3))},
            "u": {0: sc.PartitionView((4,), leader=4, leader_epoch=0, isr=(4,))},
        },
        delete_topics=("t",),
    )
    assert sc.diff_views(old, new) == [
        "broker 5 registered (broker epoch 20)",
        "broker 3 registration gone",
        "topic u created: 1 partitions, replicas 0:[4]",
        "t-0 leader 1 -> 2, epoch 1, isr [1,2,3] -> [2,3]",
        "u-0 online: leader 4, epoch 0, isr [4]",
        "/admin/delete_topics/t created (topic queued for deletion)",
    ]
    assert sc.diff_views(new, new) == []


def test_describe_requests_one_line_per_batch_and_api() -> None:
    lisr = {
        "topicStates": [
            {
                "topicName": "t",
                "partitionStates": [
                    {"partitionIndex": 0, "leader": 2, "leaderEpoch": 1, "isr": [2, 3], "isNew": False}
                ],
            }
        ]
    }
    msgs = [
        {"api": "LeaderAndIsr", "brokerId": 2, "batchId": 7, "body": lisr},
        {"api": "LeaderAndIsr", "brokerId": 3, "batchId": 7, "body": lisr},
        {
            "api": "StopReplica",
            "brokerId": 1,
            "batchId": 7,
            "body": {
                "topicStates": [
                    {
                        "topicName": "t",
                        "partitionStates": [{"partitionIndex": 0, "leaderEpoch": -2, "deletePartition": True}],
                    }
                ]
            },
        },
        {
            "api": "ControlledShutdownResponse",
            "brokerId": 4,
            "batchId": 8,
            "body": {"errorCode": 0, "remainingPartitions": [{"topicName": "t", "partitionIndex": 0}]},
        },
    ]
    assert sc.describe_requests(msgs) == [
        "LeaderAndIsr -> brokers 2,3 (batch 7): t-0 leader 2 epoch 1 isr [2,3]",
        "StopReplica -> broker 1 (batch 7): t-0 (delete)",
        "ControlledShutdownResponse -> broker 4 (batch 8): ok, still leading t-0",
    ]
    # a shared UpdateMetadata (one message, its addressees named) reads as the per-broker ones did
    um = {"topicStates": [], "liveBrokers": [{"id": 1}, {"id": 3}]}
    shared = {"api": "UpdateMetadata", "brokerId": -1, "batchId": 9, "body": um,
              "addressees": [{"brokerId": 1, "brokerEpoch": 5}, {"brokerId": 3, "brokerEpoch": 6}]}  # fmt: skip
    assert sc.describe_requests([shared]) == [
        "UpdateMetadata -> brokers 1,3 (batch 9): no partition changes; live brokers [1,3]"
    ]


def test_brokers_disagree_compares_each_replica_with_zookeeper() -> None:
    v = view(t={0: sc.PartitionView((1, 2), leader=1, leader_epoch=3, isr=(1, 2))})
    agree: dict[int, dict[str, Any]] = {
        1: {"partitions": {"t-0": {"role": "leader", "leader": 1, "leader_epoch": 3}}},
        2: {"partitions": {"t-0": {"role": "follower", "leader": 1, "leader_epoch": 3}}},
        3: {"partitions": {}},
    }
    assert sc.brokers_disagree(v, agree) == []
    stale: dict[int, dict[str, Any]] = {
        **agree,
        2: {"partitions": {"t-0": {"role": "follower", "leader": 1, "leader_epoch": 2}}},
    }
    assert len(sc.brokers_disagree(v, stale)) == 1
    stray: dict[int, dict[str, Any]] = {
        **agree,
        3: {"partitions": {"t-0": {"role": "stopped", "leader": -1, "leader_epoch": 3}}},
    }
    assert sc.brokers_disagree(v, stray) == ["broker 3 still hosts t-0, which is not assigned to it"]
    # a broker without status (not running) is not compared
    assert sc.brokers_disagree(v, {1: agree[1]}) == []


def test_leadership_and_preference_checks() -> None:
    v = view(
        t={
            0: sc.PartitionView((3, 1), leader=1, leader_epoch=1, isr=(1, 3)),
            1: sc.PartitionView((2, 4), leader=2, leader_epoch=0, isr=(2,)),
        }
    )
    assert sc.leadership_problems(v, not_on=[3]) == ["t-0 isr [1,3] still has [3]"]
    assert sc.not_preferred(v) == ["t-0 led by 1, preferred 3"]
    assert sc.missing_from_isr(v, 4) == ["t-1 isr [2] lacks 4"]


@pytest.mark.parametrize("brokers", range(3, 10))
def test_demo_plan_fits_every_broker_count(brokers: int) -> None:
    plan = sc.demo_plan(brokers)
    ids = range(1, brokers + 1)
    assert plan.kill in ids and plan.shutdown in ids and plan.kill != plan.shutdown
    # the topic deleted last lives on brokers that are up then: the deletion can complete
    audit_brokers = {b for r in plan.audit for b in r}
    assert len(audit_brokers) == 2 and audit_brokers <= set(ids) and plan.shutdown not in audit_brokers
    assert plan.audit[0] == plan.audit[1][::-1]
    # every payments partition has a broker to move onto, wherever the controller placed it
    assert 2 <= plan.payments_rf < brokers
    current = {p: tuple((p + i) % brokers + 1 for i in range(plan.payments_rf)) for p in range(3)}
    targets = sc.reassignment_targets(current, list(ids))
    assert all(set(targets[p]) != set(current[p]) for p in current), (current, targets)


def test_demo_plan_on_three_brokers_and_on_more() -> None:
    # three (the real Kafka brokers): 3 killed and restarted, 2 shut down, payments RF 2, audit on 1 and 3
    assert sc.demo_plan(3) == sc.DemoPlan(3, kill=3, shutdown=2, payments_rf=2, audit=((1, 3), (3, 1)))
    # more: the simulated demo as it always was
    assert sc.demo_plan(5) == sc.DemoPlan(5, kill=3, shutdown=5, payments_rf=3, audit=((1, 2), (2, 1)))
    with pytest.raises(ValueError, match="brokers: the scenario needs at least 3"):
        sc.demo_plan(2)


def test_hosted_partitions_are_the_partition_directories() -> None:
    names = [
        "orders-0",
        "orders-11",
        "my.topic-2",
        "audit-0.8f3b2a6c1d4e4f0a9b7c6d5e4f3a2b1c-delete",
        "orders-1.0a1b2c3d4e5f60718293a4b5c6d7e8f9-future",
        "__consumer_offsets-3",
        "meta.properties",
        "recovery-point-offset-checkpoint",
    ]
    assert sc.hosted_partitions(names) == ["my.topic-2", "orders-0", "orders-11"]


def test_kafka_broker_status_in_the_simulated_brokers_shape() -> None:
    metadata = {
        "t-0": sc.MetadataPartition(1, 3, (1, 2), (1, 2)),
        "t-1": sc.MetadataPartition(2, 0, (2,), (2, 1)),
        "u-0": sc.MetadataPartition(-1, -1, (), (3,), error_code=5),
    }
    status = sc.kafka_broker_status(2, metadata, ["t-0", "t-1", "gone-0"])
    assert status["partitions"] == {
        "t-0": {"role": "follower", "leader": 1, "leader_epoch": 3, "isr": [1, 2]},
        "t-1": {"role": "leader", "leader": 2, "leader_epoch": 0, "isr": [2]},
        # a log the metadata does not know: a role no check accepts
        "gone-0": {"role": None, "leader": None, "leader_epoch": None, "isr": []},
    }
    # a partition answered with an error is not in the cache
    assert sorted(status["kafka_metadata"]) == ["t-0", "t-1"]


def test_metadata_disagrees_compares_a_real_brokers_cache_with_zookeeper() -> None:
    v = view(t={0: sc.PartitionView((1, 2), leader=1, leader_epoch=3, isr=(1, 2))})
    good = {"t-0": sc.MetadataPartition(1, 3, (2, 1), (1, 2))}
    agree = {b: sc.kafka_broker_status(b, good, ["t-0"]) for b in (1, 2)}
    assert sc.brokers_disagree(v, agree) == []
    assert sc.metadata_disagrees(v, agree) == []
    # an ISR the broker has not heard of yet
    stale = {**agree, 2: sc.kafka_broker_status(2, {"t-0": sc.MetadataPartition(1, 3, (1,), (1, 2))}, ["t-0"])}
    assert sc.metadata_disagrees(v, stale) == [
        "broker 2's metadata: t-0 leader 1 epoch 3 isr [1] replicas [1,2]; "
        "ZooKeeper: leader 1 epoch 3 isr [1,2] replicas [1,2]"
    ]
    assert sc.brokers_disagree(v, stale) == sc.metadata_disagrees(v, stale)
    # a broker that does not answer (an empty view) agrees with nothing; a deleted topic still cached is named
    empty: dict[int, dict[str, Any]] = {1: {"partitions": {}, "kafka_metadata": {}}}
    assert sc.metadata_disagrees(v, empty) == ["broker 1's metadata has no t-0"]
    deleted = {1: sc.kafka_broker_status(1, {**good, "gone-0": sc.MetadataPartition(1, 0, (1,), (1,))}, ["t-0"])}
    assert sc.metadata_disagrees(v, deleted) == [
        "broker 1's metadata still has gone-0, a topic ZooKeeper no longer has"
    ]
    assert sc.metadata_disagrees(v, deleted, skip_topics=["gone"]) == []
    # the simulated brokers' documents have no cache: nothing to compare here
    assert sc.metadata_disagrees(v, {1: {"partitions": {}}}) == []
