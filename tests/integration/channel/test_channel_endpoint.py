"""The controller channel as the controller's endpoint, judged by a real Apache Kafka 3.9.2 broker (ZooKeeper mode).

One broker (:mod:`livectl.kafka_zk_brokers`: clients on ``PLAINTEXT``, ``INTERNAL`` between brokers,
``CONTROL_PLANE`` for the controller) under its own ZooKeeper chroot, and a channel in this process with its
endpoint advertised on ``CONTROL_PLANE`` and ``INTERNAL``. The test plays livectl's controller on the bus: it
writes the requests (LeaderAndIsr, UpdateMetadata naming controller 1000) and, for the broker's own requests
that the channel turns into events, the controller's answers. Then, from the broker itself:

* ApiVersions of the endpoint lists what it serves and what it forwards to the broker;
* an idempotent producer (kafka-python's default) completes InitProducerId: the broker got a block of
  producer ids from the channel (AllocateProducerIds), recorded in ``/latest_producer_id_block``;
* the leader of a partition whose other replica never fetches shrinks the ISR: its AlterPartition reaches
  the bus as an event and the controller's answer reaches the broker, which takes the new ISR;
* SIGTERM: the broker's ControlledShutdown reaches the bus, the answer reaches the broker, and it shuts
  down at its first attempt.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from channel_support import CONTROLLER, EPOCH, EndpointSetup, channel_beside_a_broker, topic_id
from kafka import KafkaProducer
from waiting import wait_until

from channel.answers import SERVED, node_versions
from channel.wire import BrokerConnection
from core.events import AlterPartition, ControlledShutdown
from core.kafka.requests import (
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
    UpdateMetadataRequest,
)
from livectl import local
from livectl.kafka_zk_brokers import ZkBrokerSettings, stop_zk_broker

pytestmark = pytest.mark.integration


@pytest.fixture
def setup(zookeeper: local.Service, kafka_broker: local.Service, tmp_path: Path) -> Iterator[EndpointSetup]:
    # a follower that never fetches drops out of the ISR after 2 s (Kafka's default: 30 s)
    broker_settings = ZkBrokerSettings(properties={"replica.lag.time.max.ms": "2000"})
    with channel_beside_a_broker(
        zookeeper.connect,
        kafka_broker.bootstrap,
        tmp_path / "broker",
        "endpoint",
        broker_settings,
        listener="CONTROL_PLANE",
        controller_listeners=("CONTROL_PLANE", "INTERNAL"),
    ) as rig:
        # the events awaited are broker 1's own requests
        yield EndpointSetup.beside(rig, kafka_broker.bootstrap, event_key=b"1")


def test_the_brokers_own_requests_reach_the_controller_and_are_answered(setup: EndpointSetup) -> None:
    s = setup
    # each listener its own port; ApiVersions: what the channel answers and what it forwards to the broker
    assert list(s.channel.endpoints) == ["CONTROL_PLANE", "INTERNAL"]
    host, port = s.broker("CONTROL_PLANE")
    with BrokerConnection(host, port) as broker:
        theirs = broker.negotiate()
    with BrokerConnection("127.0.0.1", s.port("CONTROL_PLANE")) as conn:
        table = conn.negotiate()
    assert table == node_versions(theirs)
    assert all(table[k][1] == min(r.stop - 1, theirs.get(k, (0, 99))[1]) for k, r in SERVED.items()), table

    # broker 1 leads "solo" alone and "pair" with broker 2 (never started) in its ISR; the UpdateMetadata
    # names controller 1000, which the channel lists as a live broker at its own endpoint
    solo, pair = (f"{s.bus.requests_topic}-solo", topic_id()), (f"{s.bus.requests_topic}-pair", topic_id())
    states = tuple(
        LisrPartitionState(t, 0, EPOCH, 1, 1, isr, 0, isr, (), (), True, 0, tid)
        for (t, tid), isr in ((solo, (1,)), (pair, (1, 2)))
    )
    host, port = s.broker("CONTROL_PLANE")
    s.send(
        RequestApi.LEADER_AND_ISR,
        LeaderAndIsrRequest(CONTROLLER, EPOCH, s.epoch, 0, states, (BrokerAddress(1, host, port),)),
    )
    endpoints = tuple(
        MetadataEndpoint(int(a.rsplit(":", 1)[1]), "127.0.0.1", name, 0) for name, a in s.svc.listeners.items()
    )
    s.send(
        RequestApi.UPDATE_METADATA,
        UpdateMetadataRequest(
            CONTROLLER,
            EPOCH,
            s.epoch,
            tuple(
                MetadataPartitionState(st.topic, 0, EPOCH, 1, 1, st.isr, 0, st.replicas, (), st.topic_id)
                for st in states
            ),
            (MetadataBroker(1, endpoints),),
        ),
    )
    wait_until("both requests delivered", lambda: s.channel.delivered == 2)

    # AllocateProducerIds: an idempotent producer's InitProducerId completes
    producer = KafkaProducer(bootstrap_servers=s.svc.address, acks="all", max_block_ms=30_000)
    try:
        producer.send(solo[0], b"once").get(timeout=30)
    finally:
        producer.close()
    data, _ = s.zk.get("/latest_producer_id_block")
    assert json.loads(data) == {"version": 1, "broker": 1, "block_start": "0", "block_end": "999"}
    # the channel's answer, not a Kafka controller's (counted once sent: the broker may act on it first)
    wait_until("the channel's answer 1 counted", lambda: s.channel.node is not None and s.channel.node.answered == 1)

    # AlterPartition: broker 2 never fetches, so broker 1 asks to shrink the ISR of "pair"
    asked = s.event(lambda e: isinstance(e, AlterPartition))
    assert isinstance(asked, AlterPartition)
    assert (asked.broker_id, asked.broker_epoch, asked.topic, asked.partition) == (1, s.epoch, pair[0], 0)
    assert (asked.leader_epoch, asked.partition_epoch, asked.new_isr, asked.topic_id) == (1, 0, (1,), pair[1])
    result = AlterPartitionResult(pair[0], 0, 0, 1, 1, (1,), 1, 0, asked.correlation_id, pair[1])
    s.send(RequestApi.ALTER_PARTITION_RESPONSE, AlterPartitionResponse(0, (result,)))
    log = Path(s.svc.log)
    taken = f"[Partition {pair[0]}-0 broker=1] ISR updated to 1 "
    wait_until("the broker taking the new ISR", lambda: taken in log.read_text())
    wait_until("the channel's answer 2 counted", lambda: s.channel.node is not None and s.channel.node.answered == 2)

    # ControlledShutdown on SIGTERM: answered with nothing left to move, the first attempt succeeds
    stopped: list[bool] = []
    stopper = threading.Thread(target=lambda: stopped.append(stop_zk_broker(s.svc, timeout=60)))
    started = time.monotonic()
    stopper.start()
    ev = s.event(lambda e: isinstance(e, ControlledShutdown))
    assert ev == ControlledShutdown(1, s.epoch)
    s.send(RequestApi.CONTROLLED_SHUTDOWN_RESPONSE, ControlledShutdownResponse(0, ()))
    stopper.join(60)
    assert stopped == [True]
    text = log.read_text()
    assert "Controlled shutdown request returned successfully" in text
    assert "Retrying controlled shutdown" not in text
    assert "Proceeding to do an unclean shutdown" not in text
    wait_until("the channel's answer 3 counted", lambda: s.channel.node is not None and s.channel.node.answered == 3)
    # the first attempt succeeded: no retry back-off (controlled.shutdown.retry.backoff.ms, 5 s)
    assert time.monotonic() - started < 30
