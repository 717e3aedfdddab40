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
