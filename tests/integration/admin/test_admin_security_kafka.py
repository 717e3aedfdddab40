"""The admin CLI over real TLS and SASL handshakes, and livectl's ACLs enforced by Apache Kafka's
authorizer (``secure_kafka``: SCRAM-SHA-512 over SASL_SSL, mutual TLS on SSL, StandardAuthorizer with
``allow.everyone.if.no.acl.found=false``, livectl's ACL set for ``controller``, ``broker-1`` and ``alice``
applied; ``mallory`` is a user with a certificate and no rights).

* ``livectl acls --apply`` run by the bootstrap super user creates exactly the set's bindings (again: no
  change), and a principal that is not a super user may not create ACLs.
* ``livectl topics --create`` with alice's ``--command-config`` (SCRAM over SASL_SSL; her certificate with
  an encrypted key over SSL) publishes the command, which the controller's principal reads.
* Refused by the broker (``TopicAuthorizationFailed``): a broker event forged by an admin or an outsider, a
  request, admin result or rejection forged by a broker, an admin command by an outsider, a broker or the
  controller (``livectl topics`` as mallory fails with the reason), and the controller's transactional id
  taken by anyone else (``TransactionalIdAuthorizationFailed``: no one else can fence the controller).
* The controller is unaffected: its sink writes in a transaction and the brokers' principal reads it.
* The printed ``kafka-acls.sh`` commands run with Kafka's own tool (``kafka.admin.AclCommand``) and create
  the same bindings, with a ``--command-config`` both livectl and Java read (``ssl.truststore.type=PEM``).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import time
from collections.abc import Mapping
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType, ResourcePatternFilter
from kafka.admin import ResourceType as KafkaResourceType
from kafka.errors import (
    KafkaError,
    NoError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
)
from kafka_secure import ADMIN, BATCH_IDS, BROKER, CONTROLLER, OUTSIDER, SUPER_ADMIN, SecureKafka
from request_bodies import lisr_request

from admin.acls import SPARK_GROUP_PREFIX, Acl, Deployment, ResourceType, Topics, acl_set
from admin.acls_cmd import bindings
from admin.cli import main as admin_main
from core.codec.events import event_from_json
from core.events import CreateTopic
from livectl.kafka_server import kafka_classpath
from livectl.spawn import find_java
from sinks.errors import SinkUnavailableError
from sinks.kafka_read import consumer_at_end
from sinks.ports import Fence
from sinks.requests import RequestSink, ensure_topics, transactional_id

pytestmark = pytest.mark.integration

T = Topics()
_BATCHES = BATCH_IDS


@pytest.fixture(scope="module")
def kafka(secure_kafka: SecureKafka) -> SecureKafka:
    """The secure broker with livectl's topics (created by the controller's principal, as ``livectl run``)."""
    ctl = secure_kafka.sasl_properties(CONTROLLER)
    ensure_topics(secure_kafka.sasl_bootstrap, T.controller_topics(), client_config=secure_kafka.client_kwargs(ctl))
    return secure_kafka


def _props(kafka: SecureKafka, protocol: str, name: str) -> dict[str, str]:
    return kafka.sasl_properties(name) if protocol == "SASL_SSL" else kafka.ssl_properties(name)


def _producer(kafka: SecureKafka, props: Mapping[str, str], **extra: Any) -> KafkaProducer:
    return KafkaProducer(
        **kafka.client_kwargs(props), bootstrap_servers=kafka.bootstrap_for(props), max_block_ms=15000, **extra
    )


def _produce(kafka: SecureKafka, props: Mapping[str, str], topic: str, value: bytes, key: bytes = b"1") -> None:
    producer = _producer(kafka, props)
    try:
        producer.send(topic, key=key, value=value).get(timeout=20)
    finally:
        producer.close(timeout=5)


def _read(consumer: KafkaConsumer, until: Any, timeout_s: float = 20.0) -> list[Any]:
    out: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=300).values():
            out.extend(records)
        if until(out):
            break
    return out


def _acls_argv(kafka: SecureKafka, config: str) -> list[str]:
    return [
        "acls",
        "--controller-principal",
        f"User:{CONTROLLER}",
        "--broker-principal",
        f"User:{BROKER}",
        "--admin-principal",
        f"User:{ADMIN}",
        "--spark-group-prefix",
        "--bootstrap-server",
        kafka.sasl_bootstrap,
        "--command-config",
        config,
        "--apply",
    ]


def test_livectl_acls_apply_creates_exactly_the_set(kafka: SecureKafka, capsys: pytest.CaptureFixture[str]) -> None:
    superuser = kafka.command_config("superuser", kafka.sasl_properties(SUPER_ADMIN))
    assert admin_main(_acls_argv(kafka, str(superuser))) == 0  # the fixture applied them already: no change
    assert "ACL bindings" in capsys.readouterr().out
    deployment = Deployment(
        (f"User:{CONTROLLER}",),
        (f"User:{BROKER}",),
        (f"User:{ADMIN}",),
        transactional_id("livectl"),
        spark_group_prefix=SPARK_GROUP_PREFIX,
    )
    wanted = {
        (b.principal, b.operation, b.resource_pattern.resource_type, b.resource_pattern.resource_name)
        for b in bindings(acl_set(deployment))
    }
    admin = KafkaAdminClient(**kafka.admin_kwargs(), bootstrap_servers=kafka.sasl_bootstrap)
    try:
        anything = ResourcePatternFilter(KafkaResourceType.ANY, None, ACLResourcePatternType.ANY)
        found, error = admin.describe_acls(ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY, anything))
    finally:
        admin.close()
    assert error is NoError
    assert all(a.permission_type == ACLPermissionType.ALLOW and a.host == "*" for a in found)
    have = {
        (a.principal, a.operation, a.resource_pattern.resource_type, a.resource_pattern.resource_name) for a in found
    }
    assert have == wanted

    # alice is an admin of livectl, not of Kafka: she may not change the cluster's ACLs
    alice = kafka.command_config("alice-acls", kafka.sasl_properties(ADMIN))
    assert admin_main(_acls_argv(kafka, str(alice))) == 1
    assert "refused by Kafka: ClusterAuthorizationFailedError" in capsys.readouterr().err


@pytest.mark.parametrize("protocol", ["SASL_SSL", "SSL"])
def test_the_admin_cli_publishes_over_a_real_handshake(
    kafka: SecureKafka, zk_connect: str, protocol: str, capsys: pytest.CaptureFixture[str]
) -> None:
    alice = _props(kafka, protocol, ADMIN)
    if protocol == "SSL":
        assert "ssl.key.password" in alice  # her key is encrypted
    config = kafka.command_config(f"alice-{protocol}", alice)
    ctl = kafka.sasl_properties(CONTROLLER)
    commands = consumer_at_end(kafka.sasl_bootstrap, T.admin, kafka.client_kwargs(ctl))
    topic = f"orders-{protocol.lower().replace('_', '-')}-{next(_BATCHES)}"
    try:
        # no controller runs here: fire and forget, the command is what is looked at
        argv = ["topics", "--create", "--topic", topic, "--partitions", "2", "--replication-factor", "1", "--no-wait"]
        argv += ["--zookeeper", zk_connect, "--bootstrap-server", kafka.bootstrap_for(alice)]
        assert admin_main([*argv, "--command-config", str(config)]) == 0, capsys.readouterr().err
        got = _read(commands, lambda rs: any(topic.encode() in r.value for r in rs))
    finally:
        commands.close()
    events = [event_from_json(r.value) for r in got if topic.encode() in r.value]
    assert len(events) == 1 and isinstance(events[0], CreateTopic)
    assert (events[0].topic, events[0].partitions) == (topic, 2)


def _refused(kafka: SecureKafka, props: Mapping[str, str], topic: str, value: bytes = b"{}") -> KafkaError:
    with pytest.raises(KafkaError) as e:
        _produce(kafka, props, topic, value)
    return e.value


FORGED_EVENT = json.dumps({"type": "broker_failure", "broker_id": 1}).encode()


@pytest.mark.parametrize("protocol", ["SASL_SSL", "SSL"])
def test_forgeries_are_refused_by_the_broker(kafka: SecureKafka, protocol: str) -> None:
    # a broker event forged by an admin or an outsider
    for who in (ADMIN, OUTSIDER):
        assert isinstance(
            _refused(kafka, _props(kafka, protocol, who), T.broker_events, FORGED_EVENT), TopicAuthorizationFailedError
        )
    # a request, an admin result or a rejection forged by a broker
    broker = _props(kafka, protocol, BROKER)
    for topic in (T.requests, T.admin_results, T.rejected):
        assert isinstance(_refused(kafka, broker, topic), TopicAuthorizationFailedError), topic
    # an admin command from anyone but an admin (the controller too)
    for who in (OUTSIDER, BROKER, CONTROLLER):
        assert isinstance(_refused(kafka, _props(kafka, protocol, who), T.admin), TopicAuthorizationFailedError), who
    # an outsider reads nothing of livectl's: not even where a partition ends, and to livectl's tools the
    # topic is not there
    mallory = _props(kafka, protocol, OUTSIDER)
    consumer = KafkaConsumer(**kafka.client_kwargs(mallory), bootstrap_servers=kafka.bootstrap_for(mallory))
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            consumer.end_offsets([TopicPartition(T.requests, 0)])
    finally:
        consumer.close()
    with pytest.raises(SinkUnavailableError, match="not allowed to describe it"):
        consumer_at_end(kafka.bootstrap_for(mallory), T.requests, kafka.client_kwargs(mallory))


@pytest.mark.parametrize("who", [BROKER, OUTSIDER])
def test_no_one_else_takes_the_controllers_transactional_id(kafka: SecureKafka, who: str) -> None:
    producer = _producer(kafka, kafka.sasl_properties(who), transactional_id=transactional_id("livectl"))
    try:
        with pytest.raises(TransactionalIdAuthorizationFailedError):
            producer.init_transactions()
    finally:
        producer.close(timeout=5)


def test_an_outsiders_admin_command_fails_with_the_reason(
    kafka: SecureKafka, zk_connect: str, capsys: pytest.CaptureFixture[str]
) -> None:
    mallory = kafka.command_config("mallory", kafka.sasl_properties(OUTSIDER))
    argv = ["topics", "--create", "--topic", "forged", "--partitions", "1", "--replication-factor", "1", "--no-wait"]
    argv += ["--zookeeper", zk_connect, "--bootstrap-server", kafka.sasl_bootstrap, "--command-config", str(mallory)]
    assert admin_main(argv) != 0
    err = capsys.readouterr().err
    assert "livectl topics: error:" in err and "TopicAuthorizationFailed" in err, err


def test_the_controller_is_unaffected(kafka: SecureKafka) -> None:
    """With the ACLs on: the controller's sink writes its transaction, the broker reads its request."""
    ctl, broker = kafka.sasl_properties(CONTROLLER), kafka.ssl_properties(BROKER)
    requests = consumer_at_end(kafka.bootstrap_for(broker), T.requests, kafka.client_kwargs(broker))
    batch = next(_BATCHES)
    try:
        with RequestSink(
            kafka.sasl_bootstrap,
            Fence(9, 8),
            client_config=kafka.client_kwargs(ctl),
            transactional_id=transactional_id("livectl"),
        ) as sink:
            sink.start().join(30)  # as a controller winning the lease: init (fencing the rest), then the tail
            assert sink.write_requests(batch, [lisr_request(1, "payments", [0])]).written == 1
        got = _read(requests, lambda rs: any(json.loads(r.value)["batchId"] == batch for r in rs))
    finally:
        requests.close()
    assert [(v["batchId"], v["controllerEpoch"]) for v in map(json.loads, (r.value for r in got))][-1] == (batch, 9)


def test_the_printed_commands_run_with_kafkas_own_acl_tool(
    kafka: SecureKafka, capsys: pytest.CaptureFixture[str]
) -> None:
    """``livectl acls`` without ``--apply`` prints ``kafka-acls.sh`` commands: run with Kafka's own tool
    (``kafka.admin.AclCommand``, what ``kafka-acls.sh`` runs) as the bootstrap super user, one of each kind
    (a topic, the transactional id, a prefixed group; a JVM each) creates the bindings ``--apply`` would,
    for principals of their own here."""
    # one file for livectl and for Kafka's Java tools: Java reads the PEM CA only when told its type
    props = {**kafka.sasl_properties(SUPER_ADMIN), "ssl.truststore.type": "PEM"}
    superuser = kafka.command_config("superuser-tool", props)
    argv = ["acls", "--controller-principal", "User:ctl-tool", "--broker-principal", "User:b-tool"]
    argv += ["--admin-principal", "User:a-tool", "--query-name", "tool", "--spark-group-prefix"]
    argv += ["--bootstrap-server", kafka.sasl_bootstrap, "--command-config", str(superuser)]
    assert admin_main(argv) == 0
    commands = [shlex.split(line) for line in capsys.readouterr().out.splitlines() if not line.startswith("#")]
    rules = acl_set(
        Deployment(
            ("User:ctl-tool",),
            ("User:b-tool",),
            ("User:a-tool",),
            transactional_id("tool"),
            spark_group_prefix="spark-kafka-source",
        )
    )
    assert len(commands) == len(rules)  # one command per rule, in the set's order
    picked: dict[ResourceType, tuple[Acl, list[str]]] = {}
    for rule, command in zip(rules, commands, strict=True):
        picked.setdefault(rule.resource.type, (rule, command))
    assert len(picked) == 3
    tool = [find_java(), "-cp", kafka_classpath(), "kafka.admin.AclCommand"]
    for _, command in picked.values():
        assert command[0] == "kafka-acls.sh"
        done = subprocess.run([*tool, *command[1:]], capture_output=True, text=True, timeout=180, check=False)
        assert done.returncode == 0, done.stdout + done.stderr

    def key(b: Any) -> tuple[Any, ...]:
        p = b.resource_pattern
        return (b.principal, b.operation, p.resource_type, p.resource_name, p.pattern_type)

    wanted = {key(b) for b in bindings([rule for rule, _ in picked.values()])}
    admin = KafkaAdminClient(**kafka.admin_kwargs(), bootstrap_servers=kafka.sasl_bootstrap)
    try:
        anything = ResourcePatternFilter(KafkaResourceType.ANY, None, ACLResourcePatternType.ANY)
        found, _ = admin.describe_acls(ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY, anything))
    finally:
        admin.close()
    assert {key(a) for a in found if a.principal in ("User:ctl-tool", "User:b-tool", "User:a-tool")} == wanted
