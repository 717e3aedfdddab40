"""The wire form of the controller's requests and responses (:mod:`core.kafka.request_encoding` lays it
out), read back: :func:`parse_body` decodes a body strictly, a malformed one raising
:class:`core.errors.FormatError` naming the field and the reason (fields a body may leave out take Kafka's
defaults); :func:`read_addressees` reads a shared request's addressees."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any

from core import jsonform as jf
from core.errors import FormatError
from core.kafka.requests import (
    ZERO_UUID,
    Addressee,
    AlterPartitionResponse,
    AlterPartitionResult,
    BrokerAddress,
    ControlledShutdownResponse,
    LeaderAndIsrRequest,
    LisrPartitionState,
    MetadataBroker,
    MetadataEndpoint,
    MetadataPartitionState,
    RequestApi,
    RequestBody,
    StopReplicaPartition,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from core.model import NO_EPOCH, TopicPartition


def read_addressees(raw: Any, field: str) -> tuple[Addressee, ...]:
    """The addressees of :func:`core.kafka.request_encoding.encode_addressees` (missing or null: none);
    :class:`FormatError` names the field and the reason (an entry that is not an object of two integers,
    or ids not distinct and ascending)."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise FormatError(field, f"must be a list of {{brokerId, brokerEpoch}}, got {type(raw).__name__}")
    out = []
    for i, a in enumerate(raw):
        p = f"{field}[{i}]."
        o = jf.obj(a, f"{field}[{i}]")
        out.append(Addressee(jf.integer(o, "brokerId", p, minimum=0), jf.integer(o, "brokerEpoch", p)))
    ids = [a.broker_id for a in out]
    if ids != sorted(set(ids)):
        raise FormatError(field, f"broker ids must be distinct and ascending, got {ids}")
    return tuple(out)


def parse_body(api: RequestApi, body: Mapping[str, Any]) -> RequestBody:
    """Decode a request body alone (the wire form of a :class:`core.decisions.BrokerRequest`'s body)."""
    parsed: RequestBody = _PARSERS[api](body)
    return parsed


def _opt_ints(o: Mapping[str, Any], field: str, prefix: str) -> tuple[int, ...]:
    if o.get(field) is None:
        return ()
    return jf.int_list(o, field, prefix)


def _opt_list(o: Mapping[str, Any], field: str, prefix: str) -> list[Mapping[str, Any]]:
    return jf.obj_list(o, field, prefix) if o.get(field) else []


def _per_partition(
    o: Mapping[str, Any], *, topics: str = "topicStates", partitions: str = "partitionStates", required: bool = True
) -> Iterator[tuple[str, str, Mapping[str, Any], str]]:
    """``(topic name, topic id, partition entry, its field prefix)`` of a body's per-topic lists, in order."""
    p = "body."
    for i, t in enumerate(jf.obj_list(o, topics, p) if required else _opt_list(o, topics, p)):
        tp = f"{p}{topics}[{i}]."
        topic = jf.string(t, "topicName", tp)
        topic_id = jf.opt_string(t, "topicId", tp) or ZERO_UUID
        for j, s in enumerate(jf.obj_list(t, partitions, tp)):
            yield topic, topic_id, s, f"{tp}{partitions}[{j}]."


def _leadership(s: Mapping[str, Any], sp: str) -> dict[str, Any]:
    """The fields LeaderAndIsr and UpdateMetadata partition states share (Kafka's two schemas agree on them)."""
    return {
        "partition": jf.integer(s, "partitionIndex", sp, minimum=0),
        "controller_epoch": jf.integer(s, "controllerEpoch", sp),
        "leader": jf.integer(s, "leader", sp),
        "leader_epoch": jf.integer(s, "leaderEpoch", sp),
        "isr": jf.int_list(s, "isr", sp),
    }


def _head_fields(o: Mapping[str, Any]) -> tuple[int, int, int]:
    p = "body."
    return (
        jf.integer(o, "controllerId", p),
        jf.integer(o, "controllerEpoch", p),
        jf.opt_integer(o, "brokerEpoch", -1, p),
    )


def _lisr(o: Mapping[str, Any]) -> LeaderAndIsrRequest:
    p = "body."
    states: list[LisrPartitionState] = []
    for topic, topic_id, s, sp in _per_partition(o):
        states.append(
            LisrPartitionState(
                topic=topic,
                **_leadership(s, sp),
                partition_epoch=jf.opt_integer(s, "partitionEpoch", 0, sp),
                replicas=jf.int_list(s, "replicas", sp),
                adding_replicas=_opt_ints(s, "addingReplicas", sp),
                removing_replicas=_opt_ints(s, "removingReplicas", sp),
                is_new=jf.boolean(s, "isNew", False, sp),
                leader_recovery_state=jf.opt_integer(s, "leaderRecoveryState", 0, sp),
                topic_id=topic_id,
            )
        )
    leaders = []
    for i, b in enumerate(_opt_list(o, "liveLeaders", p)):
        bp = f"{p}liveLeaders[{i}]."
        leaders.append(
            BrokerAddress(
                jf.integer(b, "brokerId", bp), jf.string(b, "hostName", bp, nonempty=False), jf.integer(b, "port", bp)
            )
        )
    cid, cepoch, bepoch = _head_fields(o)
    return LeaderAndIsrRequest(cid, cepoch, bepoch, jf.opt_integer(o, "type", 0, p), tuple(states), tuple(leaders))


def _update_metadata(o: Mapping[str, Any]) -> UpdateMetadataRequest:
    p = "body."
    states: list[MetadataPartitionState] = []
    for topic, topic_id, s, sp in _per_partition(o, required=False):
        states.append(
            MetadataPartitionState(
                topic=topic,
                **_leadership(s, sp),
                zk_version=jf.opt_integer(s, "zkVersion", 0, sp),
                replicas=jf.int_list(s, "replicas", sp),
                offline_replicas=_opt_ints(s, "offlineReplicas", sp),
                topic_id=topic_id,
            )
        )
    brokers: list[MetadataBroker] = []
    for i, b in enumerate(_opt_list(o, "liveBrokers", p)):
        bp = f"{p}liveBrokers[{i}]."
        endpoints = []
        for j, e in enumerate(_opt_list(b, "endpoints", bp)):
            ep = f"{bp}endpoints[{j}]."
            endpoints.append(
                MetadataEndpoint(
                    jf.integer(e, "port", ep),
                    jf.string(e, "host", ep, nonempty=False),
                    jf.opt_string(e, "listener", ep) or "PLAINTEXT",
                    jf.opt_integer(e, "securityProtocol", 0, ep),
                )
            )
        brokers.append(MetadataBroker(jf.integer(b, "id", bp), tuple(endpoints), jf.opt_string(b, "rack", bp)))
    cid, cepoch, bepoch = _head_fields(o)
    return UpdateMetadataRequest(cid, cepoch, bepoch, tuple(states), tuple(brokers))


def _stop_replica(o: Mapping[str, Any]) -> StopReplicaRequest:
    parts: list[StopReplicaPartition] = []
    for topic, _tid, s, sp in _per_partition(o):
        parts.append(
            StopReplicaPartition(
                topic,
                jf.integer(s, "partitionIndex", sp, minimum=0),
                jf.opt_integer(s, "leaderEpoch", NO_EPOCH, sp),
                jf.boolean(s, "deletePartition", False, sp),
            )
        )
    cid, cepoch, bepoch = _head_fields(o)
    return StopReplicaRequest(cid, cepoch, bepoch, tuple(parts))


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
    for topic, topic_id, s, sp in _per_partition(o, topics="topics", partitions="partitions", required=False):
        results.append(
            AlterPartitionResult(
                topic,
                jf.integer(s, "partitionIndex", sp, minimum=0),
                jf.opt_integer(s, "errorCode", 0, sp),
                jf.opt_integer(s, "leaderId", -1, sp),
                jf.opt_integer(s, "leaderEpoch", -1, sp),
                _opt_ints(s, "isr", sp),
                jf.opt_integer(s, "partitionEpoch", -1, sp),
                jf.opt_integer(s, "leaderRecoveryState", 0, sp),
                jf.opt_integer(s, "correlationId", -1, sp),
                topic_id,
            )
        )
    return AlterPartitionResponse(
        jf.opt_integer(o, "errorCode", 0, p),
        tuple(results),
        jf.opt_integer(o, "throttleTimeMs", 0, p),
        jf.opt_integer(o, "correlationId", -1, p, minimum=-1),
    )


_PARSERS: Mapping[RequestApi, Any] = MappingProxyType(
    {
        RequestApi.LEADER_AND_ISR: _lisr,
        RequestApi.UPDATE_METADATA: _update_metadata,
        RequestApi.STOP_REPLICA: _stop_replica,
        RequestApi.CONTROLLED_SHUTDOWN_RESPONSE: _controlled_shutdown_response,
        RequestApi.ALTER_PARTITION_RESPONSE: _alter_partition_response,
    }
)
