"""The requests the controller's endpoint answers itself, and what its ApiVersions lists.

A ZooKeeper-mode Kafka broker sends its controller ControlledShutdown (on SIGTERM), AlterPartition (ISR
changes, IBP 2.7+) and AllocateProducerIds (IBP 3.0+). Kafka's clients see the endpoint as the node of the
controller's id (a ZooKeeper-mode controller is also a broker) and send it what they send any broker, and
the controller-bound Admin calls; the endpoint answers :data:`SERVED` itself and forwards the rest
(:mod:`channel.forward`) but :data:`NOT_FORWARDED`. This module, pure apart from ``kio``:

* :func:`alter_partition_events`: an AlterPartition request (v0-3) as one :class:`core.events.AlterPartition`
  per partition, as the simulated brokers publish them, all carrying one ``correlation_id`` that the
  controller echoes in each partition's answer; partitions whose topic id the channel cannot name are
  answered ``UNKNOWN_TOPIC_ID`` here (Kafka's controller answers them so, without a change);
* :func:`alter_partition_response`: the answers to one request, in Kafka's response of the request's version
  (topic names up to v1, topic ids from v2);
* :func:`list_partition_reassignments_response`: Kafka's ZooKeeper controller's answer, from the topic znodes;
* :func:`nothing_hosted_response`: ListGroups, ListTransactions and DescribeLogDirs answered as a node that
  hosts no group, no transaction and no replica;
* Metadata (:data:`UNLESS_FORWARDED`) is forwarded where the connection has a broker to forward to, else
  answered from ZooKeeper (:mod:`channel.metadata`);
* :func:`node_versions`: the endpoint's ApiVersions table, its own APIs and those of the broker it forwards to;
  DescribeConfigs, AlterConfigs and IncrementalAlterConfigs (:data:`PARTLY_SERVED`) are answered only when they
  are about the controller's node's own configs (:mod:`channel.node_configs`), else forwarded;
* :func:`controlled_shutdown_response`, :func:`allocate_producer_ids_response`, :func:`api_versions_response`.
"""

from __future__ import annotations

import datetime
import importlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import groupby
from types import MappingProxyType
from typing import Any

from channel.admin_apis import ADMIN_SERVED, admin_request_type
from channel.convert import kafka_uuid, uuid_text
from channel.node_configs import CONFIGS_SERVED
from channel.node_configs import request_type as configs_request_type
from core.events import AlterPartition
from core.kafka.requests import ZERO_UUID, AlterPartitionResult
from core.model import TopicPartition
from core.snapshot import TopicZnode

__all__ = [
    "ALLOCATE_PRODUCER_IDS",
    "ALTER_PARTITION",
    "API_VERSIONS",
    "BROKER_ID_NOT_REGISTERED",
    "CONTROLLED_SHUTDOWN",
    "DESCRIBE_LOG_DIRS",
    "LIST_GROUPS",
    "LIST_PARTITION_REASSIGNMENTS",
    "LIST_TRANSACTIONS",
    "METADATA",
    "METADATA_VERSIONS",
    "NOT_FORWARDED",
    "NO_LOG_DIR",
    "PARTLY_SERVED",
    "SERVED",
    "UNLESS_FORWARDED",
    "AlterPartitionAsked",
    "allocate_producer_ids_response",
    "alter_partition_events",
    "alter_partition_response",
    "api_versions_response",
    "controlled_shutdown_response",
    "error_response",
    "list_partition_reassignments_refused",
    "list_partition_reassignments_response",
    "node_versions",
    "nothing_hosted_response",
    "request_type",
    "wanted_partitions",
]

CONTROLLED_SHUTDOWN, API_VERSIONS, ALTER_PARTITION, ALLOCATE_PRODUCER_IDS = 7, 18, 56, 67
LIST_GROUPS, DESCRIBE_LOG_DIRS, LIST_PARTITION_REASSIGNMENTS, LIST_TRANSACTIONS = 16, 35, 46, 66
METADATA = 3
#: the Metadata versions answered (:mod:`channel.metadata`): every one kio has, as Kafka 3.9
METADATA_VERSIONS = range(0, 13)
#: Kafka's error codes used here
UNKNOWN_SERVER_ERROR, UNSUPPORTED_VERSION, KAFKA_STORAGE_ERROR = -1, 35, 56
UNKNOWN_TOPIC_ID, BROKER_ID_NOT_REGISTERED = 100, 102
#: the one log directory the controller's node lists (offline): it hosts no replica
NO_LOG_DIR = "livectl-controller-hosts-no-replica"

#: the versions the controller's endpoint reads and answers itself, by api key (its ApiVersions lists them,
#: narrowed to what the broker it forwards to speaks when that broker lists the API too): the brokers' own
#: requests, the Admin client's that go to the controller (:mod:`channel.admin_apis`), a node's listings and its
#: own broker configs (:mod:`channel.node_configs`), and Metadata where nothing is forwarded (:data:`UNLESS_FORWARDED`)
SERVED: Mapping[int, range] = MappingProxyType(
    {
        API_VERSIONS: range(0, 5),
        CONTROLLED_SHUTDOWN: range(0, 4),
        ALTER_PARTITION: range(0, 4),
        ALLOCATE_PRODUCER_IDS: range(0, 1),
        LIST_PARTITION_REASSIGNMENTS: range(0, 1),
        LIST_GROUPS: range(0, 6),
        LIST_TRANSACTIONS: range(0, 2),
        DESCRIBE_LOG_DIRS: range(0, 5),
        METADATA: METADATA_VERSIONS,
        **ADMIN_SERVED,
        **CONFIGS_SERVED,
    }
)
#: of :data:`SERVED`, the APIs answered only when the request is the controller's node's own (its broker configs,
#: :func:`channel.node_configs.node_share`), else forwarded as any API not served
PARTLY_SERVED: frozenset[int] = frozenset(CONFIGS_SERVED)
#: of :data:`SERVED`, the APIs forwarded when the endpoint has a broker to forward to, else answered
#: (:mod:`channel.metadata`): on a SASL listener name, or where the brokers refuse the channel's forwarding
UNLESS_FORWARDED: frozenset[int] = frozenset({METADATA})
#: what is neither answered here (unless :data:`SERVED`) nor forwarded, so that ApiVersions does not list it:
#: the controller's requests to a broker (LeaderAndIsr 4, StopReplica 5, UpdateMetadata 6), requests only
#: the active controller takes, which a broker answers ``NOT_CONTROLLER`` (CreateTopics 19, DeleteTopics 20,
#: CreatePartitions 37, ElectLeaders 43, AlterPartitionReassignments 45, UpdateFeatures 57, and the
#: controller's own 7, 46, 56, 67), AlterReplicaLogDirs 34 (about the receiving node's disks), Envelope 58
NOT_FORWARDED: frozenset[int] = frozenset(
    {4, 5, 6, CONTROLLED_SHUTDOWN, 19, 20, 34, 37, 43, 45, LIST_PARTITION_REASSIGNMENTS, 56, 57, 58, 67}
)
_NAMES: Mapping[int, str] = MappingProxyType(
    {
        API_VERSIONS: "api_versions",
        CONTROLLED_SHUTDOWN: "controlled_shutdown",
        ALTER_PARTITION: "alter_partition",
        ALLOCATE_PRODUCER_IDS: "allocate_producer_ids",
        LIST_PARTITION_REASSIGNMENTS: "list_partition_reassignments",
        LIST_GROUPS: "list_groups",
        LIST_TRANSACTIONS: "list_transactions",
        DESCRIBE_LOG_DIRS: "describe_log_dirs",
        METADATA: "metadata",
    }
)
_CLASSES: Mapping[int, str] = MappingProxyType(
    {
        API_VERSIONS: "ApiVersions",
        CONTROLLED_SHUTDOWN: "ControlledShutdown",
        ALTER_PARTITION: "AlterPartition",
        ALLOCATE_PRODUCER_IDS: "AllocateProducerIds",
        LIST_PARTITION_REASSIGNMENTS: "ListPartitionReassignments",
        LIST_GROUPS: "ListGroups",
        LIST_TRANSACTIONS: "ListTransactions",
        DESCRIBE_LOG_DIRS: "DescribeLogDirs",
        METADATA: "Metadata",
    }
)
_NO_THROTTLE = datetime.timedelta(0)


def _module(api_key: int, version: int, kind: str) -> Any:
    return importlib.import_module(f"kio.schema.{_NAMES[api_key]}.v{version}.{kind}")


def request_type(api_key: int, version: int) -> Any:
    """The kio request class of ``api_key`` at ``version`` (one of :data:`SERVED`)."""
    if api_key in ADMIN_SERVED:
        return admin_request_type(api_key, version)
    if api_key in CONFIGS_SERVED:
        return configs_request_type(api_key, version)
    return getattr(_module(api_key, version, "request"), _CLASSES[api_key] + "Request")


def _error(code: int) -> Any:
    from kio.schema.errors import ErrorCode

    return ErrorCode(code)


def node_versions(theirs: Mapping[int, tuple[int, int]]) -> dict[int, tuple[int, int]]:
    """The endpoint's ApiVersions table (api key -> (min, max)) when it forwards to a broker speaking ``theirs``
    (``{}``: no broker to forward to). Its own APIs (:data:`SERVED`) at the versions both it and the broker
    speak when the broker lists the API (the endpoint speaks as that Kafka release), else at its own; then
    every API of the broker but :data:`NOT_FORWARDED`, at the broker's versions. An API whose ranges do not
    meet is left out."""
    table: dict[int, tuple[int, int]] = {}
    for key, ours in SERVED.items():
        low, high = ours.start, ours.stop - 1
        if key in theirs:
            low, high = max(low, theirs[key][0]), min(high, theirs[key][1])
        if low <= high:
            table[key] = (low, high)
    for key, (low, high) in theirs.items():
        if key not in SERVED and key not in NOT_FORWARDED and low <= high:
            table[key] = (low, high)
    return dict(sorted(table.items()))


def api_versions_response(version: int, table: Mapping[int, tuple[int, int]] | None = None) -> Any:
    """Kafka's answer to ApiVersions at ``version``: the ranges of ``table`` (:func:`node_versions`; default:
    :data:`SERVED`); a version newer than ours is answered at v0 with ``UNSUPPORTED_VERSION`` and the ranges, so
    that the client asks again (Kafka's rule)."""
    error = 0
    if version not in SERVED[API_VERSIONS]:
        version, error = 0, UNSUPPORTED_VERSION
    if table is None:
        table = {k: (r.start, r.stop - 1) for k, r in SERVED.items()}
    m = _module(API_VERSIONS, version, "response")
    keys = tuple(m.ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in table.items())
    fields: dict[str, Any] = {"error_code": _error(error), "api_keys": keys, "throttle_time": _NO_THROTTLE}
    if version >= 3:
        fields |= {
            "supported_features": (),
            "finalized_features_epoch": -1,
            "finalized_features": (),
            "zk_migration_ready": False,
        }
    return _make(m.ApiVersionsResponse, **fields)


def _make(cls: Any, **values: Any) -> Any:
    names = set(cls.__dataclass_fields__)
    return cls(**{k: v for k, v in values.items() if k in names})


def controlled_shutdown_response(version: int, error_code: int, remaining: Sequence[TopicPartition]) -> Any:
    """Kafka's ControlledShutdownResponse at ``version``: the error and the partitions the broker still leads."""
    m = _module(CONTROLLED_SHUTDOWN, version, "response")
    parts = tuple(m.RemainingPartition(topic_name=tp.topic, partition_index=tp.partition) for tp in remaining)
    return m.ControlledShutdownResponse(error_code=_error(error_code), remaining_partitions=parts)


def allocate_producer_ids_response(error_code: int, start: int = -1, length: int = 0) -> Any:
    """Kafka's AllocateProducerIdsResponse (v0): a block of ``length`` producer ids from ``start``, or an error."""
    m = _module(ALLOCATE_PRODUCER_IDS, 0, "response")
    return m.AllocateProducerIdsResponse(
        throttle_time=_NO_THROTTLE, error_code=_error(error_code), producer_id_start=start, producer_id_len=length
    )


def error_response(api_key: int, version: int, error_code: int) -> Any:
    """The answer to a broker's request (ControlledShutdown, AlterPartition or AllocateProducerIds at ``version``)
    refused as a whole, as Kafka's ``getErrorResponse`` of each builds it: the top-level ``error_code`` and
    nothing else (no remaining partitions, no topics, no producer ids)."""
    if api_key == CONTROLLED_SHUTDOWN:
        return controlled_shutdown_response(version, error_code, ())
    if api_key == ALLOCATE_PRODUCER_IDS:
        return allocate_producer_ids_response(error_code, 0, 0)
    if api_key == ALTER_PARTITION:
        m = _module(ALTER_PARTITION, version, "response")
        return m.AlterPartitionResponse(throttle_time=_NO_THROTTLE, error_code=_error(error_code), topics=())
    raise ValueError(f"api {api_key} is not a broker's request to its controller")


def list_partition_reassignments_response(
    topics: Iterable[TopicZnode], wanted: Mapping[str, Iterable[int]] | None, error_message: str | None = None
) -> Any:
    """Kafka 3.9's ZooKeeper controller's ListPartitionReassignmentsResponse (v0; ``listPartitionReassignments``
    and ``KafkaApis``): every partition of ``topics`` (their ``/brokers/topics/<t>`` znodes) with adding or
    removing replicas, among the partitions ``wanted`` (topic -> partitions; ``None``: every one); a partition
    not being reassigned, or that does not exist, is left out. ``replicas`` is the full replica set of the
    znode's ``partitions`` (targets and the replicas being removed). Sorted by topic and partition (Kafka's
    order is its hash map's). ``error_message``: the request failed (``UNKNOWN_SERVER_ERROR``, no topics)."""
    m = _module(LIST_PARTITION_REASSIGNMENTS, 0, "response")
    if error_message is not None:
        return m.ListPartitionReassignmentsResponse(
            throttle_time=_NO_THROTTLE,
            error_code=_error(UNKNOWN_SERVER_ERROR),
            error_message=error_message,
            topics=(),
        )
    picked = None if wanted is None else {t: frozenset(ps) for t, ps in wanted.items()}
    out = []
    for znode in sorted(topics, key=lambda z: z.topic):
        if picked is not None and znode.topic not in picked:
            continue
        replicas, adding, removing = dict(znode.partitions), dict(znode.adding_replicas), dict(znode.removing_replicas)
        moving = sorted(p for p in set(adding) | set(removing) if p in replicas)
        parts = tuple(
            m.OngoingPartitionReassignment(
                partition_index=p,
                replicas=replicas[p],
                adding_replicas=adding.get(p, ()),
                removing_replicas=removing.get(p, ()),
            )
            for p in moving
            if picked is None or p in picked[znode.topic]
        )
        if parts:
            out.append(m.OngoingTopicReassignment(name=znode.topic, partitions=parts))
    return m.ListPartitionReassignmentsResponse(
        throttle_time=_NO_THROTTLE, error_code=_error(0), error_message=None, topics=tuple(out)
    )


def list_partition_reassignments_refused(request: Any, code: int, message: str) -> Any:
    """Kafka's error response of a ListPartitionReassignmentsRequest (its ``getErrorResponse``): ``code`` and
    ``message`` at the top level, and each topic it names with each of its partitions, nothing else about them."""
    m = _module(LIST_PARTITION_REASSIGNMENTS, 0, "response")
    topics = tuple(
        m.OngoingTopicReassignment(
            name=t.name,
            partitions=tuple(m.OngoingPartitionReassignment(partition_index=p) for p in t.partition_indexes),
        )
        for t in request.topics or ()
    )
    return m.ListPartitionReassignmentsResponse(
        throttle_time=_NO_THROTTLE, error_code=_error(code), error_message=message, topics=topics
    )


def wanted_partitions(request: Any) -> dict[str, tuple[int, ...]] | None:
    """The partitions a ListPartitionReassignmentsRequest names (topic -> partitions), ``None`` for every one."""
    if request.topics is None:
        return None
    wanted: dict[str, tuple[int, ...]] = {}
    for t in request.topics:
        wanted[str(t.name)] = (*wanted.get(str(t.name), ()), *(int(p) for p in t.partition_indexes))
    return wanted


def nothing_hosted_response(api_key: int, version: int) -> Any:
    """The answer of a node that hosts no group, no transaction and no replica, to ListGroups, ListTransactions
    or DescribeLogDirs at ``version``. Kafka's Admin client asks every node for its groups and transactions and
    merges the answers (a copy of another broker's would list them twice): no error and an empty list. A node
    answering DescribeLogDirs with no directory is taken for a refusal (``CLUSTER_AUTHORIZATION_FAILED``, so
    ``kafka-log-dirs --describe`` would fail): one directory, :data:`NO_LOG_DIR`, offline
    (``KAFKA_STORAGE_ERROR``) and empty, as a broker whose every disk failed answers: the node cannot host a
    replica, which is the truth."""
    m = _module(api_key, version, "response")
    lists: dict[str, Any] = {"groups": (), "transaction_states": (), "unknown_state_filters": (), "results": ()}
    if api_key == DESCRIBE_LOG_DIRS:
        offline = _make(m.DescribeLogDirsResult, error_code=_error(KAFKA_STORAGE_ERROR), log_dir=NO_LOG_DIR, topics=())
        lists["results"] = (offline,)
    return _make(getattr(m, _CLASSES[api_key] + "Response"), throttle_time=_NO_THROTTLE, error_code=_error(0), **lists)


@dataclass(frozen=True)
class AlterPartitionAsked:
    """One AlterPartition request as the channel holds it until it is answered: the partitions in the
    request's order, with the topic id each named (v2+), and the answers the channel gave itself."""

    version: int
    partitions: tuple[tuple[TopicPartition, str], ...]
    own_answers: Mapping[TopicPartition, AlterPartitionResult]


def alter_partition_events(
    broker_id: int, version: int, request: Any, topic_names: Callable[[str], str | None], correlation_id: int
) -> tuple[list[AlterPartition], AlterPartitionAsked]:
    """The events of one AlterPartition request (``request``, a kio entity of ``version``) and what to keep of it
    to build the answer. ``topic_names``: topic id (base64) -> name, or None when no topic has that id."""
    events: list[AlterPartition] = []
    partitions: list[tuple[TopicPartition, str]] = []
    own: dict[TopicPartition, AlterPartitionResult] = {}
    for topic in request.topics:
        if version >= 2:
            topic_id = uuid_text(topic.topic_id)
            name = topic_names(topic_id)
        else:
            topic_id, name = ZERO_UUID, str(topic.topic_name)
        for p in topic.partitions:
            index = int(p.partition_index)
            if name is None:
                # no topic has that id: the whole topic is answered here, as Kafka's controller answers it
                tp = TopicPartition(topic_id, index)
                own[tp] = AlterPartitionResult(
                    tp.topic, index, UNKNOWN_TOPIC_ID, -1, -1, (), -1, 0, correlation_id, topic_id
                )
                partitions.append((tp, topic_id))
                continue
            if version >= 3:
                isr = tuple(int(b.broker_id) for b in p.new_isr_with_epochs)
            else:
                isr = tuple(int(b) for b in p.new_isr)
            partitions.append((TopicPartition(name, index), topic_id))
            events.append(
                AlterPartition(
                    broker_id,
                    int(request.broker_epoch),
                    name,
                    index,
                    int(p.leader_epoch),
                    int(p.partition_epoch),
                    isr,
                    int(p.leader_recovery_state) if version >= 1 else 0,
                    correlation_id,
                    topic_id if version >= 2 else None,
                )
            )
    return events, AlterPartitionAsked(version, tuple(partitions), MappingProxyType(own))


def alter_partition_response(
    asked: AlterPartitionAsked, error_code: int, answers: Mapping[TopicPartition, AlterPartitionResult]
) -> Any:
    """Kafka's AlterPartitionResponse to ``asked``: a top-level ``error_code`` alone, or every partition's
    answer (``answers`` and the channel's own), grouped by topic in the request's order."""
    version = asked.version
    m = _module(ALTER_PARTITION, version, "response")
    if error_code:
        return m.AlterPartitionResponse(throttle_time=_NO_THROTTLE, error_code=_error(error_code), topics=())
    merged = {**answers, **asked.own_answers}
    topics = []
    for (_, topic_id), group in groupby(asked.partitions, key=lambda e: (e[0].topic, e[1])):
        entries = []
        name = ""
        for tp, _tid in group:
            r = merged[tp]
            name = tp.topic
            entries.append(
                _make(
                    m.PartitionData,
                    partition_index=tp.partition,
                    error_code=_error(r.error_code),
                    leader_id=r.leader_id,
                    leader_epoch=r.leader_epoch,
                    isr=tuple(r.isr),
                    leader_recovery_state=r.leader_recovery_state,
                    partition_epoch=r.partition_epoch,
                )
            )
        topics.append(_make(m.TopicData, topic_name=name, topic_id=kafka_uuid(topic_id), partitions=tuple(entries)))
    return m.AlterPartitionResponse(throttle_time=_NO_THROTTLE, error_code=_error(0), topics=tuple(topics))
