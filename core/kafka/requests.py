"""The controller's requests and responses to brokers, typed, with their one parser.

A request body is a JSON object with Kafka's field names (see :class:`core.decisions.BrokerRequest` and
:mod:`core.requests`, which builds them); :func:`parse_body` makes it a frozen dataclass so that broker logic
never touches raw JSON. Parsing is strict: a malformed body raises :class:`core.errors.FormatError` naming
the field and the reason. The message around a body is :mod:`core.kafka.envelope`'s.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from core import jsonform as jf
from core.model import NO_EPOCH, TopicPartition


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


#: Kafka's ``Uuid.ZERO_UUID`` in base64: the topic id of a topic that has none
ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"
#: Kafka's ``SecurityProtocol`` ids, as UpdateMetadata's ``securityProtocol`` carries them
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


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
class MetadataPartitionState(PartitionLeadership):
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
    correlation_id: int = -1


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


def parse_body(api: RequestApi, body: Mapping[str, Any]) -> RequestBody:
    """Decode a request body alone (the ``body`` of a :class:`core.decisions.BrokerRequest`)."""
    parsed: RequestBody = _PARSERS[api](body)
    return parsed


def _ints(o: Mapping[str, Any], field: str, prefix: str) -> tuple[int, ...]:
    if o.get(field) is None:
        return ()
    return jf.int_list(o, field, prefix)


def _opt_list(o: Mapping[str, Any], field: str, prefix: str) -> list[Mapping[str, Any]]:
    return jf.obj_list(o, field, prefix) if o.get(field) else []


def _per_partition(
    o: Mapping[str, Any], *, topics: str = "topicStates", partitions: str = "partitionStates", required: bool = True
) -> Iterator[tuple[str, Mapping[str, Any], str]]:
    """``(topic name, partition entry, its field prefix)`` of a body's per-topic lists, in order."""
    p = "body."
    for i, t in enumerate(jf.obj_list(o, topics, p) if required else _opt_list(o, topics, p)):
        tp = f"{p}{topics}[{i}]."
        topic = jf.string(t, "topicName", tp)
        for j, s in enumerate(jf.obj_list(t, partitions, tp)):
            yield topic, s, f"{tp}{partitions}[{j}]."


def _leadership(s: Mapping[str, Any], sp: str) -> dict[str, Any]:
    """The fields LeaderAndIsr and UpdateMetadata partition states share (Kafka's two schemas agree on them)."""
    return {
        "partition": jf.integer(s, "partitionIndex", sp, minimum=0),
        "controller_epoch": jf.integer(s, "controllerEpoch", sp),
        "leader": jf.integer(s, "leader", sp),
        "leader_epoch": jf.integer(s, "leaderEpoch", sp),
        "isr": jf.int_list(s, "isr", sp),
    }


def _lisr(o: Mapping[str, Any]) -> LeaderAndIsrRequest:
    p = "body."
    states: list[LisrPartitionState] = []
    for topic, s, sp in _per_partition(o):
        states.append(
            LisrPartitionState(
                topic=topic,
                **_leadership(s, sp),
                partition_epoch=jf.opt_integer(s, "partitionEpoch", 0, sp),
                replicas=jf.int_list(s, "replicas", sp),
                adding_replicas=_ints(s, "addingReplicas", sp),
                removing_replicas=_ints(s, "removingReplicas", sp),
                is_new=jf.boolean(s, "isNew", False, sp),
                leader_recovery_state=jf.opt_integer(s, "leaderRecoveryState", 0, sp),
            )
        )
    leaders = []
    for i, b in enumerate(_opt_list(o, "liveLeaders", p)):
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
    for topic, s, sp in _per_partition(o, required=False):
        states.append(
            MetadataPartitionState(
                topic=topic,
                **_leadership(s, sp),
                zk_version=jf.opt_integer(s, "zkVersion", 0, sp),
                replicas=jf.int_list(s, "replicas", sp),
                offline_replicas=_ints(s, "offlineReplicas", sp),
            )
        )
    brokers: list[BrokerAddress] = []
    racks: list[tuple[int, str | None]] = []
    for i, b in enumerate(_opt_list(o, "liveBrokers", p)):
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
    for topic, s, sp in _per_partition(o):
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
    for i, r in enumerate(_opt_list(o, "remainingPartitions", p)):
        rp = f"{p}remainingPartitions[{i}]."
        remaining.append(TopicPartition(jf.string(r, "topicName", rp), jf.integer(r, "partitionIndex", rp)))
    return ControlledShutdownResponse(jf.opt_integer(o, "errorCode", 0, p), tuple(remaining))


def _alter_partition_response(o: Mapping[str, Any]) -> AlterPartitionResponse:
    p = "body."
    results: list[AlterPartitionResult] = []
    for topic, s, sp in _per_partition(o, topics="topics", partitions="partitions", required=False):
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
