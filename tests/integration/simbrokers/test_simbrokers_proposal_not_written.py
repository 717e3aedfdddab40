"""An ISR proposal whose broker-events record Kafka refuses is sent again (issue 41, item 6).

A simulated broker never sends a proposal again on a timer; one of the few things that does send it again
is its record failing to be written, which the producer reports on its own thread (the send's error
callback). Real Kafka refuses the record here: the events topic is created with a ``max.message.bytes``
smaller than any AlterPartition record, so the producer's send fails with ``MESSAGE_TOO_LARGE`` after it
left the process, as a write to an unreachable or failing broker does.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic
from simbrokers_support import envelope, lisr_body
from waiting import wait_until

from core.events import AlterPartition
from core.kafka.requests import RequestApi
from core.model import TopicPartition
from livectl import local
from simbrokers.broker import BrokerConfig
from simbrokers.runner import ProcessSettings, SimBrokersProcess, now_ms

pytestmark = pytest.mark.integration

BROKER = 1


@pytest.fixture()
def refusing_topic(kafka_broker: local.Service) -> Iterator[str]:
    """A topic whose every AlterPartition record is over its message size."""
    name = f"events-refused-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap)
    try:
        admin.create_topics([NewTopic(name, 1, 1, topic_configs={"max.message.bytes": "64"})])
        yield name
    finally:
        admin.close()


def test_a_proposal_whose_record_kafka_refused_is_sent_again(
    zk_connect: str, kafka_broker: local.Service, refusing_topic: str
) -> None:
    settings = ProcessSettings(
        (BROKER,),
        zookeeper=zk_connect,
        bootstrap_server=kafka_broker.bootstrap,
        events_topic=refusing_topic,
        config=BrokerConfig(produce_rate=0.0, replica_lag_time_max_ms=100),
    )
    p = SimBrokersProcess(settings)
    # the process's own producer settings (runner.start also reads the requests and control topics)
    p._producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap, acks="all", linger_ms=5)
    p._start_broker(BROKER, 0)
    m = p.members[BROKER]
    try:
        broker = m.broker
        # broker 1 has led a partition for a second whose followers never fetched: it proposes the ISR (1,)
        lisr = lisr_body(leader=BROKER, leader_epoch=0, isr=[1, 2, 3], replicas=[1, 2, 3])
        broker.handle(envelope(BROKER, RequestApi.LEADER_AND_ISR, lisr), now_ms() - 1000)
        part = broker.partitions[TopicPartition("orders", 0)]
        [proposal] = [e for e in broker.tick(now_ms()) if isinstance(e, AlterPartition)]
        assert proposal.new_isr == (1,)
        p._publish(BROKER, [proposal])
        p._producer.flush(timeout=30)
        # the refusal reaches the loop through the error callback; until the loop takes it, nothing is resent
        wait_until("the producer's error callback", lambda: list(p._failed_proposals), timeout=30)
        assert list(p._failed_proposals) == [(BROKER, proposal.correlation_id)]
        pending = part.pending
        assert pending is not None
        waiting = pending.send_at_ms
        assert waiting is None  # sent: waiting for its answer
        p._resend_failed_proposals()
        send_at = pending.send_at_ms
        assert send_at is not None and not p._failed_proposals
        assert broker.tick(send_at - 1) == []
        assert [e for e in broker.tick(send_at) if isinstance(e, AlterPartition)] == [proposal]
    finally:
        p._producer.close(timeout=5)
        m.zk.stop()
        m.zk.close()
        m.server.stop()
