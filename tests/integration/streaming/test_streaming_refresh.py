"""Refused partition-state writes are re-read from the real ZooKeeper and sent to their buckets."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kazoo.client import KazooClient

from core.codec.events import event_from_json
from core.decisions import ZkOp, ZkWrite
from core.events import Event, PartitionStatesRead
from core.snapshot import PartitionStateZnode
from sinks.ports import FailedWrite
from sinks.requests import ensure_topics
from streaming.query.refresh import StatesRefresher, refused_states

pytestmark = pytest.mark.integration


@pytest.fixture
def zk(zk_chrooted: KazooClient) -> KazooClient:
    return zk_chrooted


def _state(leader: int, isr: list[int], epoch: int) -> bytes:
    return json.dumps(
        {"version": 1, "leader": leader, "leader_epoch": epoch, "controller_epoch": 2, "isr": isr}
    ).encode()


def _read(event: Event) -> PartitionStatesRead:
    """What the refresher sends: the partition states it re-read."""
    assert isinstance(event, PartitionStatesRead), event
    return event


def _failed(path: str, error: str) -> FailedWrite:
    return FailedWrite(0, ZkWrite(ZkOp.SET, path, "{}", 0), error)


def test_refused_states_are_read_and_published_per_topic(zk: KazooClient, kafka_broker: Any) -> None:
    zk.create("/brokers/topics/a/partitions/0/state", _state(1, [1, 2], 3), makepath=True)
    zk.set("/brokers/topics/a/partitions/0/state", _state(2, [2], 4))
    zk.create("/brokers/topics/a/partitions/1/state", _state(2, [2, 1], 0), makepath=True)
    zk.create("/brokers/topics/b/partitions/0/state", _state(-1, [3], 7), makepath=True)
    failed = [
        _failed("/brokers/topics/a/partitions/0/state", "BadVersion"),
        _failed("/brokers/topics/a/partitions/1/state", "BadVersion"),
        _failed("/brokers/topics/a/partitions/0/state", "BadVersion"),  # twice in the batch: read once
        _failed("/brokers/topics/b/partitions/0/state", "BadVersion"),
        _failed("/brokers/topics/b/partitions/9/state", "BadVersion"),  # gone: left out
        _failed("/brokers/topics/c/partitions/0/state", "NoNode"),  # not a version conflict
        _failed("/brokers/topics/a", "BadVersion"),  # not a partition state; a topic znode without data: not read
    ]
    assert refused_states(failed) == {"a": [0, 1], "b": [0, 9]}
    topic = f"events-{uuid.uuid4().hex[:8]}"
    ensure_topics(kafka_broker.bootstrap, [topic])
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap, acks="all")
    try:
        sent = StatesRefresher(zk, producer, topic, controller_epoch=2)(failed)
    finally:
        producer.close()
    assert sent == [
        PartitionStatesRead(
            "a", ((0, PartitionStateZnode(2, 4, (2,), 2, 1)), (1, PartitionStateZnode(2, 0, (2, 1), 2, 0)))
        ),
        PartitionStatesRead("b", ((0, PartitionStateZnode(-1, 7, (3,), 2, 0)),)),
    ]
    consumer = KafkaConsumer(bootstrap_servers=kafka_broker.bootstrap, enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    records = [r for batch in consumer.poll(timeout_ms=5000).values() for r in batch]
    consumer.close()
    assert [(r.key, event_from_json(r.value)) for r in records] == [(e.topic.encode(), e) for e in map(_read, sent)]
    assert StatesRefresher(zk, None, topic, controller_epoch=2)([_failed("/brokers/topics/a", "BadVersion")]) == []
