"""The controller channel's encoders, judged by a real Apache Kafka 3.9.2 broker in ZooKeeper mode.

One broker (:mod:`livectl.kafka_zk_brokers`) registered under a chroot of the session's ZooKeeper (its own
controller is the only one there). Every version the channel builds of LeaderAndIsr (2-7), UpdateMetadata
(5-8) and StopReplica (3-4) is sent to it and must be read and obeyed: the broker becomes leader of a new
partition, serves it to a producer and a consumer after UpdateMetadata, answers a repeated LeaderAndIsr
with STALE_CONTROLLER_EPOCH, and deletes the partition on StopReplica. DescribeLogDirs (1-4) gives its
replicas' log sizes, which the channel publishes for the partitions being reassigned.
"""

from __future__ import annotations

import base64
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import closing
from dataclasses import replace
from typing import Any

import pytest
from channel_support import running_channel, running_channel_of
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition
from kazoo.client import KazooClient
from waiting import wait_until

from channel.convert import LEADER_AND_ISR, OUR_VERSIONS, STOP_REPLICA, UPDATE_METADATA, to_events, to_kafka
from channel.log_dirs import DESCRIBE_LOG_DIRS, describe_log_dirs, to_report
from channel.log_dirs import OUR_VERSIONS as LOG_DIRS_VERSIONS
from channel.runner import ChannelSettings, ControllerChannel
from channel.wire import BrokerConnection
from core.codec.events import event_from_json
from core.events import LeaderAndIsrResponse, PartitionError, StopReplicaResponse
from core.kafka.envelope import encode_envelope
from core.kafka.log_dirs import parse_log_dirs_report
from core.kafka.request_encoding import encode_body
from core.kafka.requests import (
    BrokerAddress,
    LeaderAndIsrRequest,
    LisrPartitionState,
    MetadataBroker,
    MetadataEndpoint,
    MetadataPartitionState,
    RequestApi,
    StopReplicaPartition,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from core.model import TopicPartition as CoreTopicPartition
from livectl import local
from livectl.kafka_zk_brokers import start_zk_broker, stop_zk_broker
from sinks.requests import ensure_topics

pytestmark = pytest.mark.integration

NONE, STALE_CONTROLLER_EPOCH = 0, 11
#: the controller's id and epoch in these requests: above what the broker's own controller holds (1)
CONTROLLER, EPOCH = 1000, 50


class Broker:
    def __init__(self, svc: local.Service, epoch: int, zookeeper: str) -> None:
        self.svc, self.epoch, self.zookeeper = svc, epoch, zookeeper
        self.host, port = svc.address.rsplit(":", 1)
        self.port = int(port)


@pytest.fixture(scope="module")
def broker(zookeeper: local.Service, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    chroot = f"/channel-wire-{uuid.uuid4().hex[:8]}"
    svc = start_zk_broker(tmp_path_factory.mktemp("zkbroker"), 1, zookeeper.connect + chroot)
    zk = KazooClient(zookeeper.connect + chroot)
    zk.start(timeout=15)
    try:
        _, stat = zk.get("/brokers/ids/1")
        yield Broker(svc, int(stat.czxid), zookeeper.connect + chroot)
    finally:
        zk.stop()
        zk.close()
        stop_zk_broker(svc, timeout=0)


def _topic_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def _states(
    b: Broker, topic: str, topic_id: str, leader_epoch: int
) -> tuple[LeaderAndIsrRequest, UpdateMetadataRequest]:
    lisr = LeaderAndIsrRequest(
        CONTROLLER,
        EPOCH,
        b.epoch,
        0,
        (LisrPartitionState(topic, 0, EPOCH, 1, leader_epoch, (1,), 0, (1,), (), (), True, 0, topic_id),),
        (BrokerAddress(1, b.host, b.port),),
    )
    um = UpdateMetadataRequest(
        CONTROLLER,
        EPOCH,
        b.epoch,
        (MetadataPartitionState(topic, 0, EPOCH, 1, leader_epoch, (1,), 0, (1,), (), topic_id),),
        (MetadataBroker(1, (MetadataEndpoint(b.port, b.host, "PLAINTEXT", 0),)),),
    )
    return lisr, um


def test_the_broker_speaks_the_zookeeper_era_rpcs(broker: Broker) -> None:
    with BrokerConnection(broker.host, broker.port) as conn:
        versions = conn.negotiate()
    # Kafka 3.9 in ZooKeeper mode: the versions the channel builds are all spoken
    assert versions[LEADER_AND_ISR] == (0, 7)
    assert versions[UPDATE_METADATA] == (0, 8)
    assert versions[STOP_REPLICA] == (0, 4)


@pytest.mark.parametrize(("lisr_v", "um_v", "sr_v"), [(7, 8, 4), (6, 7, 3), (5, 7, 3), (4, 6, 3), (3, 6, 3), (2, 5, 3)])
def test_each_version_is_obeyed(broker: Broker, lisr_v: int, um_v: int, sr_v: int) -> None:
    assert lisr_v in OUR_VERSIONS[LEADER_AND_ISR] and um_v in OUR_VERSIONS[UPDATE_METADATA]
    topic = f"wire-{lisr_v}-{um_v}-{sr_v}"
    topic_id = _topic_id()
    lisr, um = _states(broker, topic, topic_id, leader_epoch=1)
    with BrokerConnection(broker.host, broker.port) as conn:
        conn.negotiate()
        call = to_kafka(lisr, lisr_v, broker_epoch=broker.epoch)
        answer = to_events(1, lisr, conn.send(call.request, call.response_type))
        assert answer == [LeaderAndIsrResponse(1, (PartitionError(topic, 0, NONE),), NONE)]
        call = to_kafka(um, um_v, broker_epoch=broker.epoch)
        assert to_events(1, um, conn.send(call.request, call.response_type)) == []

        # the broker leads the partition: a producer's acknowledged record is read back
        producer = KafkaProducer(bootstrap_servers=broker.svc.address, acks="all")
        producer.send(topic, b"v%d" % lisr_v).get(timeout=30)
        producer.close()
        assert [r.value for r in _read_all(broker.svc.address, topic)] == [b"v%d" % lisr_v]

        # the same LeaderAndIsr again: Kafka ignores a leader epoch it has and says so
        call = to_kafka(lisr, lisr_v, broker_epoch=broker.epoch)
        again = to_events(1, lisr, conn.send(call.request, call.response_type))
        assert again == [LeaderAndIsrResponse(1, (PartitionError(topic, 0, STALE_CONTROLLER_EPOCH),), NONE)]

        stop = StopReplicaRequest(CONTROLLER, EPOCH, broker.epoch, (StopReplicaPartition(topic, 0, -2, True),))
        call = to_kafka(stop, sr_v, broker_epoch=broker.epoch)
        stopped = to_events(1, stop, conn.send(call.request, call.response_type))
        assert stopped == [StopReplicaResponse(1, (PartitionError(topic, 0, NONE),), NONE)]


def _read_all(bootstrap: str, topic: str, timeout: float = 30) -> list[Any]:
    """Every record of ``topic``'s partition 0, read up to the end offset it has now (no idle wait)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    tp = KafkaTopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    end = consumer.end_offsets([tp])[tp]
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    while consumer.position(tp) < end and time.monotonic() < deadline:
        got += [r for recs in consumer.poll(timeout_ms=500).values() for r in recs]
    consumer.close()
    return got


def _run_until(channel: ControllerChannel, delivered: int, timeout: float = 60) -> None:
    """Run ``channel`` in a thread until it delivered ``delivered`` requests, then stop and close it."""
    channel.start()
    thread = threading.Thread(target=channel.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while channel.delivered < delivered and time.monotonic() < deadline and thread.is_alive():
        time.sleep(0.1)
    channel.stopping.set()
    thread.join(30)
    channel.close()
    assert channel.delivered == delivered


def test_the_channel_resumes_where_it_stopped(broker: Broker, kafka_broker: local.Service) -> None:
    """Requests for broker 1 and one for broker 9 (not registered); a channel delivers the first and stops; a
    second one on the same group delivers only what came after, skipping broker 9's: each LeaderAndIsr is
    answered once on the events topic."""
    name = f"chan-{uuid.uuid4().hex[:6]}"
    requests, events = f"{name}.requests", f"{name}.broker-events"
    ensure_topics(kafka_broker.bootstrap, [requests, events])
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap, acks="all")
    topics = [f"{name}-a", f"{name}-b"]

    def send(batch: int, broker_id: int, topic: str) -> None:
        lisr, _ = _states(broker, topic, _topic_id(), leader_epoch=1)
        key, value = encode_envelope(broker_id, RequestApi.LEADER_AND_ISR, EPOCH, batch, encode_body(lisr))
        producer.send(requests, key=key, value=value).get(timeout=10)

    settings = ChannelSettings(broker.zookeeper, kafka_broker.bootstrap, requests, events, group=f"{name}.channel")
    send(1, 1, topics[0])
    _run_until(ControllerChannel(settings), delivered=1)
    send(2, 9, f"{name}-nobody")
    send(3, 1, topics[1])
    _run_until(ControllerChannel(settings), delivered=1)
    producer.close()

    answers = [(r.key, event_from_json(r.value)) for r in _read_all(kafka_broker.bootstrap, events)]
    assert answers == [(b"1", LeaderAndIsrResponse(1, (PartitionError(t, 0, NONE),), NONE)) for t in topics]


def test_a_second_channel_on_the_group_fences_the_first(broker: Broker, kafka_broker: local.Service) -> None:
    """Channel A delivers a LeaderAndIsr; channel B starts on the same group and takes A's place (static
    membership): A stops with status 1, fenced, at its next commit at the latest; B delivers what comes after.
    Each request is answered, the one A was delivering when B came at most twice, the later ones once."""
    name = f"chan-{uuid.uuid4().hex[:6]}"
    requests, events = f"{name}.requests", f"{name}.broker-events"
    ensure_topics(kafka_broker.bootstrap, [requests, events])
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap, acks="all")
    topics = [f"{name}-{x}" for x in "abc"]

    def send(batch: int, topic: str) -> None:
        lisr, _ = _states(broker, topic, _topic_id(), leader_epoch=1)
        key, value = encode_envelope(1, RequestApi.LEADER_AND_ISR, EPOCH, batch, encode_body(lisr))
        producer.send(requests, key=key, value=value).get(timeout=10)

    def answered() -> list[str]:
        got = [event_from_json(r.value) for r in _read_all(kafka_broker.bootstrap, events)]
        return [p.topic for e in got if isinstance(e, LeaderAndIsrResponse) for p in e.partitions]

    settings = ChannelSettings(broker.zookeeper, kafka_broker.bootstrap, requests, events, group=f"{name}.channel")
    first, second = ControllerChannel(settings), ControllerChannel(settings)
    status: list[int] = []
    first.start()
    thread = threading.Thread(target=lambda: status.append(first.run()), daemon=True)
    thread.start()
    try:
        send(1, topics[0])
        wait_until("the first channel's delivery", lambda: first.delivered == 1)
        with running_channel_of(second):
            send(2, topics[1])
            wait_until("the first channel to stop", lambda: not thread.is_alive(), timeout=90)
            assert status == [1] and first.fenced
            send(3, topics[2])
            wait_until("the second channel's answer to the third request", lambda: topics[2] in answered())
        assert not second.fenced
    finally:
        first.stopping.set()
        thread.join(30)
        first.close()
        producer.close()
    got = answered()
    assert got.count(topics[0]) == 1 and got.count(topics[2]) == 1
    assert 1 <= got.count(topics[1]) <= 2


def test_describe_log_dirs_of_a_real_broker_in_livectls_report_shape(broker: Broker) -> None:
    """DescribeLogDirs (API key 35) v1-v4 of a partition holding records: the broker's own log size of it."""
    topic = f"logdirs-{uuid.uuid4().hex[:6]}"
    lisr, um = _states(broker, topic, _topic_id(), leader_epoch=1)
    with BrokerConnection(broker.host, broker.port) as conn:
        versions = conn.negotiate()
        assert versions[DESCRIBE_LOG_DIRS] == (0, 4)
        for request, v in ((lisr, 7), (um, 8)):
            call = to_kafka(request, v, broker_epoch=broker.epoch)
            conn.send(call.request, call.response_type)
        producer = KafkaProducer(bootstrap_servers=broker.svc.address, acks="all")
        for i in range(50):
            producer.send(topic, b"x" * 1000, key=b"%d" % i)
        producer.flush()
        producer.close()
        sizes = []
        for version in LOG_DIRS_VERSIONS:
            request, response_type = describe_log_dirs(version, [CoreTopicPartition(topic, 0)])
            report = to_report(1, 123, conn.send(request, response_type))
            assert (report.broker_id, report.time_ms, report.error_code) == (1, 123, 0)
            [result] = report.results
            assert result.error_code == 0 and result.log_dir
            assert (result.total_bytes > 0) == (version >= 4), result
            [(tp, size)] = list(report.replica_sizes())
            assert tp == CoreTopicPartition(topic, 0)
            sizes.append(size)
            assert parse_log_dirs_report(report.to_json()) == report
        # 50 records of 1000 bytes and their batch overhead, the same answer at every version
        assert 50_000 < sizes[0] < 60_000 and len(set(sizes)) == 1, sizes


def test_the_channel_reports_the_log_sizes_of_partitions_being_reassigned(
    broker: Broker, kafka_broker: local.Service
) -> None:
    """A LeaderAndIsr naming an adding replica goes through the channel: from then on it asks the broker for
    that partition's log size every interval and publishes the answer on the log-dirs topic; a later
    LeaderAndIsr without it stops the reports: those after it, of another partition that starts moving, do
    not name it."""
    name = f"chan-{uuid.uuid4().hex[:6]}"
    requests, events, log_dirs = f"{name}.requests", f"{name}.broker-events", f"{name}.log-dirs"
    ensure_topics(kafka_broker.bootstrap, [requests, events])
    topic, topic_id = f"{name}-moving", _topic_id()
    lisr, _ = _states(broker, topic, topic_id, leader_epoch=1)
    [st] = lisr.partitions
    # replica 2 is being added (KIP-455): replicas 1, 2, adding 2
    moving = replace(lisr, partitions=(replace(st, replicas=(1, 2), adding_replicas=(2,)),))
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap, acks="all")
    key, value = encode_envelope(1, RequestApi.LEADER_AND_ISR, EPOCH, 1, encode_body(moving))
    producer.send(requests, key=key, value=value).get(timeout=10)
    settings = ChannelSettings(
        broker.zookeeper, kafka_broker.bootstrap, requests, events, group=f"{name}.channel",
        log_dirs_topic=log_dirs, log_dirs_interval_s=0.2,
    )  # fmt: skip
    other = f"{name}-next"
    with closing(producer), running_channel(settings) as channel:
        wait_until("three log-dirs reports", lambda: channel.log_dirs_reports >= 3, 60)
        # the reassignment completes: replicas 1, 2 and nothing adding; then another partition starts moving
        done = replace(lisr, partitions=(replace(st, leader_epoch=2, replicas=(1, 2)),))
        later, _ = _states(broker, other, _topic_id(), leader_epoch=1)
        [later_st] = later.partitions
        later = replace(later, partitions=(replace(later_st, replicas=(1, 2), adding_replicas=(2,)),))
        for batch, body in ((2, done), (3, later)):
            key, value = encode_envelope(1, RequestApi.LEADER_AND_ISR, EPOCH, batch, encode_body(body))
            producer.send(requests, key=key, value=value).get(timeout=10)
        wait_until("both LeaderAndIsrs delivered", lambda: channel.delivered >= 3, 60)
        # reports come from the thread that delivers, after it: the next one is of what moves after both
        after = channel.log_dirs_reports
        wait_until("a report after both", lambda: channel.log_dirs_reports > after, 60)
    reports = [parse_log_dirs_report(r.value) for r in _read_all(kafka_broker.bootstrap, log_dirs)]
    assert len(reports) >= 4
    assert all(r.broker_id == 1 and r.error_code == 0 for r in reports)
    named = [{tp for tp, _ in r.replica_sizes()} for r in reports]
    first, then = {CoreTopicPartition(topic, 0)}, {CoreTopicPartition(other, 0)}
    assert then in named, named
    k = named.index(then)
    assert k >= 3 and named == [first] * k + [then] * (len(named) - k), named
