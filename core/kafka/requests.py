"""The controller's requests and responses to brokers, as typed values (frozen, hashable dataclasses).

:mod:`core.request_batch` builds them, :class:`core.decisions.BrokerRequest` carries them, the simulated
brokers act on them. Their one wire form, a JSON object with Kafka's field names, is
:mod:`core.kafka.request_encoding`'s (:func:`~core.kafka.request_encoding.encode_body`), read back
by :mod:`core.kafka.request_parsing` (:func:`~core.kafka.request_parsing.parse_body`); the message
around a body is :mod:`core.kafka.envelope`'s. Partition entries are flat, in the order sent; the wire
form groups consecutive entries of one topic into one ``topicStates`` entry.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Any

from core.model import TopicPartition


class RequestApi(Enum):
    LEADER_AND_ISR = "LeaderAndIsr"
    UPDATE_METADATA = "UpdateMetadata"
    STOP_REPLICA = "StopReplica"
    CONTROLLED_SHUTDOWN_RESPONSE = "ControlledShutdownResponse"
    ALTER_PARTITION_RESPONSE = "AlterPartitionResponse"


#: Kafka's send order within one batch per broker
REQUEST_ORDER: Mapping[RequestApi, int] = MappingProxyType(
    {
        RequestApi.LEADER_AND_ISR: 0,
        RequestApi.UPDATE_METADATA: 1,
        RequestApi.STOP_REPLICA: 2,
        RequestApi.CONTROLLED_SHUTDOWN_RESPONSE: 3,
        RequestApi.ALTER_PARTITION_RESPONSE: 4,
    }
)


#: Kafka's ``Uuid.ZERO_UUID`` in base64: the topic id of a topic that has none
ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"
#: Kafka's ``SecurityProtocol`` ids, as UpdateMetadata's ``securityProtocol`` carries them
SECURITY_PROTOCOL_IDS = MappingProxyType({"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3})


#: ``broker_id`` of a request addressed to a set of brokers (:class:`Addressee`) rather than one
SHARED_BROKER_ID = -1


@dataclass(frozen=True, order=True)
class Addressee:
    """One broker a shared request is for, with the epoch of its registration (the ``brokerEpoch`` its own
    copy of the request would carry: Kafka sends the same UpdateMetadata to a set of brokers, each copy with
    the destination's broker epoch)."""

    broker_id: int
    broker_epoch: int


def recipients(broker_id: int, addressees: tuple[Addressee, ...]) -> tuple[int, ...]:
    """The brokers a request or message is for: its ``addressees`` when shared, else ``broker_id``."""
    return tuple(a.broker_id for a in addressees) if addressees else (broker_id,)


@dataclass(frozen=True)
class PartitionEntry:
    """One partition's entry in a request or response (``topicName`` from its topic, ``partitionIndex``)."""

    topic: str
    partition: int

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True)
class PartitionLeadership(PartitionEntry):
    """What LeaderAndIsr and UpdateMetadata partition states share (Kafka's two schemas agree on these
    fields, in this order)."""

    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]


@dataclass(frozen=True)
class LisrPartitionState(PartitionLeadership):
    partition_epoch: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    is_new: bool = False
    leader_recovery_state: int = 0
    #: the topic's id (``topicId`` of its ``topicStates`` entry)
    topic_id: str = ZERO_UUID


@dataclass(frozen=True)
class BrokerAddress:
    """A LeaderAndIsr ``liveLeaders`` entry (``brokerId``, ``hostName``, ``port``): the broker's first
    endpoint, or ``("", -1)`` when it registered none."""

    broker_id: int
    host: str
    port: int


@dataclass(frozen=True)
class MetadataEndpoint:
    """One endpoint of an UpdateMetadata ``liveBrokers`` entry; ``security_protocol`` is Kafka's numeric id
    (:data:`SECURITY_PROTOCOL_IDS`)."""

    port: int
    host: str
    listener: str
    security_protocol: int


@dataclass(frozen=True)
class MetadataBroker:
    """An UpdateMetadata ``liveBrokers`` entry: every endpoint of the broker's registration, and its rack."""

    broker_id: int
    endpoints: tuple[MetadataEndpoint, ...]
    rack: str | None = None

    def address(self) -> BrokerAddress | None:
        """The first endpoint as a :class:`BrokerAddress` (what a follower connects to); ``None`` without one."""
        if not self.endpoints:
            return None
        return BrokerAddress(self.broker_id, self.endpoints[0].host, self.endpoints[0].port)


@dataclass(frozen=True)
class LeaderAndIsrRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    type: int
    partitions: tuple[LisrPartitionState, ...]
    live_leaders: tuple[BrokerAddress, ...]


@dataclass(frozen=True)
class MetadataPartitionState(PartitionLeadership):
    zk_version: int
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    #: the topic's id (``topicId`` of its ``topicStates`` entry)
    topic_id: str = ZERO_UUID


@dataclass(frozen=True)
class UpdateMetadataRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partitions: tuple[MetadataPartitionState, ...]
    live_brokers: tuple[MetadataBroker, ...]

    @property
    def racks(self) -> tuple[tuple[int, str | None], ...]:
        """``(broker id, rack)`` of every live broker, in order."""
        return tuple((b.broker_id, b.rack) for b in self.live_brokers)


@dataclass(frozen=True)
class StopReplicaPartition(PartitionEntry):
    leader_epoch: int
    delete_partition: bool


@dataclass(frozen=True)
class StopReplicaRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partitions: tuple[StopReplicaPartition, ...]


@dataclass(frozen=True)
class ControlledShutdownResponse:
    error_code: int
    remaining: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class AlterPartitionResult(PartitionEntry):
    error_code: int
    leader_id: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    leader_recovery_state: int = 0
    #: the proposal's :attr:`core.events.AlterPartition.correlation_id`; -1 when the controller gave none
    #: (then the wire form has no ``correlationId``)
    correlation_id: int = -1
    #: the topic's id (``topicId`` of its ``topics`` entry)
    topic_id: str = ZERO_UUID


@dataclass(frozen=True)
class AlterPartitionResponse:
    """The answer to one AlterPartition request. A top-level ``error_code`` (``STALE_BROKER_EPOCH``, ...)
    answers the whole request and carries no partition entries: ``correlation_id`` then names the request it
    answers (Kafka's response header carries the request's correlation id; -1: none given, and the wire
    form has no top-level ``correlationId``). Without one, each partition entry names its request."""

    error_code: int
    partitions: tuple[AlterPartitionResult, ...]
    throttle_time_ms: int = 0
    correlation_id: int = -1


RequestBody = (
    LeaderAndIsrRequest
    | UpdateMetadataRequest
    | StopReplicaRequest
    | ControlledShutdownResponse
    | AlterPartitionResponse
)


@dataclass(frozen=True, eq=False)
class WireBody:
    """A request body in its wire form: Kafka's JSON object, already parsed. It is what the driver holds
    after decoding a bucket's row (:func:`core.codec.decisions.decode_decision`): the sink merges and
    serialises these objects as they are, and rebuilding typed values for them would cost more than the
    whole decode (see :mod:`streaming.query.batch_rows`). Never mutated; compared and hashed by identity."""

    obj: Mapping[str, Any]


@dataclass(frozen=True, eq=False)
class SplicedBody(Mapping[str, Any]):
    """A request body's wire form whose ``topicStates`` entries are still their JSON text, as a bucket
    wrote them (:func:`core.codec.decision_rows.decision_row_text`): ``head`` is the body with
    ``"topicStates": []``, ``texts`` each entry's JSON (keys sorted, no spaces: the bytes a message
    carries), ``names`` and ``counts`` each entry's ``topicName`` and partition count.

    As a mapping it is the whole body: ``topicStates`` is parsed on first use (refusals' withholding, the
    audit log), and equals what decoding the whole body gives. The request sink reads ``texts`` as they
    are (:mod:`sinks.requests`): a large batch's bodies are then never parsed on the driver.

    **The texts' form**, which readers may rely on without parsing (the state-change log cuts LeaderAndIsr
    and StopReplica partition states out of them: ``streaming.monitoring.request_digest.state_spans``). Each text is
    one ``topicStates`` entry as :func:`core.codec.decision_rows.sorted_entries` writes it:

    * canonical JSON, keys sorted at every level, no spaces: byte for byte
      ``orjson.dumps(entry, option=OPT_SORT_KEYS)`` of the parsed entry, so it starts with
      ``{"partitionStates":[`` and each partition state's bytes are that state's own sorted-key JSON;
    * its partition states are **flat** objects: every value is an integer, a boolean or an array of
      integers — no string, no object, no null. Inside the ``partitionStates`` array a ``}`` therefore only
      ends a state: the states are the pieces between ``[{`` and the first ``}]``, cut at ``},{``, as many as
      the entry's count in ``counts``;
    * each state has an integer ``partitionIndex``, and a LeaderAndIsr state an integer ``leader``.

    This holds for LeaderAndIsr, UpdateMetadata and StopReplica (Kafka's partition states of these hold no
    nested structure); ``tests/unit/core/kafka/test_core_kafka_spliced_entries.py`` fails if it stops
    holding, and a change to it must change those readers too."""

    head: Mapping[str, Any]
    names: tuple[str, ...]
    counts: tuple[int, ...]
    texts: tuple[str, ...]
    _parsed: list[list[Any]] = field(default_factory=list, repr=False)

    def states(self) -> list[Any]:
        """The ``topicStates`` entries, parsed (once)."""
        if not self._parsed:
            self._parsed.append([json.loads(t) for t in self.texts])
        return self._parsed[0]

    @property
    def partition_count(self) -> int:
        return sum(self.counts)

    def __getitem__(self, key: str) -> Any:
        if key == "topicStates":
            return self.states()
        return self.head[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.head)

    def __len__(self) -> int:
        return len(self.head)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SplicedBody):
            return self.head == other.head and self.texts == other.texts
        if isinstance(other, Mapping):
            # the request sink compares groups of bodies: a body with other fields is told apart unparsed
            return self.head.keys() == other.keys() and dict(self.items()) == dict(other.items())
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


def partition_count(body: Mapping[str, Any]) -> int:
    """The partition states of a body's wire form (``topicStates[].partitionStates[]``), counted without
    parsing a :class:`SplicedBody`'s entries."""
    if isinstance(body, SplicedBody):
        return body.partition_count
    return sum(len(ts.get("partitionStates") or ()) for ts in body.get("topicStates") or ())


#: what :attr:`core.decisions.BrokerRequest.body` holds: a typed value (the core's) or the wire form (the
#: driver's)
AnyBody = RequestBody | WireBody
