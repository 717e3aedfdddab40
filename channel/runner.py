"""The controller channel: ``livectl.requests`` delivered to real Kafka brokers as Kafka's controller RPCs.

One process beside the controller. Its consumer (group ``livectl-channel`` by default, ``read_committed``:
the controller writes each batch as one transaction) reads every partition of the requests topic; each
message is sent, in the order of its partition (a broker's messages are all in one partition, in the
order the controller decided them), to each broker it names:

* the broker's address is its registration's (``/brokers/ids/<id>`` in the controlled cluster's
  ZooKeeper; the endpoint of the listener ``listener``, else the first);
* a message for a broker not registered, or registered again since (its broker epoch, the registration's
  czxid, is newer than the one the request carries), is dropped: the controller sends the new incarnation
  its own requests, as Kafka's controller drops a dead broker's queue;
* on a new connection the channel asks ApiVersions and sends each request at the highest version both
  speak (and no newer than what Kafka 3.9's controller sends for ``inter_broker_protocol`` when given);
* an unreachable broker that is still registered is retried every ``retry_s`` until it answers or its
  registration goes;
* the answer becomes the events the simulated brokers publish for it (:mod:`channel.convert`) on the
  broker-events topic, keyed by broker id;
* the brokers' registrations and topics are read, and the connections to the brokers kept, by
  :mod:`channel.cluster`.

The brokers' own requests to their controller (:mod:`channel.endpoint`, when ``controller_listeners`` is
set): the channel listens as the controller's endpoint and each UpdateMetadata it delivers also lists the
controller (the request's ``controllerId``) as a live broker whose only endpoints are the channel's, on
``controller_listeners`` (the brokers' ``control.plane.listener.name`` and ``inter.broker.listener.name``:
a 3.9 broker looks its controller up there) and ``client_listeners`` (where clients send the controller's
node their Admin calls), one port per name, each PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
(``listener_protocols``, Kafka's ``listener.security.protocol.map``; TLS as a broker's ``ssl.*`` say,
:mod:`channel.tls`; SASL as its ``sasl.*``, :mod:`channel.sasl`); a name the brokers secure otherwise than the
endpoint gets no endpoint. The brokers' own requests are taken from the principals ``cluster_action`` allows
(Kafka's ``super.users``, :mod:`channel.authz`; anyone without it), or with ``authorizer`` those it grants
``ClusterAction`` (:mod:`channel.acls`). The channel's connections to the brokers
speak TLS to an endpoint they registered as SSL or SASL_SSL, and authenticate with SASL to one registered
SASL_*. Then:

* the requests the channel answers itself — ControlledShutdown and AlterPartition (as events for the
  controller, answered from its answers on the requests topic), AllocateProducerIds, ListPartitionReassignments,
  ListGroups, ListTransactions, DescribeLogDirs, and the configs of the node named by the controller's id —
  are :mod:`channel.node`'s;
* anything else a client sends is forwarded to a registered broker on the same listener (:mod:`channel.forward`).

Kafka's Admin client sends the controller CreateTopics, DeleteTopics, CreatePartitions, ElectLeaders and
AlterPartitionReassignments: each becomes livectl's admin commands on the admin topic and is answered from
livectl's admin results (:mod:`channel.admin_apis`, :mod:`channel.admin_link`).

One channel per group: the consumer is the group's static member ``group`` (Kafka's ``group.instance.id``,
KIP-345), so a second channel started on the group takes the first one's place at once, keeping every
partition, and the first is fenced: its next commit is refused and it stops with one line and exit status 1
(at most the message it was delivering is sent twice, which the brokers tolerate, below).

Once per message: the consumer's offset of a message is committed only after every addressee answered and
the events were acknowledged by Kafka (``acks=all``). A channel stopped between a broker's answer and the
commit sends that one message again when it restarts; Kafka's broker answers a repeated LeaderAndIsr of
the same leader epoch with ``STALE_CONTROLLER_EPOCH`` for its partitions and changes nothing, and a repeated
UpdateMetadata or StopReplica is idempotent (``docs/real-brokers.md``).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata
from kafka import TopicPartition as KafkaTopicPartition
from kafka.errors import FencedInstanceIdError
from kazoo.client import KazooClient

from channel.acls import AclAuthorizer
from channel.admin_apis import CreateDefaults
from channel.admin_link import ADMIN_RESULTS_TOPIC, ADMIN_TOPIC, AdminLink
from channel.answers import DESCRIBE_LOG_DIRS
from channel.authz import ClusterAction
from channel.cluster import Cluster
from channel.convert import (
    API_KEYS,
    UnsupportedVersionError,
    advertise_controller,
    to_events,
    to_kafka,
    unadvertised,
)
from channel.endpoint import ControllerEndpoint
from channel.forward import Forwarder
from channel.log_dirs import OUR_VERSIONS as LOG_DIRS_VERSIONS
from channel.log_dirs import describe_log_dirs, to_report
from channel.node import ControllerNode
from channel.sasl import ChannelSasl
from channel.tls import OVER_TLS, ChannelTls, protocol_of
from channel.wire import BrokerConnection, WireError
from core.codec.events import event_to_json
from core.errors import FormatError
from core.events import Event
from core.kafka import zkdata
from core.kafka.envelope import BROKER_EVENTS_TOPIC, REQUESTS_TOPIC, Envelope, parse_request
from core.kafka.log_dirs import LOG_DIRS_TOPIC, chunked
from core.kafka.requests import (
    SECURITY_PROTOCOL_IDS,
    AlterPartitionResponse,
    ControlledShutdownResponse,
    LeaderAndIsrRequest,
    MetadataEndpoint,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from core.model import Broker, TopicPartition
from core.request_states import metadata_broker
from sinks.requests import ensure_topics

__all__ = ["DEFAULT_GROUP", "ChannelSettings", "ControllerChannel"]

log = logging.getLogger("livectl.channel")

DEFAULT_GROUP = "livectl-channel"


@dataclass(frozen=True)
class ChannelSettings:
    zookeeper: str
    bootstrap_server: str
    requests_topic: str = REQUESTS_TOPIC
    events_topic: str = BROKER_EVENTS_TOPIC
    group: str = DEFAULT_GROUP
    #: the brokers' listener the channel connects to (their control.plane.listener.name), else their first
    listener: str = "CONTROL_PLANE"
    #: caps the versions at Kafka 3.9's controller's choice for this inter.broker.protocol.version ("" = none)
    inter_broker_protocol: str = ""
    retry_s: float = 1.0
    request_timeout_s: float = 30.0
    kafka: Mapping[str, Any] | None = None
    zk: Mapping[str, Any] | None = None
    #: the brokers' listener names on which UpdateMetadata advertises the channel as the controller's endpoint
    #: (their control.plane.listener.name and inter.broker.listener.name); empty: the channel does not listen
    controller_listeners: tuple[str, ...] = ()
    #: more listener names where the endpoint is advertised, for clients (with ``controller_listeners`` only)
    client_listeners: tuple[str, ...] = ()
    #: where the controller's endpoint listens: the listener names in order (controller's, then clients') on
    #: ``listen_port``, ``listen_port`` + 1, ... (port 0: each one chosen at start)
    listen_host: str = "127.0.0.1"
    listen_port: int = 0
    #: the host UpdateMetadata advertises ("": ``listen_host``)
    advertised_host: str = ""
    #: where each broker's DescribeLogDirs answer for its partitions being reassigned is published (as the
    #: simulated brokers publish theirs: ``reassign --verify`` and the status page read it), and how often
    #: the brokers are asked (0: never)
    log_dirs_topic: str = LOG_DIRS_TOPIC
    log_dirs_interval_s: float = 1.0
    #: where Kafka's admin requests to the controller go as livectl's admin commands, and their answers come from
    admin_topic: str = ADMIN_TOPIC
    admin_results_topic: str = ADMIN_RESULTS_TOPIC
    #: what CreateTopics' -1 stands for (Kafka's num.partitions and default.replication.factor)
    num_partitions: int = 1
    default_replication_factor: int = 1
    #: TLS to the brokers' SSL endpoints and on the endpoint's SSL listeners (Kafka's ``ssl.*``;
    #: ``None``: the system's CAs, no certificate, and no SSL listener)
    tls: ChannelTls | None = None
    #: the endpoint's listener names -> their security protocol, PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (Kafka's
    #: ``listener.security.protocol.map``; a name not in it: :func:`channel.tls.protocol_of`)
    listener_protocols: Mapping[str, str] = field(default_factory=dict)
    #: SASL to the brokers' SASL endpoints and on the endpoint's SASL listeners (Kafka's ``sasl.*``; ``None``: none)
    sasl: ChannelSasl | None = None
    #: who may send the endpoint the brokers' own requests (Kafka's ``super.users``; ``None``: anyone)
    cluster_action: ClusterAction | None = None
    #: who may make the admin calls the endpoint answers itself (Kafka's ``AclAuthorizer`` from the ACLs in the
    #: cluster's ZooKeeper, :mod:`channel.acls`; ``None``: anyone, as Kafka without ``authorizer.class.name``)
    authorizer: AclAuthorizer | None = None


class ControllerChannel:
    """Start with :meth:`start`, run with :meth:`run` until :attr:`stopping` is set, then :meth:`close`."""

    def __init__(self, settings: ChannelSettings) -> None:
        self.settings = settings
        self.stopping = threading.Event()
        self._consumer: KafkaConsumer | None = None
        self._producer: KafkaProducer | None = None
        self._zk: KazooClient | None = None
        #: the brokers and topics in ZooKeeper, and the connections to the brokers, once started
        self._cluster: Cluster | None = None
        #: what the channel answers itself as the controller's node, once started
        self.node: ControllerNode | None = None
        #: messages delivered (per addressee), for the log and tests
        self.delivered = 0
        #: the controller's endpoint by listener name, once started (``controller_listeners`` set)
        self.endpoints: dict[str, ControllerEndpoint] = {}
        self._advertised: tuple[MetadataEndpoint, ...] = ()
        #: listener names left out of UpdateMetadata because the brokers secure them, once logged
        self._unadvertised: set[str] = set()
        #: the broker epoch each broker last got an UpdateMetadata at (see :meth:`_announce`)
        self._announced: dict[int, int] = {}
        #: per broker, the partitions its last LeaderAndIsr named with adding or removing replicas
        self._moving: dict[int, set[TopicPartition]] = {}
        self._log_dirs_due = 0.0
        self._log_dirs_off = settings.log_dirs_interval_s <= 0
        #: DescribeLogDirs answers published, for the log and tests
        self.log_dirs_reports = 0
        #: Kafka's admin requests to the controller, once started (``controller_listeners`` set)
        self.admin: AdminLink | None = None
        #: another channel took this one's place in the group (:meth:`run` returned 1)
        self.fenced = False

    def start(self) -> None:
        s = self.settings
        kafka = dict(s.kafka or {})
        self._zk = KazooClient(hosts=s.zookeeper, **dict(s.zk or {}))
        self._zk.start(timeout=15)
        cluster = self._cluster = Cluster(
            self._zk, s.listener, s.inter_broker_protocol, s.request_timeout_s, s.tls or ChannelTls(), sasl=s.sasl
        )
        node = self.node = ControllerNode(cluster, self._publish)
        node.authorizer = s.authorizer
        self._consumer = KafkaConsumer(
            s.requests_topic,
            **kafka,
            bootstrap_servers=s.bootstrap_server,
            group_id=s.group,
            # one member per group: a second channel replaces this one, which is then fenced (see run)
            group_instance_id=s.group,
            enable_auto_commit=False,
            # first start of the group: from the beginning; what is for a broker gone or registered again
            # since is dropped by the broker-epoch rule
            auto_offset_reset="earliest",
            isolation_level="read_committed",
        )
        self._producer = KafkaProducer(**kafka, bootstrap_servers=s.bootstrap_server, acks="all", linger_ms=5)
        if not self._log_dirs_off:
            try:
                ensure_topics(s.bootstrap_server, [s.log_dirs_topic], client_config=kafka)
            except Exception as e:  # not allowed to create it: no reports (a send to a missing topic would block)
                log.warning("cannot create %s (%s): no DescribeLogDirs reports", s.log_dirs_topic, e)
                self._log_dirs_off = True
        if s.controller_listeners:
            self.admin = node.admin = AdminLink(
                s.bootstrap_server,
                node.reply,
                admin_topic=s.admin_topic,
                results_topic=s.admin_results_topic,
                kafka=kafka,
                defaults=CreateDefaults(s.num_partitions, s.default_replication_factor),
                topic_names=cluster.topic_name,
                no_wait_s=s.request_timeout_s,
                retry_s=s.retry_s,
            )
            self.admin.start()
            self._listen(cluster, node)

    def _listen(self, cluster: Cluster, node: ControllerNode) -> None:
        """One endpoint per listener name, advertised on it with its security protocol (``listener_protocols``:
        PLAINTEXT; SSL with the server context of ``tls``; SASL_* with the SASL server of ``sasl``, forwarding
        nothing); one line says where, and which names the registered brokers secure otherwise (no endpoint is
        advertised there)."""
        s = self.settings
        forwarder = Forwarder(cluster.broker_endpoints, s.request_timeout_s, cluster.open_forward)
        names = tuple(dict.fromkeys((*s.controller_listeners, *s.client_listeners)))
        protocols = {n: protocol_of(n, s.listener_protocols) for n in names}
        over_tls = any(p in OVER_TLS for p in protocols.values())
        server_tls = (s.tls or ChannelTls()).server_context() if over_tls else None
        for i, name in enumerate(names):
            port = s.listen_port + i if s.listen_port else 0
            sasl = protocols[name].startswith("SASL_")
            self.endpoints[name] = ControllerEndpoint(
                s.listen_host,
                port,
                node.on_request,
                node.on_close,
                listener=name,
                forwarder=None if sasl else forwarder,
                owns=node.owns,
                tls=server_tls if protocols[name] in OVER_TLS else None,
                sasl=(s.sasl or ChannelSasl()).server(name, cluster.scram_credential) if sasl else None,
                cluster_action=s.cluster_action,
                may_act=node.may_act if s.authorizer is not None else None,
            )
        host = s.advertised_host or s.listen_host
        self._advertised = tuple(
            MetadataEndpoint(e.port, host, n, SECURITY_PROTOCOL_IDS[e.security_protocol])
            for n, e in self.endpoints.items()
        )
        node.own_endpoints = {e.listener: (e.host, e.port) for e in self._advertised}
        for endpoint in self.endpoints.values():
            endpoint.start()
        mismatched = {n: p for n, p in cluster.secured_listeners(names).items() if p != protocols[n]}
        log.info(
            "controller endpoint listening on %s, advertised as %s; %s",
            ", ".join(f"{s.listen_host}:{e.port} ({n}, {e.security_protocol})" for n, e in self.endpoints.items()),
            ",".join(f"{e.listener}://{e.host}:{e.port}" for e in self._advertised),
            (
                "the brokers secure "
                + ", ".join(f"{n} ({p})" for n, p in mismatched.items())
                + ": not advertised there, the endpoint speaks "
                + ", ".join(f"{n} {protocols[n]}" for n in mismatched)
                + " (clients there cannot reach the controller's node: their Admin calls to it time out; "
                "--listener-security-protocol-map)"
                if mismatched
                else "a listener the brokers secure otherwise than the endpoint is not advertised there"
            ),
        )
        self._unadvertised.update(mismatched)
        secured = any(p != "PLAINTEXT" for p in protocols.values())
        cluster_action = s.cluster_action or ClusterAction()
        log.log(
            logging.WARNING
            if secured and cluster_action.super_users is None and s.authorizer is None
            else logging.INFO,
            "the brokers' requests (ControlledShutdown, AlterPartition, AllocateProducerIds) are taken %s",
            cluster_action.describe()
            if s.authorizer is None
            else "from super.users and the principals the ACLs grant ClusterAction on the Cluster",
        )
        log.log(
            logging.WARNING if secured and s.authorizer is None else logging.INFO,
            "%s",
            s.authorizer.describe()
            if s.authorizer is not None
            else "admin calls answered by the channel are allowed to anyone (no authorizer.class.name, as Kafka)",
        )

    def run(self) -> int:
        """Deliver until :attr:`stopping` is set (0), or until another channel took this one's place in the
        group (1, after one line on the log)."""
        assert self._consumer is not None
        try:
            while not self.stopping.is_set():
                batches = self._consumer.poll(timeout_ms=200, max_records=500)
                for tp, records in batches.items():
                    for rec in records:
                        if self.stopping.is_set():
                            return 0
                        if not self._deliver_message(rec.key, rec.value, int(rec.timestamp)):
                            return 0  # stopped before every addressee answered: not committed, sent again
                        self._commit(tp, rec.offset + 1)
                self._report_log_dirs()
        except FencedInstanceIdError:
            self.fenced = True
            log.error(
                "another channel joined group %s in this one's place: this channel is fenced and stops",
                self.settings.group,
            )
            return 1
        return 0

    def close(self) -> None:
        for endpoint in self.endpoints.values():
            endpoint.close()
        if self.admin is not None:
            self.admin.close()
        if self._cluster is not None:
            self._cluster.close()
        if self._producer is not None:
            self._producer.close(timeout=5)
        if self._consumer is not None:
            self._consumer.close()
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()

    def _started(self) -> tuple[Cluster, ControllerNode]:
        assert self._cluster is not None and self.node is not None, "start() first"
        return self._cluster, self.node

    # ------------------------------------------------------------------ one message

    def _commit(self, tp: KafkaTopicPartition, offset: int) -> None:
        assert self._consumer is not None and self._producer is not None
        # the events first: a committed offset means the answer reached livectl
        self._producer.flush()
        self._consumer.commit({tp: OffsetAndMetadata(offset, "", -1)})

    def _deliver_message(self, key: bytes | None, value: bytes, timestamp_ms: int = -1) -> bool:
        """Deliver one message to each broker it names; ``False`` when stopped before all of them answered. An
        answer to a broker's own request goes to the request waiting for it, if any."""
        try:
            env = parse_request(key, value)
        except FormatError as e:
            log.error("skipping a malformed request (%s)", e)
            return True
        _, node = self._started()
        if isinstance(env.body, ControlledShutdownResponse):
            node.answer_shutdown(env, env.body, _parts(value), timestamp_ms)
            return True
        if isinstance(env.body, AlterPartitionResponse):
            node.answer_alter(env.broker_id, env.body)
            return True
        for broker_id in env.recipients():
            mine = env.for_broker(broker_id)
            if mine is not None and not self._deliver(mine):
                return False
        return True

    def _deliver(self, env: Envelope) -> bool:
        """Send ``env`` to its broker until it answers (``True``; also when the message is dropped) or the
        channel stops (``False``)."""
        body: Any = env.body
        cluster, _ = self._started()
        while not self.stopping.is_set():
            broker = cluster.registration(env.broker_id)
            if broker is None:
                log.info(
                    "broker %s is not registered: dropping %s of batch %s", env.broker_id, env.api.value, env.batch_id
                )
                return True
            if 0 <= body.broker_epoch < broker.epoch:
                log.info(
                    "broker %s registered again (epoch %s > %s): dropping %s of batch %s",
                    env.broker_id,
                    broker.epoch,
                    body.broker_epoch,
                    env.api.value,
                    env.batch_id,
                )
                return True
            cluster.learn_topic_ids(body)
            if isinstance(body, UpdateMetadataRequest):
                body = self._advertise(body)
            try:
                conn = cluster.connection(broker)
                if isinstance(body, LeaderAndIsrRequest) and self._announced.get(broker.id) != broker.epoch:
                    self._announce(conn, broker, body)
                version = cluster.version(conn, API_KEYS[type(body)])
                call = to_kafka(body, version, broker_epoch=body.broker_epoch)
                response: Any = conn.send(call.request, call.response_type)
            except WireError as e:
                cluster.drop_connection(env.broker_id)
                log.warning("broker %s: %s; retrying in %.1f s", env.broker_id, e, self.settings.retry_s)
                self.stopping.wait(self.settings.retry_s)
                continue
            except UnsupportedVersionError as e:
                log.error("broker %s: cannot send %s: %s", env.broker_id, env.api.value, e)
                return True
            self.delivered += 1
            if isinstance(body, UpdateMetadataRequest):
                self._announced[broker.id] = broker.epoch
            self._track_moving(env.broker_id, body)
            events = to_events(env.broker_id, body, response)
            log.info(
                "broker %s: %s v%s of batch %s (epoch %s) answered error %s",
                env.broker_id,
                env.api.value,
                version,
                env.batch_id,
                env.controller_epoch,
                int(response.error_code.value),
            )
            self._publish(env.broker_id, events)
            return True
        return False

    # ------------------------------------------------------------------ the brokers' log sizes

    def _track_moving(self, broker_id: int, body: Any) -> None:
        """Follow which of the broker's partitions are being reassigned, from the requests it was sent."""
        moving = self._moving.setdefault(broker_id, set())
        if isinstance(body, LeaderAndIsrRequest):
            for st in body.partitions:
                if st.adding_replicas or st.removing_replicas:
                    moving.add(st.tp)
                else:
                    moving.discard(st.tp)
        elif isinstance(body, StopReplicaRequest):
            moving.difference_update(p.tp for p in body.partitions)

    def _report_log_dirs(self) -> None:
        """Every ``log_dirs_interval_s``: ask each broker with partitions being reassigned for their log sizes
        (DescribeLogDirs naming them) and publish the answer; a broker that cannot be reached is skipped."""
        s = self.settings
        if self._log_dirs_off or time.monotonic() < self._log_dirs_due:
            return
        self._log_dirs_due = time.monotonic() + s.log_dirs_interval_s
        assert self._producer is not None
        cluster, _ = self._started()
        for broker_id, moving in sorted(self._moving.items()):
            broker = cluster.registration(broker_id) if moving else None
            if broker is None:
                continue
            try:
                conn = cluster.connection(broker)
                version = conn.best_version(DESCRIBE_LOG_DIRS, LOG_DIRS_VERSIONS)
                if version is None:
                    log.debug("broker %s does not speak DescribeLogDirs v1-v4", broker_id)
                    continue
                request, response_type = describe_log_dirs(version, moving)
                response = conn.send(request, response_type)
            except WireError as e:
                cluster.drop_connection(broker_id)
                log.info("broker %s: DescribeLogDirs not answered: %s", broker_id, e)
                continue
            report = to_report(broker_id, int(time.time() * 1000), response)
            for part in chunked(report, 5000):
                self._producer.send(s.log_dirs_topic, key=str(broker_id).encode(), value=part.to_json().encode())
            self.log_dirs_reports += 1

    def _announce(self, conn: BrokerConnection, broker: Broker, lisr: LeaderAndIsrRequest) -> None:
        """Send ``broker`` the registered brokers in an UpdateMetadata with no partitions before its first
        LeaderAndIsr. A ZooKeeper-mode broker becomes a follower only of a leader its metadata cache lists,
        and Kafka's controller sends a starting broker its UpdateMetadata first (``onBrokerStartup``), where a
        batch on the requests topic has it after the LeaderAndIsr."""
        cluster, _ = self._started()
        live = []
        for child in sorted(cluster.zk.get_children(zkdata.BROKER_IDS), key=int):
            registered = cluster.registration(int(child))
            if registered is not None:
                live.append(metadata_broker(registered))
        um = UpdateMetadataRequest(lisr.controller_id, lisr.controller_epoch, broker.epoch, (), tuple(live))
        um = self._advertise(um)
        version = cluster.version(conn, API_KEYS[UpdateMetadataRequest])
        call = to_kafka(um, version, broker_epoch=broker.epoch)
        response: Any = conn.send(call.request, call.response_type)
        log.info(
            "broker %s (epoch %s): UpdateMetadata v%s of the %s registered brokers before its first LeaderAndIsr, "
            "answered error %s",
            broker.id,
            broker.epoch,
            version,
            len(live),
            int(response.error_code.value),
        )
        self._announced[broker.id] = broker.epoch

    def _advertise(self, body: UpdateMetadataRequest) -> UpdateMetadataRequest:
        """``body`` with the controller's endpoint (:func:`advertise_controller`); a listener name left out because
        the brokers secure it is logged the first time."""
        ours = {e.listener: e.security_protocol for e in self._advertised}
        for name, protocol in unadvertised(body, self._advertised).items():
            if name not in self._unadvertised:
                self._unadvertised.add(name)
                log.warning(
                    "the brokers' listener %s has security protocol id %s, the controller's endpoint there %s: it is "
                    "not advertised there; clients on it cannot reach the controller's node "
                    "(--listener-security-protocol-map, --security-config)",
                    name,
                    protocol,
                    ours.get(name),
                )
        advertised = advertise_controller(body, self._advertised)
        if advertised is not body:
            self._started()[1].advertised_id = body.controller_id
        return advertised

    def _publish(self, broker_id: int, events: list[Event]) -> None:
        assert self._producer is not None
        for ev in events:
            self._producer.send(
                self.settings.events_topic, key=str(broker_id).encode(), value=event_to_json(ev).encode()
            )


def _parts(value: bytes) -> tuple[int, int]:
    """``(part, parts)`` of a message (``(1, 1)`` when it is whole)."""
    try:
        o = json.loads(value)
        return int(o.get("part", 1)), int(o.get("parts", 1))
    except (ValueError, TypeError, AttributeError):
        return 1, 1
