"""The local services are real: ZooKeeper semantics through kazoo, Kafka semantics through kafka-python."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NoNodeError

from livectl import local

pytestmark = pytest.mark.integration


@pytest.fixture()
def zk(zookeeper: local.Service) -> Iterator[KazooClient]:
    client = KazooClient(hosts=zookeeper.connect, timeout=10)
    client.start(timeout=10)
    yield client
    client.stop()
    client.close()


def test_zookeeper_answers_ruok(zookeeper: local.Service) -> None:
    assert local.zookeeper_ok(zookeeper.port)


def test_create_and_compare_and_set(zk: KazooClient) -> None:
    path = f"/it/{uuid.uuid4().hex}"
    zk.create(path, b'{"v":0}', makepath=True)
    data, stat = zk.get(path)
    assert data == b'{"v":0}' and stat.version == 0
    stat = zk.set(path, b'{"v":1}', version=0)
    assert stat.version == 1
    with pytest.raises(BadVersionError):
        zk.set(path, b'{"v":"stale"}', version=0)
    assert zk.get(path)[0] == b'{"v":1}'


def test_watch_fires_on_change(zk: KazooClient) -> None:
    path = f"/it/{uuid.uuid4().hex}"
    zk.create(path, b"a", makepath=True)
    fired = threading.Event()
    seen: list[bytes] = []

    def on_change(data: bytes | None, _stat: object) -> None:
        if data is not None:
            seen.append(data)
        if data == b"b":
            fired.set()

    zk.DataWatch(path, on_change)
    zk.set(path, b"b")
    assert fired.wait(10)
    assert seen == [b"a", b"b"]


def test_multi_op_with_stale_check_applies_nothing(zk: KazooClient) -> None:
    base = f"/it/{uuid.uuid4().hex}"
    zk.create(base + "/epoch", b"1", makepath=True)
    zk.set(base + "/epoch", b"2")  # version is now 1
    txn = zk.transaction()
    txn.check(base + "/epoch", 0)  # stale
    txn.create(base + "/new", b"x")
    txn.set_data(base + "/epoch", b"3")
    results = txn.commit()
    assert isinstance(results[0], BadVersionError)
    with pytest.raises(NoNodeError):
        zk.get(base + "/new")
    assert zk.get(base + "/epoch")[0] == b"2"

    txn = zk.transaction()
    txn.check(base + "/epoch", 1)
    txn.create(base + "/new", b"x")
    assert txn.commit() == [True, base + "/new"]


def test_kafka_produce_consume_group_commit_resume(kafka_broker: local.Service) -> None:
    topic = f"it-{uuid.uuid4().hex[:8]}"
    group = f"g-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap)
    admin.create_topics([NewTopic(topic, 1, 1)])
    assert topic in admin.list_topics()
    admin.close()

    producer = KafkaProducer(
        bootstrap_servers=kafka_broker.bootstrap,
        acks="all",
        key_serializer=str.encode,
        value_serializer=lambda v: json.dumps(v).encode(),
    )
    for i in range(10):
        producer.send(topic, key=f"k{i}", value={"n": i})
    producer.flush()
    producer.close()

    # the broker's group join waits for the rebalance timeout, so keep it short
    group_opts = {
        "bootstrap_servers": kafka_broker.bootstrap,
        "group_id": group,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "max_poll_interval_ms": 5000,
        "session_timeout_ms": 6000,
        "heartbeat_interval_ms": 1000,
    }
    first = KafkaConsumer(topic, **group_opts)
    got: list[tuple[str, dict[str, int]]] = []
    deadline = time.monotonic() + 30
    while len(got) < 6 and time.monotonic() < deadline:
        for records in first.poll(timeout_ms=500, max_records=6 - len(got)).values():
            got.extend((r.key.decode(), json.loads(r.value)) for r in records)
    assert got == [(f"k{i}", {"n": i}) for i in range(6)]
    first.commit()
    tp = TopicPartition(topic, 0)
    assert first.committed(tp) == 6
    first.close()

    second = KafkaConsumer(topic, **group_opts)
    rest: list[int] = []
    deadline = time.monotonic() + 30
    while len(rest) < 4 and time.monotonic() < deadline:
        for records in second.poll(timeout_ms=500).values():
            rest.extend(json.loads(r.value)["n"] for r in records)
    second.close()
    assert rest == [6, 7, 8, 9]
