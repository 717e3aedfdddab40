"""The controller's node: the requests brokers and clients send their controller, which the channel answers itself.

:class:`ControllerNode` is what each of the channel's endpoints (:mod:`channel.endpoint`) calls with a request
it serves (:data:`channel.answers.SERVED` but ApiVersions) and when a connection closes:

* a ControlledShutdown becomes a :class:`core.events.ControlledShutdown` published for the controller; the
  controller's next ControlledShutdownResponse to that broker (all parts of its batch, written after the
  request arrived: :meth:`ControllerNode.answer_shutdown`) answers it;
* an AlterPartition becomes one :class:`core.events.AlterPartitionRequest` record (per 1,000 partitions), every
  partition with one correlation id of the node's; the request is answered when every partition's
  AlterPartitionResponse entry (or a top-level error naming it) has come back (:meth:`ControllerNode.answer_alter`);
* AllocateProducerIds is answered as Kafka's ZooKeeper controller answers it (:mod:`channel.producer_ids`):
  the sender must be registered at the request's broker epoch;
* Metadata, where the endpoint forwards nothing (a SASL listener name, brokers requiring client certificates),
  is answered from ZooKeeper as a ZooKeeper-mode broker answers it (:mod:`channel.metadata`), at the channel's
  endpoint of the connection's listener (:attr:`ControllerNode.own_endpoints`);
* ListPartitionReassignments is answered from the topic znodes' adding and removing replicas, as Kafka's
  ZooKeeper controller answers it from its context; ListGroups, ListTransactions and DescribeLogDirs as a
  node hosting none of them (:mod:`channel.answers`);
* DescribeConfigs, AlterConfigs and IncrementalAlterConfigs of the ``BROKER`` (and ``BROKER_LOGGER``) resource
  named by the controller's id are answered from and written to that id's ``/config/brokers/<id>`` (and
  ``<default>``) in ZooKeeper, as a Kafka broker answers for its own id (:mod:`channel.node_configs`);
  :meth:`ControllerNode.owns` tells the endpoint which config requests those are (the rest are forwarded);
* Kafka's admin requests go to the :class:`channel.admin_link.AdminLink`, when one is set.

With an :attr:`ControllerNode.authorizer` (:mod:`channel.acls`), each request's principal is authorized as
Kafka's ``KafkaApis`` does: ``DESCRIBE`` on each topic for Metadata, ``DESCRIBE`` on the ``Cluster`` for
ListPartitionReassignments, ``DESCRIBE_CONFIGS`` / ``ALTER_CONFIGS`` on it for the node's configs
(:func:`channel.node_configs.describe_configs_refused`, :func:`channel.node_configs.alter_refused`), and the admin
requests item by item (:mod:`channel.admin_requests`).

The controller's answers reach the node through the channel's delivery loop; the node publishes through the
``publish`` it is given. Its methods may be called from any endpoint thread and the delivery loop at once.
"""

from __future__ import annotations

import functools
import logging
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kazoo.exceptions import KazooException, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from channel.acls import CLUSTER_NAME, AclAuthorizer, Check, Operation, Resource, allow_all, kafka_host
from channel.admin_apis import ADMIN_SERVED
from channel.admin_link import AdminLink
from channel.answers import (
    ALLOCATE_PRODUCER_IDS,
    ALTER_PARTITION,
    BROKER_ID_NOT_REGISTERED,
    CONTROLLED_SHUTDOWN,
    DESCRIBE_LOG_DIRS,
    LIST_GROUPS,
    LIST_PARTITION_REASSIGNMENTS,
    LIST_TRANSACTIONS,
    METADATA,
    AlterPartitionAsked,
    allocate_producer_ids_response,
    alter_partition_events,
    alter_partition_response,
    controlled_shutdown_response,
    list_partition_reassignments_refused,
    list_partition_reassignments_response,
    nothing_hosted_response,
    wanted_partitions,
)
from channel.authz import CLUSTER_AUTHORIZATION_FAILED
from channel.cluster import Cluster
from channel.endpoint import Connection
from channel.metadata import OwnNode, metadata_response, read_view, topics_to_read
from channel.node_configs import (
    ALTER_CONFIGS,
    DESCRIBE_CONFIGS,
    INCREMENTAL_ALTER_CONFIGS,
    ConfigChange,
    NodeConfigs,
    Share,
    alter_configs_response,
    alter_refused,
    config_changes,
    describe_configs_refused,
    describe_configs_response,
    node_share,
)
from channel.producer_ids import ProducerIdsExhaustedError, allocate_block
from core.errors import FormatError
from core.events import AlterPartitionRequest, ControlledShutdown, Event
from core.kafka import zkdata
from core.kafka.envelope import Envelope
from core.kafka.error_codes import KafkaError
from core.kafka.requests import AlterPartitionResponse, AlterPartitionResult, ControlledShutdownResponse
from core.model import TopicPartition
from sinks.entity_configs import DEFAULT_BROKER, change_broker_configs, read_entity_configs, write_entity_configs

__all__ = ["ANSWER_SKEW_MS", "ControllerNode"]

log = logging.getLogger("livectl.channel")

#: an answer written (by the bus's record timestamp) this long before a ControlledShutdown arrived is not its
#: answer: it is one to an earlier request, read again after a restart of the channel
ANSWER_SKEW_MS = 1000
#: how long the ZooKeeper reads of one Metadata answer may take
METADATA_TIMEOUT_S = 10.0


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


class ControllerNode:
    """Answers the requests sent to the controller's node; ``publish(broker_id, events)`` sends events to the
    controller. :attr:`advertised_id` is the controller id the channel last advertised the node as."""

    def __init__(self, cluster: Cluster, publish: Callable[[int, list[Event]], None]) -> None:
        self._cluster = cluster
        self._publish = publish
        #: Kafka's admin requests to the controller, when the channel listens
        self.admin: AdminLink | None = None
        #: who may make the admin calls answered here (``None``: anyone, as Kafka without an authorizer)
        self.authorizer: AclAuthorizer | None = None
        #: the controller id the channel's endpoint was last advertised as (the node id clients know it by)
        self.advertised_id: int | None = None
        #: the channel's own endpoint (host, port) on each listener name, as it advertises the node there
        self.own_endpoints: Mapping[str, tuple[str, int]] = {}
        #: brokers' requests answered, for the log and tests
        self.answered = 0
        self._handlers: Mapping[int, Callable[[Connection, int, int, Any], None]] = {
            CONTROLLED_SHUTDOWN: self._controlled_shutdown,
            ALTER_PARTITION: self._alter_partition,
            ALLOCATE_PRODUCER_IDS: self._allocate_producer_ids_request,
            LIST_PARTITION_REASSIGNMENTS: self._list_partition_reassignments,
            LIST_GROUPS: self._nothing_hosted(LIST_GROUPS),
            LIST_TRANSACTIONS: self._nothing_hosted(LIST_TRANSACTIONS),
            DESCRIBE_LOG_DIRS: self._nothing_hosted(DESCRIBE_LOG_DIRS),
            METADATA: self._metadata,
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

    def on_request(self, conn: Connection, api_key: int, version: int, correlation_id: int, body: Any) -> None:
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
        events, asked = alter_partition_events(broker_id, version, body, self._cluster.topic_name, ours)
        log.info(
            "broker %s: AlterPartition v%s (our correlation id %s): %s",
            broker_id,
            version,
            ours,
            " ".join(f"{e.topic}-{e.partition} isr={','.join(map(str, e.new_isr))}" for e in events) or "-",
        )
        if not events:
            self.reply(conn, correlation_id, alter_partition_response(asked, 0, {}))
            return
        with self._lock:
            now_ms = int(time.time() * 1000)
            self._alters[ours] = _AskedAlter(conn, correlation_id, version, now_ms, broker_id, asked)
        # one record per request (in parts of PROPOSALS_PER_RECORD), as Kafka's controller takes one event per request
        self._publish(broker_id, list(AlterPartitionRequest.records(tuple(events))))

    def _allocate_producer_ids_request(self, conn: Connection, version: int, correlation_id: int, body: Any) -> None:
        broker_id = conn.broker_id = int(body.broker_id)
        self.reply(conn, correlation_id, self._allocate_producer_ids(broker_id, int(body.broker_epoch)))

    def _nothing_hosted(self, api_key: int) -> Callable[[Connection, int, int, Any], None]:
        def answer(conn: Connection, version: int, correlation_id: int, body: Any) -> None:
            self.reply(conn, correlation_id, nothing_hosted_response(api_key, version))

        return answer

    def _list_partition_reassignments(self, conn: Connection, version: int, correlation_id: int, body: Any) -> None:
        """Kafka 3.9's ZooKeeper controller's answer, from the topic znodes (:mod:`core.kafka.zkdata`'s layout)
        instead of its context; like AllocateProducerIds, without checking that livectl's controller is active."""
        if not self._allowed(conn)(Operation.DESCRIBE, Resource.CLUSTER, CLUSTER_NAME):
            # Kafka's KafkaApis: authorizeClusterOperation(DESCRIBE) fails the request as a whole
            message = "Request ListPartitionReassignments is not authorized."
            self.reply(
                conn, correlation_id, list_partition_reassignments_refused(body, CLUSTER_AUTHORIZATION_FAILED, message)
            )
            return
        wanted = wanted_partitions(body)
        try:
            topics = self._cluster.topic_znodes(None if wanted is None else sorted(wanted))
        except (KazooException, KazooTimeoutError) as e:
            log.error("ListPartitionReassignments from %s: %s", conn.peer, e)
            answer = list_partition_reassignments_response((), wanted, f"cannot read ZooKeeper: {e}")
        else:
            answer = list_partition_reassignments_response(topics, wanted)
        self.reply(conn, correlation_id, answer)

    def _metadata(self, conn: Connection, version: int, correlation_id: int, body: Any) -> None:
        """Metadata where the endpoint forwards nothing, from ZooKeeper (:mod:`channel.metadata`); a ZooKeeper that
        cannot be read closes the connection (the client asks another node)."""
        node = self._node_id()
        own = self.own_endpoints.get(conn.listener)
        try:
            view = read_view(
                self._cluster, topics_to_read(version, body), -1 if node is None else node, METADATA_TIMEOUT_S
            )
        except (KazooException, KazooTimeoutError, ValueError, KeyError) as e:
            log.error("Metadata v%s from %s: cannot read ZooKeeper: %s: closing", version, conn.peer, e)
            conn.close()
            return
        answer = metadata_response(
            version,
            body,
            view,
            listener=conn.listener,
            own=None if own is None or node is None else OwnNode(node, *own),
            allowed=self._allowed(conn),
        )
        self.reply(conn, correlation_id, answer)

    # ------------------------------------------------------------------ the controller's node's own configs

    def _node_id(self) -> int | None:
        """The broker id clients know the endpoint by: the controller id it was last advertised as, else (before
        the first UpdateMetadata of this run) the id ``/controller`` names when no broker is registered under it
        (livectl's controller, not a Kafka broker that won the election); ``None`` when neither is known."""
        if self.advertised_id is not None:
            return self.advertised_id
        try:
            data, _ = self._cluster.zk.get(zkdata.CONTROLLER_PATH)
            held = zkdata.decode_controller(data).broker_id
            return None if self._cluster.registration(held) is not None else held
        except (NoNodeError, FormatError):
            return None
        except (KazooException, KazooTimeoutError) as e:
            log.warning("cannot read %s: %s", zkdata.CONTROLLER_PATH, e)
            return None

    def owns(self, api_key: int, body: Any) -> bool:
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
        entity = str(int(body.resources[0].resource_name))  # every resource names the node (_owns)
        if not self._allowed(conn)(Operation.DESCRIBE_CONFIGS, Resource.CLUSTER, CLUSTER_NAME):
            self.reply(conn, correlation_id, describe_configs_refused(version, body, CLUSTER_AUTHORIZATION_FAILED))
            return
        try:
            configs = NodeConfigs(
                read_entity_configs(self._cluster.zk, "brokers", entity),
                read_entity_configs(self._cluster.zk, "brokers", DEFAULT_BROKER),
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
        self.reply(conn, correlation_id, answer)

    def _alter_node_configs(self, api_key: int, conn: Connection, version: int, correlation_id: int, body: Any) -> None:
        """AlterConfigs / IncrementalAlterConfigs of the node's resources: checked, then written to
        ``/config/brokers/<id>`` with a change notification (:mod:`sinks.entity_configs`) unless validate-only."""
        validate_only = bool(body.validate_only)
        answers: list[tuple[ConfigChange, int, str | None]] = []
        on_cluster = self._allowed(conn)(Operation.ALTER_CONFIGS, Resource.CLUSTER, CLUSTER_NAME)
        for change in config_changes(api_key, body):
            refused = None if on_cluster else alter_refused(api_key, change, CLUSTER_AUTHORIZATION_FAILED)
            if refused is not None:
                answers.append((change, *refused))
                continue
            if change.error or change.logger or validate_only:
                answers.append((change, change.error, change.message))
                continue
            entity = str(int(change.resource_name))
            try:
                if change.replace is not None:
                    write_entity_configs(self._cluster.zk, "brokers", entity, change.replace)
                    written = dict(change.replace)
                else:
                    written = change_broker_configs(self._cluster.zk, entity, change.sets, change.deletes)
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
        self.reply(conn, correlation_id, alter_configs_response(api_key, version, answers))

    def _on_admin(self, api_key: int, conn: Connection, version: int, correlation_id: int, body: Any) -> None:
        assert self.admin is not None
        self.admin.ask(conn, api_key, version, correlation_id, body, allowed=self._allowed(conn))

    def may_act(self, conn: Connection) -> bool:
        """Whether ``conn`` may send the brokers' own requests, by the authorizer: ``CLUSTER_ACTION`` on the
        ``Cluster`` (Kafka's ``KafkaApis``)."""
        return self._allowed(conn)(Operation.CLUSTER_ACTION, Resource.CLUSTER, CLUSTER_NAME)

    def _allowed(self, conn: Connection) -> Check:
        """What one request of ``conn`` may do: everything without an authorizer, else what the ACLs in
        ZooKeeper let its principal do from its address (:mod:`channel.acls`)."""
        if self.authorizer is None:
            return allow_all
        host = kafka_host(conn.peer.rpartition(":")[0].strip("[]"))
        return self.authorizer.check(self._cluster.zk, conn.principal, host)

    def _allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> Any:
        """Kafka 3.9's ZooKeeper controller's answer (``processAllocateProducerIds``)."""
        try:
            broker = self._cluster.registration(broker_id)
            if broker is None:
                log.info("AllocateProducerIds from broker %s, which is not registered", broker_id)
                return allocate_producer_ids_response(BROKER_ID_NOT_REGISTERED)
            if broker.epoch != broker_epoch:
                log.info("AllocateProducerIds from broker %s at stale epoch %s", broker_id, broker_epoch)
                return allocate_producer_ids_response(KafkaError.STALE_BROKER_EPOCH)
            block = allocate_block(self._cluster.zk, broker_id)
        except (KazooException, FormatError, ProducerIdsExhaustedError, ValueError) as e:
            log.error("AllocateProducerIds from broker %s: %s", broker_id, e)
            return allocate_producer_ids_response(KafkaError.UNKNOWN_SERVER_ERROR)
        log.info("broker %s: producer ids %s-%s", broker_id, block.first, block.last)
        return allocate_producer_ids_response(0, block.first, block.size)

    def on_close(self, conn: Connection) -> None:
        if self.admin is not None:
            self.admin.forget(conn)
        with self._lock:
            for broker_id, waiting in list(self._shutdowns.items()):
                self._shutdowns[broker_id] = [a for a in waiting if a.conn is not conn]
            for ours in [k for k, a in self._alters.items() if a.conn is conn]:
                del self._alters[ours]

    def reply(self, conn: Connection, correlation_id: int, response: Any) -> None:
        if conn.answer(correlation_id, response):
            with self._lock:
                self.answered += 1

    def answer_shutdown(
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
            self.reply(a.conn, a.correlation_id, answer)

    def answer_alter(self, broker_id: int, body: AlterPartitionResponse) -> None:
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
            self.reply(a.conn, a.correlation_id, alter_partition_response(a.asked, error, a.answers))
