"""The liveness bridge against real ZooKeeper and the real broker: registrations become broker events."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kazoo.client import KazooClient

from core.codec.events import event_from_json
from core.events import BrokerFailure, BrokerModification, BrokerStartup, Event
from core.model import Broker, Endpoint
from sinks.requests import ensure_topics
from streaming.zk.liveness import LivenessBridge

pytestmark = pytest.mark.integration


def registration(host: str, port: int, rack: str | None = None, *, external: tuple[str, int] | None = None) -> bytes:
    """Kafka's v5 ``/brokers/ids/<id>`` JSON; ``external``: a second listener, ``EXTERNAL`` (SSL) at that address."""
    endpoints = [f"PLAINTEXT://{host}:{port}"]
    protocols = {"PLAINTEXT": "PLAINTEXT"}
    if external is not None:
        endpoints.append(f"EXTERNAL://{external[0]}:{external[1]}")
        protocols["EXTERNAL"] = "SSL"
    return json.dumps(
        {
            "features": {},
            "listener_security_protocol_map": protocols,
            "endpoints": endpoints,
            "jmx_port": -1,
            "port": port,
            "host": host,
            "version": 5,
            "timestamp": str(int(time.time() * 1000)),
            "rack": rack,
        }
    ).encode()


@pytest.fixture
def session(zk_connect: str) -> Iterator[Callable[[], KazooClient]]:
    made: list[KazooClient] = []

    def make() -> KazooClient:
        c = KazooClient(hosts=zk_connect, timeout=6)
        c.start(timeout=15)
        made.append(c)
        return c

    yield make
    for c in made:
        c.stop()
        c.close()


class EventReader:
    """Reads the broker-events topic from the beginning, accumulating decoded events."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=50)
        self.tp = TopicPartition(topic, 0)
        self.consumer.assign([self.tp])
        self.consumer.seek(self.tp, 0)
        self.events: list[tuple[bytes, Event]] = []

    def wait_for(self, pred: Callable[[Event], bool], timeout: float = 20) -> Event:
        deadline = time.monotonic() + timeout
        while True:
            for _, ev in self.events:
                if pred(ev):
                    return ev
            if time.monotonic() > deadline:
                raise AssertionError(f"no matching event in {timeout} s; got {self.events}")
            for r in self.consumer.poll(timeout_ms=200).get(self.tp, []):
                self.events.append((r.key, event_from_json(r.value)))


@pytest.fixture
def topic(kafka_broker: Any) -> str:
    name = f"broker-events-{uuid.uuid4().hex[:8]}"
    ensure_topics(kafka_broker.bootstrap, [name])
    return name


@pytest.fixture
def producer(kafka_broker: Any) -> Iterator[KafkaProducer]:
    p = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap, acks="all")
    yield p
    p.close()


def test_registration_and_session_end_become_startup_and_failure(
    session: Callable[[], KazooClient], kafka_broker: Any, topic: str, producer: KafkaProducer
) -> None:
    driver = session()
    bridge = LivenessBridge(driver, producer, topic, resync_interval_s=30)
    bridge.start()
    reader = EventReader(kafka_broker.bootstrap, topic)
    try:
        broker = session()
        broker.create("/brokers/ids/5", registration("h5", 9095, "rack-a"), ephemeral=True, makepath=True)
        czxid = broker.exists("/brokers/ids/5").czxid
        ev = reader.wait_for(lambda e: isinstance(e, BrokerStartup) and e.broker_id == 5)
        assert ev == BrokerStartup(5, czxid, "rack-a", (Endpoint("PLAINTEXT", "h5", 9095, "PLAINTEXT"),))
        assert reader.events[-1][0] == b"5"

        broker.stop()  # the broker's session ends: its ephemeral registration goes
        ev = reader.wait_for(lambda e: isinstance(e, BrokerFailure))
        assert ev == BrokerFailure(5, czxid)
        assert bridge.known == {}
    finally:
        bridge.stop()
        reader.consumer.close()


def test_reregistration_between_reads_is_a_startup_with_the_newer_epoch(
    session: Callable[[], KazooClient], kafka_broker: Any, topic: str, producer: KafkaProducer
) -> None:
    driver = session()
    first = session()
    first.create("/brokers/ids/7", registration("h7", 9097), ephemeral=True, makepath=True)
    old_epoch = first.exists("/brokers/ids/7").czxid
    # already known from the failover snapshot; no watch: the test decides when the bridge reads
    bridge = LivenessBridge(driver, producer, topic, known={7: old_epoch})
    assert bridge.sync() == []
    # the broker bounces between two reads: same child list, new czxid
    first.stop()
    second = session()
    second.create("/brokers/ids/7", registration("h7", 9097), ephemeral=True)
    new_epoch = second.exists("/brokers/ids/7").czxid
    assert new_epoch > old_epoch
    assert bridge.sync() == [BrokerStartup(7, new_epoch, None, (Endpoint("PLAINTEXT", "h7", 9097, "PLAINTEXT"),))]
    reader = EventReader(kafka_broker.bootstrap, topic)
    reader.wait_for(lambda e: isinstance(e, BrokerStartup) and e.broker_epoch == new_epoch)
    assert [e for _, e in reader.events] == bridge.published
    reader.consumer.close()


def test_brokers_present_at_start_are_announced(
    session: Callable[[], KazooClient], kafka_broker: Any, topic: str, producer: KafkaProducer
) -> None:
    broker = session()
    broker.create("/brokers/ids/1", registration("h1", 9091), ephemeral=True, makepath=True)
    broker.create("/brokers/ids/2", registration("h2", 9092), ephemeral=True)
    bridge = LivenessBridge(session(), producer, topic, known={2: broker.exists("/brokers/ids/2").czxid, 3: 99})
    bridge.start()
    bridge.stop()
    failure, startup = bridge.published
    assert isinstance(failure, BrokerFailure) and failure.broker_id == 3
    assert isinstance(startup, BrokerStartup) and startup.broker_id == 1


def test_registration_rewritten_in_place_is_a_modification(
    session: Callable[[], KazooClient], kafka_broker: Any, topic: str, producer: KafkaProducer
) -> None:
    """A broker's dynamic listener update rewrites its registration in the same session (same czxid): the
    data watch on the registration wakes the bridge (the resync is far off), every time, as Kafka's
    ``BrokerModificationsHandler`` does; a rewrite that changes neither rack nor endpoints publishes nothing."""
    driver = session()
    bridge = LivenessBridge(driver, producer, topic, resync_interval_s=600)
    bridge.start()
    reader = EventReader(kafka_broker.bootstrap, topic)
    plaintext = Endpoint("PLAINTEXT", "h4", 9094, "PLAINTEXT")
    try:
        broker = session()
        path = "/brokers/ids/4"
        broker.create(path, registration("h4", 9094, "rack-a"), ephemeral=True, makepath=True)
        czxid = broker.exists(path).czxid
        reader.wait_for(lambda e: isinstance(e, BrokerStartup) and e.broker_id == 4)

        broker.set(path, registration("h4", 9094, "rack-a", external=("ext4", 19094)))
        ev = reader.wait_for(lambda e: isinstance(e, BrokerModification))
        assert ev == BrokerModification(4, czxid, "rack-a", (plaintext, Endpoint("EXTERNAL", "ext4", 19094, "SSL")))
        assert broker.exists(path).czxid == czxid
        assert reader.events[-1][0] == b"4"

        # the watch is armed again: a timestamp alone (nothing livectl holds), then the listener moved
        broker.set(path, registration("h4", 9094, "rack-a", external=("ext4", 19094)))
        broker.set(path, registration("h4", 9094, "rack-a", external=("ext4", 29094)))
        moved = (plaintext, Endpoint("EXTERNAL", "ext4", 29094, "SSL"))
        reader.wait_for(lambda e: isinstance(e, BrokerModification) and e.endpoints == moved)
        assert [e for _, e in reader.events] == [
            BrokerStartup(4, czxid, "rack-a", (plaintext,)),
            ev,
            BrokerModification(4, czxid, "rack-a", moved),
        ]
        bridge.stop()  # its round records what it published after the flush the reader saw
        assert bridge.published == [e for _, e in reader.events]
        assert bridge.known == {4: czxid}
    finally:
        bridge.stop()
        reader.consumer.close()


def test_a_registration_changed_since_the_snapshot_is_a_modification_at_start(
    session: Callable[[], KazooClient], kafka_broker: Any, topic: str, producer: KafkaProducer
) -> None:
    """Seeded with the failover snapshot's registrations, the first read publishes those rewritten since; a
    broker known by its epoch alone has nothing to compare with."""
    broker = session()
    broker.create("/brokers/ids/1", registration("h1", 9091, external=("ext1", 19091)), ephemeral=True, makepath=True)
    broker.create("/brokers/ids/2", registration("h2", 9092), ephemeral=True)
    broker.create("/brokers/ids/3", registration("h3", 9093), ephemeral=True)
    epochs = {b: broker.exists(f"/brokers/ids/{b}").czxid for b in (1, 2, 3)}
    snapshot = [
        Broker(1, epochs[1], None, (Endpoint("PLAINTEXT", "h1", 9091),)),  # before its EXTERNAL listener
        Broker(2, epochs[2], None, (Endpoint("PLAINTEXT", "h2", 9092),)),  # unchanged
    ]
    bridge = LivenessBridge(session(), producer, topic, known={3: epochs[3]}, known_brokers=snapshot)
    assert bridge.sync() == [
        BrokerModification(
            1, epochs[1], None, (Endpoint("PLAINTEXT", "h1", 9091), Endpoint("EXTERNAL", "ext1", 19091, "SSL"))
        )
    ]
    assert bridge.sync() == []  # published: the same registration again is nothing
    broker.set("/brokers/ids/3", registration("h3", 9193))
    assert bridge.sync() == [BrokerModification(3, epochs[3], None, (Endpoint("PLAINTEXT", "h3", 9193),))]
    reader = EventReader(kafka_broker.bootstrap, topic)
    reader.wait_for(lambda e: isinstance(e, BrokerModification) and e.broker_id == 3)
    assert [e for _, e in reader.events] == bridge.published
    reader.consumer.close()
