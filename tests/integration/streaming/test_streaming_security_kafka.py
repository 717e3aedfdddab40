"""The query's source and the controller's preflight over real TLS and SASL handshakes, against Apache Kafka
enforcing them and livectl's ACLs (``secure_kafka``).

The controller's settings carry Kafka's client properties (``kafka_security_protocol``, …); they reach
the source as ``kafka.<name>`` options (:func:`streaming.query.pipeline.source_options`, as with Spark's own Kafka
source) and the source's consumer reads, as the controller's principal, an admin command the admin's
principal wrote and a broker event the broker's principal wrote (driven as Spark drives it, without
Spark). The preflight passes with the right credential and stops ``livectl run`` with a wrong one."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import pytest
from kafka import KafkaProducer
from kafka_secure import ADMIN, BROKER, CONTROLLER, SecureKafka

from admin.acls import Topics
from sinks.requests import ensure_topics
from streaming.driver.preflight import UnreachableError, check_kafka
from streaming.query.pipeline import source_options
from streaming.settings import Settings
from streaming.source.kafka_source import KafkaStreamReader
from streaming.source.options import SourceOptions

pytestmark = pytest.mark.integration

T = Topics()


def _settings(kafka: SecureKafka, props: Mapping[str, str]) -> Settings:
    """The controller's settings with Kafka's client properties as ``kafka_<name>`` settings."""
    fields: dict[str, Any] = {f"kafka_{k.replace('.', '_')}": v for k, v in props.items()}
    return Settings(bootstrap_servers=kafka.bootstrap_for(props), **fields)


def _produce(kafka: SecureKafka, props: Mapping[str, str], topic: str, key: bytes, value: bytes) -> None:
    producer = KafkaProducer(**kafka.client_kwargs(props), bootstrap_servers=kafka.bootstrap_for(props))
    try:
        producer.send(topic, key=key, value=value).get(timeout=20)
    finally:
        producer.close(timeout=5)


@pytest.mark.parametrize("protocol", ["SASL_SSL", "SSL"])
def test_the_source_reads_both_inputs_as_the_controller(secure_kafka: SecureKafka, protocol: str) -> None:
    kafka = secure_kafka

    def props(name: str) -> dict[str, str]:
        return kafka.sasl_properties(name) if protocol == "SASL_SSL" else kafka.ssl_properties(name)

    settings = _settings(kafka, props(CONTROLLER))
    ensure_topics(
        settings.bootstrap_servers, T.controller_topics(), client_config=settings.kafka_security().client_kwargs()
    )
    check_kafka(settings)
    options = source_options(settings)
    assert options["kafka.security.protocol"] == protocol
    reader = KafkaStreamReader(SourceOptions.parse({**options, "starting_offsets": "latest", "poll_timeout_ms": "500"}))
    stamp = f"{protocol}-{time.monotonic_ns()}"
    try:
        start = reader.initialOffset()
        _produce(
            kafka, props(ADMIN), T.admin, stamp.encode(), f'{{"type": "create_topic", "stamp": "{stamp}"}}'.encode()
        )
        _produce(kafka, props(BROKER), T.broker_events, b"1", f'{{"type": "x", "stamp": "{stamp}"}}'.encode())
        got: list[tuple[Any, ...]] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(got) < 2:
            rows, start = reader.read(start)
            got += [r for r in rows if stamp in r[1]]
    finally:
        reader.stop()
    assert sorted(r[2] for r in got) == sorted([T.admin, T.broker_events])


def test_the_preflight_stops_a_wrong_credential(secure_kafka: SecureKafka) -> None:
    wrong = secure_kafka.sasl_properties(CONTROLLER, password="not-the-password")
    with pytest.raises(UnreachableError) as e:
        check_kafka(_settings(secure_kafka, wrong), timeout_s=5)
    assert "Kafka" in str(e.value) and secure_kafka.sasl_bootstrap in str(e.value)
    assert "not-the-password" not in str(e.value)
