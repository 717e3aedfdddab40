"""The one wire form of the controller's requests and responses (:mod:`core.kafka.requests`), written.

:func:`encode_body` writes a typed body as the JSON object brokers read: Kafka's field names, in the order
listed below, no spaces, non-ASCII escaped. :mod:`core.kafka.request_parsing` reads one back
(``parse_body(api, json.loads(encode_body(x))) == x`` for every body ``x``).

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

from core.kafka.requests import (
    Addressee,
    AlterPartitionResult,
    AnyBody,
    ControlledShutdownResponse,
    LeaderAndIsrRequest,
    LisrPartitionState,
    MetadataBroker,
    MetadataPartitionState,
    RequestBody,
    StopReplicaPartition,
    StopReplicaRequest,
    UpdateMetadataRequest,
    WireBody,
)

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


def topic_runs(parts: tuple[Any, ...], *, with_id: bool) -> Iterator[tuple[Any, tuple[Any, ...]]]:
    """Consecutive partition states of one topic (and topic id, ``with_id``), in order: each run's first state
    and the run."""
    i, n = 0, len(parts)
    while i < n:
        first = parts[i]
        j = i + 1
        while j < n and parts[j].topic == first.topic and (not with_id or parts[j].topic_id == first.topic_id):
            j += 1
        yield first, parts[i:j]
        i = j


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
    for first, run in topic_runs(parts, with_id=with_id):
        tid = f',"topicId":{_s(first.topic_id)}' if with_id else ""
        states = ",".join(state(p, memo) for p in run)
        out.append(f'{{"topicName":{_s(first.topic)}{tid},"{inner}":[{states}]}}')
    return "[" + ",".join(out) + "]"


def _lisr_topics(parts: tuple[LisrPartitionState, ...], memo: EncodeMemo | None) -> str:
    return _grouped(parts, _lisr_state_once, memo, with_id=True)


def _metadata_topics(parts: tuple[MetadataPartitionState, ...], memo: EncodeMemo | None) -> str:
    return _grouped(parts, _metadata_state, memo, with_id=True)


def _stop_topics(parts: tuple[StopReplicaPartition, ...], memo: EncodeMemo | None) -> str:
    return _grouped(parts, _stop_state, memo, with_id=False)


def encoded_once(
    parts: tuple[_S, ...], encode: Callable[[tuple[_S, ...], EncodeMemo | None], _T], memo: EncodeMemo | None
) -> _T:
    """``encode(parts, memo)``, once per tuple with ``memo``: the per-broker copies of one shared UpdateMetadata
    (``BrokerRequest.fan_out``) share one tuple of partition states."""
    if memo is None or not parts:
        return encode(parts, memo)
    return memo.once(encode, parts)


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
            f'"topicStates":{encoded_once(body.partitions, _lisr_topics, memo)},'
            f'"liveLeaders":[{leaders}]}}'
        )
    if isinstance(body, UpdateMetadataRequest):
        brokers = ",".join(_metadata_broker(b) for b in body.live_brokers)
        return (
            f"{_head(body.controller_id, body.controller_epoch, body.broker_epoch)},"
            f'"topicStates":{encoded_once(body.partitions, _metadata_topics, memo)},"liveBrokers":[{brokers}]}}'
        )
    if isinstance(body, StopReplicaRequest):
        return (
            f"{_head(body.controller_id, body.controller_epoch, body.broker_epoch)},"
            f'"topicStates":{encoded_once(body.partitions, _stop_topics, memo)}}}'
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


def encode_addressees(addressees: tuple[Addressee, ...]) -> list[dict[str, int]]:
    """A shared request's addressees in their JSON form (the decision row's and the envelope's):
    ``[{"brokerId", "brokerEpoch"}]``, in order."""
    return [{"brokerId": a.broker_id, "brokerEpoch": a.broker_epoch} for a in addressees]
