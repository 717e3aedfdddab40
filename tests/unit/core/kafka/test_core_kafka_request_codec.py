"""The controller's requests as typed values and their one wire form (:mod:`core.kafka.request_encoding`,
read back by :mod:`core.kafka.request_parsing`): every variant reads back as itself, and the encoder
writes the bytes the builders wrote before bodies became values (pinned in
``data/request_bodies_before.json``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from core_support import Cluster, every_api_requests, typed_body

from core.decisions import BrokerRequest
from core.errors import FormatError
from core.events import (
    BrokerStartup,
    CreateTopic,
    ReassignPartitions,
)
from core.kafka.request_encoding import EncodeMemo, body_dict, encode_body, encode_text, wire_object
from core.kafka.request_parsing import parse_body
from core.kafka.requests import (
    ZERO_UUID,
    AlterPartitionResponse,
    AlterPartitionResult,
    BrokerAddress,
    ControlledShutdownResponse,
    LeaderAndIsrRequest,
    LisrPartitionState,
    MetadataBroker,
    MetadataEndpoint,
    MetadataPartitionState,
    RequestApi,
    RequestBody,
    StopReplicaPartition,
    StopReplicaRequest,
    UpdateMetadataRequest,
    WireBody,
)
from core.model import EPOCH_DURING_DELETE, LEADER_DURING_DELETE, Endpoint, PartitionTarget, TopicPartition

pytestmark = pytest.mark.unit

PIN = Path(__file__).parent / "data" / "request_bodies_before.json"

_API = {
    LeaderAndIsrRequest: RequestApi.LEADER_AND_ISR,
    UpdateMetadataRequest: RequestApi.UPDATE_METADATA,
    StopReplicaRequest: RequestApi.STOP_REPLICA,
    ControlledShutdownResponse: RequestApi.CONTROLLED_SHUTDOWN_RESPONSE,
    AlterPartitionResponse: RequestApi.ALTER_PARTITION_RESPONSE,
}

_LISR = LisrPartitionState("t", 0, 3, 1, 4, (1, 2), 7, (1, 2, 3))
_LISR_FULL = LisrPartitionState("t", 1, 3, 2, 5, (2,), 8, (2, 3, 4), (4,), (3,), True, 1, "fPzmzu0y_L2k2TNhu7OvqA")
_UM = MetadataPartitionState("t", 0, 3, 1, 4, (1, 2), 7, (1, 2, 3))
_UM_DELETING = MetadataPartitionState(
    "u", 2, 3, LEADER_DURING_DELETE, EPOCH_DURING_DELETE, (1,), 9, (1, 2), (2,), "AQIDBAUGBwgJCgsMDQ4PEA"
)
_ENDPOINTS = (MetadataEndpoint(9092, "h1", "PLAINTEXT", 0), MetadataEndpoint(9192, "h1s", "EXTERNAL", 3))

VARIANTS: list[RequestBody] = [
    LeaderAndIsrRequest(0, 1, 101, 0, (_LISR, _LISR_FULL), (BrokerAddress(1, "h", 9092), BrokerAddress(2, "", -1))),
    LeaderAndIsrRequest(0, 1, -1, 0, (), ()),
    UpdateMetadataRequest(0, 1, 101, (_UM, _UM_DELETING), (MetadataBroker(1, _ENDPOINTS, "r1"), MetadataBroker(2, ()))),
    UpdateMetadataRequest(7, 2, 5, (), (MetadataBroker(3, _ENDPOINTS[:1], "r\u00e9"),)),  # brokers only
    StopReplicaRequest(0, 1, 102, (StopReplicaPartition("t", 0, 1, False), StopReplicaPartition("t", 1, -2, True))),
    StopReplicaRequest(0, 1, 102, (StopReplicaPartition("a", 0, -1, False), StopReplicaPartition("b", 0, 3, True))),
    ControlledShutdownResponse(0, ()),
    ControlledShutdownResponse(45, (TopicPartition("t", 0), TopicPartition("u", 3))),
    AlterPartitionResponse(0, ()),
    AlterPartitionResponse(0, (AlterPartitionResult("t", 0, 0, 3, 0, (3, 1), 1, 0, 7, "fPzmzu0y_L2k2TNhu7OvqA"),)),
    AlterPartitionResponse(0, (AlterPartitionResult("t", 0, 95, -1, -1, (), -1),), throttle_time_ms=20),
    # the same topic twice, apart: two topic entries, read back in order
    StopReplicaRequest(0, 1, 3, tuple(StopReplicaPartition(t, 0, 1, False) for t in ("a", "b", "a"))),
]


@pytest.mark.parametrize("body", VARIANTS, ids=lambda b: type(b).__name__)
def test_every_variant_reads_back_as_itself(body: RequestBody) -> None:
    api = _API[type(body)]
    data = encode_body(body)
    assert parse_body(api, json.loads(data)) == body
    assert body_dict(body) == json.loads(data)
    assert encode_text(body) == data.decode()
    assert hash(body) == hash(parse_body(api, json.loads(data)))


def test_the_wire_form_has_kafkas_fields_in_order() -> None:
    lisr = body_dict(VARIANTS[0])
    assert list(lisr) == ["controllerId", "controllerEpoch", "brokerEpoch", "type", "topicStates", "liveLeaders"]
    assert [list(t) for t in lisr["topicStates"]] == [["topicName", "topicId", "partitionStates"]] * 2
    assert [t["topicId"] for t in lisr["topicStates"]] == [ZERO_UUID, "fPzmzu0y_L2k2TNhu7OvqA"]
    um = body_dict(VARIANTS[2])
    assert um["liveBrokers"][0] == {
        "id": 1,
        "endpoints": [
            {"port": 9092, "host": "h1", "listener": "PLAINTEXT", "securityProtocol": 0},
            {"port": 9192, "host": "h1s", "listener": "EXTERNAL", "securityProtocol": 3},
        ],
        "rack": "r1",
    }
    assert um["liveBrokers"][1] == {"id": 2, "endpoints": [], "rack": None}
    assert um["topicStates"][1]["partitionStates"][0]["leader"] == LEADER_DURING_DELETE
    assert "topicId" not in body_dict(VARIANTS[4])["topicStates"][0]
    without = body_dict(VARIANTS[10])["topics"][0]["partitions"][0]
    assert "correlationId" not in without and body_dict(VARIANTS[10])["throttleTimeMs"] == 20
    assert body_dict(VARIANTS[9])["topics"][0]["partitions"][0]["correlationId"] == 7
    assert encode_body(VARIANTS[3]).count(b"\\u00e9") == 1  # non-ASCII escaped, as json.dumps writes it


def test_shared_partition_states_are_encoded_once_per_memo() -> None:
    states = (_UM, _UM_DELETING)
    a = UpdateMetadataRequest(0, 1, 101, states, ())
    b = UpdateMetadataRequest(0, 1, 102, states, ())
    memo = EncodeMemo()
    assert encode_text(a, memo) == encode_text(a) and encode_text(b, memo) == encode_text(b)
    assert len(memo) == 1
    # an equal tuple that is another object is encoded again, never confused with a stale entry
    c = UpdateMetadataRequest(0, 1, 103, (_UM,), ())
    assert encode_text(c, memo) == encode_text(c) and len(memo) == 2


def test_a_wire_body_is_its_own_object() -> None:
    obj = {"controllerId": 1, "controllerEpoch": 2, "topicStates": []}
    wire = WireBody(obj)
    assert wire_object(wire) is obj
    assert wire_object(VARIANTS[6]) == {"errorCode": 0, "remainingPartitions": []}
    assert BrokerRequest(1, RequestApi.UPDATE_METADATA, wire).body_json() == obj
    # compared by identity: two decodings of one row are two bodies (nothing hashes a JSON object's content)
    assert wire != WireBody(dict(obj)) and len({wire, WireBody(dict(obj))}) == 2


@pytest.mark.parametrize(
    ("api", "body", "field"),
    [
        (RequestApi.LEADER_AND_ISR, {"controllerId": 0, "controllerEpoch": 1}, "body.topicStates"),
        (
            RequestApi.UPDATE_METADATA,
            {"controllerId": 0, "controllerEpoch": 1, "liveBrokers": [{"id": 1, "endpoints": [{"host": "h"}]}]},
            "body.liveBrokers[0].endpoints[0].port",
        ),
        (
            RequestApi.ALTER_PARTITION_RESPONSE,
            {"topics": [{"topicName": "t", "partitions": [{"partitionIndex": -1}]}]},
            "body.topics[0].partitions[0].partitionIndex",
        ),
    ],
)
def test_a_malformed_body_names_the_field(api: RequestApi, body: dict[str, object], field: str) -> None:
    with pytest.raises(FormatError) as e:
        parse_body(api, body)
    assert e.value.field == field


def _pin_scenario() -> list[BrokerRequest]:
    """The batches the pin was taken from: every API (creation, AlterPartition accepted and refused, a
    broker failure, a controlled shutdown, a deletion), racks, a broker with three endpoints of different
    security protocols, a reassignment."""
    out = every_api_requests()
    c = Cluster.start([1, 2, 3], racks={1: "r1", 2: "r2"})
    endpoints = (
        Endpoint("PLAINTEXT", "h4", 9096),
        Endpoint("EXTERNAL", "h4s", 9196, "SSL"),
        Endpoint("SECURE", "h4x", 9296, "SASL_SSL"),
    )
    c.run(BrokerStartup(4, 104, "r\u00e9", endpoints))
    out += c.requests()
    c.run(CreateTopic("r1", "a.b", 3, 2), CreateTopic("r2", "z_z", 1, 3))
    out += c.requests()
    c.run(ReassignPartitions("r3", (PartitionTarget("a.b", 0, (4, 3)),)))
    out += c.requests()
    return out


def test_the_encoder_writes_the_bytes_the_builders_wrote() -> None:
    pinned = json.loads(PIN.read_text())
    # the pin holds each broker's copy: a shared UpdateMetadata is one request, whose copies (its body with
    # each addressee's broker epoch) are the bodies Kafka sends one by one
    got = [
        {"broker_id": r.broker_id, "api": r.api.value, "body": encode_body(typed_body(r)).decode()}
        for q in _pin_scenario()
        for r in q.fan_out()
    ]
    assert len(got) == len(pinned) == 30
    assert {p["api"] for p in pinned} == {a.value for a in RequestApi}
    for g, p in zip(got, pinned, strict=True):
        assert g == p


def test_left_out_fields_take_kafkas_defaults() -> None:
    body = {
        "controllerId": 0,
        "controllerEpoch": 1,
        "topicStates": [
            {
                "topicName": "t",
                "partitionStates": [
                    {
                        "partitionIndex": 0,
                        "controllerEpoch": 1,
                        "leader": 1,
                        "leaderEpoch": 0,
                        "isr": [1],
                        "replicas": [1],
                    }
                ],
            }
        ],
    }
    parsed = parse_body(RequestApi.LEADER_AND_ISR, body)
    assert parsed == LeaderAndIsrRequest(0, 1, -1, 0, (LisrPartitionState("t", 0, 1, 1, 0, (1,), 0, (1,)),), ())


def test_a_live_broker_is_addressed_by_its_first_endpoint() -> None:
    assert MetadataBroker(1, _ENDPOINTS, "r1").address() == BrokerAddress(1, "h1", 9092)
    assert MetadataBroker(2, ()).address() is None
    assert UpdateMetadataRequest(0, 1, 1, (), (MetadataBroker(1, _ENDPOINTS, "r1"), MetadataBroker(2, ()))).racks == (
        (1, "r1"),
        (2, None),
    )


def test_a_request_decision_as_an_object_carries_its_wire_body() -> None:
    from core.codec.decisions import encode_decision

    d = BrokerRequest(2, RequestApi.CONTROLLED_SHUTDOWN_RESPONSE, ControlledShutdownResponse(0, ()))
    assert encode_decision(d) == {
        "version": 1,
        "type": "broker_request",
        "broker_id": 2,
        "api": "ControlledShutdownResponse",
        "body": {"errorCode": 0, "remainingPartitions": []},
    }


def test_partition_states_carry_the_topic_id_as_of_the_flush() -> None:
    from core.request_batch import RequestBatch

    c = Cluster.start([1, 2])
    c.run(CreateTopic("r1", "t", 1, 2))
    tp = TopicPartition("t", 0)
    batch = RequestBatch()
    batch.add_update_metadata(c.ctx, [1], [tp])
    taken = c.ctx.topic_ids["t"]
    c.ctx.topic_ids["t"] = "AQIDBAUGBwgJCgsMDQ4PEA"  # changed between the state being taken and the flush
    (um,) = batch.flush(c.ctx)
    assert isinstance(um.body, UpdateMetadataRequest) and taken != "AQIDBAUGBwgJCgsMDQ4PEA"
    assert [p.topic_id for p in um.body.partitions] == ["AQIDBAUGBwgJCgsMDQ4PEA"]
