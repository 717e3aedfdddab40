"""The simulated brokers and their tool over real TLS and SASL handshakes, against Apache Kafka enforcing
them and livectl's ACLs (``secure_kafka``).

``python -m simbrokers --command-config`` with the brokers' principal (SCRAM over SASL_SSL, or its
certificate over SSL) creates its control topic, reads the controller's requests and answers on
``livectl.broker-events``: a LeaderAndIsr written by the controller's principal is answered, and the
controller's principal reads the answer. ``livectl-simbrokers kill --wait`` with the admin's principal
writes the control topic and the broker goes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer
from kafka_secure import ADMIN, BROKER, CONTROLLER, SecureKafka
from kazoo.client import KazooClient
from waiting import poll_until

from admin.acls import Topics
from core.codec.events import event_from_json
from core.events import LeaderAndIsrResponse
from core.kafka.envelope import encode_request
from core.kafka.requests import RequestApi
from simbrokers.ctl import main as ctl_main
from sinks.kafka_read import consumer_at_end
from sinks.requests import ensure_topics

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
T = Topics()


def _lisr(broker: int, port: int) -> dict[str, Any]:
    state = {
        "partitionIndex": 0,
        "controllerEpoch": 1,
        "leader": broker,
        "leaderEpoch": 0,
        "isr": [broker],
        "partitionEpoch": 0,
        "replicas": [broker],
        "addingReplicas": [],
        "removingReplicas": [],
        "isNew": True,
        "leaderRecoveryState": 0,
    }
    return {
        "controllerId": 0,
        "controllerEpoch": 1,
        "brokerEpoch": -1,
        "type": 0,
        "topicStates": [{"topicName": "orders", "topicId": "AAAAAAAAAAAAAAAAAAAAAA", "partitionStates": [state]}],
        "liveLeaders": [{"brokerId": broker, "hostName": "127.0.0.1", "port": port}],
    }


def _wait(cond: Any, what: str, log: Path, timeout: float = 30.0) -> None:
    if not poll_until(cond, timeout, interval=0.2):
        raise AssertionError(f"timed out waiting for {what}; simbrokers log: {log.read_text()[-3000:]}")


@pytest.mark.parametrize(("protocol", "broker_id"), [("SASL_SSL", 41), ("SSL", 42)])
def test_simulated_brokers_and_their_tool_over_a_real_handshake(
    secure_kafka: SecureKafka, zk_connect: str, tmp_path: Path, protocol: str, broker_id: int
) -> None:
    kafka = secure_kafka

    def props(name: str) -> Mapping[str, str]:
        return kafka.sasl_properties(name) if protocol == "SASL_SSL" else kafka.ssl_properties(name)

    ctl = props(CONTROLLER)
    bootstrap = kafka.bootstrap_for(ctl)
    ensure_topics(bootstrap, T.controller_topics(), client_config=kafka.client_kwargs(ctl))
    events = consumer_at_end(bootstrap, T.broker_events, kafka.client_kwargs(ctl))
    broker_config = kafka.command_config(f"broker-{protocol}", props(BROKER))
    log = tmp_path / "simbrokers.log"
    cmd = [sys.executable, "-m", "simbrokers", "--brokers", str(broker_id), "--zookeeper", zk_connect]
    cmd += ["--bootstrap-server", bootstrap, "--command-config", str(broker_config), "--session-timeout-ms", "4000"]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
    zk = KazooClient(hosts=zk_connect, timeout=10)
    zk.start(timeout=10)
    try:
        path = f"/brokers/ids/{broker_id}"
        _wait(lambda: zk.exists(path) is not None, f"broker {broker_id} registered", log)
        port = int(json.loads(zk.get(path)[0])["port"])

        key, value = encode_request(broker_id, RequestApi.LEADER_AND_ISR, 1, 1, _lisr(broker_id, port))
        producer = KafkaProducer(**kafka.client_kwargs(ctl), bootstrap_servers=bootstrap)
        try:
            producer.send(T.requests, key=key, value=value).get(timeout=20)
        finally:
            producer.close(timeout=5)
        answers: list[Any] = []

        def answered() -> bool:
            for records in events.poll(timeout_ms=300).values():
                answers.extend(event_from_json(r.value) for r in records)
            return any(isinstance(e, LeaderAndIsrResponse) and e.broker_id == broker_id for e in answers)

        _wait(answered, f"broker {broker_id}'s LeaderAndIsr response", log)

        admin_config = kafka.command_config(f"alice-{protocol}", props(ADMIN))
        argv = ["kill", str(broker_id), "--wait", "--timeout", "30", "--zookeeper", zk_connect]
        assert ctl_main([*argv, "--bootstrap-server", bootstrap, "--command-config", str(admin_config)]) == 0
        assert zk.exists(path) is None
    finally:
        events.close()
        zk.stop()
        zk.close()
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
