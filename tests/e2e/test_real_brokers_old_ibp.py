"""Real Apache Kafka 3.9.2 brokers on ``inter.broker.protocol.version=2.6`` under livectl: their ISR changes
reach livectl as Kafka's controller gets them from such brokers, by ZooKeeper notification.

Below IBP 2.7-IV2 a broker sends no AlterPartition: its leader writes the ISR to the partition's state znode
itself (a compare-and-set at the version its last LeaderAndIsr gave it) and lists the partition under
``/isr_change_notification`` (``docs/real-brokers.md``, "ISR changes of brokers below IBP 2.7"). The session's
ZooKeeper (a chroot) and Kafka bus, ``livectl run``, ``livectl channel --inter-broker-protocol 2.6`` and three
brokers; a topic of 3 partitions, replication factor 3, written to and read back; then a follower paused
(SIGSTOP): its leaders drop it from the ISR in ZooKeeper and livectl's watcher publishes their notifications
as ``zk_isr_change`` events; resumed, the other brokers' metadata shows the shrunk ISRs (livectl's
UpdateMetadata: a ZooKeeper-mode broker's metadata changes only through its controller's), and the follower
rejoins every ISR the same way. Last, a leader of such a partition is hard-killed: livectl's
election writes its state znode at the version the leader left (the controller took it from the
notification), with no refused write to re-read.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer

from bench import harness as cm
from bench.harness.real_brokers import PARTITIONS, Cluster, consume, kafka_view, produce, running_cluster
from livectl import local
from livectl.kafka_zk_brokers import ZkBrokerSettings, stop_zk_broker

pytestmark = pytest.mark.e2e
log = logging.getLogger(__name__)

BROKERS = (1, 2, 3)
#: IBP 2.6: ISR changes by ZooKeeper notification; a follower that stops fetching leaves the ISR after 2 s, and
#: one paused for the leaders' notification delay (5-7.5 s after their last ISR change) keeps its session
SETTINGS = ZkBrokerSettings(
    inter_broker_protocol="2.6",
    properties={"replica.lag.time.max.ms": "2000", "zookeeper.session.timeout.ms": "30000"},
)
#: the longest pause: within the session
PAUSE_S = 24
#: what the driver logs when ZooKeeper refused its compare-and-set of a state znode (streaming/query/refresh.py)
REFUSED = "refused partition state"


@pytest.fixture
def cluster(zookeeper: local.Service, kafka_broker: local.Service, tmp_path: Path) -> Iterator[Cluster]:
    with running_cluster(zookeeper.connect, kafka_broker.bootstrap, tmp_path, SETTINGS) as c:
        yield c


def test_a_paused_follower_leaves_and_rejoins_the_isr_through_isr_change_notifications(cluster: Cluster) -> None:
    m = cluster.m
    zk_client = m.zk  # the harness's ZooKeeper session, open once the cluster runs
    assert zk_client is not None
    controller = m.start_controller()
    cluster.start_channel()
    m.wait_loaded(controller, timeout=180)
    cluster.start_brokers(BROKERS)
    topic = f"{m.name}-old"
    assignment = {p: tuple(BROKERS[p:] + BROKERS[:p]) for p in range(PARTITIONS)}
    leaders = cluster.create_topic("create-old", topic, assignment)
    bootstrap = cluster.bootstrap()
    first = [f"a-{i}".encode() for i in range(100)]
    produce(bootstrap, topic, first)
    assert sorted(consume(bootstrap, topic)) == sorted(first)

    def isr(p: int) -> list[int]:
        return sorted(cluster.state(topic, p)["isr"])

    cm.wait_until("every ISR whole", lambda: all(isr(p) == list(BROKERS) for p in range(PARTITIONS)), 90)
    paused = leaders[2]
    shrinking = [p for p in range(PARTITIONS) if leaders[p] != paused]
    others = ",".join(svc.address for bid, svc in sorted(cluster.brokers.items()) if bid != paused)
    versions = {p: zk_client.get(f"/brokers/topics/{topic}/partitions/{p}/state")[1].version for p in shrinking}

    def notified(with_paused: bool) -> bool:
        """Each shrinking partition's ISR as wanted in ZooKeeper and, at the znode's version, in a zk_isr_change
        on broker-events."""
        if any((paused in isr(p)) != with_paused for p in shrinking):
            return False
        told = {
            (p, st["zk_version"]): paused in st["isr"]
            for _, e in cluster.events()
            if e.get("type") == "zk_isr_change" and e["topic"] == topic
            for p, st in e["states"]
        }
        zk = {p: zk_client.get(f"/brokers/topics/{topic}/partitions/{p}/state")[1].version for p in shrinking}
        return all(told.get((p, zk[p])) == with_paused for p in shrinking)

    # records keep coming while the follower sleeps: a follower is out of sync only when it lags
    side = KafkaProducer(bootstrap_servers=others, acks="all", request_timeout_ms=30_000, max_block_ms=30_000)
    for p in shrinking:
        side.send(topic, value=b"p-%d" % p, partition=p).get(timeout=30)
    during = [b"p-%d" % p for p in shrinking]
    os.kill(cluster.brokers[paused].pid, signal.SIGSTOP)
    try:
        futures: list[Any] = []
        for i in range(30):
            value = b"q-%d" % i
            futures.append(side.send(topic, value=value, partition=shrinking[i % len(shrinking)]))
            during.append(value)
        # the leaders write ZooKeeper themselves; they notify 5 s after their last ISR change (checked every 2.5 s)
        cm.wait_until(f"broker {paused} out of the ISRs and notified", lambda: notified(False), PAUSE_S)
    finally:
        os.kill(cluster.brokers[paused].pid, signal.SIGCONT)
    # livectl's UpdateMetadata of the shrunk ISRs (a ZooKeeper-mode broker's metadata changes through its
    # controller's only), delivered once the channel's queue, held by the paused broker, moves again; the
    # rejoin is notified 5 s or more after it happens, so the brokers serve the shrunk ISRs a while
    cm.wait_until(
        f"a broker's metadata showing broker {paused} out of the ISRs",
        lambda: all(paused not in view[1] for p, view in kafka_view(others, topic).items() if p in shrinking),
        30,
        interval=0.1,
    )
    for f in futures:
        f.get(timeout=30)
    side.close()
    cm.wait_until(f"broker {paused} back in the ISRs and notified", lambda: notified(True), 90)
    # livectl's UpdateMetadata (a ZooKeeper-mode broker's metadata changes through its controller's only)
    cm.wait_until(
        "every broker's metadata showing the ISRs whole",
        lambda: all(v[1] == list(BROKERS) for v in kafka_view(bootstrap, topic).values()),
        60,
    )
    for p in shrinking:
        assert zk_client.get(f"/brokers/topics/{topic}/partitions/{p}/state")[1].version >= versions[p] + 2
    events = cluster.events()
    assert not [e for _, e in events if e.get("type") in ("alter_partition", "alter_partition_request")], (
        "IBP 2.6 sends no AlterPartition"
    )
    cm.wait_until(
        "every notification deleted once published", lambda: not zk_client.get_children("/isr_change_notification"), 30
    )
    assert sorted(consume(bootstrap, topic)) == sorted(first + during)

    # a leader hard-killed: its registration goes when its session expires (30 s), while its followers'
    # leaders drop it from their ISRs by notification; livectl holds the versions the leaders wrote, so its
    # elections' compare-and-set is not refused
    victim = leaders[shrinking[0]]
    stop_zk_broker(cluster.brokers[victim], timeout=0)
    survivors = ",".join(svc.address for bid, svc in sorted(cluster.brokers.items()) if bid != victim)
    cm.wait_until(
        "new leaders on the surviving brokers (Kafka's view)",
        lambda: all(v[0] not in (victim, -1) for v in kafka_view(survivors, topic).values()),
        120,
    )
    for p in range(PARTITIONS):
        assert cluster.state(topic, p)["leader"] != victim
    assert REFUSED not in controller.log.read_text(), "a state znode write was refused"
