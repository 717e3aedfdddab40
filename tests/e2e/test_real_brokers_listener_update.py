"""A real Kafka 3.9.2 broker changes its advertised listeners at run time; livectl tells the other brokers.

Kafka's own tool changes broker 1's ``advertised.listeners`` (a per-broker dynamic config: ``kafka-configs
--entity-type brokers --entity-name 1 --alter``): the broker rewrites its registration ``/brokers/ids/1`` in
place, in the same session (``DynamicListenerConfig.reconfigure`` → ``KafkaController.updateBrokerInfo``).
Kafka's controller sees it through the data watch on that znode (``processBrokerModification``) and sends
UpdateMetadata to every broker (``onBrokerUpdate``). Under livectl the liveness bridge publishes
``broker_modification``, the controller decides the UpdateMetadata and the channel delivers it: Kafka's
brokers are the judge — broker 2's own metadata lists broker 1 at its new address.

Real processes only: the session's ZooKeeper (a chroot is the controlled cluster) and Kafka bus, ``livectl
run``, ``livectl channel`` and two Kafka brokers. Not part of CI (by hand: ``.venv/bin/pytest -m e2e
tests/e2e/test_real_brokers_listener_update.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.metadata.v12.response import MetadataResponse

from bench import harness as cm
from bench.harness.real_brokers import Cluster, kafka_tool, running_cluster
from channel.wire import BrokerConnection
from livectl import local
from livectl.kafka_zk_brokers import CLIENT_LISTENER, CONTROL_PLANE_LISTENER, INTER_BROKER_LISTENER, ZkBrokerSettings

pytestmark = pytest.mark.e2e

BROKERS = (1, 2)
#: kafka-configs.sh's class in Kafka 3.9 (in the core jar)
CONFIG_COMMAND = "kafka.admin.ConfigCommand"


@pytest.fixture
def cluster(zookeeper: local.Service, kafka_broker: local.Service, tmp_path: Path) -> Iterator[Cluster]:
    with running_cluster(zookeeper.connect, kafka_broker.bootstrap, tmp_path, ZkBrokerSettings()) as c:
        yield c


def brokers_seen(address: str) -> dict[int, tuple[str, int]]:
    """The brokers a broker's own metadata lists to a client on ``address``: id -> (host, port) (Kafka's view)."""
    host, port = address.rsplit(":", 1)
    with BrokerConnection(host, int(port)) as conn:
        answer = conn.send(MetadataRequest(topics=(), include_topic_authorized_operations=False), MetadataResponse)
    return {int(b.node_id): (str(b.host), int(b.port)) for b in answer.brokers}


def test_an_advertised_listener_changed_at_run_time_reaches_every_broker(cluster: Cluster) -> None:
    m = cluster.m
    controller = m.start_controller()
    cluster.start_channel()
    m.wait_loaded(controller, timeout=180)
    with ThreadPoolExecutor(len(BROKERS)) as pool:
        list(pool.map(cluster.start_broker, BROKERS))
    cm.wait_until("the Kafka brokers registered", lambda: set(m.registered_brokers()) == set(BROKERS), 60)
    assert m.zk is not None
    czxid = m.zk.exists("/brokers/ids/1").czxid
    first, second = cluster.brokers[1], cluster.brokers[2]
    _, port = first.address.rsplit(":", 1)
    # livectl's UpdateMetadata told broker 2 where broker 1 is (with the first micro-batch: Spark's workers start)
    cm.wait_until(
        "broker 2's metadata listing broker 1",
        lambda: brokers_seen(second.address).get(1) == ("127.0.0.1", int(port)),
        180,
    )

    # Kafka's own tool: broker 1 advertises its clients' listener as localhost from now on (same port)
    advertised = [
        f"{CLIENT_LISTENER}://localhost:{port}",
        f"{INTER_BROKER_LISTENER}://{first.listeners[INTER_BROKER_LISTENER]}",
        f"{CONTROL_PLANE_LISTENER}://{first.listeners[CONTROL_PLANE_LISTENER]}",
    ]
    args = ["--bootstrap-server", first.address, "--entity-type", "brokers", "--entity-name", "1", "--alter"]
    args += ["--add-config", f"advertised.listeners=[{','.join(advertised)}]"]
    kafka_tool("kafka-configs --alter", CONFIG_COMMAND, args, api_timeout_ms=60_000, timeout=180, work=cluster.work)

    # the broker rewrote its registration in place: same session, same czxid
    registration = cm.wait_until(
        "broker 1's registration rewritten",
        lambda: (r := m.znode("/brokers/ids/1")[0]) and f"{CLIENT_LISTENER}://localhost:{port}" in r["endpoints"] and r,
        60,
    )
    assert m.zk.exists("/brokers/ids/1").czxid == czxid, registration
    # livectl's bridge published it, at the registration's epoch
    event = cm.wait_until(
        "a broker_modification on broker-events",
        lambda: next((v for _, v in cluster.events() if v.get("type") == "broker_modification"), None),
        60,
    )
    assert event["broker_id"] == 1 and event["broker_epoch"] == czxid, event
    assert {"listener": CLIENT_LISTENER, "host": "localhost", "port": int(port)} in [
        {k: e[k] for k in ("listener", "host", "port")} for e in event["endpoints"]
    ], event
    # Kafka's view: both brokers' metadata list broker 1 at its new address, broker 2 where it was
    for broker in (first, second):

        def moved(b: local.Service = broker) -> dict[int, tuple[str, int]] | None:
            s = brokers_seen(b.address)
            return s if s.get(1) == ("localhost", int(port)) else None

        seen = cm.wait_until(f"{broker.name}'s metadata listing broker 1 at localhost", moved, 60)
        assert seen[2] == ("127.0.0.1", int(second.address.rsplit(":", 1)[1])), seen
