"""Three real Kafka 3.9.2 brokers whose inter-broker and control-plane listeners are SASL obey livectl over SASL.

The brokers map ``INTERNAL`` (``inter.broker.listener.name``) to SASL_PLAINTEXT and ``CONTROL_PLANE``
(``control.plane.listener.name``) to SASL_SSL, both SCRAM-SHA-512 (``sasl.mechanism.inter.broker.protocol``),
and keep their clients' ``PLAINTEXT`` (:func:`kafka_sasl.zk_broker_sasl_properties`). The SCRAM users are made in
the cluster's ZooKeeper chroot before the brokers start, by Kafka's own ``kafka-configs --zookeeper`` (the
resolved jars): ``broker`` (every broker's login, to the others and to its controller), ``livectl`` (the
channel's) and ``operator`` (Kafka's tools). ``livectl channel`` gets a broker's ``sasl.*`` and ``ssl.*`` and
``super.users=User:broker`` in its ``--security-config`` and the brokers' map. Then, with records written by
kafka-python's idempotent producer with ``acks=all`` on a topic of ``min.insync.replicas=2``:

1. each broker's UpdateMetadata and LeaderAndIsr reach it over SASL_SSL (the channel's SCRAM login);
   Kafka's own ``kafka-topics --create`` (bootstrapped from the brokers' SASL_PLAINTEXT listener, logged in as
   ``operator``) sends its CreateTopics to the controller's node, the channel's endpoint on that SASL listener:
   a topic of 3 partitions, replication factor 3, created by livectl (the tool run once: its Metadata calls
   answered by the brokers or by the endpoint, never "does not support METADATA"), served as livectl decided, written
   (replicated over the SASL inter-broker listener) and read back;
2. ``operator``, authenticated, is not the brokers' principal: its ControlledShutdown is answered
   ``CLUSTER_AUTHORIZATION_FAILED``;
3. a leader gets SIGTERM: its ControlledShutdown reaches livectl after its SCRAM login on INTERNAL, livectl
   moves its leadership and answers, the first attempt succeeds; started again, it rejoins every ISR through
   its leaders' AlterPartition (CONTROL_PLANE, SASL_SSL);
4. a leader gets SIGKILL: its partitions get new leaders from their ISRs; started again, it rejoins;
5. every acknowledged record is read back, and Kafka's ``kafka-topics --describe`` over SASL (its
   ListPartitionReassignments answered by the channel's SASL endpoint) agrees with ``livectl topics --describe``.

Real processes only. Not part of CI (by hand: ``.venv/bin/pytest -m e2e tests/e2e/test_real_brokers_sasl.py``).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka_pki import make_pki
from kafka_sasl import SCRAM, SCRAM_LOGIN, client_sasl_properties, jaas, make_scram_users, zk_broker_sasl_properties
from kio.schema.controlled_shutdown.v3.request import ControlledShutdownRequest
from kio.schema.controlled_shutdown.v3.response import ControlledShutdownResponse
from kio.schema.types import BrokerId
from kio.static.primitive import i64

from bench import harness as cm
from bench.harness.real_brokers import (
    PARTITIONS,
    TOPIC_COMMAND,
    Cluster,
    consume,
    describe_partitions,
    kafka_tool,
    kafka_topics_describe,
    kafka_view,
    produce,
    running_cluster,
)
from channel.sasl import client_mechanism
from channel.wire import BrokerConnection
from livectl import local
from livectl.kafka_zk_brokers import INTER_BROKER_LISTENER, ZkBrokerSettings, stop_zk_broker

pytestmark = pytest.mark.e2e
log = logging.getLogger(__name__)

BROKERS = (1, 2, 3)
PROTOCOLS = {"INTERNAL": "SASL_PLAINTEXT", "CONTROL_PLANE": "SASL_SSL"}
PASSWORDS = {"broker": "broker-secret", "livectl": "livectl-secret", "operator": "operator-secret"}
CHANNEL_CN = "livectl-controller"
MIN_ISR = 2
#: only faults move leaders (Kafka's brokers never run the controller here; livectl's rebalance is off)
LIVECTL = {"auto_leader_rebalance_enable": False}
CLUSTER_AUTHORIZATION_FAILED = 31
SHUTDOWN_OK = "Controlled shutdown request returned successfully"
#: what Kafka's tools printed when their Admin client picked the channel's node and it listed no Metadata (on a
#: SASL name, before the endpoint answered Metadata itself there): never again
NO_METADATA = "does not support METADATA"


@pytest.fixture
def cluster(zookeeper: local.Service, kafka_broker: local.Service, tmp_path: Path) -> Iterator[Cluster]:
    pki = make_pki(tmp_path / "pki", [], servers=[CHANNEL_CN])
    cert = pki.server(CHANNEL_CN)
    security = tmp_path / "channel-security.properties"
    channel_props = {
        "ssl.truststore.location": str(pki.ca),
        "ssl.keystore.location": str(cert.cert),
        "ssl.key.location": str(cert.key),
        "sasl.mechanism.inter.broker.protocol": SCRAM,
        "sasl.enabled.mechanisms": SCRAM,
        "listener.name.control_plane.scram-sha-512.sasl.jaas.config": jaas(
            SCRAM_LOGIN, username="livectl", password=PASSWORDS["livectl"]
        ),
        "super.users": "User:broker",
    }
    security.write_text("".join(f"{k}={v}\n" for k, v in channel_props.items()))
    security.chmod(0o600)
    settings = ZkBrokerSettings(
        properties={
            "zookeeper.session.timeout.ms": "15000",
            "auto.leader.rebalance.enable": "false",
            **zk_broker_sasl_properties(PROTOCOLS, "broker", PASSWORDS["broker"], pki=pki),
        }
    )
    channel_args = [
        "--security-config",
        str(security),
        "--listener-security-protocol-map",
        "PLAINTEXT:PLAINTEXT," + ",".join(f"{n}:{p}" for n, p in PROTOCOLS.items()),
    ]
    with running_cluster(zookeeper.connect, kafka_broker.bootstrap, tmp_path, settings, channel_args) as c:
        yield c


def _operator() -> dict[str, str]:
    """Kafka's tools' client properties: SCRAM user ``operator`` on the brokers' SASL_PLAINTEXT listener."""
    return client_sasl_properties("SASL_PLAINTEXT", "operator", PASSWORDS["operator"])


def _endpoint(log_text: str, listener: str) -> tuple[str, int]:
    """The channel's endpoint of ``listener``, from its start line."""
    found = re.search(rf"(\S+):(\d+) \({listener}, {PROTOCOLS[listener]}\)", log_text)
    assert found, f"no {listener} endpoint in the channel's start line"
    return found.group(1), int(found.group(2))


def _states(c: Cluster, topic: str) -> dict[int, dict[str, Any]]:
    return {p: c.state(topic, p) for p in range(PARTITIONS)}


def _rejoined(c: Cluster, topic: str, broker: int, how: str) -> None:
    cm.wait_until(
        f"broker {broker} back in every ISR ({how})",
        lambda: all(broker in st["isr"] for st in _states(c, topic).values()),
        120,
    )


def _served(c: Cluster, topic: str) -> None:
    """Until each running broker's own metadata has the leaders and ISRs livectl wrote in ZooKeeper."""

    def served() -> bool:
        zk = {p: (st["leader"], sorted(st["isr"])) for p, st in _states(c, topic).items()}
        return all(kafka_view(svc.address, topic) == zk for svc in c.brokers.values() if svc.running())

    cm.wait_until(f"every running broker serving ZooKeeper's leaders and ISRs of {topic}", served, 60)


def _create(c: Cluster, args: list[str]) -> str:
    """Kafka's ``kafka-topics`` with ``args`` as ``operator``, once: its Admin client may pick the channel's node
    for its metadata, which the endpoint answers on a SASL name (never :data:`NO_METADATA`)."""
    return kafka_tool(
        "kafka-topics", TOPIC_COMMAND, args, api_timeout_ms=60_000, timeout=180, work=c.work, client=_operator()
    )


def _agree(c: Cluster, topic: str) -> dict[str, Any]:
    """Until Kafka's ``kafka-topics --describe`` over SASL (bootstrapped from the brokers' SASL_PLAINTEXT
    listener, as ``operator``) and ``livectl topics --describe`` print the same facts of ``topic``."""
    last: dict[str, Any] = {}

    def same() -> dict[str, Any] | None:
        try:
            text = kafka_topics_describe(
                c.bootstrap(INTER_BROKER_LISTENER), topic, api_timeout_ms=20_000, work=c.work, client=_operator()
            )
        except RuntimeError as e:
            assert NO_METADATA not in str(e), f"the endpoint listed no Metadata on a SASL name: {e}"
            log.info("%s: Kafka's tool failed: %s", topic, e)
            last["kafka"] = str(e)
            return None
        kafka = describe_partitions(text)
        rc, out = c.admin("topics", "--describe", "--topic", topic)
        assert rc == 0, out
        ours = describe_partitions(out)
        last.update(kafka=kafka, livectl=ours)
        return kafka if kafka == ours and len(kafka["partitions"]) == PARTITIONS else None

    try:
        facts: dict[str, Any] = cm.wait_until(f"the two --describe agreeing on {topic}", same, 120, interval=2)
    except cm.MatrixError:
        raise AssertionError(f"kafka-topics and livectl disagree on {topic}: {last}") from None
    return facts


def test_three_brokers_with_a_sasl_control_plane_obey_livectl_over_sasl(cluster: Cluster) -> None:
    c, m = cluster, cluster.m
    started = time.monotonic()
    controller = m.start_controller(LIVECTL)
    make_scram_users(m.zk_connect, PASSWORDS)  # while the controller's Spark starts
    c.start_channel()
    m.wait_loaded(controller, timeout=240)
    # registered, /controller still livectl's, each broker's UpdateMetadata delivered over SASL_SSL
    c.start_brokers(BROKERS)
    log.info("cluster up in %.0f s", time.monotonic() - started)
    registration, _ = m.znode("/brokers/ids/1")
    assert registration is not None
    assert registration["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT", **PROTOCOLS}, registration
    channel_log = c.channel_log
    text = channel_log.read_text()
    start_line = next(line for line in text.splitlines() if "controller endpoint listening on" in line)
    assert all(f"({n}, {p})" in start_line for n, p in PROTOCOLS.items()), start_line
    assert "only from super.users User:broker" in text

    # Kafka's kafka-topics --create over SASL: its CreateTopics to the controller's node, the channel's endpoint
    topic = f"{m.name}-orders"
    assignment = {p: tuple(BROKERS[(p + i) % len(BROKERS)] for i in range(len(BROKERS))) for p in range(PARTITIONS)}
    spec = ",".join(":".join(str(b) for b in assignment[p]) for p in range(PARTITIONS))
    args = ["--bootstrap-server", c.bootstrap(INTER_BROKER_LISTENER), "--create", "--topic", topic]
    args += ["--replica-assignment", spec, "--config", f"min.insync.replicas={MIN_ISR}"]
    created = _create(c, args)
    assert created.strip() == f"Created topic {topic}.", created
    assert re.search(r"CreateTopics v\d+ from", channel_log.read_text()), "CreateTopics did not reach the channel"
    assert m.znode(f"/config/topics/{topic}")[0] == {"version": 1, "config": {"min.insync.replicas": str(MIN_ISR)}}
    cm.wait_until(
        f"{topic} online: each partition led by its preferred replica with a whole ISR",
        lambda: all(
            c.state(topic, p).get("leader") == r[0] and sorted(c.state(topic, p)["isr"]) == sorted(r)
            for p, r in assignment.items()
        ),
        120,
    )
    _served(c, topic)
    written: list[bytes] = []

    def write(prefix: str, bootstrap: str) -> None:
        values = [f"{prefix}-{i}".encode() for i in range(200)]
        produce(bootstrap, topic, values)  # acks=all: every one replicated to min.insync.replicas over SASL
        written.extend(values)

    write("a", c.bootstrap())
    assert sorted(consume(c.bootstrap(), topic)) == sorted(written)

    # an authenticated principal that is not the brokers' may not send their requests
    host, port = _endpoint(channel_log.read_text(), "INTERNAL")
    with BrokerConnection(host, port, timeout_s=15) as conn:
        config = {"sasl_mechanism": SCRAM, "sasl_plain_username": "operator"}
        conn.authenticate(client_mechanism({**config, "sasl_plain_password": PASSWORDS["operator"]}), SCRAM)
        shutdown = ControlledShutdownRequest(broker_id=BrokerId(1), broker_epoch=i64(0))
        refused = conn.send(shutdown, ControlledShutdownResponse)
    assert refused.error_code == CLUSTER_AUTHORIZATION_FAILED, refused
    assert "User:operator may not send api 7" in channel_log.read_text()

    # SIGTERM to the leader of partition 0: its ControlledShutdown over SASL_PLAINTEXT (INTERNAL), answered
    stopping = c.state(topic, 0)["leader"]
    before = _states(c, topic)
    svc = c.brokers[stopping]
    asked_before = sum(1 for _, e in c.events() if e.get("type") == "controlled_shutdown")
    took = time.monotonic()
    assert stop_zk_broker(svc, timeout=60), f"broker {stopping} did not exit after SIGTERM"
    took = time.monotonic() - took
    broker_log = Path(svc.log).read_text()
    assert SHUTDOWN_OK in broker_log
    assert "Retrying controlled shutdown" not in broker_log and "unclean shutdown" not in broker_log
    assert took < 30, took
    asked = [e for _, e in c.events() if e.get("type") == "controlled_shutdown"]
    assert len(asked) > asked_before and {e["broker_id"] for e in asked} == {stopping}, asked
    for p, st in _states(c, topic).items():
        assert st["leader"] != stopping and stopping not in st["isr"], (p, st)
        if before[p]["leader"] == stopping:
            assert st["leader_epoch"] > before[p]["leader_epoch"], (p, st)
    _served(c, topic)
    write("b", c.bootstrap())
    c.start_broker(stopping)
    _rejoined(c, topic, stopping, "AlterPartition through the channel's SASL_SSL endpoint")
    assert "AlterPartition answered (top-level error 0)" in channel_log.read_text()

    # SIGKILL to the leader of partition 1: new leaders from the ISRs once its registration expires
    victim = c.state(topic, 1)["leader"]
    before = _states(c, topic)
    killed = time.monotonic()
    c.kill_broker(victim)
    cm.wait_until(
        f"new leaders for broker {victim}'s partitions, it out of every ISR",
        lambda: all(st["leader"] not in (victim, -1) and victim not in st["isr"] for st in _states(c, topic).values()),
        90,
    )
    log.info("broker %s SIGKILLed: new leaders after %.1f s", victim, time.monotonic() - killed)
    for p, st in _states(c, topic).items():
        if before[p]["leader"] == victim:
            assert st["leader"] in before[p]["isr"] and st["leader_epoch"] > before[p]["leader_epoch"], (p, st)
    _served(c, topic)
    write("c", c.bootstrap())
    c.start_broker(victim)
    _rejoined(c, topic, victim, "after a hard kill")
    _served(c, topic)

    # every acknowledged record read back, from each broker; Kafka's view and livectl's agree
    for b in BROKERS:
        assert sorted(consume(c.brokers[b].address, topic)) == sorted(written), b
    facts = _agree(c, topic)
    assert facts["topic"]["Configs"] == f"min.insync.replicas={MIN_ISR}", facts
    for p, replicas in assignment.items():
        line = facts["partitions"][p]
        assert line["Replicas"] == ",".join(str(b) for b in replicas), (p, line)
        assert sorted(line["Isr"].split(",")) == sorted(str(b) for b in replicas), (p, line)
    text = channel_log.read_text()
    assert "authenticated as broker (SASL SCRAM-SHA-512)" in text
    assert "may not send" not in text.replace("User:operator may not send", ""), "a broker was refused"
    assert "SASL SCRAM-SHA-512 refused" not in text
    log.info("passed in %.0f s", time.monotonic() - started)
