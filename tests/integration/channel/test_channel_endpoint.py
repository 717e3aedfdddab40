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

from collections.abc import Iterator
from pathlib import Path

import pytest
from channel_support import EndpointSetup, channel_beside_a_broker

from channel.answers import SERVED, node_versions
from channel.wire import BrokerConnection
from core.kafka.requests import MetadataBroker, MetadataEndpoint
from livectl import local
from livectl.kafka_zk_brokers import ZkBrokerSettings

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
    endpoints = tuple(
        MetadataEndpoint(int(a.rsplit(":", 1)[1]), "127.0.0.1", name, 0) for name, a in s.svc.listeners.items()
    )
    solo, pair = s.lead_solo_and_pair(MetadataBroker(1, endpoints))

    # AllocateProducerIds: an idempotent producer's InitProducerId completes
    s.producer_ids_allocated(solo[0], answered=1)

    # AlterPartition: broker 2 never fetches, so broker 1 asks to shrink the ISR of "pair"
    asked = s.isr_proposal()
    assert (asked.broker_id, asked.broker_epoch, asked.topic, asked.partition) == (1, s.epoch, pair[0], 0)
    assert (asked.leader_epoch, asked.partition_epoch, asked.new_isr, asked.topic_id) == (1, 0, (1,), pair[1])
    s.answer_isr_shrink(asked, pair, answered=2)

    # ControlledShutdown on SIGTERM: answered with nothing left to move, the first attempt succeeds
    s.controlled_shutdown(answered=3)
