"""Metadata (API key 3) as the controller's node answers it where it forwards nothing: from the controlled cluster's
ZooKeeper, as a ZooKeeper-mode Kafka 3.9 broker answers it from its metadata cache (``KafkaApis
.handleTopicMetadataRequest``, ``ZkMetadataCache.getTopicMetadata``).

On a SASL listener name the endpoint forwards nothing (it would speak for the client with its own credentials),
nor on an SSL name whose brokers require client certificates; without Metadata there, Kafka's Java clients that
pick the controller's node for a Metadata call give up ("The node does not support METADATA"). There the endpoint
answers it itself (:func:`read_view`, then :func:`metadata_response`):

* the brokers: every registered broker with an endpoint of the connection's listener name (one without is left
  out, as Kafka does), and the controller's node at the channel's own endpoint; the cluster id (``/cluster/id``)
  and the controller id the node is advertised as;
* the topics asked (null, or an empty list at v0: all; empty: none), by name or (v12) by id, from their
  ``/brokers/topics/<t>`` znodes (replicas, topic id) and ``/brokers/topics/<t>/partitions/<p>/state`` (leader,
  leader epoch, ISR), read in one batch; offline replicas are the replicas not registered; a topic marked for
  deletion (``/admin/delete_topics``) is left out, as the brokers drop it once its deletion starts. A topic that
  does not exist is answered ``UNKNOWN_TOPIC_OR_PARTITION`` (``INVALID_TOPIC_EXCEPTION`` for a name Kafka does
  not allow) and never created, as a broker with ``auto.create.topics.enable=false`` answers;
* a partition whose leader is not registered: ``LEADER_NOT_AVAILABLE`` and leader -1; registered without an
  endpoint of the listener: ``LISTENER_NOT_FOUND`` from v6; at v0 the replicas and ISR without an endpoint there
  are left out and the partition answered ``REPLICA_NOT_AVAILABLE``, as Kafka does.

Authorization (``allowed``, :mod:`channel.acls`): a topic the principal may not ``DESCRIBE`` is left out of an
all-topics answer and answered ``TOPIC_AUTHORIZATION_FAILED`` (without its topic id) when named; the authorized
operations are filled when asked (v8+; the cluster's up to v10: none when ``DESCRIBE`` on the ``Cluster`` is not
allowed), else Kafka's "not asked" value (``-2147483648``). Sorted by topic and partition (Kafka's order is its
hash maps').
"""

from __future__ import annotations

import datetime
import importlib
import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import NoNodeError

from channel.acls import CLUSTER_NAME, TOPIC_AUTHORIZATION_FAILED, Check, Operation, Resource
from channel.answers import METADATA, METADATA_VERSIONS
from channel.cluster import Cluster
from channel.convert import kafka_uuid, uuid_text
from core.kafka import zkdata
from core.kafka.requests import ZERO_UUID
from core.model import Broker
from core.snapshot import PartitionStateZnode

__all__ = [
    "METADATA",
    "METADATA_VERSIONS",
    "MetadataView",
    "OwnNode",
    "TopicView",
    "metadata_response",
    "read_view",
    "topics_to_read",
]

log = logging.getLogger("livectl.channel.metadata")

CLUSTER_ID_PATH = "/cluster/id"
#: Kafka's error codes of a Metadata answer
UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, REPLICA_NOT_AVAILABLE = 3, 5, 9
INVALID_TOPIC_EXCEPTION, LISTENER_NOT_FOUND, UNKNOWN_TOPIC_ID = 17, 72, 100
#: Kafka's "authorized operations not asked" (``Int.MinValue``, the schema's default)
NOT_ASKED = -(2**31)
#: Kafka's internal topics (``Topic.isInternal``)
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
#: the operations Kafka reports as authorized on a topic and on the cluster (``AclEntry.supportedOperations``),
#: with their ``AclOperation`` codes
_CODES = {
    Operation.READ: 3,
    Operation.WRITE: 4,
    Operation.CREATE: 5,
    Operation.DELETE: 6,
    Operation.ALTER: 7,
    Operation.DESCRIBE: 8,
    Operation.CLUSTER_ACTION: 9,
    Operation.DESCRIBE_CONFIGS: 10,
    Operation.ALTER_CONFIGS: 11,
    Operation.IDEMPOTENT_WRITE: 12,
}
_TOPIC_OPERATIONS = (
    Operation.READ,
    Operation.WRITE,
    Operation.CREATE,
    Operation.DESCRIBE,
    Operation.DELETE,
    Operation.ALTER,
    Operation.DESCRIBE_CONFIGS,
    Operation.ALTER_CONFIGS,
)
_CLUSTER_OPERATIONS = (
    Operation.CREATE,
    Operation.CLUSTER_ACTION,
    Operation.DESCRIBE_CONFIGS,
    Operation.ALTER_CONFIGS,
    Operation.IDEMPOTENT_WRITE,
    Operation.ALTER,
    Operation.DESCRIBE,
)
#: Kafka's ``Topic.validate``: 1 to 249 of these, not ``.`` nor ``..``
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")
_NO_THROTTLE = datetime.timedelta(0)


@dataclass(frozen=True)
class OwnNode:
    """The controller's node as the brokers' metadata lists it on one listener name."""

    node_id: int
    host: str
    port: int


@dataclass(frozen=True)
class TopicView:
    """A topic as ZooKeeper holds it: its id (base64, or :data:`ZERO_UUID`) and, for each partition with a state
    znode, its replicas and state."""

    name: str
    topic_id: str
    partitions: tuple[tuple[int, tuple[int, ...], PartitionStateZnode], ...]


@dataclass(frozen=True)
class MetadataView:
    """What a Metadata answer is made of: the registered brokers, the cluster id (``None``: none), the controller
    id (-1: none known) and the topics read (by name)."""

    brokers: tuple[Broker, ...]
    cluster_id: str | None
    controller_id: int
    topics: Mapping[str, TopicView]


def _module(version: int, kind: str) -> Any:
    return importlib.import_module(f"kio.schema.metadata.v{version}.{kind}")


def _all_topics(version: int, request: Any) -> bool:
    return request.topics is None or (version == 0 and not request.topics)


def _asked_ids(version: int, request: Any) -> list[str]:
    if version < 10 or _all_topics(version, request):
        return []
    ids = (uuid_text(getattr(t, "topic_id", None)) for t in request.topics)
    return list(dict.fromkeys(i for i in ids if i != ZERO_UUID))


def topics_to_read(version: int, request: Any) -> list[str] | None:
    """The topics of a Metadata request (``request``, kio's, at ``version``) whose znodes the answer needs;
    ``None``: every topic (all asked, or some asked by id)."""
    if _all_topics(version, request) or _asked_ids(version, request):
        return None
    return list(dict.fromkeys(str(t.name) for t in request.topics if t.name is not None))


def read_view(cluster: Cluster, topics: Iterable[str] | None, controller_id: int, timeout_s: float) -> MetadataView:
    """The registered brokers, the cluster id and ``topics`` (``None``: all) from ZooKeeper: the topic znodes at
    once, then every partition's state znode at once; a topic marked for deletion is left out. Kazoo's errors
    are raised."""
    zk = cluster.zk
    try:
        cluster_id = str(json.loads(zk.get(CLUSTER_ID_PATH)[0])["id"])
    except NoNodeError:
        cluster_id = None
    deleting = set(zk.get_children(zkdata.DELETE_TOPICS)) if zk.exists(zkdata.DELETE_TOPICS) else set()
    znodes = [z for z in cluster.topic_znodes(topics) if z.topic not in deleting]
    pending = [
        (z, p, replicas, zk.get_async(zkdata.partition_state_path(z.topic, p)))
        for z in znodes
        for p, replicas in z.partitions
    ]
    states: dict[str, list[tuple[int, tuple[int, ...], PartitionStateZnode]]] = {z.topic: [] for z in znodes}
    for z, p, replicas, result in pending:
        try:
            data, stat = result.get(timeout=timeout_s)
        except NoNodeError:  # not elected yet: no broker lists the partition either
            continue
        try:
            states[z.topic].append((p, replicas, zkdata.decode_partition_state(data.decode(), int(stat.version))))
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            log.warning("%s-%s: not a partition state znode (%s): left out of Metadata", z.topic, p, e)
    views = {z.topic: TopicView(z.topic, z.topic_id or ZERO_UUID, tuple(sorted(states[z.topic]))) for z in znodes}
    return MetadataView(tuple(cluster.registered()), cluster_id, controller_id, views)


def _bitfield(allowed: Check, operations: Sequence[Operation], resource: Resource, name: str) -> int:
    """Kafka's ``authorizedOperations``: a bit (1 << code) for each of ``operations`` allowed."""
    bits = 0
    for op in operations:
        if allowed(op, resource, name):
            bits |= 1 << _CODES[op]
    return bits


def metadata_response(
    version: int, request: Any, view: MetadataView, *, listener: str, own: OwnNode | None, allowed: Check
) -> Any:
    """Kafka 3.9's MetadataResponse at ``version`` to ``request`` (kio's) on ``listener``, from ``view``; ``own``:
    the controller's node on that listener (``None``: not listed); ``allowed``: what the principal may do."""
    m = _module(version, "response")
    nodes: dict[int, tuple[str, int, str | None]] = {}
    for b in view.brokers:
        e = next((e for e in b.endpoints if e.listener == listener), None)
        if e is not None:
            nodes[b.id] = (e.host, e.port, b.rack)
    registered = {b.id for b in view.brokers}
    if own is not None:
        nodes.setdefault(own.node_id, (own.host, own.port, None))
        registered.add(own.node_id)

    all_topics = _all_topics(version, request)
    ids = _asked_ids(version, request)
    by_id = {t.topic_id: t.name for t in view.topics.values() if t.topic_id != ZERO_UUID}
    if all_topics:
        names = sorted(view.topics)
    elif ids:
        names = [by_id[i] for i in ids if i in by_id]
    else:
        names = list(dict.fromkeys(str(t.name) for t in request.topics if t.name is not None))
    authorized = [n for n in names if allowed(Operation.DESCRIBE, Resource.TOPIC, n)]
    allowed_names = frozenset(authorized)
    refused = [n for n in names if n not in allowed_names]
    ops_asked = version >= 8 and bool(request.include_topic_authorized_operations)

    def topic(error: int, name: str | None, topic_id: str, parts: tuple[Any, ...], ops: int = NOT_ASKED) -> Any:
        return _make(
            m.MetadataResponseTopic,
            error_code=_error(error),
            name=name,
            topic_id=kafka_uuid(topic_id),
            is_internal=name in INTERNAL_TOPICS,
            partitions=parts,
            topic_authorized_operations=ops,
        )

    out = [topic(UNKNOWN_TOPIC_ID, None, i, ()) for i in ids if i not in by_id]
    for name in authorized:
        ops = _bitfield(allowed, _TOPIC_OPERATIONS, Resource.TOPIC, name) if ops_asked else NOT_ASKED
        t = view.topics.get(name)
        if t is None:
            legal = _LEGAL_TOPIC.fullmatch(name) is not None and name not in (".", "..")
            error = UNKNOWN_TOPIC_OR_PARTITION if legal else INVALID_TOPIC_EXCEPTION
            out.append(topic(error, name, ZERO_UUID, (), ops))
            continue
        parts = tuple(
            _partition(m, version, index=p, replicas=r, state=st, nodes=nodes, registered=registered)
            for p, r, st in t.partitions
        )
        out.append(topic(0, name, t.topic_id, parts, ops))
    if not all_topics:
        # named and not allowed: refused, the topic id not disclosed unless it was asked by id
        out.extend(
            topic(TOPIC_AUTHORIZATION_FAILED, None if ids else n, view.topics[n].topic_id if ids else ZERO_UUID, ())
            for n in refused
        )

    cluster_ops = NOT_ASKED
    if 8 <= version <= 10 and bool(request.include_cluster_authorized_operations):
        cluster_ops = (
            _bitfield(allowed, _CLUSTER_OPERATIONS, Resource.CLUSTER, CLUSTER_NAME)
            if allowed(Operation.DESCRIBE, Resource.CLUSTER, CLUSTER_NAME)
            else 0
        )
    brokers = tuple(
        _make(m.MetadataResponseBroker, node_id=i, host=h, port=p, rack=r) for i, (h, p, r) in sorted(nodes.items())
    )
    return _make(
        m.MetadataResponse,
        throttle_time=_NO_THROTTLE,
        brokers=brokers,
        cluster_id=view.cluster_id,
        controller_id=view.controller_id,
        topics=tuple(out),
        cluster_authorized_operations=cluster_ops,
    )


def _partition(
    m: Any,
    version: int,
    *,
    index: int,
    replicas: tuple[int, ...],
    state: PartitionStateZnode,
    nodes: Mapping[int, Any],
    registered: set[int],
) -> Any:
    """One partition as ``ZkMetadataCache.getPartitionMetadata`` answers it."""
    shown_replicas, isr = replicas, state.isr
    if version == 0:  # v0 leaves out the replicas without an endpoint of the listener
        shown_replicas = tuple(r for r in replicas if r in nodes)
        isr = tuple(r for r in state.isr if r in nodes)
    leader = state.leader
    if leader not in nodes:
        error = LEADER_NOT_AVAILABLE if leader not in registered or version < 6 else LISTENER_NOT_FOUND
        leader = -1
    elif len(shown_replicas) < len(replicas) or len(isr) < len(state.isr):
        error = REPLICA_NOT_AVAILABLE
    else:
        error = 0
    return _make(
        m.MetadataResponsePartition,
        error_code=_error(error),
        partition_index=index,
        leader_id=leader,
        leader_epoch=state.leader_epoch,
        replica_nodes=shown_replicas,
        isr_nodes=isr,
        offline_replicas=tuple(r for r in replicas if r not in registered),
    )


def _make(cls: Any, **values: Any) -> Any:
    names = set(cls.__dataclass_fields__)
    return cls(**{k: v for k, v in values.items() if k in names})


def _error(code: int) -> Any:
    from kio.schema.errors import ErrorCode

    return ErrorCode(code)
