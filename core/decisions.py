"""Decisions: everything ``core.controller.step`` asks the shell to do, in order.

* :class:`ZkWrite` — one ZooKeeper operation with Kafka's exact path and JSON and the expected znode
  version. The ZooKeeper sink runs them in order, in fenced multi-ops (each transaction starts with
  ``check(/controller_epoch, epoch_zk_version)``).
* :class:`BrokerRequest` — one request to one broker with Kafka's field names (camelCase, as in
  Kafka's JSON request schemas), or one request to a set of brokers (the step's UpdateMetadata, naming
  its addressees). ``step`` emits them already batched: one per broker per API per step (UpdateMetadata:
  one per step), in Kafka's order LeaderAndIsr, UpdateMetadata, StopReplica; requests to brokers that are
  not live are dropped. Controller answers to broker requests (``ControlledShutdownResponse``,
  ``AlterPartitionResponse``) travel the same way.
* :class:`AdminResult` — the outcome of an admin command, with Kafka's error names.
* :class:`StateChangeFailure` — a per-item failure (invalid transition, no eligible leader, ...), as
  Kafka's state-change log reports them. Never an exception.

Every decision has a stable, versioned JSON form (``{"version": 1, "type": ..., ...}``):
:mod:`core.codec.decisions`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Any, ClassVar

from core.errors import FormatError
from core.frozen_json import EMPTY_OBJECT, freeze_object, thaw
from core.kafka.request_encoding import wire_object, with_broker_epoch
from core.kafka.requests import SHARED_BROKER_ID, Addressee, AnyBody, RequestApi, recipients


class ZkOp(Enum):
    CREATE = "create"
    SET = "set"
    DELETE = "delete"
    #: delete a znode and all its children (Kafka's ``deleteRecursive``)
    DELETE_TREE = "delete_tree"
    #: set the znode's data (any version) or create it when missing (Kafka's ``setOrCreateEntityConfigs``)
    UPSERT = "upsert"


#: ``expected_version`` meaning "any version" (ZooKeeper's -1)
ANY_VERSION = -1


class Decision:
    TYPE: ClassVar[str] = ""


@dataclass(frozen=True)
class ZkWrite(Decision):
    """One ZooKeeper write. ``data`` is the znode's JSON text (Kafka's format) or ``None``.

    For ``SET``/``DELETE`` ``expected_version`` is the compare-and-set version (``-1`` = any). For
    ``CREATE`` and ``UPSERT`` it is ignored; ``make_parents`` creates missing parents (persistent, empty)."""

    TYPE: ClassVar[str] = "zk_write"
    op: ZkOp
    path: str
    data: str | None = None
    expected_version: int = ANY_VERSION
    make_parents: bool = False


@dataclass(frozen=True)
class BrokerRequest(Decision):
    """One request to ``broker_id``, or one request to a set of brokers. ``body`` is the request as a typed
    value of :mod:`core.kafka.requests` (what the core builds: frozen, hashable) or, once the driver has
    decoded a bucket's row, its wire form (:class:`core.kafka.requests.WireBody`: Kafka's JSON object,
    parsed once). Its one encoding is :func:`core.kafka.request_encoding.encode_body`.

    A *shared* request (``addressees`` not empty: Kafka's ``sendUpdateMetadataRequests`` to a broker set)
    is one body for every addressee: ``broker_id`` is :data:`~core.kafka.requests.SHARED_BROKER_ID` (-1),
    the body's ``brokerEpoch`` is -1, and each addressee carries its own broker epoch, which its copy of the
    request has (:meth:`fan_out`). Addressees are distinct and ascending by broker id."""

    TYPE: ClassVar[str] = "broker_request"
    broker_id: int
    api: RequestApi
    body: AnyBody
    addressees: tuple[Addressee, ...] = ()

    def __post_init__(self) -> None:
        if self.addressees:
            if self.broker_id != SHARED_BROKER_ID:
                raise FormatError(
                    "broker_id", f"must be {SHARED_BROKER_ID} for a request with addressees, got {self.broker_id}"
                )
            ids = [a.broker_id for a in self.addressees]
            if ids != sorted(set(ids)) or ids[0] < 0:
                raise FormatError("addressees", f"must be distinct broker ids (>= 0) in ascending order, got {ids}")

    @property
    def shared(self) -> bool:
        """Whether this is one request to a set of brokers (``addressees``)."""
        return bool(self.addressees)

    def recipients(self) -> tuple[int, ...]:
        """The brokers this request is for: the addressees, or ``broker_id``."""
        return recipients(self.broker_id, self.addressees)

    def fan_out(self) -> list[BrokerRequest]:
        """One request per broker, each with its broker epoch in the body (what Kafka sends one by one); a
        request to one broker is itself."""
        if not self.addressees:
            return [self]
        return [
            BrokerRequest(a.broker_id, self.api, with_broker_epoch(self.body, a.broker_epoch)) for a in self.addressees
        ]

    def body_json(self) -> dict[str, Any]:
        """The body's wire form as a new JSON object (for tests and tools; code reads the typed value)."""
        return dict(wire_object(self.body))


class AdminStatus(Enum):
    OK = "ok"
    ERROR = "error"
    #: accepted; long-running work (reassignment, deletion) goes on and a later result says "ok"
    IN_PROGRESS = "in_progress"


@dataclass(frozen=True)
class AdminResult(Decision):
    """Outcome of an admin command. ``error`` is Kafka's error name (``TOPIC_ALREADY_EXISTS``,
    ``UNKNOWN_TOPIC_OR_PARTITION``, ``INVALID_REPLICATION_FACTOR``, ``INVALID_PARTITIONS``,
    ``INVALID_REPLICA_ASSIGNMENT``, ``BROKER_NOT_AVAILABLE``, ``NO_REASSIGNMENT_IN_PROGRESS``,
    ``ELECTION_NOT_NEEDED``, ``ELIGIBLE_LEADERS_NOT_AVAILABLE``, ``PREFERRED_LEADER_NOT_AVAILABLE``,
    ``TOPIC_DELETION_DISABLED``, ``INVALID_CONFIG``, ...) or ``None``.

    ``details`` is a JSON object (per-partition outcomes, progress) as a value, not text: handlers pass a
    ``dict``, and the result keeps a read-only copy taken at construction (:func:`core.frozen_json.freeze`:
    objects become :class:`~core.frozen_json.FrozenObject`, arrays tuples), so a handler that goes on
    filling the dict it passed cannot change an answer already given, and the result stays a value like
    every other decision. It is compared like any field but left out of the hash (a mapping has none); equal
    results still hash equal. Anything but a JSON object raises :class:`core.errors.FormatError` naming
    ``details``. Its one encoding is :func:`core.codec.decisions.encode_decision` (a JSON object in the row
    and on ``livectl.admin-results``)."""

    TYPE: ClassVar[str] = "admin_result"
    request_id: str
    command: str
    status: AdminStatus
    error: str | None = None
    message: str = ""
    details: Mapping[str, Any] = field(default_factory=lambda: EMPTY_OBJECT, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "details", freeze_object(self.details, "details"))

    def details_json(self) -> dict[str, Any]:
        """The details as a new plain JSON object (``dict``/``list``; for encoders, tests and tools)."""
        plain: dict[str, Any] = thaw(self.details)
        return plain


@dataclass(frozen=True)
class StateChangeFailure(Decision):
    """A per-item failure, e.g. an invalid transition ``OnlinePartition -> NewPartition``."""

    TYPE: ClassVar[str] = "state_change_failure"
    item: str
    from_state: str
    to_state: str
    reason: str


DECISION_TYPES: Mapping[str, type[Decision]] = MappingProxyType(
    {c.TYPE: c for c in (ZkWrite, BrokerRequest, AdminResult, StateChangeFailure)}
)
