"""The UpdateMetadata of a micro-batch, written once and read by every broker it names: the core's shared
request (:mod:`core.request_batch`) through the request sink's messages (:func:`sinks.requests.request_messages`:
once per topic partition holding an addressee, in Kafka's order there, split, replayed by identity) to
the envelope (:mod:`core.kafka.envelope`, pinned byte for byte) and the simulated brokers, which apply it
with their own broker epoch and still read the per-broker form written before."""

from __future__ import annotations

import json
from typing import Any

import pytest
from core_support import Cluster
from simbrokers_support import lisr_body

from core.decisions import BrokerRequest
from core.errors import FormatError
from core.events import BrokerFailure, CreateTopic, DeleteTopic, LeaderAndIsrResponse
from core.kafka.envelope import (
    MESSAGE_VERSION,
    SHARED_MESSAGE_VERSION,
    encode_envelope,
    encode_request,
    parse_request,
)
from core.kafka.error_codes import KafkaError
from core.kafka.request_encoding import encode_body
from core.kafka.requests import (
    SHARED_BROKER_ID,
    Addressee,
    RequestApi,
    UpdateMetadataRequest,
    WireBody,
)
from core.model import TopicPartition
from simbrokers.broker import SimBroker
from sinks.memory import MemoryRequestSink
from sinks.ports import Fence
from sinks.requests import OutboundMessage, partition_for_key, request_messages
from sinks.requests.messages import identity_of

pytestmark = pytest.mark.unit

TOPIC = "livectl.requests"
FENCE = Fence(4, 3)


def _cluster() -> Cluster:
    c = Cluster.start([1, 2, 3, 4, 5])
    c.run(
        CreateTopic("r1", "t", replica_assignment=((1, 2), (2, 3), (3, 4))),
        CreateTopic("r2", "gone", replica_assignment=((4, 5),)),
    )
    c.run(DeleteTopic("r3", "gone"), BrokerFailure(5, c.ctx.live_brokers[5].epoch))
    return c


def _recipients(v: dict[str, Any]) -> list[int]:
    return [a["brokerId"] for a in v["addressees"]] if "addressees" in v else [v["brokerId"]]


# ----------------------------------------------------------------------------- the envelope


def test_the_shared_envelope_is_pinned() -> None:
    addressees = (Addressee(1, 101), Addressee(3, 103))
    body = b'{"controllerId":0,"controllerEpoch":2,"brokerEpoch":-1,"topicStates":[],"liveBrokers":[]}'
    key, value = encode_envelope(SHARED_BROKER_ID, RequestApi.UPDATE_METADATA, 2, 7, body, addressees=addressees)
    assert key == b"-1"
    assert value == (
        b'{"body":{"controllerId":0,"controllerEpoch":2,"brokerEpoch":-1,"topicStates":[],"liveBrokers":[]},'
        b'"addressees":[{"brokerEpoch":101,"brokerId":1},{"brokerEpoch":103,"brokerId":3}],"api":"UpdateMetadata",'
        b'"batchId":7,"brokerId":-1,"controllerEpoch":2,"version":2}'
    )
    _, parted = encode_envelope(
        SHARED_BROKER_ID, RequestApi.UPDATE_METADATA, 2, 7, body, part=(2, 3), addressees=addressees
    )
    assert parted.endswith(b'"controllerEpoch":2,"part":2,"parts":3,"version":2}')
    # a message to one broker keeps its form (version 1, no addressees)
    _, one = encode_envelope(3, RequestApi.UPDATE_METADATA, 2, 7, body)
    assert one.endswith(b'"api":"UpdateMetadata","batchId":7,"brokerId":3,"controllerEpoch":2,"version":1}')
    with pytest.raises(ValueError, match="broker -1"):
        encode_envelope(3, RequestApi.UPDATE_METADATA, 2, 7, body, addressees=addressees)


def test_a_shared_message_is_parsed_with_its_addressees_and_each_copy_has_its_epoch() -> None:
    body = UpdateMetadataRequest(0, 2, -1, (), ())
    key, value = encode_envelope(
        SHARED_BROKER_ID,
        RequestApi.UPDATE_METADATA,
        2,
        7,
        encode_body(body),
        addressees=(Addressee(1, 101), Addressee(3, 103)),
    )
    env = parse_request(key, value)
    assert env.shared and env.broker_id == -1 and env.recipients() == (1, 3)
    mine = env.for_broker(3)
    assert mine is not None and not mine.shared and mine.broker_id == 3
    assert mine.body == UpdateMetadataRequest(0, 2, 103, (), ())
    assert mine.dedupe_key == env.dedupe_key  # one request of one batch
    assert env.for_broker(2) is None
    # a per-broker message is its own broker's only
    one = parse_request(*encode_request(2, RequestApi.UPDATE_METADATA, 2, 7, {"controllerId": 0, "controllerEpoch": 2}))
    assert one.for_broker(2) is one and one.for_broker(3) is None


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"version": 3}, "version"),
        ({"version": SHARED_MESSAGE_VERSION, "addressees": None}, "addressees"),
        ({"version": MESSAGE_VERSION}, "addressees"),
        ({"addressees": [{"brokerId": 3, "brokerEpoch": 1}, {"brokerId": 1, "brokerEpoch": 1}]}, "addressees"),
        ({"addressees": [{"brokerId": "1", "brokerEpoch": 1}]}, "addressees[0].brokerId"),
    ],
)
def test_a_malformed_shared_message_names_the_field(change: dict[str, Any], field: str) -> None:
    key, value = encode_envelope(
        SHARED_BROKER_ID, RequestApi.UPDATE_METADATA, 2, 7, b"{}", addressees=(Addressee(1, 101),)
    )
    v = {**json.loads(value), **change}
    with pytest.raises(FormatError) as e:
        parse_request(key, json.dumps(v))
    assert e.value.field == field


def test_a_shared_message_must_be_keyed_minus_one() -> None:
    _, value = encode_envelope(SHARED_BROKER_ID, RequestApi.UPDATE_METADATA, 2, 7, b"{}", addressees=(Addressee(1, 1),))
    v = {**json.loads(value), "brokerId": 1}
    with pytest.raises(FormatError) as e:
        parse_request(b"1", json.dumps(v))
    assert e.value.field == "key"


# ----------------------------------------------------------------------------- the sink's messages


def _per_partition(msgs: list[OutboundMessage], partitions: list[int]) -> dict[int, list[dict[str, Any]]]:
    out: dict[int, list[dict[str, Any]]] = {p: [] for p in partitions}
    for m in msgs:
        p = m.partition if m.partition is not None else partition_for_key(m.key, partitions)
        out[p].append(m.value_json())
    return out


def _kafka_order(values: list[dict[str, Any]], broker: int) -> list[str]:
    return [v["api"] for v in values if broker in _recipients(v)]


ORDER = ["LeaderAndIsr", "UpdateMetadata", "StopReplica", "ControlledShutdownResponse", "AlterPartitionResponse"]


@pytest.mark.parametrize("partitions", [[0], [0, 1, 2]])
def test_one_update_metadata_per_partition_that_holds_an_addressee_in_kafkas_order(partitions: list[int]) -> None:
    c = _cluster()
    reqs = c.requests()
    (um,) = [r for r in reqs if r.api is RequestApi.UPDATE_METADATA]
    assert um.recipients() == (1, 2, 3, 4)
    # the buckets' parts: the same addressees, bodies merged into one message
    msgs = request_messages(TOPIC, FENCE, 9, [*reqs, um], partitions=partitions)
    shared = [m for m in msgs if m.key == b"-1"]
    by_partition = _per_partition(msgs, partitions)
    holding = {partition_for_key(str(b).encode(), partitions) for b in um.recipients()}
    assert len(shared) == len(holding)
    for p, values in by_partition.items():
        named = [b for v in values if v["brokerId"] == -1 for b in _recipients(v)]
        mine = [b for b in um.recipients() if partition_for_key(str(b).encode(), partitions) == p]
        assert named == mine, "each partition's copy names exactly the addressees whose messages it holds"
        for b in mine:
            apis = _kafka_order(values, b)
            assert apis == sorted(apis, key=ORDER.index), (p, b, apis)
            assert apis.count("UpdateMetadata") == 1
    if len(partitions) > 1:
        assert all(m.partition is not None for m in shared)
    else:
        assert all(m.partition is None for m in msgs)
    # broker 4 (a replica of the deleted topic) reads LeaderAndIsr, then UpdateMetadata, then StopReplica
    b4 = _kafka_order(by_partition[partition_for_key(b"4", partitions)], 4)
    assert b4[-2:] == ["UpdateMetadata", "StopReplica"]
    # every addressee's copy holds the same partition states as the request, with its own epoch
    for v in (v for values in by_partition.values() for v in values if v["brokerId"] == -1):
        env = parse_request(b"-1", json.dumps(v))
        for a in env.addressees:
            copy = env.for_broker(a.broker_id)
            assert copy is not None and copy.body == um.fan_out()[um.recipients().index(a.broker_id)].body


def test_the_partitioner_is_kafkas_default() -> None:
    # murmur2 of the key, positive, modulo the count: the Java client's and kafka-python's default
    assert partition_for_key(b"1", [0]) == 0
    got = [partition_for_key(str(b).encode(), [0, 1, 2]) for b in range(1, 7)]
    assert sorted(set(got)) <= [0, 1, 2] and len(set(got)) > 1
    from kafka.partitioner.default import murmur2

    assert got == [(murmur2(str(b).encode()) & 0x7FFFFFFF) % 3 for b in range(1, 7)]


def test_a_large_shared_update_metadata_is_split_and_each_part_names_the_addressees() -> None:
    states = [
        {
            "topicName": f"t{t}",
            "topicId": "x",
            "partitionStates": [
                {"partitionIndex": p, "controllerEpoch": 1, "leader": 1, "leaderEpoch": 3, "isr": [1, 2],
                 "zkVersion": 0, "replicas": [1, 2], "offlineReplicas": []}
                for p in range(300)
            ],
        }
        for t in range(10)
    ]  # fmt: skip
    body = {"controllerId": 0, "controllerEpoch": 1, "brokerEpoch": -1, "topicStates": states, "liveBrokers": []}
    addressees = (Addressee(1, 11), Addressee(2, 12), Addressee(3, 13))
    req = BrokerRequest(SHARED_BROKER_ID, RequestApi.UPDATE_METADATA, WireBody(body), addressees)
    msgs = request_messages(TOPIC, FENCE, 5, [req], 40_000)
    assert len(msgs) > 3
    values = [m.value_json() for m in msgs]
    assert [(v["part"], v["parts"]) for v in values] == [(k, len(msgs)) for k in range(1, len(msgs) + 1)]
    assert all(len(m.value) <= 40_000 + 300 for m in msgs)
    assert all(_recipients(v) == [1, 2, 3] for v in values)
    got = [(ts["topicName"], ps["partitionIndex"]) for v in values for ts in v["body"]["topicStates"]
           for ps in ts["partitionStates"]]  # fmt: skip
    assert got == [(f"t{t}", p) for t in range(10) for p in range(300)]
    # identities: per part, naming the addressees; read back from the values as the sink's tail read does
    assert [m.identity for m in msgs] == [(5, f"1+2+3/UpdateMetadata#{k}") for k in range(1, len(msgs) + 1)]
    assert [identity_of(m.value) for m in msgs] == [m.identity for m in msgs]


def test_a_replayed_batch_writes_the_shared_message_once() -> None:
    c = _cluster()
    sink = MemoryRequestSink(FENCE)
    first = sink.write_requests(9, c.requests())
    again = sink.write_requests(9, c.requests())
    assert first.written > 0 and again.written == 0 and again.skipped == first.written
    assert sum(1 for m in sink.messages if m.key == b"-1") == 1


# ----------------------------------------------------------------------------- the simulated brokers


def _deliver(brokers: dict[int, SimBroker], msgs: list[OutboundMessage], partitions: list[int]) -> None:
    """What the simulated brokers' runner does: every partition in order, each message to the brokers it
    is for."""
    for p, values in _per_partition(msgs, partitions).items():
        del p
        for v in values:
            env = parse_request(str(v["brokerId"]).encode(), json.dumps(v))
            for b in env.recipients():
                if b in brokers:
                    brokers[b].handle(env, 0)


@pytest.mark.parametrize("partitions", [[0], [0, 1, 2]])
def test_each_addressee_applies_the_shared_update_metadata_as_its_own(partitions: list[int]) -> None:
    c = _cluster()
    reqs = c.requests()
    brokers = {b: SimBroker(b, broker_epoch=c.ctx.live_brokers[b].epoch) for b in (1, 2, 3, 4)}
    _deliver(brokers, request_messages(TOPIC, FENCE, 9, reqs, partitions=partitions), partitions)
    # the same facts the per-broker copies give, applied one by one to brokers of their own
    expected = {b: SimBroker(b, broker_epoch=c.ctx.live_brokers[b].epoch) for b in (1, 2, 3, 4)}
    for r in (copy for req in reqs for copy in req.fan_out()):
        if r.broker_id in expected:
            (msg,) = request_messages(TOPIC, FENCE, 9, [r])
            expected[r.broker_id].handle(parse_request(msg.key, msg.value), 0)
    for b, broker in brokers.items():
        assert broker.metadata == expected[b].metadata, b
        assert sorted(broker.metadata.brokers) == [1, 2, 3, 4]
    assert brokers[3].metadata.partitions[TopicPartition("gone", 0)].leader == -2  # queued for deletion


def test_a_stale_broker_epoch_in_the_addressees_is_ignored_by_that_broker_only() -> None:
    body = {
        "controllerId": 0,
        "controllerEpoch": 1,
        "brokerEpoch": -1,
        "topicStates": [
            {"topicName": "t", "topicId": "AAAAAAAAAAAAAAAAAAAAAA", "partitionStates": [
                {"partitionIndex": 0, "controllerEpoch": 1, "leader": 1, "leaderEpoch": 0, "isr": [1],
                 "zkVersion": 0, "replicas": [1], "offlineReplicas": []}]}
        ],
        "liveBrokers": [],
    }  # fmt: skip
    # broker 2 re-registered (epoch 250) after the controller addressed its old incarnation (200)
    addressees = (Addressee(1, 100), Addressee(2, 200))
    key, value = encode_envelope(
        SHARED_BROKER_ID, RequestApi.UPDATE_METADATA, 1, 3, json.dumps(body).encode(), addressees=addressees
    )
    env = parse_request(key, value)
    b1, b2, b3 = SimBroker(1, broker_epoch=100), SimBroker(2, broker_epoch=250), SimBroker(3, broker_epoch=300)
    for b in (b1, b2, b3):
        assert b.handle(env, 0) == []
    assert TopicPartition("t", 0) in b1.metadata.partitions
    assert b2.metadata.partitions == {}, "a copy for an older incarnation is stale"
    assert b3.metadata.partitions == {}, "not an addressee"


def test_the_per_broker_form_written_before_is_still_applied() -> None:
    b = SimBroker(1, broker_epoch=101)
    key, value = encode_request(1, RequestApi.LEADER_AND_ISR, 1, 1, lisr_body(leader=1, leader_epoch=0, isr=[1],
                                                                                replicas=[1]))  # fmt: skip
    [resp] = b.handle(parse_request(key, value), 0)
    assert isinstance(resp, LeaderAndIsrResponse) and resp.error_code == KafkaError.NONE
    endpoint = {"port": 9093, "host": "h", "listener": "PLAINTEXT", "securityProtocol": 0}
    um = {
        "controllerId": 0,
        "controllerEpoch": 1,
        "brokerEpoch": 101,
        "topicStates": [],
        "liveBrokers": [{"id": 1, "endpoints": [endpoint]}],
    }
    b.handle(parse_request(*encode_request(1, RequestApi.UPDATE_METADATA, 1, 1, um)), 0)
    assert sorted(b.metadata.brokers) == [1]


def test_addressee_sets_that_agree_in_a_partition_are_not_taken_for_each_other() -> None:
    body = WireBody({"controllerId": 0, "controllerEpoch": 1, "brokerEpoch": -1, "topicStates": [], "liveBrokers": []})
    a = BrokerRequest(SHARED_BROKER_ID, RequestApi.UPDATE_METADATA, body, (Addressee(1, 1), Addressee(2, 2)))
    b = BrokerRequest(SHARED_BROKER_ID, RequestApi.UPDATE_METADATA, body, (Addressee(1, 1), Addressee(3, 3)))
    # broker 1 alone in its partition for both sets: two messages, two identities
    parts = [0, 1, 2]
    assert partition_for_key(b"1", parts) not in {partition_for_key(b"2", parts), partition_for_key(b"3", parts)}
    msgs = request_messages(TOPIC, FENCE, 3, [a, b], partitions=parts)
    ones = [m for m in msgs if _recipients(m.value_json()) == [1]]
    assert len(ones) == 2 and ones[0].identity != ones[1].identity
    assert len({m.identity for m in msgs}) == len(msgs)
