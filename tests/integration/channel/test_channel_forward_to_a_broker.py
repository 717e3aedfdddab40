"""The controller's endpoint as a node for Kafka's clients, judged by a real Apache Kafka 3.9.2 broker (ZooKeeper
mode) and Kafka's own tools.

One broker (:mod:`livectl.kafka_zk_brokers`: clients on ``PLAINTEXT``, ``INTERNAL`` between brokers,
``CONTROL_PLANE`` for the controller) under its own ZooKeeper chroot, and a channel in this process advertised
on all three, one port each. The test plays livectl's controller on the bus (a LeaderAndIsr making the broker
the leader of topic ``moving``, and an UpdateMetadata naming controller 1000) and writes ``moving``'s topic
znode with partition 0 being reassigned (adding replica 2), as livectl's reassignment does. Then:

* the broker's own metadata on its client listener names controller 1000 at the channel's ``PLAINTEXT`` port;
* through the channel: ApiVersions lists its own APIs and the broker's; Metadata and DescribeCluster are the
  broker's answers (on ``INTERNAL``, with the brokers' ``INTERNAL`` endpoints); requests sent at once on one
  connection are answered in their order, a Produce with ``acks=0`` unanswered (and written);
  ListPartitionReassignments lists ``moving-0`` from the znode; ListGroups is empty; a LeaderAndIsr closes
  the connection;
* Kafka's ``kafka-topics --describe`` and ``kafka-reassign-partitions --list`` on the client listener show the
  reassignment (before the fix the first timed out on ListPartitionReassignments); ``kafka-log-dirs
  --describe`` lists the controller's node with one offline directory holding nothing;
* the broker killed: a new connection's ApiVersions lists only what the channel answers itself, and a
  request to forward closes the connection.
"""

from __future__ import annotations

import base64
import datetime
import io
import json
import socket
import struct
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from channel_support import CONTROLLER, EPOCH, EndpointSetup, channel_beside_a_broker
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.record.memory_records import MemoryRecordsBuilder
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.describe_cluster.v0.request import DescribeClusterRequest
from kio.schema.describe_cluster.v0.response import DescribeClusterResponse
from kio.schema.list_groups.v4.request import ListGroupsRequest
from kio.schema.list_groups.v4.response import ListGroupsResponse
from kio.schema.list_partition_reassignments.v0.request import ListPartitionReassignmentsRequest
from kio.schema.list_partition_reassignments.v0.response import ListPartitionReassignmentsResponse
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.types import TopicName
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32, i32Timedelta
from waiting import wait_until

from bench.harness.real_brokers import kafka_reassignments, kafka_tool, kafka_topics_describe
from channel.answers import NO_LOG_DIR, SERVED, node_versions
from channel.wire import BrokerConnection
from core.kafka import zkdata
from core.kafka.requests import (
    BrokerAddress,
    LeaderAndIsrRequest,
    LisrPartitionState,
    MetadataBroker,
    MetadataEndpoint,
    MetadataPartitionState,
    RequestApi,
    UpdateMetadataRequest,
)
from livectl import local
from livectl.kafka_zk_brokers import stop_zk_broker

pytestmark = pytest.mark.integration

LISTENERS = ("CONTROL_PLANE", "INTERNAL", "PLAINTEXT")


@pytest.fixture
def setup(zookeeper: local.Service, kafka_broker: local.Service, tmp_path: Path) -> Iterator[EndpointSetup]:
    with channel_beside_a_broker(
        zookeeper.connect,
        kafka_broker.bootstrap,
        tmp_path / "broker",
        "forward",
        controller_listeners=("CONTROL_PLANE", "INTERNAL"),
        client_listeners=("PLAINTEXT", "INTERNAL"),
        log_dirs_interval_s=0,
    ) as rig:
        yield EndpointSetup.beside(rig, kafka_broker.bootstrap)


def _frame(request: Any, correlation_id: int) -> bytes:
    header_type = request.__header_schema__
    header = header_type(
        request_api_key=request.__api_key__,
        request_api_version=request.__version__,
        correlation_id=i32(correlation_id),
        client_id="pipelining-client",
    )
    buf = io.BytesIO()
    entity_writer(header_type)(buf, header)
    entity_writer(type(request))(buf, request)
    payload = buf.getvalue()
    return struct.pack(">i", len(payload)) + payload


def _read_answer(sock: socket.socket, response_type: Any) -> tuple[int, Any]:
    def read(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            assert chunk, "the channel closed the connection"
            data += chunk
        return data

    (size,) = struct.unpack(">i", read(4))
    frame = read(size)
    head, offset = entity_reader(response_type.__header_schema__)(frame, 0)
    body, _ = entity_reader(response_type)(frame, offset)
    return int(head.correlation_id), body


def _metadata(conn: BrokerConnection, topic: str) -> Any:
    request = MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=None, name=TopicName(topic)),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    return conn.send(request, MetadataResponse)


def _nodes(answer: Any) -> dict[int, tuple[str, int]]:
    # Metadata names a broker's id node_id, DescribeCluster broker_id
    return {int(getattr(b, "node_id", None) or b.broker_id): (str(b.host), int(b.port)) for b in answer.brokers}


def test_clients_see_the_controller_s_node_and_get_broker_answers_through_it(setup: EndpointSetup) -> None:
    s = setup
    assert list(s.channel.endpoints) == list(LISTENERS)
    assert len({s.port(n) for n in LISTENERS}) == 3  # one port per listener: an answer depends on it
    topic, tid = "moving", base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    # moving-0 being reassigned from [1] to [1, 2] (the znode's full set, adding 2), as livectl writes it
    s.zk.create(zkdata.topic_config_path(topic), b'{"version":1,"config":{}}', makepath=True)
    s.zk.create(
        zkdata.topic_path(topic),
        json.dumps(
            {"version": 3, "topic_id": tid, "partitions": {"0": [1, 2], "1": [1]}, "adding_replicas": {"0": [2]}}
        ).encode(),
        makepath=True,
    )
    states = (
        LisrPartitionState(topic, 0, EPOCH, 1, 1, (1,), 0, (1, 2), (2,), (), True, 0, tid),
        LisrPartitionState(topic, 1, EPOCH, 1, 1, (1,), 0, (1,), (), (), True, 0, tid),
    )
    host, port = s.broker("CONTROL_PLANE")
    s.send(
        RequestApi.LEADER_AND_ISR,
        LeaderAndIsrRequest(CONTROLLER, EPOCH, s.epoch, 0, states, (BrokerAddress(1, host, port),)),
    )
    endpoints = tuple(MetadataEndpoint(s.broker(n)[1], "127.0.0.1", n, 0) for n in LISTENERS)
    s.send(
        RequestApi.UPDATE_METADATA,
        UpdateMetadataRequest(
            CONTROLLER,
            EPOCH,
            s.epoch,
            tuple(
                MetadataPartitionState(topic, st.partition, EPOCH, 1, 1, st.isr, 0, st.replicas, (), tid)
                for st in states
            ),
            (MetadataBroker(1, endpoints),),
        ),
    )
    wait_until("both requests delivered", lambda: s.channel.delivered == 2)

    # the broker's own metadata on its client listener: the controller's node at the channel's PLAINTEXT port
    with BrokerConnection(*s.broker("PLAINTEXT")) as conn:
        theirs = conn.negotiate()
        own = _metadata(conn, topic)
    assert int(own.controller_id) == CONTROLLER
    assert _nodes(own) == {1: s.broker("PLAINTEXT"), CONTROLLER: ("127.0.0.1", s.port("PLAINTEXT"))}

    # through the channel: ApiVersions, then Metadata and DescribeCluster answered by the broker
    with BrokerConnection("127.0.0.1", s.port("PLAINTEXT")) as conn:
        table = conn.negotiate()
        assert table == node_versions(theirs)
        assert 3 in table and 60 in table and 46 in table and 19 in table and 4 not in table
        via = _metadata(conn, topic)
        cluster = conn.send(
            DescribeClusterRequest(include_cluster_authorized_operations=False), DescribeClusterResponse
        )
    assert (int(via.controller_id), _nodes(via), str(via.cluster_id)) == (
        CONTROLLER,
        _nodes(own),
        str(own.cluster_id),
    )
    assert [(int(p.partition_index), tuple(p.replica_nodes)) for p in via.topics[0].partitions] == [
        (0, (1, 2)),
        (1, (1,)),
    ]
    assert int(cluster.controller_id) == CONTROLLER
    assert _nodes(cluster) == _nodes(own)
    # on the inter-broker listener, the brokers' INTERNAL endpoints: forwarded on the same listener
    with BrokerConnection("127.0.0.1", s.port("INTERNAL")) as conn:
        conn.negotiate()
        internal = _metadata(conn, topic)
    assert _nodes(internal) == {1: s.broker("INTERNAL"), CONTROLLER: ("127.0.0.1", s.port("INTERNAL"))}

    # requests sent at once on one connection: answered in their order, whoever answers; acks=0 unanswered
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    builder.append(int(time.time() * 1000), None, b"fire-and-forget", [])
    builder.close()
    produce = ProduceRequest(
        transactional_id=None,
        acks=i16(0),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
        topic_data=(
            TopicProduceData(
                name=TopicName(topic),
                partition_data=(PartitionProduceData(index=i32(1), records=builder.buffer()),),
            ),
        ),
    )
    asked: list[tuple[Any, Any]] = [
        (
            MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False),
            MetadataResponse,
        ),
        (ListPartitionReassignmentsRequest(topics=None), ListPartitionReassignmentsResponse),
        (DescribeClusterRequest(include_cluster_authorized_operations=False), DescribeClusterResponse),
        (ListGroupsRequest(states_filter=()), ListGroupsResponse),
        (ApiVersionsRequest(client_software_name="t", client_software_version="1"), ApiVersionsResponse),
    ]
    with socket.create_connection(("127.0.0.1", s.port("PLAINTEXT")), timeout=30) as sock:
        sock.sendall(_frame(produce, 10) + b"".join(_frame(r, 11 + i) for i, (r, _) in enumerate(asked)))
        answers = [_read_answer(sock, t) for _, t in asked]
    assert [c for c, _ in answers] == [11, 12, 13, 14, 15]
    listed = answers[1][1]
    assert int(listed.error_code.value) == 0
    assert [
        (str(t.name), [(int(p.partition_index), tuple(p.replicas), tuple(p.adding_replicas)) for p in t.partitions])
        for t in listed.topics
    ] == [(topic, [(0, (1, 2), (2,))])]
    assert int(answers[3][1].error_code.value) == 0 and answers[3][1].groups == ()
    assert {int(k.api_key) for k in answers[4][1].api_keys} == set(table)
    consumer = KafkaConsumer(bootstrap_servers=s.svc.address, enable_auto_commit=False)
    try:
        tp = KafkaTopicPartition(topic, 1)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        wait_until("the acks=0 record written", lambda: consumer.end_offsets([tp])[tp] == 1, 30)
    finally:
        consumer.close()

    # a request neither answered nor forwarded (the controller's LeaderAndIsr) closes the connection
    with socket.create_connection(("127.0.0.1", s.port("PLAINTEXT")), timeout=30) as sock:
        sock.sendall(struct.pack(">ihhih", 10, 4, 7, 99, -1))
        assert sock.recv(1) == b""

    # Kafka's own tools on the client listener: the reassignment livectl's znode says is running
    text = kafka_topics_describe(s.svc.address, topic, api_timeout_ms=20_000)
    line0 = next(ln for ln in text.splitlines() if "Partition: 0" in ln)
    assert "Adding Replicas: 2" in line0, text
    assert kafka_reassignments(s.svc.address, api_timeout_ms=20_000) == {
        f"{topic}-0": {"replicas": "1,2", "adding": "2"}
    }

    # kafka-log-dirs asks every node: the controller's lists one offline directory holding nothing (no directory
    # at all would read as a refusal and fail the tool)
    text = kafka_tool(
        "kafka-log-dirs --describe",
        "org.apache.kafka.tools.LogDirsCommand",
        ["--bootstrap-server", s.svc.address, "--describe"],
        api_timeout_ms=20_000,
        timeout=180,
        work=None,
    )
    dirs = {b["broker"]: b["logDirs"] for b in json.loads(text.strip().splitlines()[-1])["brokers"]}
    assert set(dirs) == {1, CONTROLLER}, text
    ((offline,),) = (dirs[CONTROLLER],)
    assert (offline["logDir"], offline["partitions"]) == (NO_LOG_DIR, []), offline
    assert "KafkaStorageException" in str(offline["error"]), offline
    assert all(d["error"] is None for d in dirs[1]), dirs[1]

    # the broker gone: nothing to forward to; Metadata is answered from ZooKeeper (broker 1 listed until its
    # registration expires), DescribeCluster closes the connection
    stop_zk_broker(s.svc, timeout=0)
    with BrokerConnection("127.0.0.1", s.port("PLAINTEXT")) as conn:
        assert conn.negotiate() == {k: (r.start, r.stop - 1) for k, r in SERVED.items()}
        alone = conn.send(*asked[0])
        assert _nodes(alone)[CONTROLLER] == ("127.0.0.1", s.port("PLAINTEXT")) and set(_nodes(alone)) <= {1, CONTROLLER}
    with socket.create_connection(("127.0.0.1", s.port("PLAINTEXT")), timeout=30) as sock:
        sock.sendall(_frame(asked[2][0], 1))
        assert sock.recv(1) == b""
