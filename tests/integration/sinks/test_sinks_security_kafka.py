"""The controller's sinks over real TLS and SASL handshakes, against Apache Kafka enforcing them
(``secure_kafka``: SCRAM-SHA-512 over SASL_SSL, mutual TLS on SSL, livectl's ACLs applied).

As the controller's principal, over each listener: the topics are created (``ensure_topics``), the request
sink writes requests, admin results and rejections in transactions with the controller's transactional id,
and a replayed batch is found on the topics' tails and not written twice. The brokers' and the admin's
principals read what is theirs from the end (``consumer_at_end``, the admin CLI's ``--wait``). A wrong
password, an unknown CA and a missing client certificate fail the handshake."""

from __future__ import annotations

import json
import logging
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import KafkaError
from kafka_secure import ADMIN, BATCH_IDS, BROKER, CONTROLLER, OUTSIDER, SecureKafka, add_scram_user
from request_bodies import lisr_request, um_request
from waiting import poll_until

from admin.acls import Topics
from core.decisions import AdminResult, AdminStatus
from livectl.kafka_server import kafka_classpath
from livectl.spawn import find_java
from sinks.kafka_read import consumer_at_end
from sinks.ports import Fence, Rejected
from sinks.requests import RequestSink, ensure_topics, transactional_id
from sinks.security import KafkaSecurity

pytestmark = pytest.mark.integration

T = Topics()
FENCE = Fence(controller_epoch=7, epoch_zk_version=6)
_BATCHES = BATCH_IDS


def _props(kafka: SecureKafka, protocol: str, name: str) -> dict[str, str]:
    return kafka.sasl_properties(name) if protocol == "SASL_SSL" else kafka.ssl_properties(name)


def _drain(consumer: KafkaConsumer, want: int, timeout_s: float = 20.0) -> list[Any]:
    out: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while len(out) < want and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            out.extend(records)
    return out


@pytest.mark.parametrize("protocol", ["SASL_SSL", "SSL"])
def test_the_controllers_sinks_write_and_replay_over_a_real_handshake(secure_kafka: SecureKafka, protocol: str) -> None:
    kafka = secure_kafka
    ctl = _props(kafka, protocol, CONTROLLER)
    bootstrap, config = kafka.bootstrap_for(ctl), kafka.client_kwargs(ctl)
    ensure_topics(bootstrap, T.controller_topics(), client_config=config)

    brokers = _props(kafka, protocol, BROKER)
    admin = _props(kafka, protocol, ADMIN)
    requests_at_end = consumer_at_end(kafka.bootstrap_for(brokers), T.requests, kafka.client_kwargs(brokers))
    results_at_end = consumer_at_end(kafka.bootstrap_for(admin), T.admin_results, kafka.client_kwargs(admin))
    batch = next(_BATCHES)
    requests = [lisr_request(1, "orders", [0, 1]), um_request(1, "orders", [1, 2])]
    results = [AdminResult(f"r-{batch}", "create_topic", AdminStatus.OK)]
    rejected = [Rejected(T.admin, 0, 42, "{not json", ("not JSON",))]
    try:
        with RequestSink(bootstrap, FENCE, client_config=config, transactional_id=transactional_id("livectl")) as sink:
            assert sink.write_requests(batch, requests).written == 2
            assert sink.write_admin_results(batch, results).written == 1
            assert sink.write_rejected(batch, rejected).written == 1
        # a replay of the batch by the next controller reads the tails (as the controller) and writes nothing
        with RequestSink(bootstrap, FENCE, client_config=config, transactional_id=transactional_id("livectl")) as again:
            assert again.write_requests(batch, requests).skipped == 2
            assert again.write_admin_results(batch, results).skipped == 1
            assert again.write_rejected(batch, rejected).skipped == 1

        got = [json.loads(r.value) for r in _drain(requests_at_end, 2)]
        assert [(v["batchId"], v["controllerEpoch"], v["api"]) for v in got] == [
            (batch, 7, "LeaderAndIsr"),
            (batch, 7, "UpdateMetadata"),
        ]
        answers = [json.loads(r.value) for r in _drain(results_at_end, 1)]
        assert [(a["request_id"], a["status"], a["controller_epoch"]) for a in answers] == [(f"r-{batch}", "ok", 7)]
    finally:
        requests_at_end.close()
        results_at_end.close()


def _refused(
    kafka: SecureKafka, props: Mapping[str, str], caplog: pytest.LogCaptureFixture, *reasons: str, bootstrap: str = ""
) -> str:
    """The client gets no metadata (kafka-python retries, then says it could not bootstrap); returns the
    broker's log of the attempt and what the client logged, once every one of ``reasons`` is in them: each
    reason is on one side or the other, the broker's line maybe a moment after the client gave up."""
    caplog.clear()
    log = Path(kafka.service.log)
    seen = log.stat().st_size
    # a refused handshake is answered at once: the client retries it until this bound, then gives up
    kwargs = {**kafka.client_kwargs(props), "request_timeout_ms": 2000}
    kwargs["bootstrap_servers"] = bootstrap or kafka.bootstrap_for(props)
    with caplog.at_level(logging.WARNING, logger="kafka"), pytest.raises(KafkaError):
        KafkaConsumer(**kwargs, bootstrap_timeout_ms=2000).topics()

    def said() -> str:
        with log.open("rb") as f:
            f.seek(seen)
            return f.read().decode(errors="replace") + caplog.text

    return poll_until(lambda: said() if all(r in said() for r in reasons) else "", timeout=10) or said()


def test_a_bad_credential_is_refused_by_the_handshake(
    secure_kafka: SecureKafka, caplog: pytest.LogCaptureFixture
) -> None:
    kafka = secure_kafka
    scram_refused = "Failed authentication with /127.0.0.1"
    scram_reason = "invalid credentials with SASL mechanism SCRAM-SHA-512"
    wrong_password = kafka.sasl_properties(CONTROLLER, password="not-the-password")
    said = _refused(kafka, wrong_password, caplog, scram_refused, scram_reason)
    assert scram_refused in said and scram_reason in said
    assert "not-the-password" not in said
    jaas = wrong_password["sasl.jaas.config"].replace('username="controller"', 'username="nobody"')
    said = _refused(kafka, {**wrong_password, "sasl.jaas.config": jaas}, caplog, scram_refused, "invalid credentials")
    assert scram_refused in said and "invalid credentials" in said
    # a client that does not trust the broker's CA (its own certificate is no CA): the client refuses
    untrusted = {**kafka.sasl_properties(CONTROLLER), "ssl.truststore.location": str(kafka.pki.client(OUTSIDER).cert)}
    assert "CERTIFICATE_VERIFY_FAILED" in _refused(kafka, untrusted, caplog, "CERTIFICATE_VERIFY_FAILED")
    # TLS without a client certificate on the mutual-TLS listener, and plaintext to a TLS listener: the broker
    # refuses the handshake
    no_cert = {k: v for k, v in kafka.ssl_properties(CONTROLLER).items() if not k.startswith("ssl.key")}
    assert "SSL handshake failed" in _refused(kafka, no_cert, caplog, "SSL handshake failed")
    plaintext = {"security.protocol": "PLAINTEXT"}
    said = _refused(kafka, plaintext, caplog, "SSL handshake failed", bootstrap=kafka.sasl_bootstrap)
    assert "SSL handshake failed" in said


def test_a_scram_user_added_after_start_authenticates(secure_kafka: SecureKafka) -> None:
    """Users written at format time are the bootstrap; an operator adds the rest through the Admin API
    (``AlterUserScramCredentials``, as ``kafka-configs.sh --entity-type users``) as a super user."""
    kafka = add_scram_user(secure_kafka, "carol", "carol-pw-late")
    carol = kafka.sasl_properties("carol")
    consumer = KafkaConsumer(**kafka.client_kwargs(carol), bootstrap_servers=kafka.sasl_bootstrap)
    try:
        # authenticated; without ACLs of her own she sees none of livectl's topics
        assert not set(consumer.topics()) & set(T.controller_topics())
    finally:
        consumer.close()


def test_one_pem_properties_file_serves_livectl_and_javas_client(secure_kafka: SecureKafka, tmp_path: Path) -> None:
    """Mutual TLS with PEM files as Java's clients take them (Spark's Kafka source, Kafka's tools):
    ``ssl.truststore.type=PEM`` and a PEM keystore holding key and certificate. livectl's client and
    Kafka's own console producer (a JVM) each write a broker event as ``broker-1`` with the same file; the
    controller's principal reads both."""
    kafka = secure_kafka
    cert = kafka.pki.client(BROKER)
    props = {
        "security.protocol": "SSL",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(kafka.pki.ca),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(cert.bundle),
    }
    config = kafka.command_config("broker-pem", props)
    ctl = kafka.sasl_properties(CONTROLLER)
    ensure_topics(kafka.sasl_bootstrap, T.controller_topics(), client_config=kafka.client_kwargs(ctl))
    events = consumer_at_end(kafka.sasl_bootstrap, T.broker_events, kafka.client_kwargs(ctl))
    stamp = f"pem-{time.monotonic_ns()}"
    try:
        producer = KafkaProducer(**KafkaSecurity.client_kwargs_from_file(config), bootstrap_servers=kafka.ssl_bootstrap)
        try:
            producer.send(T.broker_events, key=b"1", value=f'{{"from": "python", "stamp": "{stamp}"}}'.encode()).get(20)
        finally:
            producer.close(timeout=5)
        java = [find_java(), "-cp", kafka_classpath(), "kafka.tools.ConsoleProducer"]
        java += [
            "--bootstrap-server",
            kafka.ssl_bootstrap,
            "--topic",
            T.broker_events,
            "--producer.config",
            str(config),
        ]
        done = subprocess.run(
            java,
            input=f'{{"from": "java", "stamp": "{stamp}"}}\n',
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        got = _drain(events, 2, timeout_s=30)
    finally:
        events.close()
    mine = sorted(json.loads(r.value)["from"] for r in got if stamp.encode() in r.value)
    assert mine == ["java", "python"], done.stderr
