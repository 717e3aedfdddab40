"""Kafka's admin requests to the controller through the channel's endpoint, over a real Kafka bus: the test
sends CreateTopics, AlterPartitionReassignments and DeleteTopics to the endpoint as Kafka's Admin client
does (kio, its wire form) and plays livectl's controller on the bus: it reads the commands the channel
publishes on the admin topic and writes livectl's results on the admin-results topic (in transactions, as
the controller does; an aborted answer is never read). A real ZooKeeper holds the topic ids DeleteTopics v6
names. (Kafka's own tools against a whole livectl cluster: tests/e2e/test_kafka_admin_tools.py.)"""

from __future__ import annotations

import datetime
import json
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from channel_support import bus_settings, channel_with_admin_link
from kafka import KafkaConsumer, KafkaProducer
from kazoo.client import KazooClient
from kio.schema.alter_partition_reassignments.v0 import request as reassign_req
from kio.schema.alter_partition_reassignments.v0 import response as reassign_resp
from kio.schema.create_topics.v7 import request as create_req
from kio.schema.create_topics.v7 import response as create_resp
from kio.schema.delete_topics.v6 import request as delete_req
from kio.schema.delete_topics.v6 import response as delete_resp
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i16, i32, i32Timedelta

from channel.runner import ControllerChannel
from channel.wire import BrokerConnection
from core.codec.decisions import encode_decision
from core.codec.events import event_from_json
from core.decisions import AdminResult, AdminStatus
from core.events import AdminCommand, CreateTopic, DeleteTopic, ReassignPartitions
from core.kafka import zkdata
from core.model import PartitionTarget
from livectl import local

pytestmark = pytest.mark.integration

TOPIC_ID = uuid.UUID(int=42)


@dataclass
class Bus:
    """livectl's side of the bus, played by the test."""

    bootstrap: str
    admin: str
    results: str
    channel: ControllerChannel
    consumer: KafkaConsumer
    producer: KafkaProducer

    def command(self, timeout: float = 30) -> AdminCommand:
        """The next command the channel published (keyed by its request id)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for records in self.consumer.poll(timeout_ms=500, max_records=1).values():
                for r in records:
                    event = event_from_json(r.value)
                    assert isinstance(event, AdminCommand) and r.key == event.request_id.encode()
                    return event
        raise AssertionError("no command on the admin topic")

    def answer(self, result: AdminResult, *, commit: bool = True) -> None:
        """``result`` on the results topic in a transaction of its own, committed or aborted, as the controller's
        sink writes it (with its batch id and epoch)."""
        value = {**encode_decision(result), "batch_id": 1, "controller_epoch": 5}
        self.producer.begin_transaction()
        self.producer.send(self.results, key=result.request_id.encode(), value=json.dumps(value).encode())
        if commit:
            self.producer.commit_transaction()
        else:
            self.producer.abort_transaction()

    def connect(self) -> BrokerConnection:
        endpoint = next(iter(self.channel.endpoints.values()))  # the first listener name's
        conn = BrokerConnection("127.0.0.1", endpoint.port)
        conn.negotiate()
        return conn


@pytest.fixture
def bus(zookeeper: local.Service, kafka_broker: local.Service) -> Iterator[Bus]:
    chroot = f"/channel-admin-{uuid.uuid4().hex[:8]}"
    zk = KazooClient(zookeeper.connect)
    zk.start(timeout=15)
    zk.ensure_path(chroot + zkdata.BROKER_TOPICS)
    # a topic Kafka-style: DeleteTopics v6 names it by its id
    znode = {"version": 3, "topic_id": "AAAAAAAAAAAAAAAAAAAAKg", "partitions": {"0": [1]}}
    zk.create(f"{chroot}{zkdata.topic_path('by-id')}", json.dumps(znode).encode())
    name = f"admin-link-{uuid.uuid4().hex[:6]}"
    settings = bus_settings(
        zookeeper.connect + chroot,
        kafka_broker.bootstrap,
        "admin-link",
        controller_listeners=("CONTROL_PLANE",),
        log_dirs_interval_s=0,
        admin_topic=f"{name}.admin",
        admin_results_topic=f"{name}.admin-results",
        num_partitions=4,
        default_replication_factor=1,
    )
    try:
        with channel_with_admin_link(settings, kafka_broker.bootstrap, name) as link:
            yield Bus(
                kafka_broker.bootstrap,
                settings.admin_topic,
                settings.admin_results_topic,
                link.channel,
                link.commands,
                link.results,
            )
    finally:
        zk.delete(chroot, recursive=True)
        zk.stop()
        zk.close()


def _in_thread(conn: BrokerConnection, request: Any, response_type: type) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(conn.send(request, response_type)), daemon=True)
    thread.start()
    return thread, out


def _create(name: str, timeout_ms: int) -> Any:
    topic = create_req.CreatableTopic(
        name=TopicName(name),
        num_partitions=i32(-1),
        replication_factor=i16(-1),
        assignments=(),
        configs=(create_req.CreatableTopicConfig(name="retention.ms", value="1000"),),
    )
    return create_req.CreateTopicsRequest(
        topics=(topic,), timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=timeout_ms))
    )


def test_create_topics_is_livectls_command_and_answered_with_its_result(bus: Bus) -> None:
    with bus.connect() as conn:
        thread, out = _in_thread(conn, _create("orders", 30_000), create_resp.CreateTopicsResponse)
        command = bus.command()
        # -1: the channel's --num-partitions and --default-replication-factor
        assert command == CreateTopic(command.request_id, "orders", 4, 1, (), (("retention.ms", "1000"),))
        # an aborted answer (a fenced controller's) is not read
        bus.answer(AdminResult(command.request_id, "create_topic", AdminStatus.ERROR, "NOT_CONTROLLER"), commit=False)
        placed = {str(p): [1] for p in range(4)}
        bus.answer(
            AdminResult(
                command.request_id,
                "create_topic",
                AdminStatus.OK,
                details={"topic_id": "AAAAAAAAAAAAAAAAAAAAKg", "partitions": placed},
            )
        )
        thread.join(30)
        ((topic,),) = [r.topics for r in out]
        assert (topic.name, int(topic.error_code.value), topic.error_message) == ("orders", 0, None)
        assert topic.topic_id == TOPIC_ID and int(topic.num_partitions) == 4 and int(topic.replication_factor) == 1
        assert [(c.name, c.value) for c in topic.configs] == [("retention.ms", "1000")]

        # the same topic again: livectl's refusal, Kafka's code
        thread, out = _in_thread(conn, _create("orders", 30_000), create_resp.CreateTopicsResponse)
        command = bus.command()
        bus.answer(
            AdminResult(
                command.request_id,
                "create_topic",
                AdminStatus.ERROR,
                "TOPIC_ALREADY_EXISTS",
                "Topic 'orders' already exists.",
            )
        )
        thread.join(30)
        ((topic,),) = [r.topics for r in out]
        assert (int(topic.error_code.value), topic.error_message) == (36, "Topic 'orders' already exists.")


def test_an_unanswered_request_times_out_at_its_timeout(bus: Bus) -> None:
    with bus.connect() as conn:
        started = time.monotonic()
        response = conn.send(_create("late", 1500), create_resp.CreateTopicsResponse)
        took = time.monotonic() - started
        command = bus.command()
        (topic,) = response.topics
        assert int(topic.error_code.value) == 7 and command.request_id in str(topic.error_message)
        assert 1.4 < took < 10, took
        # livectl's later answer goes nowhere; the connection still serves the next request
        bus.answer(AdminResult(command.request_id, "create_topic", AdminStatus.OK))
        thread, out = _in_thread(conn, _create("next", 30_000), create_resp.CreateTopicsResponse)
        command = bus.command()
        assert isinstance(command, CreateTopic) and command.topic == "next"
        bus.answer(AdminResult(command.request_id, "create_topic", AdminStatus.OK, details={"partitions": {"0": [1]}}))
        thread.join(30)
        assert [int(t.error_code.value) for r in out for t in r.topics] == [0]


def test_reassignment_and_deletion_are_answered_once_livectl_started_them(bus: Bus) -> None:
    request = reassign_req.AlterPartitionReassignmentsRequest(
        timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=30_000)),
        topics=(
            reassign_req.ReassignableTopic(
                name=TopicName("t"),
                partitions=(
                    reassign_req.ReassignablePartition(partition_index=i32(0), replicas=(BrokerId(2), BrokerId(3))),
                ),
            ),
        ),
    )
    with bus.connect() as conn:
        thread, out = _in_thread(conn, request, reassign_resp.AlterPartitionReassignmentsResponse)
        command = bus.command()
        assert command == ReassignPartitions(command.request_id, (PartitionTarget("t", 0, (2, 3)),))
        bus.answer(
            AdminResult(
                command.request_id,
                "reassign_partitions",
                AdminStatus.IN_PROGRESS,
                details={"partitions": {"t-0": {"error": "NONE"}}},
            )
        )
        thread.join(30)
        ((moved,),) = [r.responses for r in out]
        assert moved.name == "t" and [int(p.error_code.value) for p in moved.partitions] == [0]

        delete = delete_req.DeleteTopicsRequest(
            topics=(delete_req.DeleteTopicState(name=None, topic_id=TOPIC_ID),),
            timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=30_000)),
        )
        thread, out = _in_thread(conn, delete, delete_resp.DeleteTopicsResponse)
        command = bus.command()
        assert command == DeleteTopic(command.request_id, "by-id")
        bus.answer(
            AdminResult(command.request_id, "delete_topic", AdminStatus.IN_PROGRESS, None, "Topic deletion started.")
        )
        thread.join(30)
        ((deleted,),) = [r.responses for r in out]
        assert (deleted.name, deleted.topic_id, int(deleted.error_code.value)) == ("by-id", TOPIC_ID, 0)
