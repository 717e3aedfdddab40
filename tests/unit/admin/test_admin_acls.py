"""The ACL set of a deployment (``livectl acls``): who may write and read each of livectl's topics, the
transactional id, the options' checks, and the ``kafka-acls.sh`` commands it prints."""

from __future__ import annotations

import shlex

import pytest
from kafka.admin import ACLOperation, ACLPermissionType, ACLResourcePatternType
from kafka.admin import ResourceType as KafkaResourceType

from admin.acls import (
    SPARK_GROUP_PREFIX,
    Acl,
    AclConfigError,
    Deployment,
    Operation,
    PatternType,
    ResourceType,
    Topics,
    acl_set,
    kafka_acls_commands,
    writers,
)
from admin.acls_cmd import bindings
from admin.cli import main as admin_main
from simbrokers.control import CONTROL_TOPIC
from sinks.requests import transactional_id
from streaming.settings import Settings

pytestmark = pytest.mark.unit

CONTROLLERS = ("User:controller", "User:standby")
BROKERS = ("User:broker-1", "User:broker-2")
ADMINS = ("User:alice",)
T = Topics()


def _deployment(**kw: object) -> Deployment:
    args: dict[str, object] = {
        "controllers": CONTROLLERS,
        "brokers": BROKERS,
        "admins": ADMINS,
        "transactional_id": transactional_id("livectl"),
    }
    args.update(kw)
    return Deployment(**args)  # type: ignore[arg-type]


def _allowed(acls: tuple[Acl, ...], op: Operation, rtype: ResourceType, name: str) -> frozenset[str]:
    return frozenset(
        a.principal for a in acls if a.resource.type is rtype and a.resource.name == name and op in a.operations
    )


def test_only_the_controllers_write_their_outputs_only_admins_write_commands() -> None:
    acls = acl_set(_deployment())
    controllers, brokers, admins = set(CONTROLLERS), set(BROKERS), set(ADMINS)
    for topic in (T.requests, T.admin_results, T.rejected):
        assert writers(acls, topic) == controllers, topic
    # the driver publishes what it learns outside Kafka (ZooKeeper registrations, the failover reference)
    assert writers(acls, T.broker_events) == brokers | controllers
    assert writers(acls, T.admin) == admins
    assert writers(acls, T.simbrokers_control) == admins
    # the simulated brokers, or the controller channel (which runs as a broker principal), publish log sizes
    assert writers(acls, T.log_dirs) == brokers


def test_each_client_reads_what_it_consumes() -> None:
    acls = acl_set(_deployment())
    read = Operation.READ
    topic = ResourceType.TOPIC
    controllers, brokers, admins = set(CONTROLLERS), set(BROKERS), set(ADMINS)
    assert _allowed(acls, read, topic, T.admin) == controllers  # the query's source
    assert _allowed(acls, read, topic, T.broker_events) == controllers
    # brokers act on requests; the controller reads the tail (replay); livectl-simbrokers shutdown --wait
    assert _allowed(acls, read, topic, T.requests) == brokers | controllers | admins
    assert _allowed(acls, read, topic, T.admin_results) == controllers | admins  # admins: the answers
    assert _allowed(acls, read, topic, T.rejected) == controllers
    assert _allowed(acls, read, topic, T.simbrokers_control) == brokers
    # the controller creates its five topics when missing; the simulated brokers their control topic
    for name in T.controller_topics():
        assert _allowed(acls, Operation.CREATE, topic, name) == controllers, name
    assert _allowed(acls, Operation.CREATE, topic, T.simbrokers_control) == brokers
    # the status page and reassign --verify / --list read the brokers' log sizes; their writers create the topic
    assert _allowed(acls, read, topic, T.log_dirs) == controllers | admins
    assert _allowed(acls, Operation.CREATE, topic, T.log_dirs) == brokers


def test_the_transactional_id_is_the_sinks_and_only_the_controllers() -> None:
    acls = acl_set(_deployment(transactional_id=transactional_id("prod")))
    tids = [a for a in acls if a.resource.type is ResourceType.TRANSACTIONAL_ID]
    assert {a.principal for a in tids} == set(CONTROLLERS)
    assert {a.resource.name for a in tids} == {"livectl-prod"}
    assert all(a.operations == (Operation.WRITE,) and a.resource.pattern is PatternType.LITERAL for a in tids)


def test_nothing_beyond_the_roles_needs() -> None:
    acls = acl_set(_deployment())
    # literal resources only (no prefix a stranger's topic could fall under), no group for livectl's own clients
    assert all(a.resource.pattern is PatternType.LITERAL for a in acls)
    assert all(a.resource.type is not ResourceType.GROUP for a in acls)
    assert {a.principal for a in acls} == set(CONTROLLERS + BROKERS + ADMINS)
    names = {a.resource.name for a in acls if a.resource.type is ResourceType.TOPIC}
    assert names == {*T.controller_topics(), T.simbrokers_control, T.log_dirs}


def test_without_simulated_brokers_no_control_topic() -> None:
    acls = acl_set(_deployment(simulated_brokers=False))
    assert all(a.resource.name != T.simbrokers_control for a in acls)
    assert _allowed(acls, Operation.READ, ResourceType.TOPIC, T.requests) == set(BROKERS) | set(CONTROLLERS)


def test_spark_connector_groups_on_a_prefix() -> None:
    acls = acl_set(_deployment(spark_group_prefix=SPARK_GROUP_PREFIX))
    groups = [a for a in acls if a.resource.type is ResourceType.GROUP]
    assert {a.principal for a in groups} == set(CONTROLLERS)
    assert all(a.resource.name == "spark-kafka-source" and a.resource.pattern is PatternType.PREFIXED for a in groups)
    assert all(a.operations == (Operation.READ,) for a in groups)


def test_the_defaults_are_the_components_names() -> None:
    s = Settings()
    assert (T.admin, T.broker_events, T.requests, T.admin_results, T.rejected) == (
        s.admin_topic,
        s.broker_events_topic,
        s.requests_topic,
        s.admin_results_topic,
        s.rejected_topic,
    )
    assert T.simbrokers_control == CONTROL_TOPIC
    assert T.log_dirs == s.log_dirs_topic
    assert transactional_id(s.query_name) == "livectl-livectl"


@pytest.mark.parametrize(
    ("kw", "field", "reason"),
    [
        ({"controllers": ("controller",)}, "--controller-principal", "must look like User:NAME"),
        ({"brokers": ()}, "--broker-principal", "at least one principal"),
        ({"admins": ("User:controller",)}, "--admin-principal", "also in --controller-principal"),
        ({"brokers": ("User:b", "User:b")}, "--broker-principal", "given twice"),
        ({"topics": Topics(admin="bad topic")}, "--admin-topic", "not a Kafka name"),
        ({"topics": Topics(rejected="livectl.requests")}, "--*-topic", "livectl's topics must differ"),
        ({"transactional_id": "livectl-a b"}, "--query-name", "not a Kafka name"),
        ({"spark_group_prefix": ""}, "--spark-group-prefix", "not a Kafka name"),
    ],
)
def test_a_bad_deployment_names_the_option(kw: dict[str, object], field: str, reason: str) -> None:
    with pytest.raises(AclConfigError) as e:
        _deployment(**kw)
    assert e.value.field == field
    assert reason in e.value.reason


def test_commands_are_kafka_acls_adds_one_per_rule() -> None:
    acls = acl_set(_deployment(controllers=("User:CN=controller,O=Example Org",)))
    lines = kafka_acls_commands(acls, "b:9093", "/etc/admin client.properties")
    comments, commands = lines[0::2], lines[1::2]
    assert len(commands) == len(acls)
    assert all(c.startswith("# ") for c in comments)
    first = shlex.split(commands[0])  # principals and paths with spaces or commas survive the shell
    assert first[:6] == [
        "kafka-acls.sh",
        "--bootstrap-server",
        "b:9093",
        "--command-config",
        "/etc/admin client.properties",
        "--add",
    ]
    assert first[first.index("--allow-principal") + 1] == "User:CN=controller,O=Example Org"
    tid = next(shlex.split(c) for c in commands if "--transactional-id" in c)
    assert tid[-4:] == ["--operation", "Write", "--transactional-id", "livectl-livectl"]
    grouped = kafka_acls_commands(acl_set(_deployment(spark_group_prefix="sks")), "b:9093")
    group = next(shlex.split(c) for c in grouped if "--group" in c)
    assert group[-4:] == ["--group", "sks", "--resource-pattern-type", "prefixed"]
    assert "--command-config" not in group


def test_bindings_are_one_allow_per_operation_from_any_host() -> None:
    acls = acl_set(_deployment(spark_group_prefix=SPARK_GROUP_PREFIX))
    out = bindings(acls)
    assert len(out) == sum(len(a.operations) for a in acls)
    assert all(b.permission_type == ACLPermissionType.ALLOW and b.host == "*" for b in out)
    by_kind = {(b.resource_pattern.resource_type, b.resource_pattern.pattern_type) for b in out}
    assert by_kind == {
        (KafkaResourceType.TOPIC, ACLResourcePatternType.LITERAL),
        (KafkaResourceType.TRANSACTIONAL_ID, ACLResourcePatternType.LITERAL),
        (KafkaResourceType.GROUP, ACLResourcePatternType.PREFIXED),
    }
    assert {b.operation for b in out} == {ACLOperation.READ, ACLOperation.WRITE, ACLOperation.CREATE}


def test_cli_prints_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["acls", "--controller-principal", "User:ctl", "--broker-principal", "User:b1", "--admin-principal"]
    code = admin_main(
        [*argv, "User:ops", "--bootstrap-server", "k:9093", "--query-name", "prod", "--no-simulated-brokers"]
    )
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    commands = [shlex.split(line) for line in out if not line.startswith("#")]
    assert all(c[:4] == ["kafka-acls.sh", "--bootstrap-server", "k:9093", "--add"] for c in commands)
    assert next(c[-2:] for c in commands if "--transactional-id" in c) == ["--transactional-id", "livectl-prod"]
    assert not any("livectl.simbrokers.control" in c for c in commands)


def test_cli_names_a_bad_option(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "acls",
        "--controller-principal",
        "User:ctl",
        "--broker-principal",
        "User:ctl",
        "--admin-principal",
        "User:o",
    ]
    assert admin_main(argv) == 2
    err = capsys.readouterr().err
    assert "livectl acls: error: --broker-principal: User:ctl is given also in --controller-principal" in err
