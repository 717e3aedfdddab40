"""A real broker creates ``__consumer_offsets`` on a consumer group's first use, and every replica lands on a real
broker and comes online (issue 42; docs/real-brokers.md, "topic creation by a broker").

The channel advertises livectl's controller among the live brokers of every UpdateMetadata, so the broker's own
placement (``ZkAdminManager.createTopics`` over ``metadataCache.getAliveBrokers``) spreads the internal topic
over four "brokers", livectl's controller id among them. livectl's controller repairs the assignment before it
creates the partitions: the topic znode is rewritten with the controller id replaced by real brokers, and every
partition's ISR holds all its (real) replicas. The group's committed offsets are then read back.

Real processes only: the session's ZooKeeper and Kafka bus, ``livectl run``, ``livectl channel`` and three
Kafka 3.9.2 brokers in ZooKeeper mode (:mod:`bench.harness.real_brokers`). Run by hand (``.ci/run``'s
``by_hand``): about as long as the other real-broker e2e files' start-up.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition

from bench import harness as cm
from bench.harness.real_brokers import PARTITIONS, Cluster, kafka_view, produce, running_cluster
from livectl import local
from livectl.kafka_zk_brokers import ZkBrokerSettings

pytestmark = pytest.mark.e2e
log = logging.getLogger(__name__)

BROKERS = (1, 2, 3)
OFFSETS = "__consumer_offsets"
#: replication factor 3 over 4 "live brokers" (the three and livectl's controller): 9 of 12 partitions get a
#: replica on the controller id by Kafka's placement, whatever its random start
OFFSETS_PARTITIONS = 12
BROKER_SETTINGS = ZkBrokerSettings(
    properties={
        "offsets.topic.replication.factor": "3",
        "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
    }
)


@pytest.fixture
def cluster(zookeeper: local.Service, kafka_broker: local.Service, tmp_path: Path) -> Iterator[Cluster]:
    with running_cluster(zookeeper.connect, kafka_broker.bootstrap, tmp_path, BROKER_SETTINGS) as c:
        yield c


def _offsets_online(cluster: Cluster) -> dict[int, dict[str, Any]] | None:
    """The state znodes of ``__consumer_offsets`` once every partition has one, led by a replica, with its
    whole replica set in the ISR."""
    znode, _ = cluster.m.znode(f"/brokers/topics/{OFFSETS}")
    if not znode or len(znode["partitions"]) != OFFSETS_PARTITIONS:
        return None
    out = {}
    for p, replicas in znode["partitions"].items():
        st = cluster.state(OFFSETS, int(p))
        if st.get("leader") not in replicas or sorted(st.get("isr", [])) != sorted(replicas):
            return None
        out[int(p)] = {"replicas": replicas, **st}
    return out


def _kafka_sees(bootstrap: str, states: dict[int, dict[str, Any]]) -> dict[int, tuple[int, list[int]]] | None:
    view = kafka_view(bootstrap, OFFSETS)
    want = {p: (st["leader"], sorted(st["isr"])) for p, st in states.items()}
    return view if view == want else None


def test_a_brokers_consumer_offsets_lands_on_real_brokers(cluster: Cluster) -> None:
    m = cluster.m
    controller = m.start_controller()
    cluster.start_channel()
    m.wait_loaded(controller, timeout=180)
    cluster.start_brokers(BROKERS)
    cid = controller.controller_id
    assert cid not in BROKERS

    topic = f"{m.name}-orders"
    assignment = {p: tuple(BROKERS[p:] + BROKERS[:p]) for p in range(PARTITIONS)}
    cluster.create_topic("create-orders", topic, assignment)
    bootstrap = cluster.bootstrap()
    values = [f"r-{i}".encode() for i in range(60)]
    produce(bootstrap, topic, values)
    assert m.znode(f"/brokers/topics/{OFFSETS}")[0] is None, "no group used yet: no offsets topic"

    # the group's first use: FindCoordinator makes the broker create __consumer_offsets itself
    group = f"{m.name}-group"
    tps = [KafkaTopicPartition(topic, p) for p in range(PARTITIONS)]
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False, request_timeout_ms=15_000
    )
    try:
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        read: list[bytes] = []

        def read_to_end() -> bool:
            for records in consumer.poll(timeout_ms=500).values():
                read.extend(r.value for r in records)
            return all(consumer.position(tp) >= ends[tp] for tp in tps)

        cm.wait_until("the records read back", read_to_end, 60)
        assert sorted(read) == sorted(values)
        cm.wait_until("the group's offsets committed", functools.partial(_commit, consumer), 120)
    finally:
        consumer.close()

    states = cm.wait_until(
        f"every partition of {OFFSETS} online with all its replicas", lambda: _offsets_online(cluster), 120
    )
    placed = {b for st in states.values() for b in st["replicas"]}
    assert placed <= set(BROKERS), f"a replica on a broker that does not exist: {sorted(placed)}"
    assert all(len(st["replicas"]) == 3 for st in states.values())
    # the broker wrote the znode (version 0) with replicas on the controller id; livectl rewrote it once
    _, version = m.znode(f"/brokers/topics/{OFFSETS}")
    assert version == 1, f"the topic znode at version {version}: not the broker's write repaired once"
    # Kafka's own view (a broker's metadata) agrees with ZooKeeper
    cm.wait_until(
        f"the brokers' metadata of {OFFSETS} as in ZooKeeper", functools.partial(_kafka_sees, bootstrap, states), 60
    )

    # a new member of the group reads the committed offsets back from the coordinator
    again = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        committed = {tp.partition: again.committed(tp) for tp in tps}
    finally:
        again.close()
    assert committed == {tp.partition: ends[tp] for tp in tps}, committed
    log.info("%s placed on %s; committed %s", OFFSETS, sorted(placed), committed)


def _commit(consumer: KafkaConsumer) -> bool:
    """One synchronous commit of the consumer's positions; False while the coordinator is not there yet (the
    offsets topic being created)."""
    try:
        consumer.commit()
    except Exception as e:  # kafka-python's retriable coordinator errors: asked again until the deadline
        log.info("commit not yet: %r", e)
        return False
    return True
