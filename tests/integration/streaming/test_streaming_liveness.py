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
from core.events import BrokerFailure, BrokerStartup, Event
from core.model import Endpoint
from sinks.requests import ensure_topics
from streaming.zk.liveness import LivenessBridge

pytestmark = pytest.mark.integration


def registration(host: str, port: int, rack: str | None = None) -> bytes:
    """Kafka's v5 ``/brokers/ids/<id>`` JSON."""
    return json.dumps(
        {
            "features": {},
            "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
            "endpoints": [f"PLAINTEXT://{host}:{port}"],
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
    assert [type(e).__name__ + str(e.broker_id) for e in bridge.published] == [  # type: ignore[attr-defined]
        "BrokerFailure3",
        "BrokerStartup1",
    ]
