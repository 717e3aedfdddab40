"""Kafka's formats in their one home (:mod:`core.kafka`): each codec read back by its own parser, and the
bytes Kafka's tools and brokers expect."""

from __future__ import annotations

import json

import pytest

from core.errors import FormatError
from core.kafka import zk_notifications, zkdata
from core.kafka.envelope import encode_envelope, encode_request, parse_request
from core.kafka.requests import ControlledShutdownResponse, RequestApi, StopReplicaRequest
from core.model import Endpoint

pytestmark = pytest.mark.unit


def test_controller_znode_round_trip_is_kafkas_json() -> None:
    data = zkdata.encode_controller(3, 1700000000123)
    assert data == b'{"version":1,"brokerid":3,"timestamp":"1700000000123"}'
    assert zkdata.decode_controller(data) == zkdata.ControllerZnode(3, "1700000000123")
    # Kafka 2.x wrote the same without a timestamp in some tools: still a controller
    assert zkdata.decode_controller('{"version":1,"brokerid":7}') == zkdata.ControllerZnode(7, None)


@pytest.mark.parametrize(
    ("data", "reason"),
    [(b"nope", "not valid JSON"), (b"[1]", "must hold a JSON object"), (b'{"version":1}', "brokerid must be")],
)
def test_a_malformed_controller_znode_names_the_path(data: bytes, reason: str) -> None:
    with pytest.raises(FormatError, match=reason) as e:
        zkdata.decode_controller(data)
    assert e.value.field == zkdata.CONTROLLER_PATH == "/controller"


def test_controller_epoch_is_decimal_text() -> None:
    assert zkdata.encode_controller_epoch(12) == b"12"
    assert zkdata.decode_controller_epoch(b"12\n") == 12
    with pytest.raises(FormatError, match="does not hold an epoch number") as e:
        zkdata.decode_controller_epoch(b"twelve")
    assert e.value.field == "/controller_epoch"


def test_broker_registration_round_trip() -> None:
    text = zkdata.encode_broker_registration("h1", 9092, "r1", 1700000000000)
    o = json.loads(text)
    # Kafka's BrokerIdZNode version 5, one PLAINTEXT listener
    assert (o["version"], o["host"], o["port"], o["jmx_port"], o["rack"], o["timestamp"]) == (
        5,
        "h1",
        9092,
        -1,
        "r1",
        "1700000000000",
    )
    assert o["endpoints"] == ["PLAINTEXT://h1:9092"] and o["listener_security_protocol_map"] == {
        "PLAINTEXT": "PLAINTEXT"
    }
    info = zkdata.decode_broker_registration(5, text, 77)
    assert (info.id, info.epoch, info.rack) == (5, 77, "r1")
    assert info.endpoints == (Endpoint("PLAINTEXT", "h1", 9092, "PLAINTEXT"),)


def test_an_ipv6_listener_is_bracketed_and_read_back() -> None:
    text = zkdata.encode_broker_registration("::1", 9093, None, 1)
    assert json.loads(text)["endpoints"] == ["PLAINTEXT://[::1]:9093"]
    (ep,) = zkdata.decode_broker_registration(1, text, 1).endpoints
    assert (ep.host, ep.port) == ("::1", 9093)
    assert zkdata.endpoint_text(ep.listener, ep.host, ep.port) == "PLAINTEXT://[::1]:9093"


def test_a_registration_maps_each_listener_to_its_security_protocol() -> None:
    data = json.dumps(
        {
            "version": 5,
            "endpoints": ["INTERNAL://a:1", "EXTERNAL://b:2"],
            "listener_security_protocol_map": {"INTERNAL": "PLAINTEXT", "EXTERNAL": "SASL_SSL"},
        }
    )
    eps = zkdata.decode_broker_registration(2, data, 9).endpoints
    assert [(e.listener, e.security_protocol) for e in eps] == [("INTERNAL", "PLAINTEXT"), ("EXTERNAL", "SASL_SSL")]


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        ('{"endpoints":"PLAINTEXT://h:1"}', "endpoints must be a list"),
        ('{"listener_security_protocol_map":[1],"endpoints":["PLAINTEXT://h:1"]}', "must be an object"),
        ('{"endpoints":["h:1"]}', "is not LISTENER://host:port"),
        ("{", "not valid JSON"),
    ],
)
def test_a_malformed_registration_names_its_znode(data: str, reason: str) -> None:
    with pytest.raises(FormatError, match=reason) as e:
        zkdata.decode_broker_registration(4, data, 1)
    assert e.value.field == zkdata.broker_path(4) == "/brokers/ids/4"


def test_config_paths_and_change_notifications() -> None:
    assert zkdata.entity_config_path("brokers", "<default>") == "/config/brokers/<default>"
    assert zkdata.entity_configs_path("topics") == zkdata.CONFIG_TOPICS
    child = f"{zkdata.CONFIG_CHANGE_PREFIX}0000000007"
    assert zk_notifications.config_change_sequence(child) == 7
    assert zk_notifications.decode_config_change(zk_notifications.encode_config_change("brokers", "3")) == (
        "brokers",
        "3",
    )


def test_paths_are_read_back_to_what_they_name() -> None:
    state = zkdata.partition_state_path("orders.v2", 12)
    assert state == "/brokers/topics/orders.v2/partitions/12/state"
    assert zkdata.partition_of_state_path(state) == ("orders.v2", 12)
    assert zkdata.partition_of_state_path("/brokers/topics/t/partitions/1") is None
    assert zkdata.partition_of_path("/brokers/topics/t/partitions/1") == ("t", 1)
    assert zkdata.partition_of_path(state) == ("orders.v2", 12)
    assert zkdata.topic_of_path(zkdata.topic_path("t")) == "t"
    assert zkdata.topic_of_path(zkdata.delete_topic_path("t")) is None
    assert zkdata.topic_of_path(zkdata.delete_topic_path("t"), zkdata.DELETE_TOPICS) == "t"
    assert zkdata.topic_of_path(zkdata.topic_config_path("t"), zkdata.CONFIG_TOPICS) == "t"
    assert zkdata.topic_of_path(state) is None


def test_topic_id_of_a_topic_znode() -> None:
    assert zkdata.topic_znode_id(zkdata.encode_topic_znode({}, "AbCdEfGhIjKlMnOpQrStUv")) == "AbCdEfGhIjKlMnOpQrStUv"
    assert zkdata.topic_znode_id(zkdata.encode_topic_znode({}, None)) is None
    assert zkdata.topic_znode_id("not json") is None and zkdata.topic_znode_id(None) is None
    assert zkdata.topic_znode_id("[1]") is None


def test_topic_znode_partitions_without_the_replica_lists() -> None:
    data = '{"version":2,"partitions":{"1":[1,2],"0":[2,3]},"adding_replicas":{},"removing_replicas":{}}'
    assert sorted(zkdata.topic_znode_partitions(data)) == [0, 1]
    assert zkdata.topic_znode_partitions('{"version":2}') == ()


def test_the_envelope_splices_the_body_and_sorts_its_own_keys() -> None:
    body = b'{"errorCode":0,"remainingPartitions":[{"topicName":"t","partitionIndex":2}]}'
    key, value = encode_envelope(3, RequestApi.CONTROLLED_SHUTDOWN_RESPONSE, 5, 9, body, part=(2, 3))
    assert key == b"3"
    assert value == (
        b'{"body":' + body + b',"api":"ControlledShutdownResponse","batchId":9,"brokerId":3,'
        b'"controllerEpoch":5,"part":2,"parts":3,"version":1}'
    )
    env = parse_request(key, value)
    assert (env.broker_id, env.api, env.controller_epoch, env.batch_id) == (
        3,
        RequestApi.CONTROLLED_SHUTDOWN_RESPONSE,
        5,
        9,
    )
    assert isinstance(env.body, ControlledShutdownResponse)
    assert [(tp.topic, tp.partition) for tp in env.body.remaining] == [("t", 2)]


def test_encode_request_is_the_envelope_of_the_bodys_canonical_json() -> None:
    body = {"controllerId": 1, "controllerEpoch": 2, "brokerEpoch": 3, "topicStates": []}
    assert encode_request(1, RequestApi.STOP_REPLICA, 2, 4, body) == encode_envelope(
        1, RequestApi.STOP_REPLICA, 2, 4, json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    )
    env = parse_request(*encode_request(1, RequestApi.STOP_REPLICA, 2, 4, body))
    assert env.body == StopReplicaRequest(1, 2, 3, ())


def test_a_message_whose_broker_id_disagrees_with_its_key_is_refused() -> None:
    _, value = encode_envelope(
        2, RequestApi.STOP_REPLICA, 1, 1, b'{"controllerId":0,"controllerEpoch":1,"topicStates":[]}'
    )
    with pytest.raises(FormatError, match="the message key says broker 1") as e:
        parse_request(b"1", value)
    assert e.value.field == "brokerId"


def test_the_reassignment_znode_and_file_are_one_format() -> None:
    from core.model import PartitionTarget

    targets = [PartitionTarget("t", 1, (2, 3)), PartitionTarget("t", 0, (1, 2))]
    znode = zkdata.encode_reassignment(targets)
    assert znode == '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]},' + (
        '{"topic":"t","partition":1,"replicas":[2,3]}]}'
    )
    assert zkdata.decode_reassignment(znode) == tuple(sorted(targets, key=lambda t: t.partition))
    file_form = json.loads(zkdata.encode_reassignment(targets, log_dirs=True))
    assert [e["log_dirs"] for e in file_form["partitions"]] == [["any", "any"], ["any", "any"]]
    assert zkdata.decode_reassignment(json.dumps(file_form)) == zkdata.decode_reassignment(znode)
