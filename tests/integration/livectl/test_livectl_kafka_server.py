"""The Apache Kafka launcher: one KRaft node whose log directory survives a restart on the same ports."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from livectl import kafka_server, local

pytestmark = pytest.mark.integration


def _read_all(bootstrap: str, topic: str, want: int) -> list[tuple[bytes, bytes]]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=20_000)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    got: list[tuple[bytes, bytes]] = []
    try:
        for record in consumer:
            got.append((record.key, record.value))
            if len(got) >= want:
                break
    finally:
        consumer.close()
    return got


def test_a_restarted_broker_keeps_its_topics_ports_and_cluster(tmp_path: Path) -> None:
    folder = tmp_path / "kafka"
    broker = kafka_server.start_kafka(folder)
    try:
        assert broker.running() and broker.address == broker.listener("PLAINTEXT")
        assert set(broker.listeners) == {"PLAINTEXT", "CONTROLLER"}
        meta = (Path(broker.data_dir) / "meta.properties").read_text()
        assert "cluster.id=" in meta
        topic = f"kafka-bus-{uuid.uuid4().hex[:8]}"
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        admin.create_topics([NewTopic(topic, 1, 1)])
        admin.close()
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
        producer.send(topic, key=b"k", value=b"before the restart")
        producer.flush()
        producer.close()
    finally:
        assert kafka_server.stop_kafka(broker)
    assert not broker.running()

    again = kafka_server.start_kafka(folder)
    started = [again]
    try:
        # the same ports (recorded at the first start, free again), the same cluster: not formatted twice
        assert again.listeners == broker.listeners and again.pid != broker.pid
        assert (Path(again.data_dir) / "meta.properties").read_text() == meta
        assert _read_all(again.bootstrap, topic, 1) == [(b"k", b"before the restart")]
        log = Path(again.log).read_text()
        assert log.count(kafka_server.STARTED_LINE) == 2  # both starts logged to the one file in the folder
        # restart_kafka: the same ports, whatever is free meanwhile
        third = kafka_server.restart_kafka(again)
        started.append(third)
        assert third.listeners == broker.listeners and not again.running()
        assert _read_all(third.bootstrap, topic, 1) == [(b"k", b"before the restart")]
    finally:
        for svc in started:
            kafka_server.stop_kafka(svc)


def test_local_services_keep_the_broker_data_across_down_and_up(tmp_path: Path) -> None:
    services = local.LocalServices(tmp_path)
    services.up()
    try:
        br = services.broker
        assert br is not None and services.status()["broker"]["state"] == "running"
        admin = KafkaAdminClient(bootstrap_servers=br.bootstrap)
        admin.create_topics([NewTopic("kept", 2, 1)])
        admin.close()
        assert services.down() == ["broker", "zookeeper"]
        again = local.LocalServices.load(tmp_path)
        again.up()
        br2 = again.broker
        assert br2 is not None and br2.address == br.address and br2.data_dir == br.data_dir
        admin = KafkaAdminClient(bootstrap_servers=br2.bootstrap)
        assert "kept" in admin.list_topics()
        admin.close()
    finally:
        local.LocalServices.load(tmp_path).down()


def test_a_broker_that_cannot_start_says_why_with_the_jvms_own_words(tmp_path: Path) -> None:
    settings = kafka_server.KafkaSettings(jvm_options=("-XX:+LivectlNoSuchOption",))
    with pytest.raises(local.LocalServiceError) as failed:
        kafka_server.start_kafka(tmp_path / "kafka", settings=settings, timeout=60)
    assert "the Kafka broker exited with code" in str(failed.value)
    assert "LivectlNoSuchOption" in str(failed.value) and "broker.out" in str(failed.value)
