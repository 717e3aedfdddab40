"""The UpdateMetadata of a step as one request to a set of brokers (Kafka's ``sendUpdateMetadataRequests``):
who it names, with which broker epochs, its copies, its row form and its checks."""

from __future__ import annotations

import json

import pytest
from core_support import Cluster, startup

from core.codec.decisions import decision_from_json, decision_to_json, encode_decision
from core.decisions import BrokerRequest
from core.errors import FormatError
from core.events import BrokerFailure, CreateTopic
from core.kafka.request_encoding import body_dict, encode_body, with_broker_epoch
from core.kafka.request_parsing import read_addressees
from core.kafka.requests import SHARED_BROKER_ID, Addressee, RequestApi, UpdateMetadataRequest, WireBody

pytestmark = pytest.mark.unit


def _um(c: Cluster) -> list[BrokerRequest]:
    return c.requests(RequestApi.UPDATE_METADATA)


def test_a_step_sends_one_update_metadata_naming_every_live_broker_with_its_epoch() -> None:
    c = Cluster.start([1, 2, 3])
    c.run(CreateTopic("r1", "t", replica_assignment=((1, 2), (2, 3))))
    (um,) = _um(c)
    assert um.broker_id == SHARED_BROKER_ID and um.shared
    assert um.addressees == tuple(Addressee(b, c.ctx.live_brokers[b].epoch) for b in (1, 2, 3))
    assert um.recipients() == (1, 2, 3)
    body = um.body
    assert isinstance(body, UpdateMetadataRequest) and body.broker_epoch == -1
    assert [(p.topic, p.partition) for p in body.partitions] == [("t", 0), ("t", 1)]
    # LeaderAndIsr stays per broker, first; the shared UpdateMetadata after them
    apis = [(r.api, r.broker_id) for r in c.requests()]
    assert apis == [
        (RequestApi.LEADER_AND_ISR, 1),
        (RequestApi.LEADER_AND_ISR, 2),
        (RequestApi.LEADER_AND_ISR, 3),
        (RequestApi.UPDATE_METADATA, SHARED_BROKER_ID),
    ]


def test_each_copy_is_what_kafka_sends_that_broker() -> None:
    c = Cluster.start([1, 2, 3])
    c.run(CreateTopic("r1", "t", replica_assignment=((1, 2),)))
    (um,) = _um(c)
    copies = um.fan_out()
    assert [r.broker_id for r in copies] == [1, 2, 3]
    for r in copies:
        assert not r.shared and r.api is RequestApi.UPDATE_METADATA
        body = r.body
        assert isinstance(body, UpdateMetadataRequest)
        assert body.broker_epoch == c.ctx.live_brokers[r.broker_id].epoch
        assert isinstance(um.body, UpdateMetadataRequest) and body.partitions is um.body.partitions
    # the helper the tests use gives a broker its own copy
    assert c.requests(RequestApi.UPDATE_METADATA, 2) == [copies[1]]
    # a request to one broker is its own copy
    lisr = c.requests(RequestApi.LEADER_AND_ISR)[0]
    assert lisr.fan_out() == [lisr] and lisr.recipients() == (lisr.broker_id,)


def test_a_failed_broker_is_not_an_addressee_and_a_new_one_gets_the_full_metadata() -> None:
    c = Cluster.start([1, 2, 3])
    c.run(CreateTopic("r1", "t", replica_assignment=((1, 2), (3, 1))))
    c.run(BrokerFailure(3, c.ctx.live_brokers[3].epoch))
    (um,) = _um(c)
    assert um.recipients() == (1, 2)
    c.run(startup(4, 300))
    (um,) = _um(c)
    # Kafka's onBrokerStartup: every broker learns of the new one; the new one gets every partition
    assert um.recipients() == (1, 2, 4)
    assert {a.broker_id: a.broker_epoch for a in um.addressees}[4] == 304
    body = um.body
    assert isinstance(body, UpdateMetadataRequest)
    assert {(p.topic, p.partition) for p in body.partitions} == {("t", 0), ("t", 1)}
    assert [b.broker_id for b in body.live_brokers] == [1, 2, 4]


def test_the_row_form_names_the_addressees_and_round_trips() -> None:
    c = Cluster.start([1, 2])
    c.run(CreateTopic("r1", "t", replica_assignment=((1, 2),)))
    (um,) = _um(c)
    text = decision_to_json(um)
    row = json.loads(text)
    assert row["addressees"] == [{"brokerId": a.broker_id, "brokerEpoch": a.broker_epoch} for a in um.addressees]
    assert row["broker_id"] == -1
    assert isinstance(um.body, UpdateMetadataRequest) and row["body"] == body_dict(um.body)
    assert row == encode_decision(um)  # the two encoders agree
    assert decision_from_json(text, typed=True) == um
    wire = decision_from_json(text)
    assert isinstance(wire, BrokerRequest) and isinstance(wire.body, WireBody)
    assert wire.addressees == um.addressees
    # its copies from the wire form carry each broker's epoch, like the typed ones
    assert [r.body_json() for r in wire.fan_out()] == [r.body_json() for r in um.fan_out()]
    # a request to one broker has no addressees in its row (the form before shared requests)
    lisr = c.requests(RequestApi.LEADER_AND_ISR)[0]
    assert "addressees" not in json.loads(decision_to_json(lisr))
    assert "addressees" not in encode_decision(lisr)


def test_bad_addressees_are_refused_naming_the_field() -> None:
    body = UpdateMetadataRequest(0, 1, -1, (), ())
    with pytest.raises(FormatError) as e:
        BrokerRequest(3, RequestApi.UPDATE_METADATA, body, (Addressee(3, 7),))
    assert e.value.field == "broker_id"
    with pytest.raises(FormatError) as e:
        BrokerRequest(-1, RequestApi.UPDATE_METADATA, body, (Addressee(2, 7), Addressee(1, 7)))
    assert e.value.field == "addressees"
    with pytest.raises(FormatError) as e:
        read_addressees([{"brokerId": 1, "brokerEpoch": 2}, {"brokerId": 1, "brokerEpoch": 3}], "addressees")
    assert e.value.field == "addressees" and "distinct" in e.value.reason
    with pytest.raises(FormatError) as e:
        read_addressees([{"brokerId": 1}], "addressees")
    assert e.value.field == "addressees[0].brokerEpoch"
    with pytest.raises(FormatError) as e:
        read_addressees({"brokerId": 1}, "addressees")
    assert e.value.field == "addressees"
    assert read_addressees(None, "addressees") == ()


def test_with_broker_epoch_sets_only_a_request_epoch() -> None:
    body = UpdateMetadataRequest(0, 1, -1, (), ())
    assert with_broker_epoch(body, 9) == UpdateMetadataRequest(0, 1, 9, (), ())
    wire = WireBody(json.loads(encode_body(body)))
    got = with_broker_epoch(wire, 9)
    assert isinstance(got, WireBody) and got.obj["brokerEpoch"] == 9 and wire.obj["brokerEpoch"] == -1
    response = WireBody({"errorCode": 0, "remainingPartitions": []})
    assert with_broker_epoch(response, 9) is response
