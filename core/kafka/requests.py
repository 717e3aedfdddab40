"""The wire contract between the request-topic sink and the simulated brokers, in one place.

Each message on ``livectl.requests`` is keyed by the broker id (decimal text) and its value is::

    {"api": "LeaderAndIsr" | "UpdateMetadata" | "StopReplica"
             | "ControlledShutdownResponse" | "AlterPartitionResponse",
     "controllerEpoch": <int>, "batchId": <int>, "body": {...}}

``body`` uses Kafka's field names (see :class:`core.decisions.BrokerRequest`). A ``body`` given as JSON
text instead of an object is accepted too, since :class:`core.decisions.BrokerRequest` keeps it as text.

Parsing is strict: a malformed message raises :class:`core.errors.FormatError` naming the field and the
reason; the shell logs it and skips the message. Bodies become frozen dataclasses so that the broker
logic never touches raw JSON.

The sink (``sinks/requests.py``) also writes ``"version": 1`` and ``"brokerId"`` in the value; they are
checked when present (``brokerId`` must equal the key).

Deduplication (applied by :class:`simbrokers.broker.SimBroker`): per API, a message whose
``(controllerEpoch, batchId)`` is below the highest one applied is dropped, and so is a repeat of
``(controllerEpoch, batchId, api, digest of body)``. The sink sends one merged message per broker, API and
batch; should a batch ever carry several messages of one API (one per bucket), each still applies once.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from core.codec import fields as jf
from core.errors import FormatError
from core.model import TopicPartition


class RequestApi(Enum):
    LEADER_AND_ISR = "LeaderAndIsr"
    UPDATE_METADATA = "UpdateMetadata"
    STOP_REPLICA = "StopReplica"
    CONTROLLED_SHUTDOWN_RESPONSE = "ControlledShutdownResponse"
    ALTER_PARTITION_RESPONSE = "AlterPartitionResponse"


#: Kafka's send order within one batch per broker
REQUEST_ORDER: dict[RequestApi, int] = {
    RequestApi.LEADER_AND_ISR: 0,
    RequestApi.UPDATE_METADATA: 1,
    RequestApi.STOP_REPLICA: 2,
    RequestApi.CONTROLLED_SHUTDOWN_RESPONSE: 3,
    RequestApi.ALTER_PARTITION_RESPONSE: 4,
}


REQUESTS_TOPIC = "livectl.requests"
BROKER_EVENTS_TOPIC = "livectl.broker-events"

#: StopReplica leader epoch sentinels (Kafka's ``LeaderAndIsr.EpochDuringDelete`` / ``NoEpoch``)
EPOCH_DURING_DELETE = -2
NO_EPOCH = -1


@dataclass(frozen=True)
class LisrPartitionState:
    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    is_new: bool = False
    leader_recovery_state: int = 0

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True)
class BrokerAddress:
    broker_id: int
    host: str
    port: int


@dataclass(frozen=True)
class LeaderAndIsrRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    type: int
    partitions: tuple[LisrPartitionState, ...]
    live_leaders: tuple[BrokerAddress, ...]


@dataclass(frozen=True)
class MetadataPartitionState:
    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()


@dataclass(frozen=True)
class UpdateMetadataRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partitions: tuple[MetadataPartitionState, ...]
    live_brokers: tuple[BrokerAddress, ...]
    racks: tuple[tuple[int, str | None], ...] = ()


@dataclass(frozen=True)
class StopReplicaPartition:
    topic: str
    partition: int
    leader_epoch: int
    delete_partition: bool

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


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
class AlterPartitionResult:
    topic: str
    partition: int
    error_code: int
    leader_id: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    leader_recovery_state: int = 0
    #: the proposal's :attr:`core.events.AlterPartition.correlation_id`; -1 when the controller gave none
    correlation_id: int = -1

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True)
class AlterPartitionResponse:
    error_code: int
    partitions: tuple[AlterPartitionResult, ...]


RequestBody = (
    LeaderAndIsrRequest
    | UpdateMetadataRequest
    | StopReplicaRequest
    | ControlledShutdownResponse
    | AlterPartitionResponse
)


@dataclass(frozen=True)
class Envelope:
    """One decoded message of ``livectl.requests``."""

    broker_id: int
    api: RequestApi
    controller_epoch: int
    batch_id: int
    body: RequestBody
    #: sha1 of the canonical body JSON: tells apart the messages of one batch
    digest: str

    @property
    def dedupe_key(self) -> tuple[int, int, str, str]:
        return (self.controller_epoch, self.batch_id, self.api.value, self.digest)


def parse_request(key: bytes | str | None, value: bytes | str) -> Envelope:
    """Decode one message of ``livectl.requests``; raises :class:`FormatError` naming the field."""
    if key is None:
        raise FormatError("key", "is required (the broker id)")
    key_text = key.decode() if isinstance(key, bytes) else key
    try:
        broker_id = int(key_text)
    except ValueError:
        raise FormatError("key", f"must be a broker id, got {key_text!r}") from None
    try:
        raw = json.loads(value)
    except (ValueError, UnicodeDecodeError) as e:
        raise FormatError("$", f"not valid JSON: {e}") from None
    o = jf.obj(raw, "$")
    api_text = jf.string(o, "api")
    try:
        api = RequestApi(api_text)
    except ValueError:
        known = ", ".join(a.value for a in RequestApi)
        raise FormatError("api", f"unknown api '{api_text}'; known: {known}") from None
    if o.get("version") is not None and jf.integer(o, "version") != 1:
        raise FormatError("version", f"unsupported version {o.get('version')}; this simbrokers reads version 1")
    if o.get("brokerId") is not None and jf.integer(o, "brokerId") != broker_id:
        raise FormatError("brokerId", f"is {o.get('brokerId')} but the message key says broker {broker_id}")
    controller_epoch = jf.integer(o, "controllerEpoch", minimum=0)
    batch_id = jf.integer(o, "batchId")
    body_raw = jf.req(o, "body")
    if isinstance(body_raw, str):
        try:
            body_raw = json.loads(body_raw)
        except ValueError as e:
            raise FormatError("body", f"not valid JSON: {e}") from None
    body_obj = jf.obj(body_raw, "body")
    digest = hashlib.sha1(json.dumps(body_obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    return Envelope(broker_id, api, controller_epoch, batch_id, parse_body(api, body_obj), digest)


def parse_body(api: RequestApi, body: Mapping[str, Any]) -> RequestBody:
    """Decode a request body alone (the ``body`` of a :class:`core.decisions.BrokerRequest`)."""
    parsed: RequestBody = _PARSERS[api](body)
    return parsed


def _ints(o: Mapping[str, Any], field: str, prefix: str) -> tuple[int, ...]:
    if o.get(field) is None:
        return ()
    return jf.int_list(o, field, prefix)


def _lisr(o: Mapping[str, Any]) -> LeaderAndIsrRequest:
    p = "body."
    states: list[LisrPartitionState] = []
    for i, t in enumerate(jf.obj_list(o, "topicStates", p)):
        tp_ = f"{p}topicStates[{i}]."
        topic = jf.string(t, "topicName", tp_)
        for j, s in enumerate(jf.obj_list(t, "partitionStates", tp_)):
            sp = f"{tp_}partitionStates[{j}]."
            states.append(
                LisrPartitionState(
                    topic=topic,
                    partition=jf.integer(s, "partitionIndex", sp, minimum=0),
                    controller_epoch=jf.integer(s, "controllerEpoch", sp),
                    leader=jf.integer(s, "leader", sp),
                    leader_epoch=jf.integer(s, "leaderEpoch", sp),
                    isr=jf.int_list(s, "isr", sp),
                    partition_epoch=jf.opt_integer(s, "partitionEpoch", 0, sp),
                    replicas=jf.int_list(s, "replicas", sp),
                    adding_replicas=_ints(s, "addingReplicas", sp),
                    removing_replicas=_ints(s, "removingReplicas", sp),
                    is_new=jf.boolean(s, "isNew", False, sp),
                    leader_recovery_state=jf.opt_integer(s, "leaderRecoveryState", 0, sp),
                )
            )
    leaders = []
    for i, b in enumerate((o.get("liveLeaders") and jf.obj_list(o, "liveLeaders", p)) or []):
        bp = f"{p}liveLeaders[{i}]."
        leaders.append(
            BrokerAddress(jf.integer(b, "brokerId", bp), jf.string(b, "hostName", bp), jf.integer(b, "port", bp))
        )
    return LeaderAndIsrRequest(
        jf.integer(o, "controllerId", p),
        jf.integer(o, "controllerEpoch", p),
        jf.opt_integer(o, "brokerEpoch", -1, p),
        jf.opt_integer(o, "type", 0, p),
        tuple(states),
        tuple(leaders),
    )


def _update_metadata(o: Mapping[str, Any]) -> UpdateMetadataRequest:
    p = "body."
    states: list[MetadataPartitionState] = []
    for i, t in enumerate((o.get("topicStates") and jf.obj_list(o, "topicStates", p)) or []):
        tp_ = f"{p}topicStates[{i}]."
        topic = jf.string(t, "topicName", tp_)
        for j, s in enumerate(jf.obj_list(t, "partitionStates", tp_)):
            sp = f"{tp_}partitionStates[{j}]."
            states.append(
                MetadataPartitionState(
                    topic=topic,
                    partition=jf.integer(s, "partitionIndex", sp, minimum=0),
                    controller_epoch=jf.integer(s, "controllerEpoch", sp),
                    leader=jf.integer(s, "leader", sp),
                    leader_epoch=jf.integer(s, "leaderEpoch", sp),
                    isr=jf.int_list(s, "isr", sp),
                    zk_version=jf.opt_integer(s, "zkVersion", 0, sp),
                    replicas=jf.int_list(s, "replicas", sp),
                    offline_replicas=_ints(s, "offlineReplicas", sp),
                )
            )
    brokers: list[BrokerAddress] = []
    racks: list[tuple[int, str | None]] = []
    for i, b in enumerate((o.get("liveBrokers") and jf.obj_list(o, "liveBrokers", p)) or []):
        bp = f"{p}liveBrokers[{i}]."
        bid = jf.integer(b, "id", bp)
        eps = jf.obj_list(b, "endpoints", bp) if b.get("endpoints") else []
        if eps:
            ep = eps[0]
            ep_p = bp + "endpoints[0]."
            brokers.append(BrokerAddress(bid, jf.string(ep, "host", ep_p), jf.integer(ep, "port", ep_p)))
        racks.append((bid, jf.opt_string(b, "rack", bp)))
    return UpdateMetadataRequest(
        jf.integer(o, "controllerId", p),
        jf.integer(o, "controllerEpoch", p),
        jf.opt_integer(o, "brokerEpoch", -1, p),
        tuple(states),
        tuple(brokers),
        tuple(racks),
    )


def _stop_replica(o: Mapping[str, Any]) -> StopReplicaRequest:
    p = "body."
    parts: list[StopReplicaPartition] = []
    for i, t in enumerate(jf.obj_list(o, "topicStates", p)):
        tp_ = f"{p}topicStates[{i}]."
        topic = jf.string(t, "topicName", tp_)
        for j, s in enumerate(jf.obj_list(t, "partitionStates", tp_)):
            sp = f"{tp_}partitionStates[{j}]."
            parts.append(
                StopReplicaPartition(
                    topic,
                    jf.integer(s, "partitionIndex", sp, minimum=0),
                    jf.opt_integer(s, "leaderEpoch", NO_EPOCH, sp),
                    jf.boolean(s, "deletePartition", False, sp),
                )
            )
    return StopReplicaRequest(
        jf.integer(o, "controllerId", p),
        jf.integer(o, "controllerEpoch", p),
        jf.opt_integer(o, "brokerEpoch", -1, p),
        tuple(parts),
    )


def _controlled_shutdown_response(o: Mapping[str, Any]) -> ControlledShutdownResponse:
    p = "body."
    remaining = []
    for i, r in enumerate((o.get("remainingPartitions") and jf.obj_list(o, "remainingPartitions", p)) or []):
        rp = f"{p}remainingPartitions[{i}]."
        remaining.append(TopicPartition(jf.string(r, "topicName", rp), jf.integer(r, "partitionIndex", rp)))
    return ControlledShutdownResponse(jf.opt_integer(o, "errorCode", 0, p), tuple(remaining))


def _alter_partition_response(o: Mapping[str, Any]) -> AlterPartitionResponse:
    p = "body."
    results: list[AlterPartitionResult] = []
    for i, t in enumerate((o.get("topics") and jf.obj_list(o, "topics", p)) or []):
        tp_ = f"{p}topics[{i}]."
        topic = jf.string(t, "topicName", tp_)
        for j, s in enumerate(jf.obj_list(t, "partitions", tp_)):
            sp = f"{tp_}partitions[{j}]."
            results.append(
                AlterPartitionResult(
                    topic,
                    jf.integer(s, "partitionIndex", sp, minimum=0),
                    jf.opt_integer(s, "errorCode", 0, sp),
                    jf.opt_integer(s, "leaderId", -1, sp),
                    jf.opt_integer(s, "leaderEpoch", -1, sp),
                    _ints(s, "isr", sp),
                    jf.opt_integer(s, "partitionEpoch", -1, sp),
                    jf.opt_integer(s, "leaderRecoveryState", 0, sp),
                    jf.opt_integer(s, "correlationId", -1, sp),
                )
            )
    return AlterPartitionResponse(jf.opt_integer(o, "errorCode", 0, p), tuple(results))


_PARSERS: dict[RequestApi, Any] = {
    RequestApi.LEADER_AND_ISR: _lisr,
    RequestApi.UPDATE_METADATA: _update_metadata,
    RequestApi.STOP_REPLICA: _stop_replica,
    RequestApi.CONTROLLED_SHUTDOWN_RESPONSE: _controlled_shutdown_response,
    RequestApi.ALTER_PARTITION_RESPONSE: _alter_partition_response,
}


#: ``version`` of the envelope
MESSAGE_VERSION = 1


def encode_envelope(
    broker_id: int,
    api: RequestApi,
    controller_epoch: int,
    batch_id: int,
    body: bytes,
    *,
    part: tuple[int, int] | None = None,
) -> tuple[bytes, bytes]:
    """The (key, value) of one ``livectl.requests`` message: the one encoder of the envelope.

    ``body`` is the request's JSON, already serialised: it is spliced in rather than serialised a second time
    (the bodies of a large batch are tens of MB). ``part`` = ``(k, n)`` marks the k-th of n parts of a request
    split at partition boundaries. The value is ``{"body":…,"api","batchId","brokerId","controllerEpoch",
    ["part","parts",]"version"}``, the envelope's keys sorted."""
    envelope: dict[str, Any] = {
        "version": MESSAGE_VERSION,
        "api": api.value,
        "controllerEpoch": controller_epoch,
        "batchId": batch_id,
        "brokerId": broker_id,
    }
    if part is not None:
        envelope["part"], envelope["parts"] = part
    head = json.dumps(envelope, sort_keys=True, separators=(",", ":")).encode()
    return str(broker_id).encode(), b'{"body":' + body + b"," + head[1:]


def encode_request(
    broker_id: int, api: RequestApi, controller_epoch: int, batch_id: int, body: Mapping[str, Any]
) -> tuple[bytes, bytes]:
    """:func:`encode_envelope` of a body given as a JSON object, for tests and tools that play the controller."""
    body_json = json.dumps(dict(body), sort_keys=True, separators=(",", ":")).encode()
    return encode_envelope(broker_id, api, controller_epoch, batch_id, body_json)
