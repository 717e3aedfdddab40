"""Events: everything that reaches ``core.controller.step``.

Three families, all frozen dataclasses with a stable, versioned JSON form
(``{"version": 1, "type": <TYPE>, ...fields}``):

* **admin commands** (topic ``livectl.admin``), each with a ``request_id`` that its
  :class:`core.decisions.AdminResult` echoes;
* **broker events** (topic ``livectl.broker-events``): registrations appearing and vanishing
  (published by the driver's liveness bridge), AlterPartition, LeaderAndIsr / StopReplica
  responses, ControlledShutdown requests, log-dir failures;
* **internal events** made by the driver: controller failover (with a ZooKeeper snapshot) and the
  auto leader rebalance tick.

``decode_event`` / ``encode_event`` convert between the JSON form and the dataclasses. Decoding is
strict and raises :class:`core.errors.FormatError` naming the field and the reason.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from enum import Enum
from typing import Any, ClassVar

from core import jsonform as jf
from core import limits as lim
from core.cluster_config import controller_fields
from core.errors import FormatError
from core.limits import MAX_TOPIC_LENGTH

EVENT_VERSION = 1

#: Kafka's ``Topic.LEGAL_CHARS``; matched against the whole name (``fullmatch``: a ``$`` would let a
#: final newline through)
_TOPIC_RE = re.compile(r"[a-zA-Z0-9._-]+")
#: the same rule as one regular expression, for the great-expectations suite
TOPIC_NAME_REGEX = r"^(?!\.\.?\Z)[a-zA-Z0-9._-]{1,249}\Z"
#: Kafka's ``Uuid.toString()``: 16 bytes, base64url without padding
TOPIC_ID_REGEX = re.compile(r"[A-Za-z0-9_-]{21}[AQgw]")
INVALID_TOPIC = "INVALID_TOPIC_EXCEPTION"


def validate_topic_name(name: str, fieldname: str = "topic") -> str:
    """Kafka's topic name rules (``org.apache.kafka.common.internals.Topic.validate``); the error is
    Kafka's ``INVALID_TOPIC_EXCEPTION``."""
    if not name:
        raise FormatError(fieldname, "topic name is illegal, it can't be empty", INVALID_TOPIC)
    if name in (".", ".."):
        raise FormatError(fieldname, 'topic name cannot be "." or ".."', INVALID_TOPIC)
    if len(name) > MAX_TOPIC_LENGTH:
        raise FormatError(
            fieldname,
            f"topic name is illegal, it can't be longer than {MAX_TOPIC_LENGTH} characters, "
            f"got {len(name)}: {lim.show(name)}",
            INVALID_TOPIC,
        )
    if not _TOPIC_RE.fullmatch(name):
        raise FormatError(
            fieldname,
            f"topic name {lim.show(name)} is illegal, it contains a character other than ASCII alphanumerics, "
            "'.', '_' and '-'",
            INVALID_TOPIC,
        )
    return name


def topic_field(o: Mapping[str, Any], field_: str = "topic", prefix: str = "") -> str:
    """A topic name field, checked by Kafka's rules."""
    v = jf.req(o, field_, prefix)
    if not isinstance(v, str):
        raise FormatError(prefix + field_, f"must be a string, got {type(v).__name__}", INVALID_TOPIC)
    return validate_topic_name(v, prefix + field_)


@dataclass(frozen=True, order=True)
class TopicPartition:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, order=True)
class PartitionReplica:
    """A replica of a partition on one broker (Kafka's ``PartitionAndReplica``)."""

    topic: str
    partition: int
    replica: int

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


class ElectionType(Enum):
    PREFERRED = "PREFERRED"
    UNCLEAN = "UNCLEAN"


@dataclass(frozen=True)
class Endpoint:
    """One listener of a broker registration (``/brokers/ids/<id>`` ``endpoints``)."""

    listener: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"


class Event:
    """Base of every event. ``TYPE`` is the JSON ``type``; ``scope`` tells routing what it touches."""

    TYPE: ClassVar[str] = ""
    #: "topic" events go to the bucket of ``self.topic`` (or the topics of ``self.topics()``);
    #: "cluster" events are copied to every bucket.
    SCOPE: ClassVar[str] = "topic"

    def topics(self) -> tuple[str, ...]:
        """The topics this event touches (for routing); empty for cluster-scoped events."""
        return ()


# --------------------------------------------------------------------------- admin commands


class AdminCommand(Event):
    request_id: str


@dataclass(frozen=True)
class CreateTopic(AdminCommand):
    """Create ``topic`` with ``partitions`` × ``replication_factor`` placed by Kafka's default
    placement, or with the explicit ``replica_assignment`` (partition -> broker ids)."""

    TYPE: ClassVar[str] = "create_topic"
    request_id: str
    topic: str
    partitions: int = 0
    replication_factor: int = 0
    replica_assignment: tuple[tuple[int, ...], ...] = ()
    configs: tuple[tuple[str, str], ...] = ()

    def topics(self) -> tuple[str, ...]:
        return (self.topic,)


@dataclass(frozen=True)
class DeleteTopic(AdminCommand):
    TYPE: ClassVar[str] = "delete_topic"
    request_id: str
    topic: str

    def topics(self) -> tuple[str, ...]:
        return (self.topic,)


@dataclass(frozen=True)
class CreatePartitions(AdminCommand):
    """Grow ``topic`` to ``total_count`` partitions (``kafka-topics --alter --partitions``)."""

    TYPE: ClassVar[str] = "create_partitions"
    request_id: str
    topic: str
    total_count: int
    replica_assignment: tuple[tuple[int, ...], ...] = ()

    def topics(self) -> tuple[str, ...]:
        return (self.topic,)


@dataclass(frozen=True)
class PartitionTarget:
    """One entry of Kafka's reassignment JSON. ``replicas`` empty means cancel."""

    topic: str
    partition: int
    replicas: tuple[int, ...]


@dataclass(frozen=True)
class ReassignPartitions(AdminCommand):
    """Kafka's reassignment JSON ``{"version":1,"partitions":[{"topic","partition","replicas"}]}``.

    Routing splits a multi-topic command into one per topic (same ``request_id``).
    """

    TYPE: ClassVar[str] = "reassign_partitions"
    request_id: str
    partitions: tuple[PartitionTarget, ...]

    def topics(self) -> tuple[str, ...]:
        return tuple(sorted({p.topic for p in self.partitions}))


@dataclass(frozen=True)
class CancelReassignment(AdminCommand):
    """Cancel the listed reassignments (KIP-455: reassign back to the origin replicas)."""

    TYPE: ClassVar[str] = "cancel_reassignment"
    request_id: str
    partitions: tuple[TopicPartition, ...]

    def topics(self) -> tuple[str, ...]:
        return tuple(sorted({p.topic for p in self.partitions}))


@dataclass(frozen=True)
class ElectLeaders(AdminCommand):
    """``kafka-leader-election``: ``partitions`` empty means all partitions (cluster-scoped)."""

    TYPE: ClassVar[str] = "elect_leaders"
    request_id: str
    election_type: ElectionType
    partitions: tuple[TopicPartition, ...] = ()

    def topics(self) -> tuple[str, ...]:
        return tuple(sorted({p.topic for p in self.partitions}))


@dataclass(frozen=True)
class AlterTopicConfig(AdminCommand):
    """Set topic configs and remove overrides (``delete_configs``, names), as ``kafka-configs --alter
    --add-config/--delete-config``; livectl acts on ``unclean.leader.election.enable``."""

    TYPE: ClassVar[str] = "alter_topic_config"
    request_id: str
    topic: str
    configs: tuple[tuple[str, str], ...]
    delete_configs: tuple[str, ...] = ()

    def topics(self) -> tuple[str, ...]:
        return (self.topic,)


# --------------------------------------------------------------------------- broker events


@dataclass(frozen=True)
class BrokerStartup(Event):
    """A registration appeared under ``/brokers/ids`` (epoch = the znode's czxid).

    A startup for a broker already live with an older epoch is a bounce (Kafka handles it as failure
    followed by startup)."""

    TYPE: ClassVar[str] = "broker_startup"
    SCOPE: ClassVar[str] = "cluster"
    broker_id: int
    broker_epoch: int
    rack: str | None = None
    endpoints: tuple[Endpoint, ...] = ()


@dataclass(frozen=True)
class BrokerFailure(Event):
    """A registration vanished from ``/brokers/ids``."""

    TYPE: ClassVar[str] = "broker_failure"
    SCOPE: ClassVar[str] = "cluster"
    broker_id: int
    broker_epoch: int = -1


@dataclass(frozen=True)
class AlterPartition(Event):
    """A leader asks to change the ISR of one partition (Kafka's AlterPartition request)."""

    TYPE: ClassVar[str] = "alter_partition"
    broker_id: int
    broker_epoch: int
    topic: str
    partition: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]
    leader_recovery_state: int = 0
    #: the sender's id for this proposal, echoed as ``correlationId`` in the answer's partition entry (our
    #: transport has no request header to carry Kafka's correlation id); -1 = none
    correlation_id: int = -1
    #: Kafka's topic id (base64) when the proposal names its topic by id, as AlterPartition v2+ does
    #: (Kafka >= 2.8 brokers); ``topic`` still routes it to its bucket. None: by name (v0/v1)
    topic_id: str | None = None

    def topics(self) -> tuple[str, ...]:
        return (self.topic,)


@dataclass(frozen=True)
class PartitionError:
    topic: str
    partition: int
    error_code: int = 0


@dataclass(frozen=True)
class LeaderAndIsrResponse(Event):
    """A broker's answer to a LeaderAndIsr request; ``KAFKA_STORAGE_ERROR`` (56) marks the replica
    offline. Routed to each topic it names."""

    TYPE: ClassVar[str] = "leader_and_isr_response"
    broker_id: int
    partitions: tuple[PartitionError, ...]
    error_code: int = 0

    def topics(self) -> tuple[str, ...]:
        return tuple(sorted({p.topic for p in self.partitions}))


@dataclass(frozen=True)
class StopReplicaResponse(Event):
    """A broker's answer to StopReplica with ``delete_partition`` (drives topic deletion)."""

    TYPE: ClassVar[str] = "stop_replica_response"
    broker_id: int
    partitions: tuple[PartitionError, ...]
    error_code: int = 0

    def topics(self) -> tuple[str, ...]:
        return tuple(sorted({p.topic for p in self.partitions}))


@dataclass(frozen=True)
class ControlledShutdown(Event):
    """A broker asks to shut down cleanly (Kafka's ControlledShutdown request)."""

    TYPE: ClassVar[str] = "controlled_shutdown"
    SCOPE: ClassVar[str] = "cluster"
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True)
class LogDirFailure(Event):
    """A broker's log directory failed (``/log_dir_event_notification``)."""

    TYPE: ClassVar[str] = "log_dir_failure"
    SCOPE: ClassVar[str] = "cluster"
    broker_id: int


# --------------------------------------------------------------------------- internal events


@dataclass(frozen=True)
class BrokerInfo:
    broker_id: int
    broker_epoch: int
    rack: str | None = None
    endpoints: tuple[Endpoint, ...] = ()


@dataclass(frozen=True)
class PartitionStateZnode:
    """``/brokers/topics/<t>/partitions/<p>/state`` as read, with its znode version."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int
    leader_recovery_state: int = 0


@dataclass(frozen=True)
class TopicZnode:
    """``/brokers/topics/<t>`` as read: assignment plus KIP-455 adding / removing replicas."""

    topic: str
    partitions: tuple[tuple[int, tuple[int, ...]], ...]
    adding_replicas: tuple[tuple[int, tuple[int, ...]], ...] = ()
    removing_replicas: tuple[tuple[int, tuple[int, ...]], ...] = ()
    topic_id: str | None = None
    zk_version: int = 0


@dataclass(frozen=True)
class ZkSnapshot:
    """What a new controller reads from ZooKeeper on failover (Kafka's ``initializeControllerContext``)."""

    controller_epoch: int
    controller_epoch_zk_version: int
    brokers: tuple[BrokerInfo, ...]
    topics: tuple[TopicZnode, ...]
    partition_states: tuple[tuple[TopicPartition, PartitionStateZnode], ...]
    #: ``/admin/reassign_partitions`` (legacy path) contents
    pending_reassignments: tuple[PartitionTarget, ...] = ()
    #: children of ``/admin/delete_topics``
    topics_to_delete: tuple[str, ...] = ()
    #: ``/admin/preferred_replica_election`` contents
    pending_preferred_elections: tuple[TopicPartition, ...] = ()
    #: per-topic configs from ``/config/topics/<t>``
    topic_configs: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()
    #: children of ``/livectl/offline_replicas`` (:mod:`core.offline_replicas`): the topics whose record a
    #: new controller must rewrite or delete, since it knows no failed log dir yet
    offline_replica_topics: tuple[str, ...] = ()


@dataclass(frozen=True)
class ControllerFailover(Event):
    """This controller was elected: rebuild the context from ``snapshot`` and resume pending work.

    The driver restricts the snapshot to each bucket's topics before routing it."""

    TYPE: ClassVar[str] = "controller_failover"
    SCOPE: ClassVar[str] = "cluster"
    controller_id: int
    snapshot: ZkSnapshot


@dataclass(frozen=True)
class PartitionStatesRead(Event):
    """Partition-state znodes of ``topic`` as the driver re-read them after ZooKeeper refused this
    controller's compare-and-set on them (``BadVersion``: the znode changed under the version the
    controller held). Kafka's controller re-reads such partitions and retries (the retry loops of
    ``PartitionStateMachine.doElectLeaderForPartitions`` and ``ReplicaStateMachine.doRemoveReplicasFromIsr``):
    the partition's leadership is taken from the znode and what it still needs is done again — a leader
    that is not live is replaced, replicas that are not live leave the ISR, a reassignment resumes."""

    TYPE: ClassVar[str] = "partition_states_read"
    topic: str
    #: (partition, the znode as read); a partition whose znode is gone is left out
    states: tuple[tuple[int, PartitionStateZnode], ...]

    def topics(self) -> tuple[str, ...]:
        return (self.topic,)


@dataclass(frozen=True)
class TopicCreationRefused(Event):
    """ZooKeeper refused this controller's creation of ``/brokers/topics/<topic>`` with ``NodeExists``:
    someone else (an ``AdminZkClient``-style tool) had created the topic. ``refused_topic_id`` is the id
    the refused creation carried; ``znode``, ``states`` and ``configs`` are the topic as the driver read
    it afterwards (``znode`` None: gone again). The bucket forgets what it made of its own creation and
    takes the topic ZooKeeper holds, as Kafka's controller takes a topic a tool created: partitions with
    a state znode keep it, the others get one (New -> Online)."""

    TYPE: ClassVar[str] = "topic_creation_refused"
    topic: str
    refused_topic_id: str
    znode: TopicZnode | None
    states: tuple[tuple[int, PartitionStateZnode], ...] = ()
    configs: tuple[tuple[str, str], ...] = ()

    def topics(self) -> tuple[str, ...]:
        return (self.topic,)


@dataclass(frozen=True)
class AutoRebalanceTick(Event):
    """Periodic check (``leader.imbalance.check.interval.seconds``); ``brokers`` lists the brokers whose
    cluster-wide imbalance ratio (summed by the driver) is above the threshold."""

    TYPE: ClassVar[str] = "auto_rebalance_tick"
    SCOPE: ClassVar[str] = "cluster"
    brokers: tuple[int, ...] = ()


@dataclass(frozen=True)
class Tick(Event):
    """Time passes: retry topic deletions that were waiting and similar periodic work."""

    TYPE: ClassVar[str] = "tick"
    SCOPE: ClassVar[str] = "cluster"
    now_ms: int = 0


# --------------------------------------------------------------------------- ZooKeeper admin paths
#
# Published by the driver's admin-path watcher (``streaming/admin_watch.py``) when a ZooKeeper-era tool
# writes one of the paths Kafka's controller watches. Each carries the controller epoch it was read
# under: a bucket applies it only under that epoch. After a takeover the new controller has read the
# same znodes in its failover snapshot, so an event a previous controller published but did not get to
# apply is not applied a second time.


@dataclass(frozen=True)
class ZkReassignment(Event):
    """``/admin/reassign_partitions`` was created (Kafka's ``PartitionReassignmentHandler``): its
    entries, as Kafka's ``ReassignPartitionsZNode`` JSON lists them."""

    TYPE: ClassVar[str] = "zk_reassign_partitions"
    controller_epoch: int
    partitions: tuple[PartitionTarget, ...]

    def topics(self) -> tuple[str, ...]:
        return tuple(sorted({p.topic for p in self.partitions}))


@dataclass(frozen=True)
class ZkPreferredElection(Event):
    """``/admin/preferred_replica_election`` was created (Kafka's ``PreferredReplicaElectionHandler``)."""

    TYPE: ClassVar[str] = "zk_preferred_replica_election"
    controller_epoch: int
    partitions: tuple[TopicPartition, ...]

    def topics(self) -> tuple[str, ...]:
        return tuple(sorted({p.topic for p in self.partitions}))


@dataclass(frozen=True)
class ZkTopicDeletion(Event):
    """``/admin/delete_topics/<topic>`` appeared (Kafka's ``TopicDeletionHandler``)."""

    TYPE: ClassVar[str] = "zk_delete_topic"
    controller_epoch: int
    topic: str

    def topics(self) -> tuple[str, ...]:
        return (self.topic,)


@dataclass(frozen=True)
class ZkTopicChange(Event):
    """``/brokers/topics/<topic>`` appeared or changed (Kafka's ``TopicChangeHandler`` and
    ``PartitionModificationsHandler``): the assignment as the znode holds it, with the topic id and the
    configs of ``/config/topics/<topic>`` as read with it. Partitions the controller does not know are
    created."""

    TYPE: ClassVar[str] = "zk_topic_change"
    controller_epoch: int
    topic: str
    partitions: tuple[tuple[int, tuple[int, ...]], ...]
    topic_id: str | None = None
    configs: tuple[tuple[str, str], ...] = ()

    def topics(self) -> tuple[str, ...]:
        return (self.topic,)


@dataclass(frozen=True)
class ZkLogDirEvents(Event):
    """Children of ``/log_dir_event_notification`` (Kafka's ``LogDirEventNotificationHandler``):
    ``(sequence znode name, broker id)`` per notification; handled, the znodes are deleted."""

    TYPE: ClassVar[str] = "zk_log_dir_events"
    SCOPE: ClassVar[str] = "cluster"
    controller_epoch: int
    notifications: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class ClusterConfigChanged(Event):
    """The controller's configs by Kafka's names (settings, then ``/config/brokers/<default>``, then
    ``/config/brokers/<controller id>``), as the driver read them; see :mod:`core.cluster_config`."""

    TYPE: ClassVar[str] = "cluster_config"
    SCOPE: ClassVar[str] = "cluster"
    controller_epoch: int
    configs: tuple[tuple[str, str], ...]


# --------------------------------------------------------------------------- JSON form

EVENT_TYPES: dict[str, type[Event]] = {
    c.TYPE: c
    for c in (
        CreateTopic,
        DeleteTopic,
        CreatePartitions,
        ReassignPartitions,
        CancelReassignment,
        ElectLeaders,
        AlterTopicConfig,
        BrokerStartup,
        BrokerFailure,
        AlterPartition,
        LeaderAndIsrResponse,
        StopReplicaResponse,
        ControlledShutdown,
        LogDirFailure,
        ControllerFailover,
        PartitionStatesRead,
        TopicCreationRefused,
        AutoRebalanceTick,
        Tick,
        ZkReassignment,
        ZkPreferredElection,
        ZkTopicDeletion,
        ZkTopicChange,
        ZkLogDirEvents,
        ClusterConfigChanged,
    )
}
ADMIN_TYPES = frozenset(
    c.TYPE
    for c in (
        CreateTopic,
        DeleteTopic,
        CreatePartitions,
        ReassignPartitions,
        CancelReassignment,
        ElectLeaders,
        AlterTopicConfig,
    )
)


def _to_jsonable(v: Any) -> Any:
    if isinstance(v, Enum):
        return v.value
    if hasattr(v, "__dataclass_fields__"):
        return {f.name: _to_jsonable(getattr(v, f.name)) for f in fields(v)}
    if isinstance(v, tuple | list):
        return [_to_jsonable(x) for x in v]
    return v


def encode_event(event: Event) -> dict[str, Any]:
    """The versioned JSON object of ``event``. Config pairs and per-partition assignments become
    JSON objects keyed by name / partition, like Kafka's own JSON."""
    body: dict[str, Any] = {"version": EVENT_VERSION, "type": event.TYPE}
    for name in (f.name for f in fields(event)):  # type: ignore[arg-type]
        value = getattr(event, name)
        if name == "configs":
            body[name] = dict(value)
        elif name == "replica_assignment":
            body[name] = {str(i): list(r) for i, r in enumerate(value)}
        else:
            body[name] = _to_jsonable(value)
    return body


def event_to_json(event: Event) -> str:
    return json.dumps(encode_event(event), separators=(",", ":"), sort_keys=True)


def event_from_json(text: str | bytes) -> Event:
    try:
        raw = json.loads(text)
    except (ValueError, UnicodeDecodeError) as e:
        raise FormatError("$", f"not valid JSON: {e}") from None
    except RecursionError:
        raise FormatError("$", "not valid JSON: nested too deeply") from None
    return decode_event(raw)


def decode_event(raw: Any) -> Event:
    """Decode and validate one event; raises :class:`FormatError` naming the field and reason."""
    o = jf.obj(raw, "$")
    jf.version(o, EVENT_VERSION)
    t = jf.string(o, "type", max_length=lim.MAX_NAME_LENGTH)
    decoder = _DECODERS.get(t)
    if decoder is None:
        raise FormatError("type", f"unknown event type {lim.show(t)}; known: {', '.join(sorted(EVENT_TYPES))}")
    return decoder(o)


def _assignment(o: Mapping[str, Any], field_: str) -> tuple[tuple[int, ...], ...]:
    v = o.get(field_)
    if v is None:
        return ()
    m = jf.obj(v, field_)
    bad = "INVALID_REPLICA_ASSIGNMENT"
    parts: dict[int, tuple[int, ...]] = {}
    for k, reps in m.items():
        name = f"{field_}.{k if len(k) <= 40 and k.isascii() and k.isprintable() else lim.show(k, 20)}"
        if not (k.isascii() and k.isdigit() and len(k) <= 10 and int(k) <= lim.INT32_MAX):
            raise FormatError(name, "partition ids must be integers from 0 to 2147483647", bad)
        p = int(k)
        try:
            parts[p] = jf.int_seq(
                reps,
                name,
                minimum=0,
                maximum=lim.MAX_BROKER_ID,
                distinct=True,
                what=f"partition {p}",
                max_items=lim.MAX_REPLICATION_FACTOR,
            )
        except FormatError as e:
            raise FormatError(e.field, e.reason, bad) from None
        if not parts[p]:
            raise FormatError(name, f"partition {p} must list at least one broker", bad)
    if sorted(parts) != list(range(len(parts))):
        raise FormatError(
            field_, f"partitions must be numbered 0..{len(parts) - 1}, got {lim.show(sorted(parts))}", bad
        )
    rfs = {len(r) for r in parts.values()}
    if len(rfs) > 1:
        raise FormatError(field_, "all partitions must have the same replication factor", bad)
    return tuple(parts[i] for i in range(len(parts)))


def _configs(o: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    configs = jf.str_map(o, "configs", max_key_length=lim.MAX_NAME_LENGTH, max_value_length=lim.MAX_CONFIG_VALUE_LENGTH)
    # /config/topics/<t> holds them all: {"version":1,"config":{…}}
    size = len(json.dumps({"version": 1, "config": configs}, separators=(",", ":")).encode())
    if size > lim.MAX_ZNODE_BYTES:
        raise FormatError(
            "configs",
            f"the topic's config znode would be {size} bytes, over the {lim.MAX_ZNODE_BYTES} bytes a znode may "
            f"hold (ZooKeeper's jute.maxbuffer is {lim.JUTE_MAXBUFFER})",
            "INVALID_CONFIG",
        )
    return tuple(sorted(configs.items()))


def _tp_list(o: Mapping[str, Any], field_: str, *, required: bool) -> tuple[TopicPartition, ...]:
    if o.get(field_) is None and not required:
        return ()
    out = []
    for i, e in enumerate(jf.obj_list(o, field_, max_items=lim.MAX_LIST_ITEMS)):
        pre = f"{field_}[{i}]."
        out.append(TopicPartition(topic_field(e, "topic", pre), _partition_id(e, pre)))
    return tuple(out)


def _partition_id(o: Mapping[str, Any], prefix: str = "") -> int:
    return jf.integer(o, "partition", prefix, minimum=0, maximum=lim.INT32_MAX)


def _broker_id(o: Mapping[str, Any], field_: str = "broker_id", prefix: str = "") -> int:
    return jf.integer(o, field_, prefix, minimum=0, maximum=lim.MAX_BROKER_ID)


def _error_code(o: Mapping[str, Any], prefix: str = "") -> int:
    return jf.opt_integer(o, "error_code", 0, prefix, minimum=-(2**15), maximum=lim.INT16_MAX)


def _partition_errors(o: Mapping[str, Any]) -> tuple[PartitionError, ...]:
    out = []
    for i, e in enumerate(jf.obj_list(o, "partitions", max_items=lim.MAX_LIST_ITEMS)):
        pre = f"partitions[{i}]."
        out.append(PartitionError(topic_field(e, "topic", pre), _partition_id(e, pre), _error_code(e, pre)))
    return tuple(out)


def _name(o: Mapping[str, Any], field_: str, prefix: str = "") -> str:
    return jf.string(o, field_, prefix, max_length=lim.MAX_NAME_LENGTH)


def _endpoints(o: Mapping[str, Any], prefix: str = "") -> tuple[Endpoint, ...]:
    if o.get("endpoints") is None:
        return ()
    out = []
    for i, e in enumerate(jf.obj_list(o, "endpoints", prefix, max_items=1000)):
        pre = f"{prefix}endpoints[{i}]."
        out.append(
            Endpoint(
                _name(e, "listener", pre),
                _name(e, "host", pre),
                jf.integer(e, "port", pre, minimum=0, maximum=lim.MAX_PORT),
                jf.opt_string(e, "security_protocol", pre, max_length=lim.MAX_NAME_LENGTH) or "PLAINTEXT",
            )
        )
    return tuple(out)


def _request_id(o: Mapping[str, Any]) -> str:
    return jf.string(o, "request_id", max_length=lim.MAX_REQUEST_ID_LENGTH)


def _topic(o: Mapping[str, Any]) -> str:
    return topic_field(o)


def _fits_one_znode(partitions: int, rf: int, field_: str, error: str) -> None:
    """Refuse a topic that could never be recorded: its ``/brokers/topics/<t>`` znode, even on the
    smallest broker ids, would be over what ZooKeeper accepts (the core checks the exact size once the
    replicas are placed)."""
    need = lim.min_topic_znode_bytes(partitions, rf)
    if need > lim.MAX_ZNODE_BYTES:
        raise FormatError(
            field_,
            f"{partitions} partitions of {rf} replicas need at least {need} bytes in the topic's znode, over the "
            f"{lim.MAX_ZNODE_BYTES} bytes one znode may hold (ZooKeeper's jute.maxbuffer is {lim.JUTE_MAXBUFFER})",
            error,
        )


def _partitions_count(o: Mapping[str, Any], field_: str, default: int | None = None) -> int:
    if default is not None:
        return jf.opt_integer(o, field_, default, minimum=1, maximum=lim.MAX_PARTITIONS)
    return jf.integer(o, field_, minimum=1, maximum=lim.MAX_PARTITIONS, error="INVALID_PARTITIONS")


def _replication_factor(o: Mapping[str, Any], default: int | None = None) -> int:
    field_ = "replication_factor"
    if default is not None and o.get(field_) is None:
        return default
    return jf.integer(o, field_, minimum=1, maximum=lim.MAX_REPLICATION_FACTOR, error="INVALID_REPLICATION_FACTOR")


def _create_topic(o: Mapping[str, Any]) -> Event:
    request_id = _request_id(o)
    topic = _topic(o)
    assignment = _assignment(o, "replica_assignment")
    if assignment:
        parts = _partitions_count(o, "partitions", len(assignment))
        rf = _replication_factor(o, len(assignment[0]))
        if parts != len(assignment):
            raise FormatError(
                "partitions", f"is {parts} but replica_assignment lists {len(assignment)}", "INVALID_PARTITIONS"
            )
        if rf != len(assignment[0]):
            raise FormatError(
                "replication_factor",
                f"is {rf} but replica_assignment has {len(assignment[0])}",
                "INVALID_REPLICATION_FACTOR",
            )
    else:
        parts = _partitions_count(o, "partitions")
        rf = _replication_factor(o)
    _fits_one_znode(parts, rf, "partitions", "INVALID_PARTITIONS")
    return CreateTopic(request_id, topic, parts, rf, assignment, _configs(o))


def _create_partitions(o: Mapping[str, Any]) -> Event:
    request_id = _request_id(o)
    topic = _topic(o)
    total = _partitions_count(o, "total_count")
    assignment = _assignment(o, "replica_assignment")
    _fits_one_znode(total, len(assignment[0]) if assignment else 1, "total_count", "INVALID_PARTITIONS")
    return CreatePartitions(request_id, topic, total, assignment)


def _reassign(o: Mapping[str, Any]) -> Event:
    targets = []
    seen: set[TopicPartition] = set()
    for i, e in enumerate(jf.obj_list(o, "partitions", max_items=lim.MAX_LIST_ITEMS)):
        pre = f"partitions[{i}]."
        tp = TopicPartition(topic_field(e, "topic", pre), _partition_id(e, pre))
        if tp in seen:
            raise FormatError(pre + "partition", f"{tp} is listed twice")
        seen.add(tp)
        try:
            reps = jf.int_list(
                e,
                "replicas",
                pre,
                minimum=0,
                maximum=lim.MAX_BROKER_ID,
                distinct=True,
                what=f"partition {tp}",
                max_items=lim.MAX_REPLICATION_FACTOR,
            )
        except FormatError as err:
            raise FormatError(err.field, err.reason, "INVALID_REPLICA_ASSIGNMENT") from None
        if not reps:
            raise FormatError(
                pre + "replicas",
                f"partition {tp} must list at least one broker (use cancel to cancel)",
                "INVALID_REPLICA_ASSIGNMENT",
            )
        targets.append(PartitionTarget(tp.topic, tp.partition, reps))
    if not targets:
        raise FormatError("partitions", "must list at least one partition")
    return ReassignPartitions(_request_id(o), tuple(targets))


def _cancel(o: Mapping[str, Any]) -> Event:
    tps = _tp_list(o, "partitions", required=True)
    if not tps:
        raise FormatError("partitions", "must list at least one partition")
    return CancelReassignment(_request_id(o), tps)


def _elect(o: Mapping[str, Any]) -> Event:
    et = jf.string(o, "election_type", max_length=lim.MAX_NAME_LENGTH).upper()
    try:
        etype = ElectionType(et)
    except ValueError:
        raise FormatError("election_type", f"must be PREFERRED or UNCLEAN, got {lim.show(et)}") from None
    return ElectLeaders(_request_id(o), etype, _tp_list(o, "partitions", required=False))


def _alter_config(o: Mapping[str, Any]) -> Event:
    configs = _configs(o)
    deletes: list[str] = []
    raw = o.get("delete_configs")
    if raw is not None:
        if not isinstance(raw, list):
            raise FormatError("delete_configs", f"must be a list of config names, got {lim.show(raw)}")
        for i, name in enumerate(raw):
            deletes.append(jf.text(name, f"delete_configs[{i}]", max_length=lim.MAX_NAME_LENGTH))
    if not configs and not deletes:
        raise FormatError("configs", "must set or delete at least one config")
    both = sorted(set(dict(configs)) & set(deletes))
    if both:
        raise FormatError("delete_configs", f"{both[0]} is both set and deleted")
    return AlterTopicConfig(_request_id(o), _topic(o), configs, tuple(sorted(set(deletes))))


def _broker_startup(o: Mapping[str, Any]) -> Event:
    return BrokerStartup(
        _broker_id(o),
        jf.integer(o, "broker_epoch", minimum=0),
        jf.opt_string(o, "rack", max_length=lim.MAX_NAME_LENGTH),
        _endpoints(o),
    )


def _broker_failure(o: Mapping[str, Any]) -> Event:
    return BrokerFailure(_broker_id(o), jf.opt_integer(o, "broker_epoch", -1, minimum=-1))


def _alter_partition(o: Mapping[str, Any]) -> Event:
    broker_id = _broker_id(o)
    broker_epoch = jf.integer(o, "broker_epoch", minimum=lim.INT64_MIN, maximum=lim.INT64_MAX)
    topic = _topic(o)
    partition = _partition_id(o)
    return AlterPartition(
        broker_id,
        broker_epoch,
        topic,
        partition,
        # the wire's ranges only (int32 epochs and ids, int8 recovery state): whatever Kafka's controller
        # would answer is answered by the core, with Kafka's error codes, not refused as malformed
        jf.integer(o, "leader_epoch", minimum=lim.INT32_MIN, maximum=lim.INT32_MAX),
        jf.integer(o, "partition_epoch", minimum=lim.INT32_MIN, maximum=lim.INT32_MAX),
        jf.int_list(
            o,
            "new_isr",
            minimum=lim.INT32_MIN,
            maximum=lim.INT32_MAX,
            what=f"partition {topic}-{partition}",
            max_items=lim.MAX_REPLICATION_FACTOR,
        ),
        jf.opt_integer(o, "leader_recovery_state", 0, minimum=lim.INT8_MIN, maximum=lim.INT8_MAX),
        jf.opt_integer(o, "correlation_id", -1, minimum=-1, maximum=lim.INT32_MAX),
        _topic_id(o),
    )


def _topic_id(o: Mapping[str, Any]) -> str | None:
    """Kafka's ``Uuid`` in its base64 text form (22 characters, URL-safe alphabet), or None."""
    v = jf.opt_string(o, "topic_id", max_length=lim.MAX_NAME_LENGTH)
    if v is not None and not TOPIC_ID_REGEX.fullmatch(v):
        raise FormatError("topic_id", f"must be a Kafka topic id (22 base64url characters), got {lim.show(v)}")
    return v


def _partition_state_znode(st: Any, p: str, what: str = "") -> PartitionStateZnode:
    st = jf.obj(st, p.rstrip("."))
    return PartitionStateZnode(
        jf.integer(st, "leader", p, minimum=-1, maximum=lim.MAX_BROKER_ID),
        jf.integer(st, "leader_epoch", p, minimum=0, maximum=lim.INT32_MAX),
        jf.int_list(
            st,
            "isr",
            p,
            minimum=0,
            maximum=lim.MAX_BROKER_ID,
            distinct=True,
            what=what,
            max_items=lim.MAX_REPLICATION_FACTOR,
        ),
        jf.integer(st, "controller_epoch", p, minimum=0, maximum=lim.INT32_MAX),
        jf.integer(st, "zk_version", p, minimum=0, maximum=lim.INT32_MAX),
        jf.opt_integer(st, "leader_recovery_state", 0, p, minimum=0, maximum=1),
    )


def _partition_states_read(o: Mapping[str, Any]) -> Event:
    topic = _topic(o)
    return PartitionStatesRead(topic, _states(o, topic))


def _topic_creation_refused(o: Mapping[str, Any]) -> Event:
    topic = _topic(o)
    refused = jf.string(o, "refused_topic_id", max_length=lim.MAX_NAME_LENGTH)
    raw = o.get("znode")
    znode = None
    if raw is not None:
        z = jf.obj(raw, "znode")
        p = "znode."

        def pairs(x: Any, name: str) -> tuple[tuple[int, tuple[int, ...]], ...]:
            if not isinstance(x, list) or not all(isinstance(e, list) and len(e) == 2 for e in x):
                raise FormatError(name, "must be a list of [partition, replicas]")
            return tuple((jf.integer({"p": k}, "p", name + ".", minimum=0), jf.int_seq(v, name)) for k, v in x)

        znode = TopicZnode(
            topic,
            pairs(jf.req(z, "partitions", p), p + "partitions"),
            pairs(z.get("adding_replicas") or [], p + "adding_replicas"),
            pairs(z.get("removing_replicas") or [], p + "removing_replicas"),
            jf.opt_string(z, "topic_id", p),
            jf.opt_integer(z, "zk_version", 0, p),
        )
    configs = tuple(sorted(_configs(o))) if o.get("configs") else ()
    return TopicCreationRefused(topic, refused, znode, _states(o, topic, required=False), configs)


def _states(o: Mapping[str, Any], topic: str, required: bool = True) -> tuple[tuple[int, PartitionStateZnode], ...]:
    raw = jf.req(o, "states") if required else (o.get("states") or [])
    if not isinstance(raw, list):
        raise FormatError("states", f"must be a list, got {type(raw).__name__}")
    states = []
    for i, entry in enumerate(raw):
        if (
            not isinstance(entry, list)
            or len(entry) != 2
            or not isinstance(entry[0], int)
            or isinstance(entry[0], bool)
            or not 0 <= entry[0] <= lim.INT32_MAX
        ):
            raise FormatError(f"states[{i}]", "must be [partition, partition-state znode]")
        states.append((entry[0], _partition_state_znode(entry[1], f"states[{i}][1].", f"partition {topic}-{entry[0]}")))
    return tuple(states)


def _lisr_response(o: Mapping[str, Any]) -> Event:
    return LeaderAndIsrResponse(_broker_id(o), _partition_errors(o), _error_code(o))


def _stop_replica_response(o: Mapping[str, Any]) -> Event:
    return StopReplicaResponse(_broker_id(o), _partition_errors(o), _error_code(o))


def _controlled_shutdown(o: Mapping[str, Any]) -> Event:
    return ControlledShutdown(_broker_id(o), jf.integer(o, "broker_epoch", minimum=-1))


def _log_dir_failure(o: Mapping[str, Any]) -> Event:
    return LogDirFailure(_broker_id(o))


def _snapshot(raw: Any) -> ZkSnapshot:
    o = jf.obj(raw, "snapshot")
    p = "snapshot."
    brokers = tuple(
        BrokerInfo(
            jf.integer(b, "broker_id", p), jf.integer(b, "broker_epoch", p), jf.opt_string(b, "rack"), _endpoints(b, p)
        )
        for b in jf.obj_list(o, "brokers", p)
    )

    def pairs(x: Any, name: str) -> tuple[tuple[int, tuple[int, ...]], ...]:
        return tuple((int(k), jf.int_seq(v, name)) for k, v in x)

    topics = tuple(
        TopicZnode(
            jf.string(t, "topic", p),
            pairs(jf.req(t, "partitions", p), p + "partitions"),
            pairs(t.get("adding_replicas") or (), p + "adding_replicas"),
            pairs(t.get("removing_replicas") or (), p + "removing_replicas"),
            jf.opt_string(t, "topic_id"),
            jf.opt_integer(t, "zk_version", 0),
        )
        for t in jf.obj_list(o, "topics", p)
    )
    states = []
    for entry in jf.req(o, "partition_states", p):
        tp_raw, st = entry
        tp = TopicPartition(jf.string(tp_raw, "topic", p), jf.integer(tp_raw, "partition", p))
        states.append(
            (
                tp,
                PartitionStateZnode(
                    jf.integer(st, "leader", p),
                    jf.integer(st, "leader_epoch", p),
                    jf.int_list(st, "isr", p),
                    jf.integer(st, "controller_epoch", p),
                    jf.integer(st, "zk_version", p),
                    jf.opt_integer(st, "leader_recovery_state", 0, p),
                ),
            )
        )
    pending = tuple(
        PartitionTarget(jf.string(e, "topic", p), jf.integer(e, "partition", p), jf.int_list(e, "replicas", p))
        for e in (o.get("pending_reassignments") or ())
    )
    return ZkSnapshot(
        jf.integer(o, "controller_epoch", p),
        jf.integer(o, "controller_epoch_zk_version", p),
        brokers,
        topics,
        tuple(states),
        pending,
        tuple(o.get("topics_to_delete") or ()),
        _tp_list(o, "pending_preferred_elections", required=False),
        tuple((str(t), tuple((str(k), str(v)) for k, v in cfg)) for t, cfg in (o.get("topic_configs") or ())),
        tuple(
            jf.text(t, f"{p}offline_replica_topics", max_length=lim.MAX_NAME_LENGTH)
            for t in (o.get("offline_replica_topics") or ())
        ),
    )


def _failover(o: Mapping[str, Any]) -> Event:
    return ControllerFailover(jf.integer(o, "controller_id", minimum=0), _snapshot(jf.req(o, "snapshot")))


def _rebalance(o: Mapping[str, Any]) -> Event:
    return AutoRebalanceTick(
        jf.int_seq(
            o.get("brokers") or [], "brokers", minimum=0, maximum=lim.MAX_BROKER_ID, max_items=lim.MAX_LIST_ITEMS
        )
    )


def _tick(o: Mapping[str, Any]) -> Event:
    return Tick(jf.opt_integer(o, "now_ms", 0, minimum=0))


def _controller_epoch(o: Mapping[str, Any]) -> int:
    return jf.integer(o, "controller_epoch", minimum=0, maximum=lim.INT32_MAX)


def _zk_reassignment(o: Mapping[str, Any]) -> Event:
    parsed = _reassign({**o, "request_id": "zk"})
    assert isinstance(parsed, ReassignPartitions)
    return ZkReassignment(_controller_epoch(o), parsed.partitions)


def _zk_preferred(o: Mapping[str, Any]) -> Event:
    return ZkPreferredElection(_controller_epoch(o), _tp_list(o, "partitions", required=True))


def _zk_topic_change(o: Mapping[str, Any]) -> Event:
    topic = _topic(o)
    raw = jf.req(o, "partitions")
    if not isinstance(raw, list) or len(raw) > lim.MAX_LIST_ITEMS:
        raise FormatError("partitions", f"must be a list of at most {lim.MAX_LIST_ITEMS} [partition, replicas]")
    parts: list[tuple[int, tuple[int, ...]]] = []
    for i, entry in enumerate(raw):
        if not isinstance(entry, list) or len(entry) != 2:
            raise FormatError(f"partitions[{i}]", "must be [partition, replicas]")
        p = jf._int_value(entry[0], f"partitions[{i}][0]", 0, lim.INT32_MAX)
        reps = jf.int_seq(
            entry[1],
            f"partitions[{i}][1]",
            minimum=0,
            maximum=lim.MAX_BROKER_ID,
            distinct=True,
            what=f"partition {topic}-{p}",
            max_items=lim.MAX_REPLICATION_FACTOR,
        )
        if not reps:
            raise FormatError(f"partitions[{i}][1]", f"partition {topic}-{p} must list at least one replica")
        parts.append((p, reps))
    return ZkTopicChange(
        _controller_epoch(o),
        topic,
        tuple(parts),
        jf.opt_string(o, "topic_id", max_length=lim.MAX_NAME_LENGTH),
        _configs(o),
    )


def _zk_log_dir_events(o: Mapping[str, Any]) -> Event:
    raw = jf.req(o, "notifications")
    if not isinstance(raw, list) or len(raw) > lim.MAX_LIST_ITEMS:
        raise FormatError("notifications", f"must be a list of at most {lim.MAX_LIST_ITEMS} [znode, broker]")
    out: list[tuple[str, int]] = []
    for i, entry in enumerate(raw):
        if not isinstance(entry, list) or len(entry) != 2:
            raise FormatError(f"notifications[{i}]", "must be [sequence znode name, broker id]")
        name = jf.text(entry[0], f"notifications[{i}][0]", max_length=lim.MAX_NAME_LENGTH)
        if not re.fullmatch(r"log_dir_event_\d{10}", name):
            raise FormatError(f"notifications[{i}][0]", f"must be log_dir_event_<10 digits>, got {lim.show(name)}")
        out.append((name, jf._int_value(entry[1], f"notifications[{i}][1]", 0, lim.MAX_BROKER_ID)))
    return ZkLogDirEvents(_controller_epoch(o), tuple(out))


def _cluster_config(o: Mapping[str, Any]) -> Event:
    configs = _configs(o)
    controller_fields(configs)  # each value as Kafka parses it; FormatError names the config
    return ClusterConfigChanged(_controller_epoch(o), configs)


_DECODERS: dict[str, Callable[[Mapping[str, Any]], Event]] = {
    CreateTopic.TYPE: _create_topic,
    DeleteTopic.TYPE: lambda o: DeleteTopic(_request_id(o), _topic(o)),
    CreatePartitions.TYPE: _create_partitions,
    ReassignPartitions.TYPE: _reassign,
    CancelReassignment.TYPE: _cancel,
    ElectLeaders.TYPE: _elect,
    AlterTopicConfig.TYPE: _alter_config,
    BrokerStartup.TYPE: _broker_startup,
    BrokerFailure.TYPE: _broker_failure,
    AlterPartition.TYPE: _alter_partition,
    LeaderAndIsrResponse.TYPE: _lisr_response,
    StopReplicaResponse.TYPE: _stop_replica_response,
    ControlledShutdown.TYPE: _controlled_shutdown,
    LogDirFailure.TYPE: _log_dir_failure,
    ControllerFailover.TYPE: _failover,
    PartitionStatesRead.TYPE: _partition_states_read,
    TopicCreationRefused.TYPE: _topic_creation_refused,
    AutoRebalanceTick.TYPE: _rebalance,
    Tick.TYPE: _tick,
    ZkReassignment.TYPE: _zk_reassignment,
    ZkPreferredElection.TYPE: _zk_preferred,
    ZkTopicDeletion.TYPE: lambda o: ZkTopicDeletion(_controller_epoch(o), _topic(o)),
    ZkTopicChange.TYPE: _zk_topic_change,
    ZkLogDirEvents.TYPE: _zk_log_dir_events,
    ClusterConfigChanged.TYPE: _cluster_config,
}
