"""The messages of the request sink's three topics: keys, values, headers, order and identities (pure).

**Requests** (:meth:`sinks.requests.RequestSink.write_requests`) go to ``livectl.requests``, key = the
broker id as text, one message per broker per API per micro-batch: bodies of the same broker and API (from
several buckets) are merged by :func:`sinks.requests.merge.merge_bodies` (its rules in
:mod:`sinks.requests.merge`). **AlterPartitionResponse** bodies are answers to separate requests: only
those whose top-level fields agree merge (answers without a top-level error, each partition entry naming
its request by ``correlationId``); an answer with a top-level error (``STALE_BROKER_EPOCH``, ...) answers
its one request, named by its own top-level ``correlationId``, and is a message of its own — merged, its
error would win over the other requests' per-partition results (issue 41). A broker's several
AlterPartitionResponse messages of one batch are numbered like the parts of a split request (each is
complete). The value is

``{"version":1,"api":"LeaderAndIsr","controllerEpoch":E,"batchId":B,"brokerId":b,"body":{…}}``

A **shared** request (the UpdateMetadata of a micro-batch, addressed to a set of brokers: see
:mod:`core.request_batch`) is merged the same way per (addressee set, API) and written **once per partition
of the topic that holds an addressee** (the partition the producer's default partitioner gives the
addressee's key; with one partition, once), keyed ``-1``, naming that partition's addressees with their
broker epochs (:mod:`core.kafka.envelope`, version 2). Kafka sends the same UpdateMetadata to every
broker one by one; a topic every broker reads carries it once, a third of the bytes
(``docs/decisions/2026-11-24-updatemetadata-once.md``).

Messages are written in Kafka's order by API — every LeaderAndIsr, then UpdateMetadata, then StopReplica,
then the controller's responses, brokers ascending within each — so in every partition each broker reads
its own messages, and a shared one, in Kafka's order LeaderAndIsr, UpdateMetadata, StopReplica. A request
over :data:`~sinks.requests.split.MAX_MESSAGE_BYTES` is split at partition boundaries into complete
requests of the same API (:mod:`sinks.requests.split`) sent one after the other, each with
``"part": k, "parts": n``; messages are compressed with the sink's ``compression``
(:mod:`sinks.compression`). The headers carry ``api``, ``batch_id`` and ``controller_epoch`` (UTF-8 text).

**Admin results** go to ``livectl.admin-results`` keyed by ``request_id``: the decision's JSON
(:func:`core.codec.decisions.encode_decision`, ``details`` a JSON object) plus ``batch_id`` and
``controller_epoch``. **Rejected input** goes to ``livectl.rejected`` keyed by
``<topic>/<partition>/<offset>`` of the source record:
``{"version":1,"source":{"topic","partition","offset"},"payload":…,"reasons":[…],"batch_id","controller_epoch"}``.

**Identities.** Every message has one (batch id, and broker+API[+part] — for a shared message its
partition's addressees+API[+part], e.g. ``1+4+7/UpdateMetadata`` / request id+occurrence / source
position): what a replay of the batch does not send again (:mod:`sinks.requests.tail`). :func:`identity_of`
and :func:`admin_identity` read it back from a message's value.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from kafka.partitioner.default import murmur2

from core.codec.decisions import decode_decision, encode_decision
from core.decisions import AdminResult, BrokerRequest
from core.errors import FormatError
from core.kafka.envelope import encode_envelope
from core.kafka.request_encoding import wire_object
from core.kafka.requests import REQUEST_ORDER, SHARED_BROKER_ID, Addressee, RequestApi
from sinks.ports import Fence, Rejected
from sinks.requests.merge import merge_bodies, merge_spliced
from sinks.requests.split import MAX_MESSAGE_BYTES, dumps, split_dumped

MESSAGE_VERSION = 1


@dataclass(frozen=True)
class OutboundMessage:
    """One message as sent; ``identity`` = (batch id, id within the batch)."""

    topic: str
    key: bytes
    value: bytes
    headers: tuple[tuple[str, bytes], ...]
    identity: tuple[int, str]
    #: the topic partition to write to; ``None``: the producer's partitioner picks it from the key
    partition: int | None = None

    def value_json(self) -> dict[str, Any]:
        result: dict[str, Any] = json.loads(self.value)
        return result


def _key(text: str) -> bytes:
    return text.encode("utf-8", "backslashreplace")


def _cut(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[:chars] + f"… [truncated: {len(text)} characters in all]"


def fit_admin_value(value: dict[str, Any], max_bytes: int) -> bytes:
    """An admin result's message value within ``max_bytes``: when the whole one is larger (per-partition
    details of a reassignment or election over tens of thousands of partitions), ``details`` becomes the
    object ``{"truncated":true,"original_bytes":N}`` (N: the bytes of the details' own JSON) and the message
    is cut, and ``"truncated"`` names what was cut — the status and error, what ``--wait`` acts on, are
    always kept."""
    data = dumps(value)
    if len(data) <= max_bytes:
        return data
    cut = dict(value)
    cut["details"] = {"truncated": True, "original_bytes": len(dumps(value.get("details") or {}))}
    cut["truncated"] = {"fields": ["details"], "original_bytes": len(data)}
    data = dumps(cut)
    chars = max_bytes // 8
    while len(data) > max_bytes and chars > 16:
        cut["message"] = _cut(str(value.get("message", "")), chars)
        cut["truncated"] = {"fields": ["details", "message"], "original_bytes": len(data)}
        data = dumps(cut)
        chars //= 2
    return data


def fit_rejected_value(value: dict[str, Any], max_bytes: int) -> bytes:
    """A rejected record's message value within ``max_bytes``: the copy of the record (``payload``; its
    JSON escaping can double a record's size) is cut to what fits and marked with
    ``"payload_truncated": true`` and ``"payload_chars"`` (its full length); reasons likewise."""
    data = dumps(value)
    if len(data) <= max_bytes:
        return data
    payload = str(value.get("payload", ""))
    cut = {**value, "payload_truncated": True, "payload_chars": len(payload)}
    chars = min(len(payload), max_bytes // 2)
    while True:
        cut["payload"] = payload[:chars]
        data = dumps(cut)
        if len(data) <= max_bytes or chars == 0:
            break
        chars //= 2
    reason_chars = max_bytes // 16
    while len(data) > max_bytes and reason_chars > 16:
        cut["reasons"] = [_cut(str(r), reason_chars) for r in value.get("reasons", [])][:16]
        data = dumps(cut)
        reason_chars //= 2
    return data


def _headers(batch_id: int, fence: Fence, **extra: str) -> tuple[tuple[str, bytes], ...]:
    items = {**extra, "batch_id": str(batch_id), "controller_epoch": str(fence.controller_epoch)}
    return tuple((k, v.encode()) for k, v in items.items())


def request_messages(
    topic: str,
    fence: Fence,
    batch_id: int,
    requests: Sequence[BrokerRequest],
    max_bytes: int = MAX_MESSAGE_BYTES,
    *,
    partitions: Sequence[int] = (0,),
) -> list[OutboundMessage]:
    """One message per (broker, API), and one per (addressee set, API) and topic partition for a shared
    request, in Kafka's order among each partition's messages (see the module docstring). A request too
    large for one message is split by :func:`split_body` into parts sent in order, each carrying
    ``"part": k, "parts": n`` (1-based). ``partitions``: the topic's partition ids (a shared message goes
    to each one that holds an addressee's key, by the producer's default partitioner)."""
    groups: dict[tuple[int, RequestApi], list[Mapping[str, Any]]] = {}
    shared: dict[tuple[RequestApi, tuple[Addressee, ...]], list[Mapping[str, Any]]] = {}
    for r in requests:
        if r.addressees:
            shared.setdefault((r.api, r.addressees), []).append(wire_object(r.body))
        else:
            groups.setdefault((r.broker_id, r.api), []).append(wire_object(r.body))
    # a bucket often sends equal bodies to several brokers (a LeaderAndIsr to every replica of the same
    # partitions): equal groups are merged and split once (nothing below mutates a body)
    split: list[tuple[list[Mapping[str, Any]], list[tuple[Mapping[str, Any] | None, bytes]]]] = []

    def parts_of(bodies: list[Mapping[str, Any]]) -> list[tuple[Mapping[str, Any] | None, bytes]]:
        parts = next((p for b, p in split if b == bodies), None)
        if parts is None:
            spliced = merge_spliced(bodies)
            parts = split_dumped(spliced if spliced is not None else merge_bodies(bodies), max_bytes, mappings=False)
            split.append((bodies, parts))
        return parts

    shared_identities: set[str] = set()

    def messages(
        broker: int,
        api: RequestApi,
        bodies: list[Mapping[str, Any]],
        members: tuple[Addressee, ...] = (),
        partition: int | None = None,
    ) -> list[OutboundMessage]:
        """The request's message(s), one per part: to ``broker``, or shared with ``members`` (``partition``:
        the topic partition of a shared message, when the topic has several)."""
        if api is RequestApi.ALTER_PARTITION_RESPONSE and len(bodies) > 1:
            # answers to separate requests merge only where their top-level fields agree (_answer_groups)
            parts = [p for group in _answer_groups(bodies) for p in parts_of(group)]
        else:
            parts = parts_of(bodies)
        msgs = []
        for k, (_, body_bytes) in enumerate(parts, start=1):
            part = (k, len(parts)) if len(parts) > 1 else None
            key, value = encode_envelope(
                broker, api, fence.controller_epoch, batch_id, body_bytes, part=part, addressees=members
            )
            identity = _identity(_addressee_ids(members) if members else broker, api.value, k if part else None)
            if members:
                if identity in shared_identities:
                    # two addressee sets that name the same brokers in this partition (buckets that disagree
                    # on the live brokers: not expected). A replay cannot tell them apart from the topic, so
                    # the later one is sent again then — a duplicate the brokers drop by its digest — rather
                    # than taken for the earlier one and lost
                    identity = f"{identity}~{len(shared_identities)}"
                shared_identities.add(identity)
            headers = _headers(batch_id, fence, api=api.value)
            msgs.append(OutboundMessage(topic, key, value, headers, (batch_id, identity), partition))
        return msgs

    # Kafka's order per broker (LeaderAndIsr, UpdateMetadata, StopReplica, responses) by API first: a shared
    # message then follows every addressee's LeaderAndIsr and precedes its StopReplica in any partition
    keyed: list[tuple[int, int, list[OutboundMessage]]] = [
        (REQUEST_ORDER[api], broker, messages(broker, api, bodies)) for (broker, api), bodies in groups.items()
    ]
    for (api, addressees), bodies in sorted(shared.items(), key=lambda kv: (kv[0][1], REQUEST_ORDER[kv[0][0]])):
        for p, members in _by_partition(addressees, partitions):
            keyed.append(
                (
                    REQUEST_ORDER[api],
                    members[0].broker_id,
                    messages(SHARED_BROKER_ID, api, bodies, members, p if len(partitions) > 1 else None),
                )
            )
    keyed.sort(key=lambda k: (k[0], k[1]))
    return [m for _, _, msgs in keyed for m in msgs]


def _answer_groups(bodies: list[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    """AlterPartitionResponse bodies grouped by their top-level fields (all but ``topics``), in order of first
    appearance: the bodies of one group merge, those of different groups never do (see the module docstring)."""
    groups: dict[bytes, list[Mapping[str, Any]]] = {}
    for b in bodies:
        groups.setdefault(dumps({k: v for k, v in b.items() if k != "topics"}), []).append(b)
    return list(groups.values())


def partition_for_key(key: bytes, partitions: Sequence[int]) -> int:
    """The partition kafka-python's default partitioner (Kafka's: murmur2 of the key) gives ``key``."""
    ordered = sorted(partitions)
    return ordered[(int(murmur2(key)) & 0x7FFFFFFF) % len(ordered)]


def _by_partition(
    addressees: tuple[Addressee, ...], partitions: Sequence[int]
) -> list[tuple[int, tuple[Addressee, ...]]]:
    """The addressees grouped by the partition their own messages (keyed by broker id) go to, partitions
    ascending."""
    out: dict[int, list[Addressee]] = {}
    for a in addressees:
        p = partition_for_key(str(a.broker_id).encode(), partitions) if len(partitions) > 1 else partitions[0]
        out.setdefault(p, []).append(a)
    return [(p, tuple(out[p])) for p in sorted(out)]


def _addressee_ids(addressees: Iterable[Addressee] | Iterable[int]) -> str:
    return "+".join(str(a.broker_id if isinstance(a, Addressee) else a) for a in addressees)


def _identity(broker: Any, api: Any, part: Any) -> str:
    # a shared message's identity names its addressees in its partition ("1+4+7/UpdateMetadata")
    return f"{broker}/{api}" + (f"#{part}" if part is not None else "")


def _request_identity(value: dict[str, Any]) -> str:
    if value.get("addressees"):
        ids = _addressee_ids(int(a["brokerId"]) for a in value["addressees"])
        return _identity(ids, value["api"], value.get("part"))
    return _identity(value["brokerId"], value["api"], value.get("part"))


def admin_result_messages(
    topic: str, fence: Fence, batch_id: int, results: Sequence[AdminResult], max_bytes: int = MAX_MESSAGE_BYTES
) -> list[OutboundMessage]:
    """One message per result, keyed by ``request_id``, in the order given; each within ``max_bytes``
    (:func:`fit_admin_value`)."""
    out = []
    occurrences: dict[str, int] = {}
    for r in results:
        k = occurrences[r.request_id] = occurrences.get(r.request_id, -1) + 1
        value = {**encode_decision(r), "batch_id": batch_id, "controller_epoch": fence.controller_epoch}
        out.append(
            OutboundMessage(
                topic,
                _key(r.request_id),
                fit_admin_value(value, max_bytes),
                _headers(batch_id, fence, command=r.command, status=r.status.value),
                (batch_id, f"{r.request_id}#{k}"),
            )
        )
    return out


def read_admin_result(value: bytes) -> AdminResult | None:
    """The result an admin-results message holds (:func:`admin_result_messages`' value, the sink's own fields
    left out); ``None`` for a value that is not one."""
    try:
        raw = json.loads(value)
        if isinstance(raw, dict):
            raw = {k: v for k, v in raw.items() if k not in ("batch_id", "controller_epoch")}
        decision = decode_decision(raw)
    except (ValueError, FormatError):
        return None
    return decision if isinstance(decision, AdminResult) else None


def rejected_messages(
    topic: str, fence: Fence, batch_id: int, rejected: Sequence[Rejected], max_bytes: int = MAX_MESSAGE_BYTES
) -> list[OutboundMessage]:
    """One message per rejected record, keyed by its source position; each within ``max_bytes``
    (:func:`fit_rejected_value`)."""
    out = []
    for r in rejected:
        key = f"{r.source_topic}/{r.source_partition}/{r.source_offset}"
        value = {
            "version": MESSAGE_VERSION,
            "source": {"topic": r.source_topic, "partition": r.source_partition, "offset": r.source_offset},
            "payload": r.payload,
            "reasons": list(r.reasons),
            "batch_id": batch_id,
            "controller_epoch": fence.controller_epoch,
        }
        out.append(
            OutboundMessage(
                topic, _key(key), fit_rejected_value(value, max_bytes), _headers(batch_id, fence), (batch_id, key)
            )
        )
    return out


def identity_of(value: bytes) -> tuple[int, str] | None:
    """The identity of a message read back from one of the sink's topics (None if not ours)."""
    try:
        v = orjson.loads(value)
        if "api" in v and "batchId" in v:
            return (int(v["batchId"]), _request_identity(v))
        if v.get("type") == "admin_result":
            return None  # occurrence numbers are rebuilt by the caller: admin_identity
        if "source" in v:
            s = v["source"]
            return (int(v["batch_id"]), f"{s['topic']}/{s['partition']}/{s['offset']}")
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    return None


def admin_identity(value: bytes, occurrences: dict[str, int], batch_id: int) -> tuple[int, str] | None:
    """The identity of an admin result of batch ``batch_id`` read back in partition order (None if not one):
    ``occurrences`` counts the results of each request id seen so far, as :func:`admin_result_messages` did."""
    # admin results are keyed by request id, so all results of one request id share a partition and
    # their occurrence numbers can be recounted in partition order
    try:
        v = orjson.loads(value)
        if v.get("type") != "admin_result":
            return None
        rid = str(v["request_id"])
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    k = occurrences[rid] = occurrences.get(rid, -1) + 1
    return (batch_id, f"{rid}#{k}")
