"""The admin calls the channel answers itself, authorized from ACLs written by Kafka's own ``kafka-acls``.

Kafka 3.9.2's ``kafka-acls`` (``kafka.admin.AclCommand`` from the resolved jars, ``--authorizer-properties
zookeeper.connect=...``: the ``AclAuthorizer`` of a ZooKeeper-mode cluster) writes ACLs into the ZooKeeper chroot
the channel controls. The channel's endpoint is a SASL_PLAINTEXT listener (PLAIN users ``alice`` and ``bob``) with
``authorizer.class.name=kafka.security.authorizer.AclAuthorizer``; the test plays livectl's controller on a real
Kafka bus (it reads the admin topic and answers on the admin-results topic). Then, as Kafka's Admin client sends
them (kio, its wire form):

* ``alice`` (CREATE on the Cluster, DELETE on the topics prefixed ``<name>``, DENY DELETE on ``<name>-kept``)
  creates and deletes a topic: each becomes livectl's command and is answered with livectl's result;
* ``bob`` (no ACL) is refused with 29 for CreateTopics and DeleteTopics and 31 for ElectLeaders, and ``alice``
  with 29 for the topic whose DELETE is denied; nothing of theirs reaches the admin topic or ZooKeeper;
* an ACL ``kafka-acls`` adds for ``bob`` applies from his next request on;
* the controller's node's own configs (Describe / IncrementalAlterConfigs) and ListPartitionReassignments need
  ``DescribeConfigs`` / ``AlterConfigs`` / ``Describe`` on the Cluster: ``bob`` gets 31 and nothing is written;
* the brokers' own requests need ``ClusterAction`` on the Cluster.
"""

from __future__ import annotations

import datetime
import json
import subprocess
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
from kio.schema.allocate_producer_ids.v0 import request as pid_req
from kio.schema.allocate_producer_ids.v0 import response as pid_resp
from kio.schema.create_topics.v7 import request as create_req
from kio.schema.create_topics.v7 import response as create_resp
from kio.schema.delete_topics.v6 import request as delete_req
from kio.schema.delete_topics.v6 import response as delete_resp
from kio.schema.describe_configs.v4 import request as describe_req
from kio.schema.describe_configs.v4 import response as describe_resp
from kio.schema.elect_leaders.v2 import request as elect_req
from kio.schema.elect_leaders.v2 import response as elect_resp
from kio.schema.incremental_alter_configs.v1 import request as alter_req
from kio.schema.incremental_alter_configs.v1 import response as alter_resp
from kio.schema.list_partition_reassignments.v0 import request as list_req
from kio.schema.list_partition_reassignments.v0 import response as list_resp
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i16, i32, i32Timedelta, i64

from channel.acls import AclAuthorizer
from channel.runner import ControllerChannel
from channel.sasl import ChannelSasl, client_mechanism
from channel.wire import BrokerConnection
from core.codec.decisions import encode_decision
from core.codec.events import event_from_json
from core.decisions import AdminResult, AdminStatus
from core.events import AdminCommand, CreateTopic, DeleteTopic
from core.kafka import zkdata
from livectl import local
from livectl.kafka_server import kafka_classpath
from livectl.spawn import find_java

pytestmark = pytest.mark.integration

ACL_COMMAND = "kafka.admin.AclCommand"
PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
PASSWORDS = {"alice": "alice-secret", "bob": "bob-secret"}
LISTENER = "CONTROL_PLANE"
_TIMEOUT = i32Timedelta.parse(datetime.timedelta(milliseconds=30_000))


@dataclass
class Rig:
    """The channel, the test's side of the bus (livectl's controller) and the chroot's ZooKeeper."""

    channel: ControllerChannel
    connect: str
    zk: KazooClient
    chroot: str
    admin: KafkaConsumer
    results: KafkaProducer
    results_topic: str
    name: str

    def kafka_acls(self, *args: str) -> None:
        """``kafka-acls`` of Kafka 3.9.2 against the chroot, as an operator of a ZooKeeper-mode cluster runs it."""
        cmd = [
            find_java(),
            "-Xmx128m",
            "-cp",
            kafka_classpath(),
            ACL_COMMAND,
            "--authorizer-properties",
            f"zookeeper.connect={self.connect}",
            "--force",
            *args,
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stdout + done.stderr

    def client(self, user: str) -> BrokerConnection:
        """A client of the endpoint, authenticated as ``user`` with PLAIN."""
        conn = BrokerConnection("127.0.0.1", self.channel.endpoints[LISTENER].port, timeout_s=30)
        config = {"sasl_mechanism": "PLAIN", "sasl_plain_username": user, "sasl_plain_password": PASSWORDS[user]}
        conn.authenticate(client_mechanism(config), "PLAIN")
        return conn

    def commands(self, timeout: float = 5) -> list[AdminCommand]:
        """Every command published on the admin topic since the last call, read until ``timeout`` passes
        without a new one (``timeout``: how long a command the channel might still publish is waited for)."""
        out: list[AdminCommand] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for records in self.admin.poll(timeout_ms=200).values():
                for r in records:
                    event = event_from_json(r.value)
                    assert isinstance(event, AdminCommand)
                    out.append(event)
                    deadline = time.monotonic() + timeout
        return out

    def command(self, timeout: float = 30) -> AdminCommand:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for records in self.admin.poll(timeout_ms=500, max_records=1).values():
                for r in records:
                    event = event_from_json(r.value)
                    assert isinstance(event, AdminCommand)
                    return event
        raise AssertionError("no command on the admin topic")

    def answer(self, result: AdminResult) -> None:
        value = {**encode_decision(result), "batch_id": 1, "controller_epoch": 5}
        self.results.begin_transaction()
        self.results.send(self.results_topic, key=result.request_id.encode(), value=json.dumps(value).encode())
        self.results.commit_transaction()


@pytest.fixture
def rig(zookeeper: local.Service, kafka_broker: local.Service) -> Iterator[Rig]:
    chroot = f"/channel-acls-{uuid.uuid4().hex[:8]}"
    root = KazooClient(zookeeper.connect)
    root.start(timeout=15)
    root.ensure_path(chroot + zkdata.BROKER_TOPICS)
    zk = KazooClient(zookeeper.connect + chroot)
    zk.start(timeout=15)
    name = f"acls-{uuid.uuid4().hex[:6]}"
    users = " ".join(f'user_{u}="{p}"' for u, p in PASSWORDS.items())
    settings = bus_settings(
        zookeeper.connect + chroot,
        kafka_broker.bootstrap,
        "acls",
        controller_listeners=(LISTENER,),
        listener_protocols={LISTENER: "SASL_PLAINTEXT"},
        sasl=ChannelSasl.from_properties(
            {"sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": f"{PLAIN_LOGIN} required {users};"}
        ),
        authorizer=AclAuthorizer(),
        log_dirs_interval_s=0,
        admin_topic=f"{name}.admin",
        admin_results_topic=f"{name}.admin-results",
    )
    try:
        with channel_with_admin_link(settings, kafka_broker.bootstrap, name) as link:
            yield Rig(
                link.channel,
                zookeeper.connect + chroot,
                zk,
                chroot,
                link.commands,
                link.results,
                settings.admin_results_topic,
                name,
            )
    finally:
        zk.stop()
        zk.close()
        root.delete(chroot, recursive=True)
        root.stop()
        root.close()


def _create(topic: str) -> Any:
    return create_req.CreateTopicsRequest(
        topics=(
            create_req.CreatableTopic(
                name=TopicName(topic), num_partitions=i32(1), replication_factor=i16(1), assignments=(), configs=()
            ),
        ),
        timeout=_TIMEOUT,
    )


def _delete(topic: str) -> Any:
    return delete_req.DeleteTopicsRequest(
        topics=(delete_req.DeleteTopicState(name=TopicName(topic), topic_id=uuid.UUID(int=0)),), timeout=_TIMEOUT
    )


def _in_thread(conn: BrokerConnection, request: Any, response_type: type) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(conn.send(request, response_type)), daemon=True)
    thread.start()
    return thread, out


def _code(response: Any) -> tuple[int, str | None]:
    entries = getattr(response, "topics", None) or response.responses
    (entry,) = entries
    return int(entry.error_code.value), entry.error_message


def test_kafka_acls_decide_who_may_create_and_delete_topics_through_the_channel(rig: Rig) -> None:
    topic, kept = f"{rig.name}-orders", f"{rig.name}-kept"
    rig.kafka_acls("--add", "--allow-principal", "User:alice", "--operation", "Create", "--cluster")
    rig.kafka_acls(
        "--add", "--allow-principal", "User:alice", "--operation", "Delete", "--topic", rig.name,
        "--resource-pattern-type", "prefixed",
    )  # fmt: skip
    rig.kafka_acls("--add", "--deny-principal", "User:alice", "--operation", "Delete", "--topic", kept)
    # what kafka-acls wrote is Kafka's layout, which the channel reads
    assert rig.zk.exists(f"/kafka-acl-extended/prefixed/Topic/{rig.name}")
    assert json.loads(rig.zk.get("/kafka-acl/Cluster/kafka-cluster")[0])["acls"] == [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Create", "host": "*"}
    ]

    with rig.client("bob") as bob, rig.client("alice") as alice:
        # bob may do nothing: refused at once, nothing published
        assert _code(bob.send(_create(topic), create_resp.CreateTopicsResponse)) == (29, "Authorization failed.")
        assert _code(bob.send(_delete(topic), delete_resp.DeleteTopicsResponse)) == (29, None)
        elect = elect_req.ElectLeadersRequest(election_type=i8(0), topic_partitions=None, timeout=_TIMEOUT)
        elected = bob.send(elect, elect_resp.ElectLeadersResponse)
        assert int(elected.error_code.value) == 31 and elected.replica_election_results == ()
        # alice's DELETE of the one topic is denied, though her prefix allows it: DENY wins
        assert _code(alice.send(_delete(kept), delete_resp.DeleteTopicsResponse)) == (29, None)
        assert rig.commands(timeout=3) == []

        # alice creates the topic: livectl's command, answered with its result
        thread, out = _in_thread(alice, _create(topic), create_resp.CreateTopicsResponse)
        command = rig.command()
        assert isinstance(command, CreateTopic) and command.topic == topic
        details = {"topic_id": "AAAAAAAAAAAAAAAAAAAAKg", "partitions": {"0": [1]}}
        rig.answer(AdminResult(command.request_id, "create_topic", AdminStatus.OK, details=details))
        thread.join(30)
        assert [_code(r) for r in out] == [(0, None)]
        # created without DESCRIBE_CONFIGS on the topic: Kafka tells nothing of its configs
        (created,) = out[0].topics
        assert int(created.topic_config_error_code) == 29 and int(created.num_partitions) == -1

        # and deletes it
        thread, out = _in_thread(alice, _delete(topic), delete_resp.DeleteTopicsResponse)
        command = rig.command()
        assert command == DeleteTopic(command.request_id, topic)
        rig.answer(AdminResult(command.request_id, "delete_topic", AdminStatus.IN_PROGRESS))
        thread.join(30)
        assert [_code(r) for r in out] == [(0, None)]

        # an ACL added for bob applies from his next request on
        rig.kafka_acls("--add", "--allow-principal", "User:bob", "--operation", "Create", "--topic", topic)
        thread, out = _in_thread(bob, _create(topic), create_resp.CreateTopicsResponse)
        command = rig.command()
        assert isinstance(command, CreateTopic) and command.topic == topic
        rig.answer(AdminResult(command.request_id, "create_topic", AdminStatus.ERROR, "TOPIC_ALREADY_EXISTS", "x"))
        thread.join(30)
        assert [_code(r) for r in out] == [(36, "x")]

    # nothing but alice's and bob's allowed calls reached livectl's controller; the channel wrote no topic
    assert rig.commands(timeout=2) == []
    assert rig.zk.get_children(zkdata.BROKER_TOPICS) == []
    assert not rig.zk.exists(zkdata.DELETE_TOPICS) or rig.zk.get_children(zkdata.DELETE_TOPICS) == []


def test_the_node_configs_and_the_reassignment_list_need_their_cluster_acls(rig: Rig) -> None:
    """The controller's node (``/controller`` names 1000, no broker registered under it) answers its own configs
    and ListPartitionReassignments only to whom the ACLs grant ``DescribeConfigs`` / ``AlterConfigs`` /
    ``Describe`` on the Cluster; ``kafka-acls`` grants them to ``alice`` and ``bob`` gets 31."""
    rig.zk.create(zkdata.CONTROLLER_PATH, zkdata.encode_controller(1000, 0), ephemeral=True)
    for operation in ("DescribeConfigs", "AlterConfigs", "Describe"):
        rig.kafka_acls("--add", "--allow-principal", "User:alice", "--operation", operation, "--cluster")
    described = describe_req.DescribeConfigsRequest(
        resources=(
            describe_req.DescribeConfigsResource(resource_type=i8(4), resource_name="1000", configuration_keys=None),
        ),
        include_synonyms=False,
        include_documentation=False,
    )
    rate = alter_req.AlterableConfig(name="leader.replication.throttled.rate", config_operation=i8(0), value="1000")
    altered = alter_req.IncrementalAlterConfigsRequest(
        resources=(alter_req.AlterConfigsResource(resource_type=i8(4), resource_name="1000", configs=(rate,)),),
        validate_only=False,
    )
    listed = list_req.ListPartitionReassignmentsRequest(timeout=_TIMEOUT, topics=None)
    with rig.client("bob") as bob, rig.client("alice") as alice:
        (result,) = bob.send(described, describe_resp.DescribeConfigsResponse).results
        assert (int(result.error_code.value), result.configs) == (31, ())
        (answer,) = bob.send(altered, alter_resp.IncrementalAlterConfigsResponse).responses
        assert int(answer.error_code.value) == 31
        assert not rig.zk.exists("/config/brokers/1000")  # nothing written for bob
        assert int(bob.send(listed, list_resp.ListPartitionReassignmentsResponse).error_code.value) == 31

        (answer,) = alice.send(altered, alter_resp.IncrementalAlterConfigsResponse).responses
        assert int(answer.error_code.value) == 0
        assert json.loads(rig.zk.get("/config/brokers/1000")[0])["config"] == {
            "leader.replication.throttled.rate": "1000"
        }
        (result,) = alice.send(described, describe_resp.DescribeConfigsResponse).results
        assert int(result.error_code.value) == 0
        assert ("leader.replication.throttled.rate", "1000") in {(c.name, c.value) for c in result.configs}
        listing = alice.send(listed, list_resp.ListPartitionReassignmentsResponse)
        assert int(listing.error_code.value) == 0 and listing.topics == ()


def test_the_brokers_requests_need_cluster_action(rig: Rig) -> None:
    """With the authorizer, the brokers' own requests are taken from whom the ACLs grant ``ClusterAction`` on the
    Cluster (and ``super.users``), as Kafka's ``KafkaApis``: ``bob`` gets 31 for AllocateProducerIds, ``alice``,
    once ``kafka-acls`` granted it, Kafka's controller's own answer (broker 1 is not registered)."""
    rig.kafka_acls("--add", "--allow-principal", "User:alice", "--operation", "ClusterAction", "--cluster")
    request = pid_req.AllocateProducerIdsRequest(broker_id=BrokerId(1), broker_epoch=i64(5))
    with rig.client("bob") as bob, rig.client("alice") as alice:
        assert int(bob.send(request, pid_resp.AllocateProducerIdsResponse).error_code.value) == 31
        assert int(alice.send(request, pid_resp.AllocateProducerIdsResponse).error_code.value) == 102
