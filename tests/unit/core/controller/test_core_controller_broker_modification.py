"""A registration rewritten in place (Kafka's ``processBrokerModification`` / ``onBrokerUpdate``): the
``broker_modification`` event through ``step``, its JSON form and its validation."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from core_support import Cluster, endpoint, startup

from core.codec.events import EVENT_TYPES, event_from_json, event_to_json
from core.controller import ControllerConfig, ControllerState
from core.decisions import BrokerRequest
from core.errors import FormatError
from core.events import BrokerFailure, BrokerModification, ControlledShutdown, Event
from core.kafka.requests import RequestApi
from core.model import Broker, Endpoint, TopicPartition

pytestmark = pytest.mark.unit

#: broker 1's registration after a dynamic listener update: a second listener, the first one moved
NEW_ENDPOINTS = (Endpoint("PLAINTEXT", "broker1", 19093), Endpoint("EXTERNAL", "broker1.example", 29093, "SSL"))


def make() -> Cluster:
    c = Cluster.start([1, 2, 3], ControllerConfig(), racks={1: "r1"})
    c.create_topic("t", ((1, 2), (2, 3), (3, 1)))
    return c


def modified(c: Cluster, broker: int, endpoints: tuple[Endpoint, ...], rack: str | None = "r1") -> BrokerModification:
    return BrokerModification(broker, c.ctx.live_brokers[broker].epoch, rack, endpoints)


def update_metadata(c: Cluster) -> BrokerRequest:
    (um,) = c.requests(RequestApi.UPDATE_METADATA)
    return um


def test_changed_endpoints_are_kept_and_every_broker_gets_update_metadata() -> None:
    c = make()
    epoch = c.ctx.live_brokers[1].epoch
    c.run(BrokerModification(1, epoch, "r2", NEW_ENDPOINTS))
    assert c.ctx.live_brokers[1] == Broker(1, epoch, "r2", NEW_ENDPOINTS)  # the rack comes with the endpoints
    # onBrokerUpdate: only UpdateMetadata, the broker list without partition states, to every live broker
    assert [d.api for d in c.decisions if isinstance(d, BrokerRequest)] == [RequestApi.UPDATE_METADATA]
    assert len(c.decisions) == 1  # no ZooKeeper write either
    um = update_metadata(c)
    assert um.recipients() == (1, 2, 3)
    body = um.body_json()
    assert body["topicStates"] == []
    listed = {b["id"]: b for b in body["liveBrokers"]}
    assert set(listed) == {1, 2, 3}
    assert [(e["listener"], e["host"], e["port"]) for e in listed[1]["endpoints"]] == [
        ("PLAINTEXT", "broker1", 19093),
        ("EXTERNAL", "broker1.example", 29093),
    ]
    assert listed[1]["rack"] == "r2"
    assert [(e["host"], e["port"]) for e in listed[2]["endpoints"]] == [("broker2", 9094)]
    # each addressee's copy carries its own broker epoch
    assert {r.broker_id: r.body_json()["brokerEpoch"] for r in um.fan_out()} == {
        b: c.ctx.live_brokers[b].epoch for b in (1, 2, 3)
    }


def test_the_new_endpoints_are_what_later_requests_name() -> None:
    c = make()
    c.run(modified(c, 1, NEW_ENDPOINTS))
    c.run(ControlledShutdown(3, c.ctx.live_brokers[3].epoch))  # broker 1 leads t-2 now
    (lisr,) = c.requests(RequestApi.LEADER_AND_ISR, 1)
    leaders = {n["brokerId"]: (n["hostName"], n["port"]) for n in lisr.body_json()["liveLeaders"]}
    assert leaders[1] == ("broker1", 19093)  # Kafka's leader node: the first endpoint


def test_shutting_down_brokers_are_told_too() -> None:
    c = make()
    c.run(ControlledShutdown(3, c.ctx.live_brokers[3].epoch))
    c.run(modified(c, 1, NEW_ENDPOINTS))
    assert update_metadata(c).recipients() == (1, 2, 3)
    # a broker shutting down may change its registration as well: it is still registered
    c.run(modified(c, 3, NEW_ENDPOINTS[:1], rack=None))
    assert c.ctx.live_brokers[3].endpoints == NEW_ENDPOINTS[:1]
    assert update_metadata(c).recipients() == (1, 2, 3)


@pytest.mark.parametrize(
    ("why", "event"),
    [
        ("an unknown broker", lambda c: BrokerModification(9, 109, None, NEW_ENDPOINTS)),
        ("an older epoch", lambda c: BrokerModification(1, c.ctx.live_brokers[1].epoch - 1, "r1", NEW_ENDPOINTS)),
        ("a newer epoch", lambda c: BrokerModification(1, c.ctx.live_brokers[1].epoch + 1, "r1", NEW_ENDPOINTS)),
        ("the same registration", lambda c: modified(c, 1, endpoint(1))),
        ("the rack alone", lambda c: modified(c, 1, endpoint(1), rack="elsewhere")),
    ],
)
def test_nothing_changes(why: str, event: Callable[[Cluster], Event]) -> None:
    c = make()
    before = c.state
    c.run(event(c))
    assert c.decisions == [], why
    assert c.state == before, why


def test_listeners_reordered_are_a_change() -> None:
    """Kafka compares the endpoint lists in order; the first is the leader node LeaderAndIsr names."""
    c = make()
    c.run(modified(c, 1, NEW_ENDPOINTS))
    c.run(modified(c, 1, tuple(reversed(NEW_ENDPOINTS))))
    assert c.ctx.live_brokers[1].endpoints == tuple(reversed(NEW_ENDPOINTS))
    assert update_metadata(c).recipients() == (1, 2, 3)


def test_a_failed_broker_modification_is_ignored_and_its_startup_brings_the_registration() -> None:
    c = make()
    old_epoch = c.ctx.live_brokers[1].epoch
    c.run(BrokerFailure(1, old_epoch))
    c.run(BrokerModification(1, old_epoch, "r1", NEW_ENDPOINTS))
    assert c.decisions == [] and 1 not in c.ctx.live_brokers
    c.run(startup(1, epoch=700))
    c.run(BrokerModification(1, old_epoch, "r1", NEW_ENDPOINTS))  # the old incarnation's, late
    assert c.decisions == [] and c.ctx.live_brokers[1].endpoints == endpoint(1)


def test_the_change_survives_a_checkpoint_and_a_failover() -> None:
    c = make()
    c.run(modified(c, 1, NEW_ENDPOINTS))
    assert ControllerState.from_bytes(c.state.to_bytes()).context.live_brokers[1].endpoints == NEW_ENDPOINTS
    c.failover()
    assert c.ctx.live_brokers[1].endpoints == NEW_ENDPOINTS
    um = [r for r in c.requests(RequestApi.UPDATE_METADATA) if r.body_json()["topicStates"]]
    assert um, "the failover's UpdateMetadata"
    listed = {b["id"]: b for b in um[0].body_json()["liveBrokers"]}
    assert [e["port"] for e in listed[1]["endpoints"]] == [19093, 29093]
    assert c.ctx.leader_and_isr(TopicPartition("t", 0)) is not None


def test_json_form() -> None:
    ev = BrokerModification(1, 4294967312, "r2", NEW_ENDPOINTS)
    text = event_to_json(ev)
    assert json.loads(text) == {
        "version": 1,
        "type": "broker_modification",
        "broker_id": 1,
        "broker_epoch": 4294967312,
        "rack": "r2",
        "endpoints": [
            {"listener": "PLAINTEXT", "host": "broker1", "port": 19093, "security_protocol": "PLAINTEXT"},
            {"listener": "EXTERNAL", "host": "broker1.example", "port": 29093, "security_protocol": "SSL"},
        ],
    }
    assert event_from_json(text) == ev
    assert event_from_json('{"version":1,"type":"broker_modification","broker_id":2,"broker_epoch":7}') == (
        BrokerModification(2, 7)
    )
    assert BrokerModification.SCOPE == "cluster"  # every bucket holds the broker list
    assert "broker_modification" in EVENT_TYPES


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('{"version":1,"type":"broker_modification","broker_id":-1,"broker_epoch":1}', "broker_id"),
        ('{"version":1,"type":"broker_modification","broker_id":1}', "broker_epoch"),
        ('{"version":1,"type":"broker_modification","broker_id":1,"broker_epoch":-1}', "broker_epoch"),
        ('{"version":1,"type":"broker_modification","broker_id":1,"broker_epoch":1,"rack":5}', "rack"),
        (
            '{"version":1,"type":"broker_modification","broker_id":1,"broker_epoch":1,'
            '"endpoints":[{"listener":"P","host":"h","port":70000}]}',
            "endpoints[0].port",
        ),
    ],
)
def test_malformed(text: str, field: str) -> None:
    with pytest.raises(FormatError) as e:
        event_from_json(text)
    assert e.value.field == field
