"""Simulated brokers, pure: Kafka's broker-side checks of each request (LeaderAndIsr, StopReplica,
UpdateMetadata), parsing included. Replication: ``test_simbrokers_partition.py``; controlled shutdown:
``test_simbrokers_shutdown.py``.

The tests play the controller with :class:`MiniController`, a fake that keeps each partition's leader,
epochs and ISR the way ZooKeeper would, sends LeaderAndIsr to the replicas and commits AlterPartition.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from simbrokers_support import TP, MiniController, T, cluster, envelope, lisr_body, part

from core.codec.events import event_from_json, event_to_json
from core.errors import FormatError
from core.events import LeaderAndIsrResponse, LogDirFailure, StopReplicaResponse
from core.kafka.envelope import encode_request, parse_request
from core.kafka.error_codes import KafkaError
from core.kafka.requests import RequestApi
from simbrokers.broker import Faults, SimBroker
from simbrokers.partition import Role

pytestmark = pytest.mark.unit


# ----------------------------------------------------------------------------- request parsing


def test_parse_request_names_the_field_and_reason() -> None:
    key, value = encode_request(
        1, RequestApi.LEADER_AND_ISR, 3, 7, lisr_body(leader=1, leader_epoch=0, isr=[1], replicas=[1])
    )
    env = parse_request(key, value)
    assert (env.broker_id, env.controller_epoch, env.batch_id) == (1, 3, 7)
    bad = json.loads(value)
    del bad["body"]["topicStates"][0]["partitionStates"][0]["leader"]
    with pytest.raises(FormatError) as e:
        parse_request(key, json.dumps(bad))
    assert e.value.field == "body.topicStates[0].partitionStates[0].leader"
    assert e.value.reason == "is required"
    with pytest.raises(FormatError) as e:
        parse_request(b"x", value)
    assert e.value.field == "key"
    with pytest.raises(FormatError) as e:
        parse_request(key, json.dumps({**json.loads(value), "api": "Produce"}))
    assert e.value.field == "api"


def test_body_given_as_json_text_is_accepted() -> None:
    body = lisr_body(leader=1, leader_epoch=0, isr=[1], replicas=[1])
    value = json.dumps({"api": "LeaderAndIsr", "controllerEpoch": 1, "batchId": 1, "body": json.dumps(body)})
    assert (
        parse_request(b"1", value).body == parse_request(*encode_request(1, RequestApi.LEADER_AND_ISR, 1, 1, body)).body
    )


# ----------------------------------------------------------------------------- broker-side checks


def test_leader_and_isr_makes_leader_and_follower_and_answers_in_core_json() -> None:
    brokers, _ = cluster()
    ctl = MiniController(brokers, [1, 2, 3])
    ctl.elect(1, [1, 2, 3])
    assert part(brokers[1]).role is Role.LEADER
    assert part(brokers[2]).role is Role.FOLLOWER and part(brokers[2]).leader == 1
    resp = ctl.responses[0]
    assert isinstance(resp, LeaderAndIsrResponse)
    assert event_from_json(event_to_json(resp)) == resp
    assert [p.error_code for p in resp.partitions] == [KafkaError.NONE]


def test_stale_controller_epoch_is_refused() -> None:
    b = SimBroker(1)
    b.handle(
        envelope(1, RequestApi.LEADER_AND_ISR, lisr_body(leader=1, leader_epoch=0, isr=[1], replicas=[1], c_epoch=5)), 0
    )
    [resp] = b.handle(
        envelope(1, RequestApi.LEADER_AND_ISR, lisr_body(leader=1, leader_epoch=1, isr=[1], replicas=[1], c_epoch=4)), 0
    )
    assert isinstance(resp, LeaderAndIsrResponse)
    assert resp.error_code == KafkaError.STALE_CONTROLLER_EPOCH
    assert [p.error_code for p in resp.partitions] == [KafkaError.STALE_CONTROLLER_EPOCH]
    assert part(b).leader_epoch == 0


@pytest.mark.parametrize("epoch", [2, 3])
def test_leader_epoch_not_newer_is_ignored(epoch: int) -> None:
    b = SimBroker(1)
    b.handle(
        envelope(1, RequestApi.LEADER_AND_ISR, lisr_body(leader=1, leader_epoch=3, isr=[1, 2], replicas=[1, 2])), 0
    )
    [resp] = b.handle(
        envelope(
            1, RequestApi.LEADER_AND_ISR, lisr_body(leader=2, leader_epoch=epoch, isr=[2], replicas=[1, 2]), batch=1
        ),
        0,
    )
    assert isinstance(resp, LeaderAndIsrResponse)
    assert resp.error_code == KafkaError.NONE
    assert [p.error_code for p in resp.partitions] == [KafkaError.STALE_CONTROLLER_EPOCH]
    assert part(b).role is Role.LEADER and part(b).leader_epoch == 3


def test_partition_not_assigned_here_is_unknown() -> None:
    b = SimBroker(1)
    [resp] = b.handle(
        envelope(1, RequestApi.LEADER_AND_ISR, lisr_body(leader=2, leader_epoch=0, isr=[2], replicas=[2, 3])), 0
    )
    assert isinstance(resp, LeaderAndIsrResponse)
    assert [p.error_code for p in resp.partitions] == [KafkaError.UNKNOWN_TOPIC_OR_PARTITION]
    assert TP not in b.partitions


def test_stale_broker_epoch_is_refused() -> None:
    b = SimBroker(1, broker_epoch=50)
    body = lisr_body(leader=1, leader_epoch=0, isr=[1], replicas=[1]) | {"brokerEpoch": 49}
    [resp] = b.handle(envelope(1, RequestApi.LEADER_AND_ISR, body), 0)
    assert isinstance(resp, LeaderAndIsrResponse)
    assert resp.error_code == KafkaError.STALE_BROKER_EPOCH
    assert TP not in b.partitions


def test_replayed_request_is_dropped_but_other_bucket_messages_apply() -> None:
    b = SimBroker(1)
    env = envelope(1, RequestApi.LEADER_AND_ISR, lisr_body(leader=1, leader_epoch=0, isr=[1], replicas=[1]), batch=9)
    assert len(b.handle(env, 0)) == 1
    assert b.handle(env, 0) == []
    other = lisr_body(leader=1, leader_epoch=0, isr=[1], replicas=[1])
    other["topicStates"][0]["topicName"] = "other"
    assert len(b.handle(envelope(1, RequestApi.LEADER_AND_ISR, other, batch=9), 0)) == 1
    older = lisr_body(leader=1, leader_epoch=5, isr=[1], replicas=[1])
    assert b.handle(envelope(1, RequestApi.LEADER_AND_ISR, older, batch=8), 0) == []  # an older batch
    assert part(b).leader_epoch == 0
    assert len(b.handle(envelope(1, RequestApi.LEADER_AND_ISR, older, batch=1, epoch=2), 0)) == 1  # newer controller


def test_request_for_another_broker_is_ignored() -> None:
    b = SimBroker(1)
    assert (
        b.handle(envelope(2, RequestApi.LEADER_AND_ISR, lisr_body(leader=2, leader_epoch=0, isr=[2], replicas=[2])), 0)
        == []
    )


def stop_body(*, delete: bool, leader_epoch: int = -2) -> dict[str, Any]:
    return {
        "controllerId": 0,
        "controllerEpoch": 1,
        "brokerEpoch": -1,
        "topicStates": [
            {
                "topicName": T,
                "partitionStates": [{"partitionIndex": 0, "leaderEpoch": leader_epoch, "deletePartition": delete}],
            }
        ],
    }


def test_stop_replica_delete_reports_success() -> None:
    brokers, _ = cluster(2)
    MiniController(brokers, [1, 2]).elect(1, [1, 2])
    [resp] = brokers[2].handle(envelope(2, RequestApi.STOP_REPLICA, stop_body(delete=True), batch=5), 0)
    assert isinstance(resp, StopReplicaResponse)
    assert [p.error_code for p in resp.partitions] == [KafkaError.NONE]
    assert TP not in brokers[2].partitions


def test_stop_replica_without_delete_stops_and_sends_no_response() -> None:
    brokers, _ = cluster(2)
    MiniController(brokers, [1, 2]).elect(1, [1, 2])
    assert (
        brokers[2].handle(envelope(2, RequestApi.STOP_REPLICA, stop_body(delete=False, leader_epoch=1), batch=5), 0)
        == []
    )
    assert part(brokers[2]).role is Role.STOPPED


def test_stop_replica_with_older_leader_epoch_is_fenced() -> None:
    brokers, _ = cluster(2)
    ctl = MiniController(brokers, [1, 2])
    ctl.elect(1, [1, 2])
    ctl.elect(1, [1, 2])
    [resp] = brokers[2].handle(envelope(2, RequestApi.STOP_REPLICA, stop_body(delete=True, leader_epoch=0), batch=5), 0)
    assert isinstance(resp, StopReplicaResponse)
    assert [p.error_code for p in resp.partitions] == [KafkaError.FENCED_LEADER_EPOCH]


def test_disk_failure_fails_stop_replica_and_leader_and_isr_and_is_reported_once() -> None:
    brokers, _ = cluster(2)
    MiniController(brokers, [1, 2]).elect(1, [1, 2])
    assert brokers[2].inject(Faults(disk_failed=True)) == [LogDirFailure(2)]
    assert brokers[2].inject(Faults(disk_failed=True)) == []
    assert brokers[2].inject(Faults()) == [] and brokers[2].faults.disk_failed  # sticks until restart
    [resp] = brokers[2].handle(envelope(2, RequestApi.STOP_REPLICA, stop_body(delete=True), batch=5), 0)
    assert isinstance(resp, StopReplicaResponse)
    assert [p.error_code for p in resp.partitions] == [KafkaError.KAFKA_STORAGE_ERROR]
    [lisr] = brokers[2].handle(
        envelope(2, RequestApi.LEADER_AND_ISR, lisr_body(leader=2, leader_epoch=5, isr=[2], replicas=[1, 2]), batch=6),
        0,
    )
    assert isinstance(lisr, LeaderAndIsrResponse)
    assert [p.error_code for p in lisr.partitions] == [KafkaError.KAFKA_STORAGE_ERROR]


def test_update_metadata_fills_the_cache_and_stale_one_is_ignored() -> None:
    b = SimBroker(1)
    body = {
        "controllerId": 0,
        "controllerEpoch": 2,
        "brokerEpoch": -1,
        "topicStates": [
            {
                "topicName": T,
                "topicId": "x",
                "partitionStates": [
                    {
                        "partitionIndex": 0,
                        "controllerEpoch": 2,
                        "leader": 2,
                        "leaderEpoch": 4,
                        "isr": [2],
                        "zkVersion": 7,
                        "replicas": [1, 2],
                        "offlineReplicas": [1],
                    }
                ],
            }
        ],
        "liveBrokers": [
            {
                "id": 2,
                "endpoints": [{"port": 9093, "host": "h2", "listener": "PLAINTEXT", "securityProtocol": 0}],
                "rack": None,
            }
        ],
    }
    b.handle(envelope(1, RequestApi.UPDATE_METADATA, body), 0)
    assert b.metadata.partitions[TP].leader == 2
    assert (leader := b.leader_address(2)) is not None and leader.port == 9093
    stale = body | {"controllerEpoch": 1, "liveBrokers": []}
    b.handle(envelope(1, RequestApi.UPDATE_METADATA, stale, batch=1), 0)
    assert 2 in b.metadata.brokers


# ----------------------------------------------------------------------------- DescribeLogDirs


def test_describe_log_dirs_reports_the_partitions_being_reassigned_in_kafkas_shape() -> None:
    brokers, fabric = cluster(3)
    ctl = MiniController(brokers, [1, 2])
    ctl.elect(1, [1, 2])
    part(brokers[1]).append(5)
    # nothing is moving: the answer names no partition
    assert brokers[1].describe_log_dirs(7).results[0].topics == ()
    # KIP-455: replica 3 is being added (the controller's LeaderAndIsr names it to every replica)
    body = lisr_body(leader=1, leader_epoch=1, isr=[1, 2], replicas=[1, 2, 3], partition_epoch=1)
    body["topicStates"][0]["partitionStates"][0]["addingReplicas"] = [3]
    for b in (1, 2, 3):
        brokers[b].handle(envelope(b, RequestApi.LEADER_AND_ISR, body, batch=9), 0)
    report = brokers[1].describe_log_dirs(7)
    assert (report.broker_id, report.time_ms) == (1, 7)
    [result] = report.results
    assert (result.log_dir, result.error_code) == ("/simbrokers/1", 0)
    # partitionSize: the log end offset in records of record_bytes (1 KiB); offsetLag: HW - LEO, at least 0
    assert [(str(tp), n) for tp, n in report.replica_sizes()] == [("orders-0", 5 * 1024)]
    assert [(str(tp), n) for tp, n in brokers[3].describe_log_dirs(7).replica_sizes()] == [("orders-0", 0)]
    fabric.step(10)
    assert [n for _, n in brokers[3].describe_log_dirs(8).replica_sizes()] == [5 * 1024]
    # a failed disk answers KAFKA_STORAGE_ERROR for its directory, with no partitions
    brokers[2].inject(Faults(disk_failed=True))
    [failed] = brokers[2].describe_log_dirs(9).results
    assert (failed.error_code, failed.topics) == (KafkaError.KAFKA_STORAGE_ERROR, ())
