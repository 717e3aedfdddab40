"""A real controller run over SASL_SSL on Apache Kafka enforcing livectl's ACLs (``secure_kafka``).

The controller query runs with the controller's principal (SCRAM-SHA-512 over TLS, as ``kafka_*``
settings) on livectl's own topic names and transactional id, so every Kafka client it runs — the topics'
creation check, the query's source (Spark's own Kafka source, ``query_source=kafka``: the JVM connector's
consumers on the driver and the executors, in consumer groups of Spark's prefix), the liveness bridge, the
failover reference, the request sink's transactions and tail reads — passes the broker's authorizer with the
ACL set and nothing more (livectl's Python source over the same handshakes:
``tests/integration/streaming/test_streaming_security_kafka.py``). The admin's principal creates a topic
with ``livectl topics --create --wait`` (the command on ``livectl.admin``, the answer read from
``livectl.admin-results``); the brokers' principal reads the LeaderAndIsr requests; a broker failure forged
by the admin is refused by the broker and the controller goes on answering (broker 1 stays in every ISR).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from controller_harness import Cluster, start_controller
from kafka import KafkaProducer
from kafka.errors import TopicAuthorizationFailedError
from kafka_secure import ADMIN, BROKER, CONTROLLER, SecureKafka
from kazoo.client import KazooClient
from waiting import wait_until

from admin.acls import Topics
from admin.cli import main as admin_main
from livectl import local
from sinks.kafka_read import consumer_at_end
from streaming.settings import Settings

pytestmark = pytest.mark.spark

T = Topics()


@pytest.fixture()
def secure_cluster(zookeeper: local.Service, secure_kafka: SecureKafka, tmp_path: Path) -> Iterator[Cluster]:
    name = f"sec{uuid.uuid4().hex[:8]}"
    root = KazooClient(hosts=zookeeper.connect, timeout=10)
    root.start(timeout=10)
    root.ensure_path(f"/{name}")
    root.stop()
    root.close()
    connect = f"{zookeeper.connect}/{name}"
    ctl = secure_kafka.sasl_properties(CONTROLLER)
    settings = Settings.from_mapping(
        {
            "zookeeper_connect": connect,
            "zookeeper_session_timeout_ms": 6000,
            "bootstrap_servers": secure_kafka.sasl_bootstrap,
            "num_buckets": 2,
            "checkpoint_dir": str(tmp_path / "checkpoint"),
            "trigger_interval": "500 milliseconds",
            # livectl's own topic names and query name: the ones the ACLs are for (transactional id livectl-livectl)
            "starting_offsets": "latest",
            # Spark's connector, not the Python source (the default): its Java clients make the handshake
            "query_source": "kafka",
            **{f"kafka_{k.replace('.', '_')}": v for k, v in ctl.items()},
        }
    )
    zk = KazooClient(hosts=connect, timeout=10)
    zk.start(timeout=10)
    c = Cluster(connect, secure_kafka.sasl_bootstrap, settings, zk)
    try:
        yield c
    finally:
        c.close()


def test_a_controller_runs_over_sasl_ssl_within_the_acls(
    spark: Any, secure_kafka: SecureKafka, secure_cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    kafka, cluster = secure_kafka, secure_cluster
    assert cluster.settings.kafka_security_protocol == "SASL_SSL"
    for b in (1, 2, 3):
        cluster.register_broker(b)
    alice = kafka.command_config("alice-live", kafka.sasl_properties(ADMIN))
    broker = kafka.ssl_properties(BROKER)

    def cli(*argv: str) -> int:
        common = ["--zookeeper", cluster.zk_connect, "--bootstrap-server", kafka.sasl_bootstrap]
        return admin_main([*argv, *common, "--command-config", str(alice), "--timeout", "120"])

    controller = start_controller(spark, cluster.settings)
    try:
        requests = consumer_at_end(kafka.ssl_bootstrap, T.requests, kafka.client_kwargs(broker))
        topic = f"orders-{uuid.uuid4().hex[:6]}"
        try:
            assert (
                cli("topics", "--create", "--topic", topic, "--partitions", "2", "--replication-factor", "3", "--wait")
                == 0
            ), capsys.readouterr().err
            assert cluster.state(topic, 0) is not None and cluster.state(topic, 1) is not None

            def lisr_for_topic() -> list[Any]:
                for records in requests.poll(timeout_ms=300).values():
                    seen.extend(json.loads(r.value) for r in records)
                return [v for v in seen if v["api"] == "LeaderAndIsr" and topic in json.dumps(v["body"])]

            seen: list[Any] = []
            lisr = wait_until("the brokers' principal reads the LeaderAndIsr", lisr_for_topic)
            assert {v["controllerEpoch"] for v in lisr} == {1}
        finally:
            requests.close()

        # the admin forges a broker failure: the broker refuses it, and the controller goes on answering
        producer = KafkaProducer(
            **kafka.client_kwargs(kafka.sasl_properties(ADMIN)), bootstrap_servers=kafka.sasl_bootstrap
        )
        try:
            forged = json.dumps({"type": "broker_failure", "broker_id": 1}).encode()
            with pytest.raises(TopicAuthorizationFailedError):
                producer.send(T.broker_events, key=b"1", value=forged).get(timeout=20)
        finally:
            producer.close(timeout=5)
        second = f"{topic}-2"
        assert (
            cli("topics", "--create", "--topic", second, "--partitions", "1", "--replication-factor", "3", "--wait")
            == 0
        )
        assert controller.error == []
        # the commands were read by Spark's connector (its source, as the query's progress names it)
        sources = [
            src["description"] for q in spark.streams.active for src in (q.lastProgress or {}).get("sources", [])
        ]
        assert any(d.startswith("KafkaV2") for d in sources), sources
        # broker 1 did not "fail": it is still in every ISR
        assert all(1 in (cluster.state(t, p) or {}).get("isr", []) for t, p in ((topic, 0), (topic, 1), (second, 0)))
    finally:
        controller.stop()
