"""Versioned JSON forms of events and decisions: round trips and strict decoding."""

from __future__ import annotations

import json

import pytest

from core.codec.decisions import decision_from_json, decision_to_json, encode_decision
from core.codec.events import event_from_json, event_to_json
from core.decisions import AdminResult, AdminStatus, BrokerRequest, Decision, StateChangeFailure, ZkOp, ZkWrite
from core.errors import FormatError
from core.events import (
    AlterPartition,
    AlterTopicConfig,
    AutoRebalanceTick,
    BrokerFailure,
    BrokerStartup,
    CancelReassignment,
    ControlledShutdown,
    ControllerFailover,
    CreatePartitions,
    CreateTopic,
    DeleteTopic,
    ElectLeaders,
    Event,
    LeaderAndIsrResponse,
    LogDirFailure,
    PartitionError,
    ReassignPartitions,
    StopReplicaResponse,
    Tick,
)
from core.kafka.requests import ControlledShutdownResponse, LeaderAndIsrRequest, RequestApi, WireBody
from core.kafka.zkdata import (
    decode_preferred_election,
    decode_reassignment,
    decode_topic_znode,
    encode_preferred_election,
    encode_reassignment,
    encode_topic_znode,
)
from core.model import Broker, ElectionType, Endpoint, PartitionTarget, TopicPartition
from core.snapshot import PartitionStateZnode, TopicZnode, ZkSnapshot

pytestmark = pytest.mark.unit

SNAP = ZkSnapshot(
    3,
    2,
    (Broker(1, 10, "r1", (Endpoint("PLAINTEXT", "h", 9092),)),),
    (TopicZnode("t", ((0, (1, 2)),), ((0, (2,)),), ((0, (1,)),), "id", 4),),
    ((TopicPartition("t", 0), PartitionStateZnode(1, 2, (1, 2), 3, 4, 0)),),
    (PartitionTarget("t", 0, (2,)),),
    ("gone",),
    (TopicPartition("t", 0),),
    (("t", (("unclean.leader.election.enable", "true"),)),),
)

EVENTS: list[Event] = [
    CreateTopic("r", "t", 2, 1, configs=(("a", "b"),)),
    CreateTopic("r", "t", 2, 2, ((1, 2), (2, 1))),
    DeleteTopic("r", "t"),
    CreatePartitions("r", "t", 3, ((1,),)),
    ReassignPartitions("r", (PartitionTarget("t", 0, (1, 2)),)),
    CancelReassignment("r", (TopicPartition("t", 0),)),
    ElectLeaders("r", ElectionType.PREFERRED, (TopicPartition("t", 0),)),
    ElectLeaders("r", ElectionType.UNCLEAN),
    AlterTopicConfig("r", "t", (("unclean.leader.election.enable", "true"),)),
    BrokerStartup(1, 5, "rack", (Endpoint("PLAINTEXT", "h", 9092, "SSL"),)),
    BrokerFailure(1, 5),
    AlterPartition(1, 5, "t", 0, 1, 2, (1, 2), 0),
    LeaderAndIsrResponse(1, (PartitionError("t", 0, 56),)),
    StopReplicaResponse(1, (PartitionError("t", 0, 0),), 0),
    ControlledShutdown(1, 5),
    LogDirFailure(1),
    ControllerFailover(0, SNAP),
    AutoRebalanceTick((1, 2)),
    Tick(5),
]


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: e.TYPE)
def test_event_round_trip(event: Event) -> None:
    assert event_from_json(event_to_json(event)) == event
    assert isinstance(event.topics(), tuple)


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("nope", "$"),
        ("[]", "$"),
        ('{"version":2,"type":"tick"}', "version"),
        ('{"version":1,"type":"what"}', "type"),
        ('{"version":1,"type":"delete_topic","request_id":"r","topic":"a b"}', "topic"),
        ('{"version":1,"type":"delete_topic","request_id":"r","topic":".."}', "topic"),
        ('{"version":1,"type":"delete_topic","request_id":"r","topic":"' + "x" * 250 + '"}', "topic"),
        ('{"version":1,"type":"delete_topic","request_id":"","topic":"t"}', "request_id"),
        ('{"version":1,"type":"delete_topic","request_id":3,"topic":"t"}', "request_id"),
        (
            '{"version":1,"type":"create_topic","request_id":"r","topic":"t","partitions":0,"replication_factor":1}',
            "partitions",
        ),
        (
            '{"version":1,"type":"create_topic","request_id":"r","topic":"t","partitions":true,"replication_factor":1}',
            "partitions",
        ),
        (
            '{"version":1,"type":"create_topic","request_id":"r","topic":"t","replica_assignment":{"0":[1],"2":[1]}}',
            "replica_assignment",
        ),
        (
            '{"version":1,"type":"create_topic","request_id":"r","topic":"t","replica_assignment":{"0":[1],"1":[1,2]}}',
            "replica_assignment",
        ),
        (
            '{"version":1,"type":"create_topic","request_id":"r","topic":"t","replica_assignment":{"x":[1]}}',
            "replica_assignment.x",
        ),
        (
            '{"version":1,"type":"create_topic","request_id":"r","topic":"t","replica_assignment":{"0":[]}}',
            "replica_assignment.0",
        ),
        (
            '{"version":1,"type":"create_topic","request_id":"r","topic":"t","replica_assignment":{"0":[1,1]}}',
            "replica_assignment.0",
        ),
        (
            '{"version":1,"type":"create_topic","request_id":"r","topic":"t","replica_assignment":{"0":"x"}}',
            "replica_assignment.0",
        ),
        (
            '{"version":1,"type":"create_topic","request_id":"r","topic":"t","partitions":2,"replica_assignment":{"0":[1]}}',
            "partitions",
        ),
        (
            '{"version":1,"type":"create_topic","request_id":"r","topic":"t","replication_factor":2,"replica_assignment":{"0":[1]}}',
            "replication_factor",
        ),
        (
            '{"version":1,"type":"create_topic","request_id":"r","topic":"t","partitions":1,"replication_factor":1,"configs":{"a":1}}',
            "configs.a",
        ),
        ('{"version":1,"type":"reassign_partitions","request_id":"r","partitions":[]}', "partitions"),
        ('{"version":1,"type":"reassign_partitions","request_id":"r","partitions":{}}', "partitions"),
        (
            '{"version":1,"type":"reassign_partitions","request_id":"r","partitions":[{"topic":"t","partition":0,"replicas":[]}]}',
            "partitions[0].replicas",
        ),
        (
            '{"version":1,"type":"reassign_partitions","request_id":"r","partitions":[{"topic":"t","partition":0,"replicas":[1]},{"topic":"t","partition":0,"replicas":[1]}]}',
            "partitions[1].partition",
        ),
        ('{"version":1,"type":"cancel_reassignment","request_id":"r","partitions":[]}', "partitions"),
        ('{"version":1,"type":"elect_leaders","request_id":"r","election_type":"x"}', "election_type"),
        ('{"version":1,"type":"alter_topic_config","request_id":"r","topic":"t","configs":{}}', "configs"),
        ('{"version":1,"type":"broker_startup","broker_id":-1,"broker_epoch":1}', "broker_id"),
        (
            '{"version":1,"type":"alter_partition","broker_id":1,"broker_epoch":1,"topic":"t","partition":0,"leader_epoch":0,"partition_epoch":0,"new_isr":[1,2147483648]}',
            "new_isr[1]",
        ),
        ('{"version":1,"type":"broker_failure","broker_id":1,"broker_epoch":"x"}', "broker_epoch"),
        ('{"version":1,"type":"tick","now_ms":-1}', "now_ms"),
    ],
)
def test_event_decoding_is_strict(text: str, field: str) -> None:
    with pytest.raises(FormatError) as e:
        event_from_json(text)
    assert e.value.field == field


DECISIONS = [
    ZkWrite(ZkOp.SET, "/a", "{}", 3),
    ZkWrite(ZkOp.CREATE, "/a", None, -1, make_parents=True),
    BrokerRequest(1, RequestApi.LEADER_AND_ISR, LeaderAndIsrRequest(0, 1, 5, 0, (), ())),
    BrokerRequest(2, RequestApi.CONTROLLED_SHUTDOWN_RESPONSE, ControlledShutdownResponse(0, (TopicPartition("t", 1),))),
    AdminResult("r", "create_topic", AdminStatus.ERROR, "X", "m", {"a": 1, "b": [1, {"c": None}]}),
    StateChangeFailure("t-0", "NewPartition", "OnlinePartition", "why"),
]


@pytest.mark.parametrize("decision", DECISIONS, ids=lambda d: d.TYPE)
def test_decision_round_trip(decision: Decision) -> None:
    assert decision_from_json(decision_to_json(decision), typed=True) == decision


@pytest.mark.parametrize(
    "write",
    [
        ZkWrite(ZkOp.SET, "/brokers/topics/t/partitions/0/state", '{"controller_epoch":1,"isr":[2,3],"leader":2}', 5),
        ZkWrite(ZkOp.CREATE, '/a/\u00fc"\\\n\u2028', "d\u00e4t\u00e4 \x00 \t \U0001f600", -1, True),
        ZkWrite(ZkOp.DELETE, "/x", None),
        ZkWrite(ZkOp.UPSERT, "/config/topics/t", "", -1, False),
        ZkWrite(ZkOp.DELETE_TREE, "/admin/delete_topics/t", None, 0),
    ],
)
def test_a_zk_writes_text_is_the_generic_encoding_of_its_object(write: ZkWrite) -> None:
    """ZooKeeper writes have their own writer (one per partition a broker failure moves): the same text."""
    assert decision_to_json(write) == json.dumps(encode_decision(write), separators=(",", ":"), sort_keys=True)
    assert decision_from_json(decision_to_json(write)) == write


def test_a_request_body_is_an_object_in_the_row_and_stays_one_on_decoding() -> None:
    body = ControlledShutdownResponse(0, (TopicPartition("t", 1),))
    text = decision_to_json(BrokerRequest(2, RequestApi.CONTROLLED_SHUTDOWN_RESPONSE, body))
    row = json.loads(text)
    assert row["body"] == {"errorCode": 0, "remainingPartitions": [{"topicName": "t", "partitionIndex": 1}]}
    assert '\\"' not in text  # no JSON escaped inside a string
    decoded = decision_from_json(text)
    assert isinstance(decoded, BrokerRequest) and isinstance(decoded.body, WireBody)
    assert decoded.body.obj == row["body"]
    # a decoded row encodes back to the same row
    assert decision_to_json(decoded) == text


@pytest.mark.parametrize(
    "text",
    [
        "nope",
        '{"version":1,"type":"zk_write","op":"x","path":"/a"}',
        '{"version":1,"type":"broker_request","broker_id":1,"api":"x","body":{}}',
        '{"version":1,"type":"broker_request","broker_id":1,"api":"LeaderAndIsr","body":"{}"}',
        '{"version":1,"type":"admin_result","request_id":"r","command":"c","status":"x"}',
        '{"version":1,"type":"x"}',
        '{"version":1,"type":"zk_write","op":"set","path":"/a","make_parents":"yes"}',
    ],
)
def test_decision_decoding_is_strict(text: str) -> None:
    with pytest.raises(FormatError):
        decision_from_json(text)


def test_zk_codecs_round_trip() -> None:
    from core.model import ReplicaAssignment

    data = encode_topic_znode({0: ReplicaAssignment((1, 2, 3), (3,), (1,)), 1: ReplicaAssignment((2,))}, None)
    z = decode_topic_znode("t", data)
    assert z.partitions == ((0, (1, 2, 3)), (1, (2,))) and z.adding_replicas == ((0, (3,)),) and z.topic_id is None
    assert '"version":2' in data
    targets = (PartitionTarget("t", 0, (1, 2)),)
    assert decode_reassignment(encode_reassignment(targets)) == targets
    tps = (TopicPartition("t", 1),)
    assert decode_preferred_election(encode_preferred_election(tps)) == tps
