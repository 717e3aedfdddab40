"""Who may make the admin calls the channel answers itself (:mod:`channel.acls`): Kafka 3.9's ``AclAuthorizer``
over ACLs as Kafka writes them in ZooKeeper, and each admin API's answer to what it refuses, as ``KafkaApis``
gives it. (Kafka's own ``kafka-acls`` writing the ACLs a real client is judged by:
tests/integration/channel/test_channel_acls_kafka_tools.py.)"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from kio_wire import kio_module, wire

from channel.acls import (
    ACL_AUTHORIZER,
    CLUSTER_NAME,
    AclAuthorizer,
    AclEntry,
    Operation,
    Permission,
    Resource,
    ZkAcls,
    kafka_host,
    parse_acls,
)
from channel.admin_apis import WHOLE_REQUEST, AdminApi, ItemAnswer, TopicRef
from channel.admin_requests import admin_request
from channel.admin_results import admin_response, item_answers
from channel.answers import list_partition_reassignments_refused
from channel.cli import register
from channel.node_configs import (
    INCREMENTAL_ALTER_CONFIGS,
    ConfigChange,
    alter_refused,
    config_changes,
    describe_configs_refused,
)
from core.decisions import AdminResult, AdminStatus
from core.model import TopicPartition
from sinks.security import SecurityConfigError

pytestmark = pytest.mark.unit

ALICE, BOB = "User:alice", "User:bob"
HOST, OTHER_HOST = "10.0.0.1", "10.0.0.2"


def _znode(*acls: tuple[str, str, str, str]) -> bytes:
    """A znode as Kafka's ``AclAuthorizer`` writes it: (principal, permission, operation, host) each."""
    entries = [{"principal": p, "permissionType": t, "operation": o, "host": h} for p, t, o, h in acls]
    return json.dumps({"version": 1, "acls": entries}).encode()


class _Zk:
    """The read side of a ZooKeeper client over a dict of paths (the matching rules, not ZooKeeper, are tested
    here; the integration test reads a real one)."""

    def __init__(self, nodes: Mapping[str, bytes]) -> None:
        self.nodes = dict(nodes)
        self.reads = 0

    def get(self, path: str) -> tuple[bytes, None]:
        from kazoo.exceptions import NoNodeError

        self.reads += 1
        if path not in self.nodes:
            raise NoNodeError(path)
        return self.nodes[path], None

    def get_children(self, path: str) -> list[str]:
        from kazoo.exceptions import NoNodeError

        kids = {p[len(path) + 1 :].split("/")[0] for p in self.nodes if p.startswith(path + "/")}
        if not kids:
            raise NoNodeError(path)
        return sorted(kids)


def _allowed(
    nodes: Mapping[str, bytes],
    principal: str,
    operation: Operation,
    resource: Resource = Resource.TOPIC,
    name: str = "orders",
    *,
    host: str = HOST,
    authorizer: AclAuthorizer | None = None,
) -> bool:
    az = authorizer or AclAuthorizer()
    return az.authorize(ZkAcls(_Zk(nodes)), principal, host, operation=operation, resource=resource, name=name)


def test_acls_are_read_as_kafka_writes_them_and_names_in_any_case() -> None:
    data = _znode(("User:alice", "Allow", "DescribeConfigs", "*"), ("User:CN=a,O=b", "DENY", "ALTERCONFIGS", HOST))
    assert parse_acls(data) == {
        AclEntry(ALICE, Permission.ALLOW, Operation.DESCRIBE_CONFIGS, "*"),
        AclEntry("User:CN=a,O=b", Permission.DENY, Operation.ALTER_CONFIGS, HOST),
    }
    assert parse_acls(b"") == frozenset() and parse_acls(None) == frozenset()
    (entry,) = parse_acls(_znode((ALICE, "Allow", "Frobnicate", "*")))
    assert entry.operation is Operation.UNKNOWN  # Kafka reads it as UNKNOWN: it allows nothing
    for bad in (b'{"version": 2, "acls": []}', b"[1]", b"{", _znode(("alice", "Allow", "Read", "*"))):
        with pytest.raises(ValueError):
            parse_acls(bad)


def test_no_acl_refuses_unless_allow_everyone_and_super_users_bypass() -> None:
    assert not _allowed({}, ALICE, Operation.CREATE)
    assert _allowed({}, ALICE, Operation.CREATE, authorizer=AclAuthorizer(allow_everyone_if_no_acl_found=True))
    deny_all = {"/kafka-acl/Topic/orders": _znode((ALICE, "Deny", "All", "*"))}
    assert _allowed(deny_all, ALICE, Operation.DELETE, authorizer=AclAuthorizer(frozenset({ALICE})))
    # some ACL on the resource, none for this principal: allow.everyone does not apply
    bob_only = {"/kafka-acl/Topic/orders": _znode((BOB, "Allow", "All", "*"))}
    assert not _allowed(
        bob_only, ALICE, Operation.DELETE, authorizer=AclAuthorizer(allow_everyone_if_no_acl_found=True)
    )


def test_deny_beats_allow_and_all_matches_every_operation() -> None:
    nodes = {
        "/kafka-acl/Topic/orders": _znode((ALICE, "Allow", "All", "*"), (ALICE, "Deny", "Delete", "*")),
    }
    assert _allowed(nodes, ALICE, Operation.ALTER) and not _allowed(nodes, ALICE, Operation.DELETE)
    # a DENY of READ does not deny DESCRIBE (Kafka checks DENY for the operation itself and ALL only)
    nodes = {"/kafka-acl/Topic/orders": _znode((ALICE, "Allow", "Describe", "*"), (ALICE, "Deny", "Read", "*"))}
    assert _allowed(nodes, ALICE, Operation.DESCRIBE)
    nodes = {"/kafka-acl/Topic/orders": _znode((ALICE, "Allow", "Read", "*"), (ALICE, "Deny", "All", "*"))}
    assert not _allowed(nodes, ALICE, Operation.DESCRIBE)


@pytest.mark.parametrize(
    ("granted", "asked", "allowed"),
    [
        ("Read", Operation.DESCRIBE, True),
        ("Write", Operation.DESCRIBE, True),
        ("Delete", Operation.DESCRIBE, True),
        ("Alter", Operation.DESCRIBE, True),
        ("Create", Operation.DESCRIBE, False),
        ("AlterConfigs", Operation.DESCRIBE_CONFIGS, True),
        ("AlterConfigs", Operation.ALTER, False),
        ("Alter", Operation.ALTER_CONFIGS, False),
        ("Describe", Operation.READ, False),
        ("All", Operation.CREATE, True),
    ],
)
def test_implied_operations(granted: str, asked: Operation, allowed: bool) -> None:
    nodes = {"/kafka-acl/Topic/orders": _znode((ALICE, "Allow", granted, "*"))}
    assert _allowed(nodes, ALICE, asked) is allowed


def test_wildcard_resource_prefix_principal_and_host() -> None:
    nodes = {
        "/kafka-acl/Topic/*": _znode(("User:*", "Allow", "Create", "*")),
        "/kafka-acl-extended/prefixed/Topic/ord": _znode((BOB, "Deny", "Create", OTHER_HOST)),
        "/kafka-acl-extended/prefixed/Topic/pay": _znode((ALICE, "Deny", "Create", "*")),
    }
    assert _allowed(nodes, ALICE, Operation.CREATE, name="orders")
    assert _allowed(nodes, BOB, Operation.CREATE, name="orders")  # denied only from the other host
    assert not _allowed(nodes, BOB, Operation.CREATE, name="orders", host=OTHER_HOST)
    assert not _allowed(nodes, ALICE, Operation.CREATE, name="payments")
    assert _allowed(nodes, ALICE, Operation.CREATE, name="pa")  # a prefix longer than the name does not match
    # a pattern of another resource type, or a host given by name, counts for nothing
    nodes = {"/kafka-acl/Cluster/kafka-cluster": _znode((ALICE, "Allow", "Create", "localhost"))}
    assert not _allowed(nodes, ALICE, Operation.CREATE, Resource.CLUSTER, CLUSTER_NAME, host="127.0.0.1")
    assert not _allowed(nodes, ALICE, Operation.CREATE, Resource.TOPIC, CLUSTER_NAME, host="localhost")


@pytest.mark.parametrize(
    ("address", "java"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("::1", "0:0:0:0:0:0:0:1"),
        ("fe80::1%eth0", "fe80:0:0:0:0:0:0:1%eth0"),
        ("2001:db8::0a0b", "2001:db8:0:0:0:0:0:a0b"),
        ("::ffff:10.0.0.1", "10.0.0.1"),
    ],
)
def test_a_clients_address_as_java_writes_it(address: str, java: str) -> None:
    assert kafka_host(address) == java


def test_a_request_reads_each_znode_once() -> None:
    zk = _Zk({"/kafka-acl/Topic/orders": _znode((ALICE, "Allow", "All", "*"))})
    check = AclAuthorizer().check(zk, ALICE, HOST)
    assert check(Operation.CREATE, Resource.TOPIC, "orders") and check(Operation.DELETE, Resource.TOPIC, "orders")
    assert zk.reads == 2  # the literal name's and the type's wildcard


def test_unreadable_acls_refuse() -> None:
    zk = _Zk({"/kafka-acl/Topic/orders": b"{not json"})
    assert not AclAuthorizer(allow_everyone_if_no_acl_found=True).check(zk, ALICE, HOST)(
        Operation.CREATE, Resource.TOPIC, "orders"
    )


def test_the_authorizer_from_the_security_config() -> None:
    assert AclAuthorizer.from_properties({"super.users": "User:admin"}) is None
    az = AclAuthorizer.from_properties(
        {
            " authorizer.class.name ": f" {ACL_AUTHORIZER} ",
            "super.users": "User:admin;User:CN=broker,O=example",
            "allow.everyone.if.no.acl.found": "TRUE",
        }
    )
    assert az == AclAuthorizer(frozenset({"User:admin", "User:CN=broker,O=example"}), True)
    assert AclAuthorizer.from_properties({"authorizer.class.name": ACL_AUTHORIZER}) == AclAuthorizer()
    with pytest.raises(SecurityConfigError, match=r"authorizer\.class\.name"):
        AclAuthorizer.from_properties(
            {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}
        )


# ------------------------------------------------------------------------------------ the admin APIs' refusals


def _ids() -> Any:
    counter = itertools.count(1)
    return lambda: f"r{next(counter)}"


def _grants(*granted: tuple[Operation, Resource, str]) -> Any:
    return lambda op, resource, name: (op, resource, name) in granted


_MS = datetime.timedelta(milliseconds=30_000)


def test_create_topics_needs_create_on_the_cluster_or_the_topic() -> None:
    m = kio_module("create_topics", 7, "request")
    topics = tuple(
        m.CreatableTopic(name=n, num_partitions=1, replication_factor=1, assignments=(), configs=())
        for n in ("mine", "theirs", "twice", "twice")
    )
    request = wire(m.CreateTopicsRequest(topics=topics, timeout=_MS, validate_only=False))
    only_mine = _grants(
        (Operation.CREATE, Resource.TOPIC, "mine"), (Operation.DESCRIBE_CONFIGS, Resource.TOPIC, "mine")
    )
    ask = admin_request(AdminApi.CREATE_TOPICS, 7, request, _ids(), allowed=only_mine)
    assert [json.loads(c)["topic"] for _, c in ask.commands] == ["mine"]
    assert ask.own["theirs"].error == 29 and ask.own["theirs"].message == "Authorization failed."
    assert ask.own["twice"].error == 42  # a topic named twice is INVALID_REQUEST before anything else
    everything = admin_request(
        AdminApi.CREATE_TOPICS, 7, request, _ids(), allowed=_grants((Operation.CREATE, Resource.CLUSTER, CLUSTER_NAME))
    )
    assert [json.loads(c)["topic"] for _, c in everything.commands] == ["mine", "theirs"]
    assert everything.configs_hidden == {"mine", "theirs", "twice"}
    created = AdminResult(
        "r1", "command", AdminStatus.OK, None, "", {"topic_id": "AAAAAAAAAAAAAAAAAAAABw", "partitions": {"0": [1]}}
    )
    exists = AdminResult("r2", "command", AdminStatus.ERROR, "TOPIC_ALREADY_EXISTS", "exists", {})
    answers = {**item_answers(everything, "r1", created), **item_answers(everything, "r2", exists)}
    response = admin_response(everything, answers)
    by_name = {t.name: t for t in response.topics}
    mine = by_name["mine"]
    assert int(mine.error_code.value) == 0 and int(mine.topic_config_error_code) == 29
    assert int(mine.num_partitions) == -1 and mine.configs == ()
    theirs = by_name["theirs"]  # refused by livectl: Kafka resets the config error
    assert int(theirs.error_code.value) == 36 and int(theirs.topic_config_error_code) == 0
    twice = by_name["twice"]  # refused before creating: KafkaApis' mark stays
    assert int(twice.error_code.value) == 42 and int(twice.topic_config_error_code) == 29
    # alice may describe the configs of hers only: the topic refused her is marked too
    marks = {t.name: int(t.topic_config_error_code) for t in admin_response(ask, {"mine": ItemAnswer(0)}).topics}
    assert marks == {"twice": 29, "mine": 0, "theirs": 29}


def test_delete_topics_needs_delete_and_by_id_describe() -> None:
    m = kio_module("delete_topics", 6, "request")
    request = wire(
        m.DeleteTopicsRequest(
            topics=(
                m.DeleteTopicState(name="mine", topic_id=uuid.UUID(int=0)),
                m.DeleteTopicState(name="theirs", topic_id=uuid.UUID(int=0)),
                m.DeleteTopicState(name=None, topic_id=uuid.UUID(int=7)),
            ),
            timeout=_MS,
        )
    )
    allowed = _grants((Operation.DELETE, Resource.TOPIC, "mine"), (Operation.DELETE, Resource.TOPIC, "hidden"))
    ask = admin_request(AdminApi.DELETE_TOPICS, 6, request, _ids(), topic_names=lambda _: "hidden", allowed=allowed)
    assert [json.loads(c)["topic"] for _, c in ask.commands] == ["mine"]
    assert ask.own[TopicRef("theirs")].error == 29
    hidden = TopicRef(None, "AAAAAAAAAAAAAAAAAAAABw")
    assert ask.own[hidden].error == 29  # named by id, not describable: refused without its name
    response = admin_response(ask, {TopicRef("mine"): ItemAnswer(0)})
    assert [(r.name, int(r.error_code.value)) for r in response.responses[1:]] == [("theirs", 29), (None, 29)]


def test_create_partitions_needs_alter_on_the_topic() -> None:
    m = kio_module("create_partitions", 3, "request")
    topics = tuple(m.CreatePartitionsTopic(name=n, count=3, assignments=None) for n in ("mine", "theirs"))
    request = wire(m.CreatePartitionsRequest(topics=topics, timeout=_MS, validate_only=False))
    ask = admin_request(
        AdminApi.CREATE_PARTITIONS, 3, request, _ids(), allowed=_grants((Operation.ALTER, Resource.TOPIC, "mine"))
    )
    assert [json.loads(c)["topic"] for _, c in ask.commands] == ["mine"]
    assert (ask.own["theirs"].error, ask.own["theirs"].message) == (29, "The topic authorization is failed.")


@pytest.mark.parametrize("every", [False, True])
def test_elect_leaders_needs_alter_on_the_cluster(every: bool) -> None:
    m = kio_module("elect_leaders", 2, "request")
    named = (m.TopicPartitions(topic="orders", partitions=(0, 1)),)
    request = wire(m.ElectLeadersRequest(election_type=0, topic_partitions=None if every else named, timeout=_MS))
    ask = admin_request(AdminApi.ELECT_LEADERS, 2, request, _ids(), allowed=_grants())
    assert not ask.commands and ask.own[WHOLE_REQUEST].error == 31
    response = admin_response(ask, {})
    assert int(response.error_code.value) == 31
    parts = [
        (int(p.partition_id), int(p.error_code.value))
        for r in response.replica_election_results
        for p in r.partition_result
    ]
    assert parts == ([] if every else [(0, 31), (1, 31)])
    granted = admin_request(
        AdminApi.ELECT_LEADERS, 2, request, _ids(), allowed=_grants((Operation.ALTER, Resource.CLUSTER, CLUSTER_NAME))
    )
    assert len(granted.commands) == 1


def test_the_reassignment_apis_need_the_cluster() -> None:
    m = kio_module("alter_partition_reassignments", 0, "request")
    topics = (
        m.ReassignableTopic(name="orders", partitions=(m.ReassignablePartition(partition_index=0, replicas=(1,)),)),
    )
    request = wire(m.AlterPartitionReassignmentsRequest(timeout=_MS, topics=topics))
    ask = admin_request(AdminApi.ALTER_PARTITION_REASSIGNMENTS, 0, request, _ids(), allowed=_grants())
    assert not ask.commands
    response = admin_response(ask, {})
    assert int(response.error_code.value) == 31
    assert [(int(p.partition_index), int(p.error_code.value)) for p in response.responses[0].partitions] == [(0, 31)]
    assert ask.own[TopicPartition("orders", 0)].error == 31
    lm = kio_module("list_partition_reassignments", 0, "request")
    listed = lm.ListPartitionReassignmentsRequest(
        timeout=_MS, topics=(lm.ListPartitionReassignmentsTopics(name="orders", partition_indexes=(2,)),)
    )
    refused = list_partition_reassignments_refused(listed, 31, "no")
    assert int(refused.error_code.value) == 31 and refused.topics[0].partitions[0].partition_index == 2


def test_the_node_configs_need_describe_configs_and_alter_configs_on_the_cluster() -> None:
    dm = kio_module("describe_configs", 4, "request")
    described = dm.DescribeConfigsRequest(
        resources=(dm.DescribeConfigsResource(resource_type=4, resource_name="1000", configuration_keys=None),),
        include_synonyms=False,
        include_documentation=False,
    )
    (result,) = describe_configs_refused(4, described, 31).results
    assert (int(result.error_code.value), result.error_message) == (31, "Cluster authorization failed.")
    assert result.configs == () and result.resource_name == "1000"
    im = kio_module("incremental_alter_configs", 1, "request")

    def changes(*resources: tuple[int, tuple[Any, ...]]) -> list[ConfigChange]:
        body = im.IncrementalAlterConfigsRequest(
            resources=tuple(
                im.AlterConfigsResource(resource_type=t, resource_name="1000", configs=c) for t, c in resources
            ),
            validate_only=False,
        )
        return config_changes(INCREMENTAL_ALTER_CONFIGS, wire(body))

    rate = im.AlterableConfig(name="leader.replication.throttled.rate", config_operation=0, value="10")
    logger = im.AlterableConfig(name="kafka.server", config_operation=0, value="DEBUG")
    broker, loggers = changes((4, (rate,)), (8, (logger,)))
    # a broker change: refused without a message; a logger change: refused before its loggers are looked at
    assert alter_refused(INCREMENTAL_ALTER_CONFIGS, broker, 31) == (31, None)
    assert alter_refused(INCREMENTAL_ALTER_CONFIGS, loggers, 31) == (31, "Cluster authorization failed.")
    # what ConfigAdminManager.preprocess refuses keeps its answer
    (twice,) = changes((4, (rate, rate)))
    assert twice.error == 42 and alter_refused(INCREMENTAL_ALTER_CONFIGS, twice, 31) is None


def test_the_command_refuses_another_authorizer_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = argparse.ArgumentParser(prog="livectl")
    register(parser.add_subparsers())
    config = tmp_path / "security.properties"
    config.write_text("authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n")
    args = parser.parse_args(["channel", "--security-config", str(config)])
    assert args.func(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "--security-config" in err and "authorizer.class.name" in err and ACL_AUTHORIZER in err
