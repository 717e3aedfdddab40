"""The controller channel over SASL, judged by a real Apache Kafka 3.9.2 broker (ZooKeeper mode) whose control
plane is SASL_SSL and whose inter-broker listener is SASL_PLAINTEXT, both SCRAM-SHA-512 (PLAIN enabled too).

The SCRAM users are made in the broker's ZooKeeper chroot before it starts, by Kafka's own ``kafka-configs
--zookeeper`` (the resolved jars): ``broker`` (the broker's login, to itself and to its controller) and
``livectl`` (the channel's). The broker's JAAS logins are per listener and mechanism, as a Kafka operator writes
them (``listener.name.<listener>.<mechanism>.sasl.jaas.config``); its PLAIN login lists ``livectl`` too. The
channel gets a broker's own ``sasl.*`` and ``ssl.*`` (:class:`ChannelSasl`, :class:`ChannelTls`) and
``CONTROL_PLANE:SASL_SSL,INTERNAL:SASL_PLAINTEXT``; its endpoint enables SCRAM-SHA-512 (checked against the
users in ZooKeeper, as the broker checks them) and PLAIN (``user_operator``). The test plays livectl's
controller on the bus (:mod:`channel_support`). Then:

* the broker refuses the channel's SCRAM login with a wrong password (``SASL_AUTHENTICATION_FAILED``) and takes
  its PLAIN login; the endpoint refuses a wrong password, a mechanism it does not enable and a request before
  authenticating, and takes PLAIN and SCRAM logins;
* the channel's LeaderAndIsr and UpdateMetadata reach the broker over SASL_SSL (SCRAM) and are answered;
* the controller is advertised on the SASL listeners: the broker's AlterPartition (an ISR shrink) reaches the
  endpoint over SASL_SSL and, on SIGTERM, its ControlledShutdown over SASL_PLAINTEXT, each after the broker
  authenticated with SCRAM, and both are answered;
* with Kafka's ``AclAuthorizer`` on both, the endpoint answers Metadata on a SASL listener (where it forwards
  nothing) as the broker answers it, from the topics the test wrote into ZooKeeper and delivered to the broker
  in an UpdateMetadata: every version, all topics and named ones, an unknown topic, a topic a principal may not
  describe.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from channel_support import CONTROLLER, EPOCH, EndpointSetup, channel_beside_a_broker, topic_id
from kafka_pki import Pki, make_pki
from kafka_sasl import PLAIN, PLAIN_LOGIN, SCRAM, SCRAM_LOGIN, jaas, make_scram_users, zk_broker_sasl_properties
from kio.schema.controlled_shutdown.v3.request import ControlledShutdownRequest
from kio.schema.controlled_shutdown.v3.response import ControlledShutdownResponse as KafkaControlledShutdownResponse
from kio.schema.types import BrokerId
from kio.static.primitive import i64
from waiting import wait_until

from channel.acls import ACL_AUTHORIZER, AclAuthorizer
from channel.answers import METADATA, METADATA_VERSIONS, node_versions
from channel.cluster import Cluster
from channel.endpoint import SASL_VERSIONS, ControllerEndpoint
from channel.sasl import ChannelSasl, ScramCredential, client_mechanism
from channel.tls import ChannelTls
from channel.wire import BrokerConnection, SaslRefusedError, WireError
from core.kafka import zkdata
from core.kafka.requests import MetadataPartitionState, RequestApi, UpdateMetadataRequest
from core.request_states import metadata_broker
from livectl import local
from livectl.kafka_zk_brokers import ZkBrokerSettings

pytestmark = pytest.mark.integration

CHANNEL_CN = "livectl-controller"
PASSWORDS = {"broker": "broker-secret", "livectl": "livectl-secret"}
#: PLAIN passwords: the broker's list (the channel's login) and the endpoint's (a client's)
BROKER_PLAIN = {"livectl": "livectl-plain"}
ENDPOINT_PLAIN = {"operator": "operator-plain"}
PROTOCOLS = {"CONTROL_PLANE": "SASL_SSL", "INTERNAL": "SASL_PLAINTEXT"}
INCORRECT_PASSWORD = "wrong"
SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM = 58, 33


def _broker_properties(pki: Pki) -> dict[str, str]:
    return {
        **zk_broker_sasl_properties(PROTOCOLS, "broker", PASSWORDS["broker"], pki=pki, plain_users=BROKER_PLAIN),
        # a follower that never fetches drops out of the ISR after 2 s (Kafka's default: 30 s)
        "replica.lag.time.max.ms": "2000",
    }


def _channel_sasl(scram_password: str = PASSWORDS["livectl"], mechanism: str = SCRAM) -> ChannelSasl:
    """The channel's SASL, as a broker's properties: SCRAM (or ``mechanism``) to the brokers as ``livectl``, the
    endpoint enabling SCRAM and PLAIN (PLAIN's users in the unprefixed login)."""
    password = scram_password if mechanism == SCRAM else BROKER_PLAIN["livectl"]
    return ChannelSasl.from_properties(
        {
            "sasl.mechanism.inter.broker.protocol": mechanism,
            "sasl.enabled.mechanisms": f"{SCRAM},{PLAIN}",
            f"listener.name.control_plane.{mechanism.lower()}.sasl.jaas.config": jaas(
                SCRAM_LOGIN if mechanism == SCRAM else PLAIN_LOGIN, username="livectl", password=password
            ),
            "sasl.jaas.config": jaas(PLAIN_LOGIN, **{f"user_{u}": p for u, p in ENDPOINT_PLAIN.items()}),
        }
    )


@dataclass
class Setup(EndpointSetup):
    """The channel's setup with the certificates the test made."""

    pki: Pki = field(kw_only=True)

    def endpoint_client(self, name: str, mechanism: str, user: str, password: str) -> BrokerConnection:
        """A client of the endpoint of ``name``, authenticated (:class:`SaslRefusedError` when refused)."""
        e = self.channel.endpoints[name]
        tls = ChannelTls(cafile=str(self.pki.ca)).client_context() if e.security_protocol == "SASL_SSL" else None
        conn = BrokerConnection("127.0.0.1", e.port, timeout_s=10, tls=tls)
        try:
            config = {"sasl_mechanism": mechanism, "sasl_plain_username": user, "sasl_plain_password": password}
            conn.authenticate(client_mechanism(config), mechanism)
        except WireError:
            conn.close()
            raise
        return conn


@pytest.fixture
def setup(zookeeper: local.Service, kafka_broker: local.Service, tmp_path: Path) -> Iterator[Setup]:
    pki = make_pki(tmp_path / "pki", [], servers=[CHANNEL_CN])
    cert = pki.server(CHANNEL_CN)
    tls = ChannelTls(cafile=str(pki.ca), certfile=str(cert.cert), keyfile=str(cert.key))
    with channel_beside_a_broker(
        zookeeper.connect,
        kafka_broker.bootstrap,
        tmp_path / "broker",
        "sasl",
        ZkBrokerSettings(properties=_broker_properties(pki)),
        prepare=lambda connect: make_scram_users(connect, PASSWORDS),
        listener="CONTROL_PLANE",
        controller_listeners=tuple(PROTOCOLS),
        tls=tls,
        sasl=_channel_sasl(),
        listener_protocols=PROTOCOLS,
    ) as rig:
        yield Setup.beside(rig, kafka_broker.bootstrap, pki=pki)


def test_the_channel_speaks_sasl_both_ways_with_a_sasl_control_plane(setup: Setup) -> None:
    s = setup
    registration = zkdata.decode_broker_registration(1, s.zk.get("/brokers/ids/1")[0], s.epoch)
    assert {e.listener: e.security_protocol for e in registration.endpoints} == {"PLAINTEXT": "PLAINTEXT", **PROTOCOLS}
    assert {n: e.security_protocol for n, e in s.channel.endpoints.items()} == PROTOCOLS
    host, port = s.broker("CONTROL_PLANE")
    tls = ChannelTls(cafile=str(s.pki.ca))

    # the broker judges the channel's logins: a wrong SCRAM password refused, PLAIN from its JAAS list taken
    wrong = Cluster(s.zk, "CONTROL_PLANE", "", 10, tls, sasl=_channel_sasl(INCORRECT_PASSWORD))
    with pytest.raises(SaslRefusedError) as refused:
        wrong.open(host, port, "SASL_SSL", 10, listener="CONTROL_PLANE")
    assert refused.value.error_code == SASL_AUTHENTICATION_FAILED
    plain = Cluster(s.zk, "CONTROL_PLANE", "", 10, tls, sasl=_channel_sasl(mechanism=PLAIN))
    with plain.open(host, port, "SASL_SSL", 10, listener="CONTROL_PLANE") as conn:
        assert conn.sasl == PLAIN and conn.negotiate()[4][1] >= 7  # LeaderAndIsr, after authenticating

    # the endpoint judges its clients: PLAIN and SCRAM (the user Kafka's kafka-configs made) taken, the rest refused
    with s.endpoint_client("CONTROL_PLANE", PLAIN, "operator", ENDPOINT_PLAIN["operator"]) as conn:
        assert conn.negotiate() == dict(sorted((node_versions({}) | SASL_VERSIONS).items()))
    with s.endpoint_client("INTERNAL", SCRAM, "livectl", PASSWORDS["livectl"]) as conn:
        assert conn.sasl == SCRAM
    for name, mechanism, user, password, code in (
        ("CONTROL_PLANE", PLAIN, "operator", INCORRECT_PASSWORD, SASL_AUTHENTICATION_FAILED),
        ("INTERNAL", SCRAM, "livectl", INCORRECT_PASSWORD, SASL_AUTHENTICATION_FAILED),
        ("INTERNAL", SCRAM, "nobody", INCORRECT_PASSWORD, SASL_AUTHENTICATION_FAILED),
        ("INTERNAL", "SCRAM-SHA-256", "livectl", PASSWORDS["livectl"], UNSUPPORTED_SASL_MECHANISM),
    ):
        with pytest.raises(SaslRefusedError) as refused:
            s.endpoint_client(name, mechanism, user, password)
        assert refused.value.error_code == code, (name, mechanism, user)
    # a request before authenticating closes the connection unanswered
    with BrokerConnection("127.0.0.1", s.channel.endpoints["INTERNAL"].port, timeout_s=10) as conn:
        conn.negotiate()
        with pytest.raises(WireError, match="closed the connection"):
            conn.send(
                ControlledShutdownRequest(broker_id=BrokerId(1), broker_epoch=i64(s.epoch)),
                KafkaControlledShutdownResponse,
            )
    assert sum(e.authentication_failures for e in s.channel.endpoints.values()) == 5
    authenticated = {n: e.authentications for n, e in s.channel.endpoints.items()}
    assert authenticated == {"CONTROL_PLANE": 1, "INTERNAL": 1}

    # LeaderAndIsr and UpdateMetadata over SASL_SSL (SCRAM): broker 1 leads "solo" alone and "pair" with broker 2
    # (never started) in its ISR
    _, pair = s.lead_solo_and_pair(metadata_broker(registration))

    # AlterPartition over SASL_SSL: broker 2 never fetches, so broker 1 asks to shrink the ISR of "pair"
    asked = s.isr_proposal()
    assert (asked.broker_id, asked.topic, asked.partition, asked.new_isr) == (1, pair[0], 0, (1,))
    assert s.channel.endpoints["CONTROL_PLANE"].authentications == 2  # the broker's own SCRAM login
    s.answer_isr_shrink(asked, pair, answered=1)

    # ControlledShutdown over SASL_PLAINTEXT on INTERNAL (SIGTERM): answered, the first attempt succeeds
    s.controlled_shutdown(answered=2)
    assert s.channel.endpoints["INTERNAL"].authentications == 2


def test_an_endpoint_takes_scram_sha_256_and_plain_and_refuses_the_rest(tmp_path: Path) -> None:
    """The endpoint alone on loopback (no broker): a SCRAM-SHA-256 credential as Kafka stores it, checked against
    kafka-python's SCRAM client; a client authenticated with PLAIN gets its request to the node."""
    from channel.sasl import parse_scram_credential, scram_credential_of

    stored = {"alice": parse_scram_credential(scram_credential_of("SCRAM-SHA-256", "alice-secret", b"0123456789"))}

    def scram(user: str, mechanism: str) -> ScramCredential | None:
        return stored.get(user) if mechanism == "SCRAM-SHA-256" else None

    sasl = ChannelSasl.from_properties(
        {
            "listener.name.internal.sasl.enabled.mechanisms": "SCRAM-SHA-256,PLAIN",
            "listener.name.internal.plain.sasl.jaas.config": jaas(PLAIN_LOGIN, user_bob="bob-secret"),
        }
    )
    asked: list[tuple[int, str]] = []
    endpoint = ControllerEndpoint(
        "127.0.0.1",
        0,
        lambda conn, api_key, version, correlation_id, body: asked.append((api_key, conn.principal)),
        lambda conn: None,
        listener="INTERNAL",
        sasl=sasl.server("INTERNAL", scram),
    )
    endpoint.start()

    def login(mechanism: str, user: str, password: str) -> BrokerConnection:
        conn = BrokerConnection("127.0.0.1", endpoint.port, timeout_s=5)
        config = {"sasl_mechanism": mechanism, "sasl_plain_username": user, "sasl_plain_password": password}
        try:
            conn.authenticate(client_mechanism(config), mechanism)
        except WireError:
            conn.close()
            raise
        return conn

    try:
        assert endpoint.security_protocol == "SASL_PLAINTEXT"
        login("SCRAM-SHA-256", "alice", "alice-secret").close()
        with pytest.raises(SaslRefusedError):
            login("SCRAM-SHA-256", "alice", "bob-secret")
        with pytest.raises(SaslRefusedError):
            login("SCRAM-SHA-512", "alice", "alice-secret")
        with pytest.raises(SaslRefusedError):
            login("PLAIN", "alice", "alice-secret")
        with login("PLAIN", "bob", "bob-secret") as conn:
            conn.set_timeout(1)
            with pytest.raises(WireError):  # never answered here: no controller
                conn.send(
                    ControlledShutdownRequest(broker_id=BrokerId(1), broker_epoch=i64(7)),
                    KafkaControlledShutdownResponse,
                )
        wait_until("the request handed to the node", lambda: asked == [(7, "User:bob")])
        assert (endpoint.authentications, endpoint.authentication_failures) == (2, 3)
    finally:
        endpoint.close()


# ---------------------------------------------------------------------------- Metadata where nothing is forwarded

#: a third SCRAM user, allowed to describe SEEN only (an ACL written before the broker starts)
READER, READER_PASSWORD = "reader", "reader-secret"
SEEN, HIDDEN = "meta-seen", "meta-hidden"
SUPER_USERS = ("User:broker", "User:livectl")


def _prepare_acls(connect: str) -> None:
    """SCRAM users (the broker, the channel, the reader) and the reader's ACL: ``Describe`` on topic SEEN."""
    from kazoo.client import KazooClient

    make_scram_users(connect, {**PASSWORDS, READER: READER_PASSWORD})
    zk = KazooClient(connect)
    zk.start(timeout=15)
    try:
        acl = {"principal": f"User:{READER}", "permissionType": "Allow", "operation": "Describe", "host": "*"}
        zk.create(f"/kafka-acl/Topic/{SEEN}", json.dumps({"version": 1, "acls": [acl]}).encode(), makepath=True)
    finally:
        zk.stop()
        zk.close()


@pytest.fixture
def acl_setup(zookeeper: local.Service, kafka_broker: local.Service, tmp_path: Path) -> Iterator[Setup]:
    pki = make_pki(tmp_path / "pki", [], servers=[CHANNEL_CN])
    cert = pki.server(CHANNEL_CN)
    tls = ChannelTls(cafile=str(pki.ca), certfile=str(cert.cert), keyfile=str(cert.key))
    properties = {
        **_broker_properties(pki),
        "authorizer.class.name": ACL_AUTHORIZER,
        "super.users": ";".join(SUPER_USERS),
    }
    with channel_beside_a_broker(
        zookeeper.connect,
        kafka_broker.bootstrap,
        tmp_path / "broker",
        "saslmeta",
        ZkBrokerSettings(properties=properties),
        prepare=_prepare_acls,
        listener="CONTROL_PLANE",
        controller_listeners=tuple(PROTOCOLS),
        tls=tls,
        sasl=_channel_sasl(),
        listener_protocols=PROTOCOLS,
        authorizer=AclAuthorizer(frozenset(SUPER_USERS)),
    ) as rig:
        yield Setup.beside(rig, kafka_broker.bootstrap, pki=pki)


def _write_topics(s: Setup) -> None:
    """SEEN (partition 0 on broker 1; 1 on brokers 1 and 2, 2 never registered) and HIDDEN (led by broker 2) in
    ZooKeeper as Kafka's controller writes them, and in an UpdateMetadata to the broker as it sends it (the
    replicas not registered offline); returns once the channel delivered it."""
    # topic -> partition -> (replicas, leader, leader epoch, ISR)
    layout: dict[str, dict[int, tuple[tuple[int, ...], int, int, tuple[int, ...]]]] = {
        SEEN: {0: ((1,), 1, 3, (1,)), 1: ((1, 2), 1, 4, (1, 2))},
        HIDDEN: {0: ((2, 1), 2, 2, (2,))},
    }
    states = []
    for topic, partitions in layout.items():
        tid = topic_id()
        znode: dict[str, Any] = {
            "version": 3,
            "partitions": {str(p): list(r) for p, (r, _, _, _) in partitions.items()},
            "adding_replicas": {},
            "removing_replicas": {},
            "topic_id": tid,
        }
        s.zk.create(zkdata.topic_path(topic), json.dumps(znode).encode(), makepath=True)
        for p, (replicas, leader, epoch, isr) in partitions.items():
            state = {"version": 1, "leader": leader, "leader_epoch": epoch, "controller_epoch": EPOCH, "isr": list(isr)}
            s.zk.create(zkdata.partition_state_path(topic, p), json.dumps(state).encode(), makepath=True)
            offline = tuple(r for r in replicas if r != 1)
            states.append(MetadataPartitionState(topic, p, EPOCH, leader, epoch, isr, 0, replicas, offline, tid))
    registration = zkdata.decode_broker_registration(1, s.zk.get("/brokers/ids/1")[0], s.epoch)
    delivered = s.channel.delivered
    s.send(
        RequestApi.UPDATE_METADATA,
        UpdateMetadataRequest(CONTROLLER, EPOCH, s.epoch, tuple(states), (metadata_broker(registration),)),
    )
    wait_until("the UpdateMetadata delivered", lambda: s.channel.delivered == delivered + 1)


def _metadata(version: int, names: list[str] | None, **extra: bool) -> tuple[Any, Any]:
    """A MetadataRequest at ``version`` (``names``; ``None``: all topics) and its response class."""
    m = importlib.import_module(f"kio.schema.metadata.v{version}.request")
    fields = set(m.MetadataRequest.__dataclass_fields__)
    topic_fields = set(m.MetadataRequestTopic.__dataclass_fields__)
    topics = None
    if names is not None:
        topics = tuple(
            m.MetadataRequestTopic(**{k: v for k, v in (("name", n), ("topic_id", None)) if k in topic_fields})
            for n in names
        )
    values: dict[str, Any] = {
        "topics": topics,
        "allow_auto_topic_creation": True,
        "include_topic_authorized_operations": False,
        "include_cluster_authorized_operations": False,
        **extra,
    }
    body = m.MetadataRequest(**{k: v for k, v in values.items() if k in fields})
    return body, importlib.import_module(f"kio.schema.metadata.v{version}.response").MetadataResponse


def _normal(r: Any) -> dict[str, Any]:
    """A MetadataResponse without its order (Kafka's is its hash maps')."""

    def get(o: Any, name: str) -> Any:
        return getattr(o, name, None)

    topics = {}
    for t in r.topics:
        parts = {
            int(p.partition_index): (
                int(p.error_code),
                int(p.leader_id),
                get(p, "leader_epoch"),
                tuple(p.replica_nodes),
                tuple(p.isr_nodes),
                tuple(get(p, "offline_replicas") or ()),
            )
            for p in t.partitions
        }
        key = t.name if t.name is not None else str(t.topic_id)
        topics[key] = (
            int(t.error_code),
            get(t, "topic_id"),
            t.is_internal if hasattr(t, "is_internal") else None,
            get(t, "topic_authorized_operations"),
            parts,
        )
    return {
        "brokers": sorted((int(b.node_id), b.host, int(b.port), get(b, "rack")) for b in r.brokers),
        "cluster_id": get(r, "cluster_id"),
        "controller_id": get(r, "controller_id"),
        "cluster_authorized_operations": get(r, "cluster_authorized_operations"),
        "topics": topics,
    }


def test_the_endpoint_answers_metadata_on_a_sasl_listener_as_the_broker_does(acl_setup: Setup) -> None:
    s = acl_setup
    _write_topics(s)
    host, port = s.broker("INTERNAL")

    def broker_client(user: str, password: str) -> BrokerConnection:
        conn = BrokerConnection(host, port, timeout_s=10)
        config = {"sasl_mechanism": SCRAM, "sasl_plain_username": user, "sasl_plain_password": password}
        conn.authenticate(client_mechanism(config), SCRAM)
        return conn

    for user, password in (("livectl", PASSWORDS["livectl"]), (READER, READER_PASSWORD)):
        with broker_client(user, password) as kafka, s.endpoint_client("INTERNAL", SCRAM, user, password) as ours:
            assert kafka.negotiate()[METADATA] == ours.negotiate()[METADATA] == (0, 12)
            for version in METADATA_VERSIONS:
                asks: list[tuple[list[str] | None, dict[str, bool]]] = [
                    ([] if version == 0 else None, {}),
                    ([SEEN, HIDDEN, "no-such-topic"], {}),
                ]
                if version >= 8:
                    asks.append((None, {"include_topic_authorized_operations": True}))
                    asks.append(
                        (
                            [SEEN, HIDDEN],
                            {
                                "include_topic_authorized_operations": True,
                                "include_cluster_authorized_operations": True,
                            },
                        )
                    )
                for names, extra in asks:
                    body, response = _metadata(version, names, **extra)
                    theirs, mine = _normal(kafka.send(body, response)), _normal(ours.send(body, response))
                    assert mine == theirs, (user, version, names, extra)
                    assert CONTROLLER in {b[0] for b in mine["brokers"]}
                    if version >= 1:
                        assert mine["controller_id"] == CONTROLLER
            # what was compared: the reader sees SEEN only, HIDDEN is refused when named; nothing was created
            body, response = _metadata(12, [SEEN, HIDDEN, "no-such-topic"])
            answer = _normal(ours.send(body, response))["topics"]
            if user == READER:
                assert {t: e[0] for t, e in answer.items()} == {SEEN: 0, HIDDEN: 29, "no-such-topic": 29}
            else:
                assert {t: e[0] for t, e in answer.items()} == {SEEN: 0, HIDDEN: 0, "no-such-topic": 3}
                assert answer[HIDDEN][4][0][:2] == (5, -1)  # led by broker 2, not registered
                assert answer[SEEN][4][1][5] == (2,)
    assert not s.zk.exists(zkdata.topic_path("no-such-topic"))
