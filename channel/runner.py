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
  broker-events topic, keyed by broker id.

The brokers' own requests to their controller (:mod:`channel.endpoint`, when ``controller_listeners`` is
set): the channel listens as the controller's endpoint and each UpdateMetadata it delivers also lists the
controller (the request's ``controllerId``) as a live broker whose only endpoints are the channel's, on
``controller_listeners`` (the brokers' ``control.plane.listener.name`` and ``inter.broker.listener.name``:
a 3.9 broker looks its controller up there) and ``client_listeners`` (where clients send the controller's
node their Admin calls), one port per name; a name the brokers secure with SSL or SASL gets no endpoint
(the channel speaks plaintext). Then:

* a ControlledShutdown becomes a :class:`core.events.ControlledShutdown` on the broker-events topic; the
  controller's next ControlledShutdownResponse to that broker (all parts of its batch, written after the
  request arrived) answers it;
* an AlterPartition becomes one :class:`core.events.AlterPartition` per partition, all with one correlation
  id of the channel's; the request is answered when every partition's AlterPartitionResponse entry (or a
  top-level error naming it) has come back;
* AllocateProducerIds is answered by the channel itself, as Kafka's ZooKeeper controller answers it
  (:mod:`channel.producer_ids`): the sender must be registered at the request's broker epoch;
* ListPartitionReassignments is answered from the topic znodes' adding and removing replicas, as Kafka's
  ZooKeeper controller answers it from its context; ListGroups, ListTransactions and DescribeLogDirs as a
  node hosting none of them (:mod:`channel.answers`);
* DescribeConfigs, AlterConfigs and IncrementalAlterConfigs of the ``BROKER`` (and ``BROKER_LOGGER``) resource
  named by the controller's id, which Kafka's Admin client sends that node, are answered from and written to
  that id's ``/config/brokers/<id>`` (and ``<default>``) in ZooKeeper, as a Kafka broker answers for its own id
  (:mod:`channel.node_configs`); the same APIs about anything else are forwarded;
* anything else a client sends is forwarded to a registered broker on the same listener (:mod:`channel.forward`).

Kafka's Admin client sends the controller CreateTopics, DeleteTopics, CreatePartitions, ElectLeaders and
AlterPartitionReassignments: each becomes livectl's admin commands on the admin topic and is answered from
livectl's admin results (:mod:`channel.admin_apis`, :mod:`channel.admin_link`).

Once per message: the consumer's offset of a message is committed only after every addressee answered and
the events were acknowledged by Kafka (``acks=all``). A channel stopped between a broker's answer and the
commit sends that one message again when it restarts; Kafka's broker answers a repeated LeaderAndIsr of
the same leader epoch with ``STALE_CONTROLLER_EPOCH`` for its partitions and changes nothing, and a repeated
UpdateMetadata or StopReplica is idempotent (``docs/real-brokers.md``).
"""

from __future__ import annotations

import functools
import json
import logging
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata
from kafka import TopicPartition as KafkaTopicPartition
from kazoo.client import KazooClient
from kazoo.exceptions import BadArgumentsError, KazooException, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from channel.admin_apis import ADMIN_SERVED, CreateDefaults
from channel.admin_link import ADMIN_RESULTS_TOPIC, ADMIN_TOPIC, AdminLink
from channel.answers import (
    ALLOCATE_PRODUCER_IDS,
    ALTER_PARTITION,
    BROKER_ID_NOT_REGISTERED,
    CONTROLLED_SHUTDOWN,
    DESCRIBE_LOG_DIRS,
    LIST_GROUPS,
    LIST_PARTITION_REASSIGNMENTS,
    LIST_TRANSACTIONS,
    AlterPartitionAsked,
    allocate_producer_ids_response,
    alter_partition_events,
    alter_partition_response,
    controlled_shutdown_response,
    list_partition_reassignments_response,
    nothing_hosted_response,
    wanted_partitions,
)
from channel.convert import (
    API_KEYS,
    OUR_VERSIONS,
    UnsupportedVersionError,
    advertise_controller,
    ibp_cap,
    to_events,
    to_kafka,
    unadvertised,
)
from channel.endpoint import Connection, ControllerEndpoint
from channel.forward import Forwarder
from channel.log_dirs import OUR_VERSIONS as LOG_DIRS_VERSIONS
from channel.log_dirs import describe_log_dirs, to_report
from channel.node_configs import (
    ALTER_CONFIGS,
    DESCRIBE_CONFIGS,
    INCREMENTAL_ALTER_CONFIGS,
    ConfigChange,
    NodeConfigs,
    Share,
    alter_configs_response,
    config_changes,
    describe_configs_response,
    node_share,
)
from channel.producer_ids import ProducerIdsExhaustedError, allocate_block
from channel.wire import BrokerConnection, WireError
from core.codec.events import event_to_json
from core.errors import FormatError
from core.events import ControlledShutdown, Event
from core.kafka import zkdata
from core.kafka.envelope import BROKER_EVENTS_TOPIC, REQUESTS_TOPIC, Envelope, parse_request
from core.kafka.error_codes import KafkaError
from core.kafka.log_dirs import LOG_DIRS_TOPIC, chunked
from core.kafka.requests import (
    SECURITY_PROTOCOL_IDS,
    ZERO_UUID,
    AlterPartitionResponse,
    AlterPartitionResult,
    ControlledShutdownResponse,
    LeaderAndIsrRequest,
    MetadataEndpoint,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from core.model import Broker, TopicPartition
from core.request_states import metadata_broker
from core.snapshot import TopicZnode
from sinks.entity_configs import DEFAULT_BROKER, change_broker_configs, read_entity_configs, write_entity_configs
from sinks.requests import ensure_topics

__all__ = ["DEFAULT_GROUP", "ChannelSettings", "ControllerChannel"]

log = logging.getLogger("livectl.channel")

DEFAULT_GROUP = "livectl-channel"
#: an answer written (by the bus's record timestamp) this long before a ControlledShutdown arrived is not its
#: answer: it is one to an earlier request, read again after a restart of the channel
ANSWER_SKEW_MS = 1000


@dataclass
class _Asked:
    """A broker's request waiting for the controller's answer."""

    conn: Connection
    correlation_id: int
    version: int
    arrived_ms: int


@dataclass
class _AskedAlter(_Asked):
    broker_id: int = -1
    asked: AlterPartitionAsked | None = None
    answers: dict[TopicPartition, AlterPartitionResult] = field(default_factory=dict)


@dataclass
class _ShutdownAnswer:
    """The parts of one ControlledShutdownResponse read so far (the sink may split one answer)."""

    seen: int = 0
    error_code: int = 0
    remaining: list[TopicPartition] = field(default_factory=list)


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


class ControllerChannel:
    """Start with :meth:`start`, run with :meth:`run` until :attr:`stopping` is set, then :meth:`close`."""

    def __init__(self, settings: ChannelSettings) -> None:
        self.settings = settings
        self.stopping = threading.Event()
        self._connections: dict[int, tuple[int, BrokerConnection]] = {}
        self._consumer: KafkaConsumer | None = None
        self._producer: KafkaProducer | None = None
        self._zk: KazooClient | None = None
        #: messages delivered (per addressee), for the log and tests
        self.delivered = 0
        #: the controller's endpoint by listener name, once started (``controller_listeners`` set)
        self.endpoints: dict[str, ControllerEndpoint] = {}
        self._advertised: tuple[MetadataEndpoint, ...] = ()
        #: listener names left out of UpdateMetadata because the brokers secure them, once logged
        self._unadvertised: set[str] = set()
        #: the controller id the channel's endpoint was last advertised as (the node id clients know it by)
        self._advertised_id: int | None = None
        #: what the channel answers itself, by api key (:data:`channel.answers.SERVED` but ApiVersions)
        self._handlers: Mapping[int, Callable[[Connection, int, int, Any], None]] = {
            CONTROLLED_SHUTDOWN: self._controlled_shutdown,
            ALTER_PARTITION: self._alter_partition,
            ALLOCATE_PRODUCER_IDS: self._allocate_producer_ids_request,
            LIST_PARTITION_REASSIGNMENTS: self._list_partition_reassignments,
            LIST_GROUPS: self._nothing_hosted(LIST_GROUPS),
            LIST_TRANSACTIONS: self._nothing_hosted(LIST_TRANSACTIONS),
            DESCRIBE_LOG_DIRS: self._nothing_hosted(DESCRIBE_LOG_DIRS),
            DESCRIBE_CONFIGS: self._describe_node_configs,
            ALTER_CONFIGS: functools.partial(self._alter_node_configs, ALTER_CONFIGS),
            INCREMENTAL_ALTER_CONFIGS: functools.partial(self._alter_node_configs, INCREMENTAL_ALTER_CONFIGS),
            **{api_key: functools.partial(self._on_admin, api_key) for api_key in ADMIN_SERVED},
        }
        self._lock = threading.Lock()
        self._shutdowns: dict[int, list[_Asked]] = {}
        self._shutdown_answers: dict[tuple[int, int, int], _ShutdownAnswer] = {}
        self._alters: dict[int, _AskedAlter] = {}
        # unique across restarts of the channel with high probability: an old answer never matches a new request
        self._next_correlation = secrets.randbelow(2**30)
        self._topic_names: dict[str, str] = {}
        #: brokers' requests answered, for the log and tests
        self.answered = 0
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

    def start(self) -> None:
        s = self.settings
        kafka = dict(s.kafka or {})
        self._zk = KazooClient(hosts=s.zookeeper, **dict(s.zk or {}))
        self._zk.start(timeout=15)
        self._consumer = KafkaConsumer(
            s.requests_topic,
            **kafka,
            bootstrap_servers=s.bootstrap_server,
            group_id=s.group,
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
            self.admin = AdminLink(
                s.bootstrap_server,
                self._reply,
                admin_topic=s.admin_topic,
                results_topic=s.admin_results_topic,
                kafka=kafka,
                defaults=CreateDefaults(s.num_partitions, s.default_replication_factor),
                topic_names=self._topic_name,
                no_wait_s=s.request_timeout_s,
                retry_s=s.retry_s,
            )
            self.admin.start()
            self._listen()

    def _listen(self) -> None:
        """One endpoint per listener name, advertised on it; one line says where, and which names the registered
        brokers secure (no endpoint is advertised there: the channel speaks plaintext)."""
        s = self.settings
        forwarder = Forwarder(self._broker_endpoints, s.request_timeout_s)
        names = tuple(dict.fromkeys((*s.controller_listeners, *s.client_listeners)))
        for i, name in enumerate(names):
            port = s.listen_port + i if s.listen_port else 0
            self.endpoints[name] = ControllerEndpoint(
                s.listen_host,
                port,
                self._on_request,
                self._on_close,
                listener=name,
                forwarder=forwarder,
                owns=self._owns,
            )
        host = s.advertised_host or s.listen_host
        plaintext = SECURITY_PROTOCOL_IDS["PLAINTEXT"]
        self._advertised = tuple(MetadataEndpoint(e.port, host, n, plaintext) for n, e in self.endpoints.items())
        for endpoint in self.endpoints.values():
            endpoint.start()
        secured = self._secured_listeners(names)
        log.info(
            "controller endpoint listening on %s, advertised as %s; %s",
            ", ".join(f"{s.listen_host}:{e.port} ({n})" for n, e in self.endpoints.items()),
            ",".join(f"{e.listener}://{e.host}:{e.port}" for e in self._advertised),
            (
                "the brokers secure "
                + ", ".join(f"{n} ({p})" for n, p in secured.items())
                + ": not advertised there, the endpoint speaks PLAINTEXT only (clients there cannot reach the "
                "controller's node: their Admin calls to it time out)"
                if secured
                else "a listener the brokers secure with SSL or SASL is not advertised (PLAINTEXT only)"
            ),
        )
        self._unadvertised.update(secured)

    def _registered(self) -> list[Broker]:
        """Every registered broker (none when ZooKeeper cannot be read: logged)."""
        assert self._zk is not None
        out: list[Broker] = []
        try:
            for child in self._zk.get_children(zkdata.BROKER_IDS):
                broker = self._registration(int(child)) if child.isdigit() else None
                if broker is not None:
                    out.append(broker)
        except NoNodeError:  # no broker ever registered
            return out
        except (KazooException, FormatError) as e:
            log.warning("cannot read the brokers' registrations: %s", e)
        return out

    def _secured_listeners(self, names: Iterable[str]) -> dict[str, str]:
        """Of ``names``, those a registered broker secures (name -> its security protocol)."""
        wanted = set(names)
        return {
            e.listener: e.security_protocol
            for b in self._registered()
            for e in b.endpoints
            if e.listener in wanted and e.security_protocol != "PLAINTEXT"
        }

    def _broker_endpoints(self, listener: str) -> list[tuple[str, int]]:
        """(host, port) of every registered broker's plaintext endpoint named ``listener``, where the endpoint
        of that name forwards what it does not answer itself."""
        return [
            (e.host, e.port)
            for b in self._registered()
            for e in b.endpoints
            if e.listener == listener and e.security_protocol == "PLAINTEXT"
        ]

    def run(self) -> int:
        assert self._consumer is not None
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
        return 0

    def close(self) -> None:
        for endpoint in self.endpoints.values():
            endpoint.close()
        if self.admin is not None:
            self.admin.close()
        for _, conn in self._connections.values():
            conn.close()
        self._connections.clear()
        if self._producer is not None:
            self._producer.close(timeout=5)
        if self._consumer is not None:
            self._consumer.close()
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()

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
        if isinstance(env.body, ControlledShutdownResponse):
            self._answer_shutdown(env, env.body, _parts(value), timestamp_ms)
            return True
        if isinstance(env.body, AlterPartitionResponse):
            self._answer_alter(env.broker_id, env.body)
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
        while not self.stopping.is_set():
            broker = self._registration(env.broker_id)
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
            self._learn_topic_ids(body)
            if isinstance(body, UpdateMetadataRequest):
                body = self._advertise(body)
            try:
                conn = self._connection(broker)
                if isinstance(body, LeaderAndIsrRequest) and self._announced.get(broker.id) != broker.epoch:
                    self._announce(conn, broker, body)
                version = self._version(conn, API_KEYS[type(body)])
                call = to_kafka(body, version, broker_epoch=body.broker_epoch)
                response: Any = conn.send(call.request, call.response_type)
            except WireError as e:
                self._drop_connection(env.broker_id)
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
        for broker_id, moving in sorted(self._moving.items()):
            broker = self._registration(broker_id) if moving else None
            if broker is None:
                continue
            try:
                conn = self._connection(broker)
                version = conn.best_version(DESCRIBE_LOG_DIRS, LOG_DIRS_VERSIONS)
                if version is None:
                    log.debug("broker %s does not speak DescribeLogDirs v1-v4", broker_id)
                    continue
                request, response_type = describe_log_dirs(version, moving)
                response = conn.send(request, response_type)
            except WireError as e:
                self._drop_connection(broker_id)
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
        assert self._zk is not None
        live = []
        for child in sorted(self._zk.get_children(zkdata.BROKER_IDS), key=int):
            registered = self._registration(int(child))
            if registered is not None:
                live.append(metadata_broker(registered))
        um = UpdateMetadataRequest(lisr.controller_id, lisr.controller_epoch, broker.epoch, (), tuple(live))
        um = self._advertise(um)
        version = self._version(conn, API_KEYS[UpdateMetadataRequest])
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
        for name, protocol in unadvertised(body, self._advertised).items():
            if name not in self._unadvertised:
                self._unadvertised.add(name)
                log.warning(
                    "the brokers' listener %s is not PLAINTEXT (protocol id %s): the controller's endpoint is not "
                    "advertised there; clients on it cannot reach the controller's node",
                    name,
                    protocol,
                )
        advertised = advertise_controller(body, self._advertised)
        if advertised is not body:
            self._advertised_id = body.controller_id
        return advertised

    def _version(self, conn: BrokerConnection, api_key: int) -> int:
        ours = OUR_VERSIONS[api_key]
        if self.settings.inter_broker_protocol:
            cap = ibp_cap(api_key, self.settings.inter_broker_protocol)
            ours = range(ours.start, min(ours.stop, cap + 1))
        version = conn.best_version(api_key, ours)
        if version is None:
            theirs = conn.versions.get(api_key)
            raise UnsupportedVersionError(
                f"api {api_key}: the broker speaks {theirs}, the channel builds {ours.start}-{ours.stop - 1}"
            )
        return version

    def _registration(self, broker_id: int) -> Broker | None:
        assert self._zk is not None
        try:
            data, stat = self._zk.get(zkdata.broker_path(broker_id))
        except NoNodeError:
            return None
        return zkdata.decode_broker_registration(broker_id, data, int(stat.czxid))

    def _connection(self, broker: Broker) -> BrokerConnection:
        held = self._connections.get(broker.id)
        if held is not None and held[0] == broker.epoch:
            return held[1]
        self._drop_connection(broker.id)
        if not broker.endpoints:
            raise WireError(f"broker {broker.id} registered no endpoint")
        endpoint = next((e for e in broker.endpoints if e.listener == self.settings.listener), broker.endpoints[0])
        conn = BrokerConnection(endpoint.host, endpoint.port, timeout_s=self.settings.request_timeout_s)
        try:
            conn.negotiate()
        except WireError:
            conn.close()
            raise
        self._connections[broker.id] = (broker.epoch, conn)
        return conn

    def _drop_connection(self, broker_id: int) -> None:
        held = self._connections.pop(broker_id, None)
        if held is not None:
            held[1].close()

    def _publish(self, broker_id: int, events: list[Event]) -> None:
        assert self._producer is not None
        for ev in events:
            self._producer.send(
                self.settings.events_topic, key=str(broker_id).encode(), value=event_to_json(ev).encode()
            )

    # ------------------------------------------------------------------ the brokers' requests to their controller

    def _on_request(self, conn: Connection, api_key: int, version: int, correlation_id: int, body: Any) -> None:
        self._handlers[api_key](conn, version, correlation_id, body)

    def _controlled_shutdown(self, conn: Connection, version: int, correlation_id: int, body: Any) -> None:
        broker_id = conn.broker_id = int(body.broker_id)
        epoch = int(body.broker_epoch) if version >= 2 else -1
        with self._lock:
            asked = _Asked(conn, correlation_id, version, int(time.time() * 1000))
            self._shutdowns.setdefault(broker_id, []).append(asked)
        log.info("broker %s asks for a controlled shutdown (v%s, broker epoch %s)", broker_id, version, epoch)
        self._publish(broker_id, [ControlledShutdown(broker_id, epoch)])

    def _alter_partition(self, conn: Connection, version: int, correlation_id: int, body: Any) -> None:
        broker_id = conn.broker_id = int(body.broker_id)
        with self._lock:
            ours = self._next_correlation
            self._next_correlation = (ours + 1) % 2**31
        events, asked = alter_partition_events(broker_id, version, body, self._topic_name, ours)
        log.info(
            "broker %s: AlterPartition v%s (our correlation id %s): %s",
            broker_id,
            version,
            ours,
            " ".join(f"{e.topic}-{e.partition} isr={','.join(map(str, e.new_isr))}" for e in events) or "-",
        )
        if not events:
            self._reply(conn, correlation_id, alter_partition_response(asked, 0, {}))
            return
        with self._lock:
            now_ms = int(time.time() * 1000)
            self._alters[ours] = _AskedAlter(conn, correlation_id, version, now_ms, broker_id, asked)
        self._publish(broker_id, list(events))

    def _allocate_producer_ids_request(self, conn: Connection, version: int, correlation_id: int, body: Any) -> None:
        broker_id = conn.broker_id = int(body.broker_id)
        self._reply(conn, correlation_id, self._allocate_producer_ids(broker_id, int(body.broker_epoch)))

    def _nothing_hosted(self, api_key: int) -> Callable[[Connection, int, int, Any], None]:
        def answer(conn: Connection, version: int, correlation_id: int, body: Any) -> None:
            self._reply(conn, correlation_id, nothing_hosted_response(api_key, version))

        return answer

    def _list_partition_reassignments(self, conn: Connection, version: int, correlation_id: int, body: Any) -> None:
        """Kafka 3.9's ZooKeeper controller's answer, from the topic znodes (:mod:`core.kafka.zkdata`'s layout)
        instead of its context; like AllocateProducerIds, without checking that livectl's controller is active."""
        wanted = wanted_partitions(body)
        try:
            topics = self._topic_znodes(None if wanted is None else sorted(wanted))
        except (KazooException, KazooTimeoutError) as e:
            log.error("ListPartitionReassignments from %s: %s", conn.peer, e)
            answer = list_partition_reassignments_response((), wanted, f"cannot read ZooKeeper: {e}")
        else:
            answer = list_partition_reassignments_response(topics, wanted)
        self._reply(conn, correlation_id, answer)

    def _topic_znodes(self, topics: Iterable[str] | None) -> list[TopicZnode]:
        """The ``/brokers/topics/<t>`` znodes of ``topics`` (``None``: every topic), read at once; a topic without
        one is left out, and so is one whose znode is not Kafka's format (logged)."""
        assert self._zk is not None
        names = self._zk.get_children(zkdata.BROKER_TOPICS) if topics is None else list(topics)
        pending = []
        for name in names:
            try:
                pending.append((name, self._zk.get_async(zkdata.topic_path(name))))
            except ValueError:  # not a name a znode can have: no such topic
                continue
        out: list[TopicZnode] = []
        for name, result in pending:
            try:
                data, stat = result.get(timeout=self.settings.request_timeout_s)
            except (NoNodeError, BadArgumentsError):
                continue
            try:
                out.append(zkdata.decode_topic_znode(name, data.decode(), int(stat.version)))
            except (ValueError, TypeError, AttributeError, KeyError) as e:
                log.warning("%s: not a topic znode (%s): left out of ListPartitionReassignments", name, e)
        return out

    # ------------------------------------------------------------------ the controller's node's own configs

    def _node_id(self) -> int | None:
        """The broker id clients know the endpoint by: the controller id it was last advertised as, else (before
        the first UpdateMetadata of this run) the id ``/controller`` names when no broker is registered under it
        (livectl's controller, not a Kafka broker that won the election); ``None`` when neither is known."""
        if self._advertised_id is not None:
            return self._advertised_id
        assert self._zk is not None
        try:
            data, _ = self._zk.get(zkdata.CONTROLLER_PATH)
            held = zkdata.decode_controller(data).broker_id
            return None if self._registration(held) is not None else held
        except (NoNodeError, FormatError):
            return None
        except (KazooException, KazooTimeoutError) as e:
            log.warning("cannot read %s: %s", zkdata.CONTROLLER_PATH, e)
            return None

    def _owns(self, api_key: int, body: Any) -> bool:
        """Whether a config request is about the controller's node's own configs only (answered here); one that
        mixes them with other resources, which Kafka's Admin client does not send, is forwarded whole."""
        node = self._node_id()
        share = node_share(body, node)
        if share is Share.SOME:
            log.warning(
                "api %s names the controller's node %s beside other resources: forwarded whole (the broker refuses "
                "the node's resources)",
                api_key,
                node,
            )
        return share is Share.ALL

    def _describe_node_configs(self, conn: Connection, version: int, correlation_id: int, body: Any) -> None:
        """DescribeConfigs of the node's ``BROKER`` / ``BROKER_LOGGER`` resources (:mod:`channel.node_configs`)."""
        assert self._zk is not None
        entity = str(int(body.resources[0].resource_name))  # every resource names the node (_owns)
        try:
            configs = NodeConfigs(
                read_entity_configs(self._zk, "brokers", entity),
                read_entity_configs(self._zk, "brokers", DEFAULT_BROKER),
            )
        except (KazooException, KazooTimeoutError, ValueError, AttributeError) as e:
            log.error("DescribeConfigs of broker %s from %s: %s", entity, conn.peer, e)
            answer = describe_configs_response(version, body, None, f"cannot read the configs in ZooKeeper: {e}")
        else:
            log.info(
                "DescribeConfigs v%s of the controller's node %s from %s: %s of its own, %s default",
                version,
                entity,
                conn.peer,
                len(configs.own),
                len(configs.default),
            )
            answer = describe_configs_response(version, body, configs)
        self._reply(conn, correlation_id, answer)

    def _alter_node_configs(self, api_key: int, conn: Connection, version: int, correlation_id: int, body: Any) -> None:
        """AlterConfigs / IncrementalAlterConfigs of the node's resources: checked, then written to
        ``/config/brokers/<id>`` with a change notification (:mod:`sinks.entity_configs`) unless validate-only."""
        assert self._zk is not None
        validate_only = bool(body.validate_only)
        answers: list[tuple[ConfigChange, int, str | None]] = []
        for change in config_changes(api_key, body):
            if change.error or change.logger or validate_only:
                answers.append((change, change.error, change.message))
                continue
            entity = str(int(change.resource_name))
            try:
                if change.replace is not None:
                    write_entity_configs(self._zk, "brokers", entity, change.replace)
                    written = dict(change.replace)
                else:
                    written = change_broker_configs(self._zk, entity, change.sets, change.deletes)
            except (KazooException, KazooTimeoutError, ValueError, AttributeError) as e:
                log.error("api %s: cannot write the configs of broker %s: %s", api_key, entity, e)
                answers.append((change, KafkaError.UNKNOWN_SERVER_ERROR, f"cannot write the configs in ZooKeeper: {e}"))
                continue
            log.info(
                "api %s v%s from %s: the controller's node %s configs now %s",
                api_key,
                version,
                conn.peer,
                entity,
                ",".join(f"{k}={v}" for k, v in sorted(written.items())) or "none",
            )
            answers.append((change, 0, None))
        self._reply(conn, correlation_id, alter_configs_response(api_key, version, answers))

    def _on_admin(self, api_key: int, conn: Connection, version: int, correlation_id: int, body: Any) -> None:
        assert self.admin is not None
        self.admin.ask(conn, api_key, version, correlation_id, body)

    def _allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> Any:
        """Kafka 3.9's ZooKeeper controller's answer (``processAllocateProducerIds``)."""
        assert self._zk is not None
        try:
            broker = self._registration(broker_id)
            if broker is None:
                log.info("AllocateProducerIds from broker %s, which is not registered", broker_id)
                return allocate_producer_ids_response(BROKER_ID_NOT_REGISTERED)
            if broker.epoch != broker_epoch:
                log.info("AllocateProducerIds from broker %s at stale epoch %s", broker_id, broker_epoch)
                return allocate_producer_ids_response(KafkaError.STALE_BROKER_EPOCH)
            block = allocate_block(self._zk, broker_id)
        except (KazooException, FormatError, ProducerIdsExhaustedError, ValueError) as e:
            log.error("AllocateProducerIds from broker %s: %s", broker_id, e)
            return allocate_producer_ids_response(KafkaError.UNKNOWN_SERVER_ERROR)
        log.info("broker %s: producer ids %s-%s", broker_id, block.first, block.last)
        return allocate_producer_ids_response(0, block.first, block.size)

    def _on_close(self, conn: Connection) -> None:
        if self.admin is not None:
            self.admin.forget(conn)
        with self._lock:
            for broker_id, waiting in list(self._shutdowns.items()):
                self._shutdowns[broker_id] = [a for a in waiting if a.conn is not conn]
            for ours in [k for k, a in self._alters.items() if a.conn is conn]:
                del self._alters[ours]

    def _reply(self, conn: Connection, correlation_id: int, response: Any) -> None:
        if conn.answer(correlation_id, response):
            with self._lock:
                self.answered += 1

    def _answer_shutdown(
        self, env: Envelope, body: ControlledShutdownResponse, part: tuple[int, int], timestamp_ms: int
    ) -> None:
        key = (env.broker_id, env.controller_epoch, env.batch_id)
        with self._lock:
            acc = self._shutdown_answers.setdefault(key, _ShutdownAnswer())
            acc.seen += 1
            acc.error_code = acc.error_code or body.error_code
            acc.remaining.extend(body.remaining)
            if acc.seen < part[1]:
                return
            del self._shutdown_answers[key]
            waiting = self._shutdowns.get(env.broker_id, [])
            due: list[_Asked] = []
            later: list[_Asked] = []
            for a in waiting:
                (due if timestamp_ms < 0 or a.arrived_ms <= timestamp_ms + ANSWER_SKEW_MS else later).append(a)
            self._shutdowns[env.broker_id] = later
        if not due:
            log.info("broker %s: a ControlledShutdownResponse no request waits for (batch %s)", *key[::2])
        for a in due:
            log.info(
                "broker %s: controlled shutdown answered error %s, %s partition(s) remaining (batch %s)",
                env.broker_id,
                acc.error_code,
                len(acc.remaining),
                env.batch_id,
            )
            answer = controlled_shutdown_response(a.version, acc.error_code, acc.remaining)
            self._reply(a.conn, a.correlation_id, answer)

    def _answer_alter(self, broker_id: int, body: AlterPartitionResponse) -> None:
        done: list[tuple[_AskedAlter, int]] = []
        with self._lock:
            if body.error_code:
                a = self._alters.get(body.correlation_id)
                if a is not None and a.broker_id == broker_id:
                    del self._alters[body.correlation_id]
                    done.append((a, body.error_code))
            for r in body.partitions:
                a = self._alters.get(r.correlation_id)
                if a is None or a.broker_id != broker_id or a.asked is None:
                    continue
                a.answers[TopicPartition(r.topic, r.partition)] = r
                if all(tp in a.answers or tp in a.asked.own_answers for tp, _ in a.asked.partitions):
                    del self._alters[r.correlation_id]
                    done.append((a, 0))
        for a, error in done:
            assert a.asked is not None
            log.info("broker %s: AlterPartition answered (top-level error %s)", broker_id, error)
            self._reply(a.conn, a.correlation_id, alter_partition_response(a.asked, error, a.answers))

    def _learn_topic_ids(self, body: Any) -> None:
        if isinstance(body, LeaderAndIsrRequest | UpdateMetadataRequest):
            for s in body.partitions:
                if s.topic_id != ZERO_UUID:
                    self._topic_names[s.topic_id] = s.topic

    def _topic_name(self, topic_id: str) -> str | None:
        """The topic ``topic_id`` names: from the requests delivered, else from ZooKeeper's topic znodes."""
        name = self._topic_names.get(topic_id)
        if name is not None:
            return name
        assert self._zk is not None
        try:
            for topic in self._zk.get_children(zkdata.BROKER_TOPICS):
                if topic in self._topic_names.values():
                    continue
                try:
                    data, _ = self._zk.get(zkdata.topic_path(topic))
                except NoNodeError:
                    continue
                tid = zkdata.topic_znode_id(data)
                if tid:
                    self._topic_names[tid] = topic
        except (KazooException, FormatError) as e:
            log.warning("cannot read the topic ids in ZooKeeper: %s", e)
        return self._topic_names.get(topic_id)


def _parts(value: bytes) -> tuple[int, int]:
    """``(part, parts)`` of a message (``(1, 1)`` when it is whole)."""
    try:
        o = json.loads(value)
        return int(o.get("part", 1)), int(o.get("parts", 1))
    except (ValueError, TypeError, AttributeError):
        return 1, 1
