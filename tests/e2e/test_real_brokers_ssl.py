"""Real Kafka 3.9.2 brokers whose inter-broker and control-plane listeners are SSL obey livectl over TLS.

The brokers map ``INTERNAL`` (``inter.broker.listener.name``) and ``CONTROL_PLANE``
(``control.plane.listener.name``) to SSL with ``ssl.client.auth=required`` — what a cluster with
``security.inter.broker.protocol=SSL`` does — and keep their clients' ``PLAINTEXT``. Certificates made by the
test (:mod:`kafka_pki`): a CA, the brokers' PKCS12 stores and the channel's PEM certificate for 127.0.0.1.
``livectl channel`` gets them as a broker's ``ssl.*`` (``--ssl-config``) and the brokers' map
(``--listener-security-protocol-map``). Then:

1. each broker's UpdateMetadata and LeaderAndIsr reach it over TLS (its control plane speaks nothing else):
   a topic of 3 partitions, replication factor 2, created through livectl, served by the brokers as livectl
   decided (Kafka's view: their metadata); records written with ``acks=all`` (replicated over the SSL
   inter-broker listener; the idempotent producer's AllocateProducerIds answered by the channel over TLS) and
   read back;
2. a leader gets SIGTERM: its ControlledShutdown reaches livectl over TLS (the channel's endpoint advertised
   on the SSL listeners), livectl moves its leadership and answers, the first attempt succeeds;
3. started again, it rejoins every ISR through its leaders' AlterPartition, sent to the channel over TLS,
   written by livectl and answered; every record is read back from it.

Real processes only. Not part of CI (by hand: ``.venv/bin/pytest -m e2e tests/e2e/test_real_brokers_ssl.py``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka_pki import make_pki, zk_broker_ssl_properties

from bench import harness as cm
from bench.harness.real_brokers import PARTITIONS, Cluster, consume, kafka_view, produce, running_cluster
from livectl import local
from livectl.kafka_zk_brokers import ZkBrokerSettings, stop_zk_broker

pytestmark = pytest.mark.e2e

BROKERS = (1, 2)
SECURED = ("INTERNAL", "CONTROL_PLANE")
CHANNEL_CN = "livectl-controller"


@pytest.fixture
def cluster(zookeeper: local.Service, kafka_broker: local.Service, tmp_path: Path) -> Iterator[Cluster]:
    pki = make_pki(tmp_path / "pki", [], servers=[CHANNEL_CN])
    cert = pki.server(CHANNEL_CN)
    ssl_config = tmp_path / "channel-ssl.properties"
    ssl_config.write_text(
        f"ssl.truststore.location={pki.ca}\n"
        f"ssl.keystore.location={cert.cert}\n"
        f"ssl.key.location={cert.key}\n"
        "ssl.client.auth=required\n"
    )
    settings = ZkBrokerSettings(
        # replica.lag.time.max.ms stays Kafka's 30 s: with two brokers, a follower dropped from an ISR under load
        # would leave its leader's partition nowhere to move at the controlled shutdown
        properties={"zookeeper.session.timeout.ms": "15000", **zk_broker_ssl_properties(pki, SECURED)}
    )
    channel_args = [
        "--ssl-config",
        str(ssl_config),
        "--listener-security-protocol-map",
        "PLAINTEXT:PLAINTEXT,INTERNAL:SSL,CONTROL_PLANE:SSL",
    ]
    with running_cluster(zookeeper.connect, kafka_broker.bootstrap, tmp_path, settings, channel_args) as c:
        yield c


def test_brokers_with_an_ssl_inter_broker_listener_obey_livectl_over_tls(cluster: Cluster) -> None:
    m = cluster.m
    controller = m.start_controller()
    cluster.start_channel()
    m.wait_loaded(controller, timeout=180)
    # registered, /controller still livectl's, and each broker's UpdateMetadata delivered (over TLS)
    cluster.start_brokers(BROKERS)
    registration, _ = m.znode("/brokers/ids/1")
    assert registration is not None
    assert registration["listener_security_protocol_map"] == {
        "PLAINTEXT": "PLAINTEXT",
        "INTERNAL": "SSL",
        "CONTROL_PLANE": "SSL",
    }, registration
    # the channel's endpoint listens with TLS on both SSL names and is advertised there
    log = cluster.channel_log
    started = next(line for line in log.read_text().splitlines() if "controller endpoint listening on" in line)
    assert "(CONTROL_PLANE, SSL)" in started and "(INTERNAL, SSL)" in started, started

    topic = f"{m.name}-orders"
    assignment = {p: (BROKERS[p % 2], BROKERS[(p + 1) % 2]) for p in range(PARTITIONS)}
    leaders = cluster.create_topic("create-orders", topic, assignment)
    bootstrap = cluster.bootstrap()
    # Kafka's view: what livectl decided, delivered over TLS
    view = cm.wait_until(
        "the brokers' metadata showing livectl's leaders and whole ISRs",
        lambda: (
            (v := kafka_view(bootstrap, topic))
            and all(v.get(p) == (leaders[p], sorted(BROKERS)) for p in range(PARTITIONS))
            and v
        ),
        90,
    )
    for p in range(PARTITIONS):
        st = cluster.state(topic, p)
        assert view[p] == (st["leader"], sorted(st["isr"])), (p, view[p], st)
    first = [f"a-{i}".encode() for i in range(200)]
    produce(bootstrap, topic, first)  # acks=all: replicated over the SSL inter-broker listener
    assert sorted(consume(bootstrap, topic)) == sorted(first)

    cm.wait_until(
        "every ISR whole in ZooKeeper",
        lambda: all(sorted(cluster.state(topic, p)["isr"]) == list(BROKERS) for p in range(PARTITIONS)),
        60,
    )

    # SIGTERM to the leader of partition 0: ControlledShutdown over TLS (INTERNAL), answered by livectl
    stopping = leaders[0]
    other = next(b for b in BROKERS if b != stopping)
    svc = cluster.brokers[stopping]
    before = time.monotonic()
    assert stop_zk_broker(svc, timeout=60), f"broker {stopping} did not exit after SIGTERM"
    took = time.monotonic() - before
    text = Path(svc.log).read_text()
    assert "Controlled shutdown request returned successfully" in text
    assert "Retrying controlled shutdown" not in text and "unclean shutdown" not in text
    assert took < 20, took
    asked = [e for _, e in cluster.events() if e.get("type") == "controlled_shutdown"]
    assert asked and {e["broker_id"] for e in asked} == {stopping}, asked
    for p in range(PARTITIONS):
        st = cluster.state(topic, p)
        assert st["leader"] == other and st["isr"] == [other], (p, st)
    remaining = cluster.brokers[other].address
    second = [f"b-{i}".encode() for i in range(200)]
    produce(remaining, topic, second)
    assert sorted(consume(remaining, topic)) == sorted(first + second)

    # started again: it catches up over SSL and its leaders' AlterPartition (over TLS) put it back in every ISR
    cluster.start_broker(stopping)
    cm.wait_until(
        f"broker {stopping} back in every ISR (ZooKeeper, by AlterPartition through the channel over TLS)",
        lambda: all(stopping in cluster.state(topic, p)["isr"] for p in range(PARTITIONS)),
        120,
    )
    proposals = cluster.isr_proposals(topic)
    assert {e.partition for e in proposals if stopping in e.new_isr} == set(range(PARTITIONS)), proposals
    assert "AlterPartition answered (top-level error 0)" in log.read_text()
    back = cluster.brokers[stopping].address
    cm.wait_until(
        f"broker {stopping}'s own metadata showing the whole ISRs",
        lambda: all(sorted(v[1]) == sorted(BROKERS) for v in kafka_view(back, topic).values()),
        60,
    )
    assert sorted(consume(back, topic)) == sorted(first + second)
    assert "TLS handshake failed" not in log.read_text()
