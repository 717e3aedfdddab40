"""The one wire form of the controller's requests and responses (:mod:`core.kafka.requests`).

:func:`encode_body` writes a typed body as the JSON object brokers read: Kafka's field names, in the order
listed below, no spaces, non-ASCII escaped. :func:`parse_body` reads one back, strictly: a malformed body
raises :class:`core.errors.FormatError` naming the field and the reason (fields a body may leave out take
Kafka's defaults). ``parse_body(api, json.loads(encode_body(x))) == x`` for every body ``x``.

LeaderAndIsr::

    {"controllerId", "controllerEpoch", "brokerEpoch", "type": 0,
     "topicStates": [{"topicName", "topicId", "partitionStates": [{"partitionIndex", "controllerEpoch",
        "leader", "leaderEpoch", "isr", "partitionEpoch", "replicas", "addingReplicas",
        "removingReplicas", "isNew", "leaderRecoveryState"}]}],
     "liveLeaders": [{"brokerId", "hostName", "port"}]}

UpdateMetadata (``leader`` and ``leaderEpoch`` are -2 for topics queued for deletion; empty ``topicStates``
only announces the live brokers)::

    {"controllerId", "controllerEpoch", "brokerEpoch",
     "topicStates": [{"topicName", "topicId", "partitionStates": [{"partitionIndex", "controllerEpoch",
        "leader", "leaderEpoch", "isr", "zkVersion", "replicas", "offlineReplicas"}]}],
     "liveBrokers": [{"id", "endpoints": [{"port", "host", "listener", "securityProtocol"}], "rack"}]}

StopReplica (``leaderEpoch`` -2 for topics queued for deletion, -1 when unknown)::

    {"controllerId", "controllerEpoch", "brokerEpoch",
     "topicStates": [{"topicName", "partitionStates": [{"partitionIndex", "leaderEpoch", "deletePartition"}]}]}

ControlledShutdownResponse::

    {"errorCode", "remainingPartitions": [{"topicName", "partitionIndex"}]}

AlterPartitionResponse (``correlationId`` only when the AlterPartition carried one: it stands in for the
request header's correlation id — at the top of a response whose top-level ``errorCode`` answers the whole
request, in each partition entry otherwise)::

    {"errorCode", "throttleTimeMs", ["correlationId",] "topics": [{"topicName", "topicId", "partitions":
        [{"partitionIndex", "errorCode", "leaderId", "leaderEpoch", "isr", "partitionEpoch",
        "leaderRecoveryState", "correlationId"}]}]}
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import replace
from typing import Any, TypeVar

from core import jsonform as jf
from core.errors import FormatError
from core.kafka.requests import (
    ZERO_UUID,
    Addressee,
    AlterPartitionResponse,
    AlterPartitionResult,
    AnyBody,
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
    WireBody,
)
from core.model import NO_EPOCH, TopicPartition

# ---------------------------------------------------------------------------- encoding

_S = TypeVar("_S")
_T = TypeVar("_T")


def ints_text(xs: Iterable[int]) -> str:
    """The JSON text of a list of integers. A bool among them raises :class:`TypeError`: the wire form's
    integer lists never hold one (every decoder refuses them), but ``bool`` is a subclass of ``int``, so the
    type checker lets one through where ``int`` is declared, and ``str(True)`` is not JSON."""
    items = tuple(xs)
    if bool in map(type, items):
        raise TypeError(f"an integer list of the wire form holds a bool: {items!r}")
    return "[" + ",".join(map(str, items)) + "]"


class EncodeMemo:
    """Encodings one caller reuses while it encodes a set of bodies (e.g. one step's decisions): created
    by the caller, dropped with the bodies; encoding with one gives the same text as without.

    * :meth:`once` — a value encoded once per object *identity* and encoder: the per-broker copies of one
      shared UpdateMetadata (``BrokerRequest.fan_out``) share one tuple of partition states, and the
      LeaderAndIsr requests of one step to several brokers share a partition's state object
      (:class:`core.request_batch.RequestBatch`), a failover's every partition's with each of its replicas.
      Each entry keeps its object, so an id is never reused while its entry lives.
    * :meth:`ints` — the JSON text of integer tuples: a request's replica lists and ISRs repeat a few
      hundred distinct values across thousands of partitions (a C-level tuple hash beats formatting);
      cleared when ``max_ints`` are held, so it stays small whatever the cluster."""

    __slots__ = ("_by_encoder", "_ints", "_ints_01", "_max_ints")

    def __init__(self, max_ints: int = 65_536) -> None:
        if max_ints < 1:
            raise ValueError(f"max_ints must be at least 1, got {max_ints}")
        self._by_encoder: dict[Callable[..., Any], dict[int, tuple[object, Any]]] = {}
        # A tuple is found by equality, and True == 1, False == 0 ((True,) would find (1,)'s text): so
        # _ints holds only tuples without an item equal to 0 or 1, which no tuple holding a bool can
        # equal, and is answered from unchecked; the others are checked for bools, then found in _ints_01
        self._ints: dict[tuple[int, ...], str] = {}
        self._ints_01: dict[tuple[int, ...], str] = {}
        self._max_ints = max_ints

    def __len__(self) -> int:
        """How many objects' encodings :meth:`once` holds (every encoder's)."""
        return sum(map(len, self._by_encoder.values()))

    def ints_held(self) -> tuple[tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...]]:
        """The integer tuples :meth:`ints` holds: (those without an item equal to 0 or 1, those with one)."""
        return tuple(self._ints), tuple(self._ints_01)

    def once(self, encode: Callable[[_S, EncodeMemo], _T], obj: _S) -> _T:
        """``encode(obj, self)``, computed once per identity of ``obj`` for this ``encode``."""
        by_id = self._by_encoder.get(encode)
        if by_id is None:
            by_id = self._by_encoder[encode] = {}
        hit = by_id.get(id(obj))
        if hit is not None and hit[0] is obj:
            done: _T = hit[1]
            return done
        value = encode(obj, self)
        by_id[id(obj)] = (obj, value)
        return value

    def ints(self, xs: Iterable[int]) -> str:
        """:func:`ints_text`, a tuple's text memoised."""
        if type(xs) is not tuple:
            return ints_text(xs)
        text = self._ints.get(xs)
        if text is None and bool not in map(type, xs):
            text = self._ints_01.get(xs)
        if text is not None:
            return text
        text = ints_text(xs)
        memo = self._ints_01 if (0 in xs or 1 in xs) else self._ints
        if len(memo) >= self._max_ints:
            memo.clear()
        memo[xs] = text
        return text


def _ints_of(memo: EncodeMemo | None) -> Callable[[Iterable[int]], str]:
    return ints_text if memo is None else memo.ints


def _b(v: bool) -> str:
    return "true" if v else "false"


def _s(v: str | None) -> str:
    return json.dumps(v)


def _lisr_state(p: LisrPartitionState, memo: EncodeMemo | None) -> str:
    ints = _ints_of(memo)
    return (
        f'{{"partitionIndex":{p.partition},"controllerEpoch":{p.controller_epoch},"leader":{p.leader},'
        f'"leaderEpoch":{p.leader_epoch},"isr":{ints(p.isr)},"partitionEpoch":{p.partition_epoch},'
        f'"replicas":{ints(p.replicas)},"addingReplicas":{ints(p.adding_replicas)},'
        f'"removingReplicas":{ints(p.removing_replicas)},"isNew":{_b(p.is_new)},'
        f'"leaderRecoveryState":{p.leader_recovery_state}}}'
    )


def _lisr_state_once(p: LisrPartitionState, memo: EncodeMemo | None) -> str:
    return _lisr_state(p, None) if memo is None else memo.once(_lisr_state, p)


def _metadata_state(p: MetadataPartitionState, memo: EncodeMemo | None) -> str:
    ints = _ints_of(memo)
    return (
        f'{{"partitionIndex":{p.partition},"controllerEpoch":{p.controller_epoch},"leader":{p.leader},'
        f'"leaderEpoch":{p.leader_epoch},"isr":{ints(p.isr)},"zkVersion":{p.zk_version},'
        f'"replicas":{ints(p.replicas)},"offlineReplicas":{ints(p.offline_replicas)}}}'
    )


def _stop_state(p: StopReplicaPartition, memo: EncodeMemo | None) -> str:
    return (
        f'{{"partitionIndex":{p.partition},"leaderEpoch":{p.leader_epoch},"deletePartition":{_b(p.delete_partition)}}}'
    )


def _alter_result(p: AlterPartitionResult, memo: EncodeMemo | None) -> str:
    corr = f',"correlationId":{p.correlation_id}' if p.correlation_id >= 0 else ""
    return (
        f'{{"partitionIndex":{p.partition},"errorCode":{p.error_code},"leaderId":{p.leader_id},'
        f'"leaderEpoch":{p.leader_epoch},"isr":{_ints_of(memo)(p.isr)},"partitionEpoch":{p.partition_epoch},'
        f'"leaderRecoveryState":{p.leader_recovery_state}{corr}}}'
    )


def _grouped(
    parts: tuple[Any, ...],
    state: Callable[[Any, EncodeMemo | None], str],
    memo: EncodeMemo | None,
    *,
    with_id: bool,
    inner: str = "partitionStates",
) -> str:
    """Consecutive entries of one topic (and topic id) as one topic entry, in order."""
    out: list[str] = []
    i, n = 0, len(parts)
    while i < n:
        first = parts[i]
        j = i + 1
        while j < n and parts[j].topic == first.topic and (not with_id or parts[j].topic_id == first.topic_id):
            j += 1
        tid = f',"topicId":{_s(first.topic_id)}' if with_id else ""
        states = ",".join(state(p, memo) for p in parts[i:j])
        out.append(f'{{"topicName":{_s(first.topic)}{tid},"{inner}":[{states}]}}')
        i = j
    return "[" + ",".join(out) + "]"


def _lisr_topics(parts: tuple[LisrPartitionState, ...], memo: EncodeMemo | None) -> str:
    return _grouped(parts, _lisr_state_once, memo, with_id=True)


def _metadata_topics(parts: tuple[MetadataPartitionState, ...], memo: EncodeMemo | None) -> str:
    return _grouped(parts, _metadata_state, memo, with_id=True)


def _stop_topics(parts: tuple[StopReplicaPartition, ...], memo: EncodeMemo | None) -> str:
    return _grouped(parts, _stop_state, memo, with_id=False)


def _topic_states(
    parts: tuple[_S, ...], topics: Callable[[tuple[_S, ...], EncodeMemo | None], str], memo: EncodeMemo | None
) -> str:
    # the per-broker copies of one shared UpdateMetadata (BrokerRequest.fan_out) share one tuple of
    # partition states: encode it once
    if memo is None or not parts:
        return topics(parts, memo)
    return memo.once(topics, parts)


def _head(controller_id: int, controller_epoch: int, broker_epoch: int) -> str:
    return f'{{"controllerId":{controller_id},"controllerEpoch":{controller_epoch},"brokerEpoch":{broker_epoch}'


def _metadata_broker(b: MetadataBroker) -> str:
    eps = ",".join(
        f'{{"port":{e.port},"host":{_s(e.host)},"listener":{_s(e.listener)},"securityProtocol":{e.security_protocol}}}'
        for e in b.endpoints
    )
    return f'{{"id":{b.broker_id},"endpoints":[{eps}],"rack":{_s(b.rack)}}}'


def encode_text(body: RequestBody, memo: EncodeMemo | None = None) -> str:
    """:func:`encode_body` as text. ``memo`` (kept by the caller while the bodies live, e.g. over one
    step's decisions) lets bodies that share one tuple of partition states, or LeaderAndIsr partition
    state objects, encode them once."""
    if isinstance(body, LeaderAndIsrRequest):
        leaders = ",".join(
            f'{{"brokerId":{a.broker_id},"hostName":{_s(a.host)},"port":{a.port}}}' for a in body.live_leaders
        )
        return (
            f'{_head(body.controller_id, body.controller_epoch, body.broker_epoch)},"type":{body.type},'
            f'"topicStates":{_topic_states(body.partitions, _lisr_topics, memo)},'
            f'"liveLeaders":[{leaders}]}}'
        )
    if isinstance(body, UpdateMetadataRequest):
        brokers = ",".join(_metadata_broker(b) for b in body.live_brokers)
        return (
            f"{_head(body.controller_id, body.controller_epoch, body.broker_epoch)},"
            f'"topicStates":{_topic_states(body.partitions, _metadata_topics, memo)},"liveBrokers":[{brokers}]}}'
        )
    if isinstance(body, StopReplicaRequest):
        return (
            f"{_head(body.controller_id, body.controller_epoch, body.broker_epoch)},"
            f'"topicStates":{_topic_states(body.partitions, _stop_topics, memo)}}}'
        )
    if isinstance(body, ControlledShutdownResponse):
        remaining = ",".join(f'{{"topicName":{_s(tp.topic)},"partitionIndex":{tp.partition}}}' for tp in body.remaining)
        return f'{{"errorCode":{body.error_code},"remainingPartitions":[{remaining}]}}'
    topics = _grouped(body.partitions, _alter_result, memo, with_id=True, inner="partitions")
    corr = f'"correlationId":{body.correlation_id},' if body.correlation_id >= 0 else ""
    return f'{{"errorCode":{body.error_code},"throttleTimeMs":{body.throttle_time_ms},{corr}"topics":{topics}}}'


def encode_body(body: RequestBody, memo: EncodeMemo | None = None) -> bytes:
    """The body's wire form (UTF-8 JSON, the field order of the module docstring); see :func:`encode_text`."""
    return encode_text(body, memo).encode()


def body_dict(body: RequestBody) -> dict[str, Any]:
    """The body's wire form as a JSON object (for readers of the wire form: the sink, tests)."""
    result: dict[str, Any] = json.loads(encode_text(body))
    return result


def wire_object(body: AnyBody) -> Mapping[str, Any]:
    """The wire form of either kind of body, as a JSON object: a :class:`~core.kafka.requests.WireBody`'s
    own (no copy: never mutate it), a typed body's encoded."""
    return body.obj if isinstance(body, WireBody) else body_dict(body)


def with_broker_epoch(body: AnyBody, broker_epoch: int) -> AnyBody:
    """``body`` with ``brokerEpoch`` set to ``broker_epoch`` (one addressee's copy of a shared request); a body
    without a broker epoch (a response) is returned as it is."""
    if isinstance(body, WireBody):
        if "brokerEpoch" not in body.obj:
            return body
        return WireBody({**body.obj, "brokerEpoch": broker_epoch})
    if isinstance(body, LeaderAndIsrRequest | UpdateMetadataRequest | StopReplicaRequest):
        return replace(body, broker_epoch=broker_epoch)
    return body


# ---------------------------------------------------------------------------- parsing


def encode_addressees(addressees: tuple[Addressee, ...]) -> list[dict[str, int]]:
    """A shared request's addressees in their JSON form (the decision row's and the envelope's):
    ``[{"brokerId", "brokerEpoch"}]``, in order."""
    return [{"brokerId": a.broker_id, "brokerEpoch": a.broker_epoch} for a in addressees]


def read_addressees(raw: Any, field: str) -> tuple[Addressee, ...]:
    """The addressees of :func:`encode_addressees` (missing or null: none); :class:`FormatError` names the
    field and the reason (an entry that is not an object of two integers, or ids not distinct and
    ascending)."""
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


_PARSERS: dict[RequestApi, Any] = {
    RequestApi.LEADER_AND_ISR: _lisr,
    RequestApi.UPDATE_METADATA: _update_metadata,
    RequestApi.STOP_REPLICA: _stop_replica,
    RequestApi.CONTROLLED_SHUTDOWN_RESPONSE: _controlled_shutdown_response,
    RequestApi.ALTER_PARTITION_RESPONSE: _alter_partition_response,
}
