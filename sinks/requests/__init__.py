"""The request-topic sink: broker requests, admin results and rejected input, to Kafka (``acks=all``).

**Requests** (:meth:`RequestSink.write_requests`) go to ``livectl.requests``, key = the broker id as
text, one message per broker per API per micro-batch: bodies of the same broker and API (from several
buckets; each already a JSON object, the driver's :class:`core.kafka.requests.WireBody`, or a typed value
encoded by :mod:`core.kafka.request_encoding`) are merged by :func:`merge_bodies` (``topicStates``
concatenated, entries of the same ``topicName`` joined; ``liveBrokers`` / ``liveLeaders`` de-duplicated
by broker id; other lists concatenated without duplicates; differing scalars: the larger, and a non-zero
``errorCode`` wins). **AlterPartitionResponse** bodies are answers to separate requests: only those whose
top-level fields agree merge (answers without a top-level error, each partition entry naming its request by
``correlationId``); an answer with a top-level error (``STALE_BROKER_EPOCH``, ...) answers its one request,
named by its own top-level ``correlationId``, and is a message of its own — merged, its error would win
over the other requests' per-partition results (issue 41). A broker's several AlterPartitionResponse
messages of one batch are numbered like the parts of a split request (each is complete). The value is

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
over :data:`MAX_MESSAGE_BYTES` is split at partition boundaries into complete requests of the same API
sent one after the other, each with ``"part": k, "parts": n``; messages are compressed with the
sink's ``compression`` (:mod:`sinks.compression`). The headers carry ``api``, ``batch_id`` and
``controller_epoch`` (UTF-8 text).

**Admin results** go to ``livectl.admin-results`` keyed by ``request_id``: the decision's JSON
(:func:`core.codec.decisions.encode_decision`, ``details`` a JSON object) plus ``batch_id`` and
``controller_epoch``. **Rejected input** goes to ``livectl.rejected`` keyed by
``<topic>/<partition>/<offset>`` of the source record:
``{"version":1,"source":{"topic","partition","offset"},"payload":…,"reasons":[…],"batch_id","controller_epoch"}``.

**Idempotent replay by batch id.** Every message has an identity (batch id, and broker+API[+part] —
for a shared message its partition's addressees+API[+part], e.g. ``1+4+7/UpdateMetadata`` / request
id+occurrence / source position). Before the first write of a sink instance, and again after
any failed write, the sink reads the tail of each partition of the topic: the messages at the end whose
batch id is at least the one being written. If they are all of that batch, their identities are not
sent again, whichever controller epoch wrote them (Spark's replay of a batch id gives the same
decisions; after a crash the replaying controller has a new epoch). If the tail holds a *later* batch
id, it comes from an earlier run (a new checkpoint restarts batch ids at 0) and nothing is skipped.
Afterwards the instance remembers what it wrote, so replaying a batch it completed (or an older one)
sends nothing. Consumers get a second line of
defence: **simulated brokers keep the highest (controllerEpoch, batchId) applied per request type and
drop any message at or below it**, as Kafka brokers drop requests from an older controller epoch.
"""

from __future__ import annotations

import bisect
import contextlib
import json
import logging
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import InvalidProducerEpochError, KafkaError, ProducerFencedError
from kafka.partitioner.default import murmur2

from core import limits
from core.codec.decisions import encode_decision
from core.decisions import AdminResult, BrokerRequest
from core.kafka.envelope import encode_envelope
from core.kafka.request_encoding import wire_object
from core.kafka.requests import REQUEST_ORDER, SHARED_BROKER_ID, Addressee, RequestApi, SplicedBody
from sinks.compression import compression_type
from sinks.errors import ControllerFencedError, SinkUnavailableError
from sinks.ports import Fence, Rejected, RequestBatchResult

log = logging.getLogger("livectl.sinks")

MESSAGE_VERSION = 1
#: keys that identify one entry of a list, for de-duplication when merging bodies
_ENTRY_IDS = ("brokerId", "id")


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


# ---------------------------------------------------------------------------- pure: merging, messages


def _merge_scalar(key: str, a: Any, b: Any) -> Any:
    if a == b or b is None:
        return a
    if a is None:
        return b
    if key == "errorCode":
        return a if a != 0 else b
    if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool):
        return max(a, b)
    return a


def _entry_id(entry: Any) -> Any:
    if isinstance(entry, dict):
        for k in _ENTRY_IDS:
            if k in entry:
                return (k, entry[k])
    return ("=", json.dumps(entry, sort_keys=True))


def _merge_lists(a: list[Any], b: list[Any]) -> list[Any]:
    out = list(a)
    by_topic = {e["topicName"]: i for i, e in enumerate(out) if isinstance(e, dict) and "topicName" in e}
    # topic entries merge by name; only the others (live brokers, ...) need an identity, and computing one
    # for a topic entry would serialise all its partition states
    seen = {_entry_id(e) for e in out if not (isinstance(e, dict) and "topicName" in e)}
    for e in b:
        if isinstance(e, dict) and "topicName" in e:
            if e["topicName"] in by_topic:
                i = by_topic[e["topicName"]]
                out[i] = merge_bodies([out[i], e])
            else:
                by_topic[e["topicName"]] = len(out)
                out.append(e)
            continue
        ident = _entry_id(e)
        if ident not in seen:
            seen.add(ident)
            out.append(e)
    return out


def merge_bodies(bodies: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Merge request bodies of one broker and API (rules in the module docstring); order is kept."""
    merged: dict[str, Any] = {}
    for body in bodies:
        for key, value in body.items():
            if key not in merged:
                merged[key] = value
            elif isinstance(merged[key], list) and isinstance(value, list):
                merged[key] = _merge_lists(merged[key], value)
            elif isinstance(merged[key], dict) and isinstance(value, dict):
                merged[key] = merge_bodies([merged[key], value])
            else:
                merged[key] = _merge_scalar(key, merged[key], value)
    return merged


def merge_spliced(bodies: Sequence[Mapping[str, Any]]) -> SplicedBody | None:
    """:func:`merge_bodies` of bodies whose ``topicStates`` entries are text
    (:class:`~core.kafka.requests.SplicedBody`; a body with no entries counts as one), without parsing
    them: their other fields merge, their entries are concatenated in order — what :func:`merge_bodies`
    gives when no topic name comes twice (buckets own disjoint topics). ``None`` when that does not hold
    (then the bodies merge as objects)."""
    if not any(isinstance(b, SplicedBody) for b in bodies):
        return None
    heads: list[Mapping[str, Any]] = []
    names: list[str] = []
    counts: list[int] = []
    texts: list[str] = []
    for b in bodies:
        if isinstance(b, SplicedBody):
            heads.append(b.head)
            names.extend(b.names)
            counts.extend(b.counts)
            texts.extend(b.texts)
        elif b.get("topicStates", []) == []:
            heads.append(b)
        else:
            return None
    if len(set(names)) != len(names):
        return None
    if len(bodies) == 1 and isinstance(bodies[0], SplicedBody):
        return bodies[0]
    head = merge_bodies(heads)
    head["topicStates"] = []
    return SplicedBody(head, tuple(names), tuple(counts), tuple(texts))


def _dumps(obj: Any) -> bytes:
    # orjson: the request bodies of a large batch are tens to hundreds of MB of JSON, and the standard
    # library's encoder and decoder were most of the sink's time (bench/request_sink_cost.py)
    try:
        return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:
        # orjson refuses what JSON allows but UTF-8 cannot carry (a lone surrogate) and integers beyond
        # 64 bits; the standard encoder escapes both to ASCII, so the message can always be written
        return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


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
    data = _dumps(value)
    if len(data) <= max_bytes:
        return data
    cut = dict(value)
    cut["details"] = {"truncated": True, "original_bytes": len(_dumps(value.get("details") or {}))}
    cut["truncated"] = {"fields": ["details"], "original_bytes": len(data)}
    data = _dumps(cut)
    chars = max_bytes // 8
    while len(data) > max_bytes and chars > 16:
        cut["message"] = _cut(str(value.get("message", "")), chars)
        cut["truncated"] = {"fields": ["details", "message"], "original_bytes": len(data)}
        data = _dumps(cut)
        chars //= 2
    return data


def fit_rejected_value(value: dict[str, Any], max_bytes: int) -> bytes:
    """A rejected record's message value within ``max_bytes``: the copy of the record (``payload``; its
    JSON escaping can double a record's size) is cut to what fits and marked with
    ``"payload_truncated": true`` and ``"payload_chars"`` (its full length); reasons likewise."""
    data = _dumps(value)
    if len(data) <= max_bytes:
        return data
    payload = str(value.get("payload", ""))
    cut = {**value, "payload_truncated": True, "payload_chars": len(payload)}
    chars = min(len(payload), max_bytes // 2)
    while True:
        cut["payload"] = payload[:chars]
        data = _dumps(cut)
        if len(data) <= max_bytes or chars == 0:
            break
        chars //= 2
    reason_chars = max_bytes // 16
    while len(data) > max_bytes and reason_chars > 16:
        cut["reasons"] = [_cut(str(r), reason_chars) for r in value.get("reasons", [])][:16]
        data = _dumps(cut)
        reason_chars //= 2
    return data


def _headers(batch_id: int, fence: Fence, **extra: str) -> tuple[tuple[str, bytes], ...]:
    items = {**extra, "batch_id": str(batch_id), "controller_epoch": str(fence.controller_epoch)}
    return tuple((k, v.encode()) for k, v in items.items())


#: the first window of the tail read (messages per partition, doubled until a message of an earlier batch is in
#: it). The write of a new batch id (every write but a replay's) needs one window, whose first message is of an
#: earlier batch: a controller's first write after a failover then decompresses 8 of the previous controller's
#: ~1 MB messages instead of 128 (the first write of a 100k-partition failover's 86 messages, median 1.48 s with
#: 128 and 1.21 s with 8 on a 2-core machine: ``bench/first_write.py``)
TAIL_WINDOW = 8

#: largest message value the sink writes (before compression): below Kafka's default 1 MB
#: ``max.message.bytes`` / kafka-python's ``max_request_size``, whatever the compression
MAX_MESSAGE_BYTES = limits.MAX_MESSAGE_BYTES


def split_body(body: Mapping[str, Any], max_bytes: int) -> list[Mapping[str, Any]]:
    """``body`` as one or more requests whose JSON each fits in ``max_bytes``, by splitting its
    ``topicStates`` at partition boundaries. Every part is a complete request of the same API (other
    fields, e.g. ``liveBrokers``, are repeated): a broker applies the parts in order as it would one
    request, since LeaderAndIsr, UpdateMetadata and StopReplica act partition by partition."""
    parts = []
    for part, _ in _split_dumped(body, max_bytes):
        assert part is not None
        parts.append(part)
    return parts


def _split_dumped(
    body: Mapping[str, Any], max_bytes: int, *, mappings: bool = True
) -> list[tuple[Mapping[str, Any] | None, bytes]]:
    """:func:`split_body` with each part's JSON (serialising tens of MB is the sink's main cost: once);
    without ``mappings``, a part cut from entries held as text is only its JSON (``None`` in place of the
    request: the messages need only the bytes, and a failover's parts as text are tens of MB more).

    The partition states of every ``topicStates`` entry, in order, are cut into parts of equal counts,
    then any part still too large is halved. A part is a range of that sequence, built from slices of the
    entries' lists (a failover's bodies hold hundreds of thousands of states: walking them one by one in
    Python was most of the split), and its JSON from each whole entry's JSON, serialised once (or, for a
    :class:`~core.kafka.requests.SplicedBody`, as the bucket wrote it): only an entry cut by a part's edge
    is parsed and serialised again. The whole body's JSON is written only when it is sent whole (for the
    other bodies its size is known from its entries')."""
    split = _Split.of(body)
    if split is None:
        return [(body, _dumps(body))]
    split.mappings = mappings
    size = split.whole_size()
    dumped = split.whole() if size is None else None
    size = len(dumped) if dumped is not None else size
    assert size is not None
    if size <= max_bytes or split.total == 0:
        # nothing to cut at (no partition states): sent whole, never dropped — a message over the producer's
        # or the broker's limit is then refused loudly, naming its size
        return [(body, dumped if dumped is not None else split.whole())]
    pieces = -(-size // max_bytes)
    step = max(1, -(-split.total // pieces))
    return [
        p for start in range(0, split.total, step) for p in split.fit(start, min(start + step, split.total), max_bytes)
    ]


def _framed(prefix: bytes, texts: Sequence[bytes], suffix: bytes) -> bytes:
    """``prefix + b",".join(texts) + suffix`` in one copy (the entries of a failover's body are megabytes, and
    each fresh copy of them costs its page faults)."""
    if not texts:
        return prefix + suffix
    pieces = [prefix]
    for t in texts:
        pieces.append(t)
        pieces.append(b",")
    pieces[-1] = suffix
    return b"".join(pieces)


_TOPIC_STATES_SLOT = b'"topicStates":[]'

#: one entry of a part: segments ``(entry, start, end)`` of the body's entries (consecutive entries of one
#: topic name join)
_Segments = list[tuple[int, int, int]]


class _Split:
    """A body's partition states as one sequence, ``[0, total)``, across its ``topicStates`` entries, with
    each entry's JSON and the JSON around ``topicStates`` (keys sorted: the entries' text is spliced in)."""

    def __init__(self, body: Mapping[str, Any], names: list[Any], counts: list[int]) -> None:
        self.body = body
        # keys, not items: a SplicedBody would parse its entries for its topicStates
        self.rest = {k: body[k] for k in body if k != "topicStates"}
        self.names = names
        #: each entry as (the entry without partitionStates, its partitionStates), once parsed
        self.entries: list[tuple[dict[str, Any], list[Any]] | None] = [None] * len(names)
        #: each entry's JSON, and the body's JSON before and after the entries; None: written whole
        self.texts: list[bytes] | None = None
        self.prefix, self.suffix = b"", b""
        #: whether a part of entries held as text is also built as a request (see :func:`_split_dumped`)
        self.mappings = True
        #: offsets[i]: the states before entry i; entry i holds [offsets[i], offsets[i + 1])
        self.offsets = [0]
        for n in counts:
            self.offsets.append(self.offsets[-1] + n)
        self.total = self.offsets[-1]

    @classmethod
    def of(cls, body: Mapping[str, Any]) -> _Split | None:
        """``None`` when ``topicStates`` is not a list of objects. When orjson cannot write the body (the
        standard encoder's escapes then apply to the whole message: :func:`_dumps`) each part is written
        whole."""
        if isinstance(body, SplicedBody):
            split = cls(body, list(body.names), list(body.counts))
            split.texts = [t.encode() for t in body.texts]
            return split if split.frame() else None
        states = body.get("topicStates")
        if not isinstance(states, list) or not all(isinstance(ts, dict) for ts in states):
            return None
        lists = [ts.get("partitionStates", []) for ts in states]
        split = cls(body, [ts.get("topicName") for ts in states], [len(ps) for ps in lists])
        split.entries = [
            ({k: v for k, v in ts.items() if k != "partitionStates"}, ps) for ts, ps in zip(states, lists, strict=True)
        ]
        try:
            if split.frame():
                split.texts = [_dumps_strict(ts) for ts in states]
        except orjson.JSONEncodeError:
            split.texts = None
        return split

    def frame(self) -> bool:
        """Set the JSON before and after the entries; False when it cannot be spliced."""
        around = _dumps_strict({**self.rest, "topicStates": []})
        if around.count(_TOPIC_STATES_SLOT) != 1:
            return False
        before, _, after = around.partition(_TOPIC_STATES_SLOT)
        self.prefix, self.suffix = before + b'"topicStates":[', b"]" + after
        return True

    def entry(self, i: int) -> tuple[dict[str, Any], list[Any]]:
        got = self.entries[i]
        if got is None:
            assert self.texts is not None
            ts = orjson.loads(self.texts[i])
            got = self.entries[i] = ({k: v for k, v in ts.items() if k != "partitionStates"}, ts["partitionStates"])
        return got

    def whole(self) -> bytes:
        """The body's JSON, as :func:`_dumps` writes it."""
        if self.texts is None:
            return _dumps(self.body)
        return _framed(self.prefix, self.texts, self.suffix)

    def whole_size(self) -> int | None:
        """The length of :meth:`whole`, without writing it; ``None`` when the body is written whole."""
        if self.texts is None:
            return None
        return len(self.prefix) + sum(map(len, self.texts)) + max(0, len(self.texts) - 1) + len(self.suffix)

    def built(self, segments: _Segments) -> dict[str, Any]:
        header, _ = self.entry(segments[0][0])
        states: list[Any] = []
        for i, a, b in segments:
            states.extend(self.entry(i)[1][a:b])
        return {**header, "partitionStates": states}

    def part(self, lo: int, hi: int) -> tuple[Mapping[str, Any] | None, bytes]:
        """The request of the states ``[lo, hi)`` (consecutive states of one topic in one entry), with its
        JSON."""
        out: list[_Segments] = []
        offsets = self.offsets
        i = bisect.bisect_right(offsets, lo) - 1
        while i < len(self.names) and offsets[i] < hi:
            a, b = max(lo, offsets[i]) - offsets[i], min(hi, offsets[i + 1]) - offsets[i]
            if b > a:
                if out and self.names[out[-1][0][0]] == self.names[i]:
                    out[-1].append((i, a, b))
                else:
                    out.append([(i, a, b)])
            i += 1
        if self.texts is None:
            part = {**self.rest, "topicStates": [self.built(seg) for seg in out]}
            return part, _dumps(part)
        own = self.texts
        texts = [
            own[seg[0][0]]
            if len(seg) == 1 and seg[0][1] == 0 and seg[0][2] == offsets[seg[0][0] + 1] - offsets[seg[0][0]]
            else _dumps_strict(self.built(seg))
            for seg in out
        ]
        data = _framed(self.prefix, texts, self.suffix)
        if not self.mappings:
            return None, data
        if isinstance(self.body, SplicedBody):
            counts = tuple(sum(b - a for _, a, b in seg) for seg in out)
            names = tuple(self.names[seg[0][0]] for seg in out)
            head = {**self.rest, "topicStates": []}
            return SplicedBody(head, names, counts, tuple(t.decode() for t in texts)), data
        return {**self.rest, "topicStates": [self.built(seg) for seg in out]}, data

    def fit(self, lo: int, hi: int, max_bytes: int) -> list[tuple[Mapping[str, Any] | None, bytes]]:
        part, dumped = self.part(lo, hi)
        if hi - lo <= 1 or len(dumped) <= max_bytes:
            return [(part, dumped)]
        half = (hi - lo) // 2
        return self.fit(lo, lo + half, max_bytes) + self.fit(lo + half, hi, max_bytes)


def _dumps_strict(obj: Any) -> bytes:
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)


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
            parts = _split_dumped(spliced if spliced is not None else merge_bodies(bodies), max_bytes, mappings=False)
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
        groups.setdefault(_dumps({k: v for k, v in b.items() if k != "topics"}), []).append(b)
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


def _identity_of(value: bytes) -> tuple[int, str] | None:
    """The identity of a message read back from one of the sink's topics (None if not ours)."""
    try:
        v = orjson.loads(value)
        if "api" in v and "batchId" in v:
            return (int(v["batchId"]), _request_identity(v))
        if v.get("type") == "admin_result":
            return None  # occurrence numbers are rebuilt by the caller, see _admin_identities
        if "source" in v:
            s = v["source"]
            return (int(v["batch_id"]), f"{s['topic']}/{s['partition']}/{s['offset']}")
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    return None


# ---------------------------------------------------------------------------- the Kafka sink


def transactional_id(query_name: str) -> str:
    """The Kafka ``transactional.id`` of the request sink of the controller query ``query_name``: one id
    for every controller of the cluster, so that a successor's first write fences the rest (and the one
    ``TransactionalId`` resource the controller's principal is granted, :mod:`admin.acls`)."""
    return f"livectl-{query_name}"


class RequestSink:
    """:class:`sinks.ports.RequestSinkPort` on Kafka (kafka-python, ``acks=all``, in order).

    The topics must exist. ``fence`` supplies the controller epoch written into every message."""

    def __init__(
        self,
        bootstrap_servers: str,
        fence: Fence,
        *,
        requests_topic: str = "livectl.requests",
        admin_results_topic: str = "livectl.admin-results",
        rejected_topic: str = "livectl.rejected",
        timeout_s: float = 30.0,
        tail_window: int = TAIL_WINDOW,
        client_config: Mapping[str, Any] | None = None,
        transactional_id: str | None = None,
        max_request_size: int | None = None,
        compression: str = "zstd",
    ) -> None:
        """``client_config``: extra kafka-python keyword arguments of every client of the sink (security:
        :meth:`sinks.security.KafkaSecurity.client_kwargs`).

        ``transactional_id``: every write is one Kafka transaction of a producer with this id, shared by
        every controller of the cluster. A controller's first write initialises it, which fences the
        producer of any earlier controller at the broker (Kafka's zombie fencing): a controller paused
        between its ZooKeeper fence check and its send, and resumed after a takeover, gets
        ``PRODUCER_FENCED`` (raised as :class:`ControllerFencedError`) instead of writing after its
        successor. ``None``: a plain idempotent-free producer (tests, brokers without transactions).

        ``max_request_size``: the largest produce request the producer sends, in bytes (kafka-python's
        ``max_request_size``; ``None``: its default, 1 MiB). Brokers still refuse messages over their
        ``message.max.bytes``.

        ``compression``: the producer's codec, one of :data:`sinks.compression.COMPRESSIONS` (``none``,
        ``gzip``, ``snappy``, ``lz4``, ``zstd``); an unknown name raises
        :class:`sinks.compression.CompressionError`."""
        self._compression_type = compression_type(compression)
        self.compression = compression
        self.fence = fence
        self._transactional_id = transactional_id
        #: set once a successor fenced this sink's producer: never start another (it would fence the successor)
        self._fenced: ControllerFencedError | None = None
        self._client_config = dict(client_config or {})
        self.requests_topic = requests_topic
        self.admin_results_topic = admin_results_topic
        self.rejected_topic = rejected_topic
        self._bootstrap = bootstrap_servers
        self._timeout = timeout_s
        self._tail_window = tail_window
        self._producer: KafkaProducer | None = None
        #: one producer at a time: two with one transactional id would fence each other
        self._producer_lock = threading.Lock()
        self._closed = False
        self._max_request_size = max_request_size
        #: per topic: (latest batch id written by this instance, identities written for it); absent
        #: means "unknown, read the topic's tail first"
        self._written: dict[str, tuple[int, set[tuple[int, str]]]] = {}
        #: the requests topic's tail as read by :meth:`start` once the producer had fenced every earlier one,
        #: for the first write (:class:`TailAhead`); dropped by the first write, used or not
        self._ahead: TailAhead | None = None
        self._ahead_lock = threading.Lock()
        self._sending_started = False

    @property
    def bootstrap_servers(self) -> str:
        """The Kafka cluster this sink writes to."""
        return self._bootstrap

    def start(self) -> threading.Thread:
        """Start the producer now, on a thread (returned, started), instead of at the first write: a new
        controller calls it as it wins the lease, so its transactional init — which fences every earlier
        controller's producer, Kafka's moment for it — is done before its first micro-batch needs the sink.
        A failure here is only logged: the first write starts the producer again and reports its own error.

        With a transactional id, the thread then reads the requests topic's tail (:func:`read_tail_ahead`): once
        the init has fenced every earlier producer nothing but this sink writes there, so the first write
        settles what of its batch is there already from it, without reading the tail itself (a consumer's
        start and a fetch of the previous controller's last messages: ~0.4 s quiet, more in a takeover)."""
        self._closed = False
        thread = threading.Thread(target=self._start_producer, name="livectl-request-producer", daemon=True)
        thread.start()
        return thread

    def _start_producer(self) -> None:
        if self._fenced is not None:
            return
        try:
            self._get_producer()
        except Exception as e:  # the first write meets it again and says it
            log.info("request sink: starting the producer ahead failed, the first write starts it: %r", e)
            return
        if self._closed:  # closed while it started: close() may have found no producer yet
            self.close()
            return
        if self._transactional_id is None or self._sending_started:
            return  # without fencing an earlier controller could still write after the read
        try:
            ahead = read_tail_ahead(
                self._bootstrap,
                self.requests_topic,
                window=self._tail_window,
                timeout_s=self._timeout,
                client_config=self._client_config,
            )
        except Exception as e:  # the first write reads the tail itself
            log.info(
                "request sink: reading the tail of %s ahead failed, the first write reads it: %r",
                self.requests_topic,
                e,
            )
            return
        with self._ahead_lock:
            if not self._sending_started:
                self._ahead = ahead

    def close(self) -> None:
        self._closed = True
        if self._producer is not None:
            self._producer.close(timeout=self._timeout)
            self._producer = None

    def __enter__(self) -> RequestSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def write_requests(self, batch_id: int, requests: Sequence[BrokerRequest]) -> RequestBatchResult:
        partitions = self._partitions(self.requests_topic) if any(r.addressees for r in requests) else (0,)
        msgs = request_messages(self.requests_topic, self.fence, batch_id, requests, partitions=partitions)
        return self._send(batch_id, msgs)

    def write_admin_results(self, batch_id: int, results: Sequence[AdminResult]) -> RequestBatchResult:
        msgs = admin_result_messages(self.admin_results_topic, self.fence, batch_id, results)
        return self._send(batch_id, msgs)

    def write_rejected(self, batch_id: int, rejected: Sequence[Rejected]) -> RequestBatchResult:
        return self._send(batch_id, rejected_messages(self.rejected_topic, self.fence, batch_id, rejected))

    # ------------------------------------------------------------------ internals

    def _send(self, batch_id: int, msgs: list[OutboundMessage]) -> RequestBatchResult:
        if not msgs:
            return RequestBatchResult(batch_id, 0, 0)
        if self._fenced is not None:
            raise self._fenced
        topic = msgs[0].topic
        with self._ahead_lock:
            self._sending_started = True
            ahead = self._ahead if topic == self.requests_topic else None
            self._ahead = None
        known = self._written.get(topic)
        if known is not None and known[0] > batch_id:
            return RequestBatchResult(batch_id, 0, len(msgs))
        if known is not None and known[0] == batch_id:
            done = known[1]
        elif known is not None:
            done = set()
        else:
            settled = ahead.identities(batch_id) if ahead is not None else None
            done = settled if settled is not None else self._tail_identities(topic, batch_id)
        todo = [m for m in msgs if m.identity not in done]
        self._written.pop(topic, None)  # unknown until this send is confirmed
        producer: KafkaProducer | None = None
        try:
            producer = self._get_producer()
            if self._transactional_id is not None:
                producer.begin_transaction()
            futures = [
                producer.send(m.topic, key=m.key, value=m.value, headers=list(m.headers), partition=m.partition)
                for m in todo
            ]
            producer.flush(timeout=self._timeout)
            for f in futures:
                f.get(timeout=self._timeout)
            if self._transactional_id is not None:
                producer.commit_transaction()
        except (KafkaError, OSError) as e:
            fenced = self._transactional_id is not None and _producer_fenced(producer, e)
            # a transactional producer in an error state cannot be used again: the retry starts a new one,
            # whose init aborts the open transaction (abort_transaction here could wait without a bound)
            self._drop_producer()
            if fenced:
                self._fenced = ControllerFencedError(
                    f"transactional.id {self._transactional_id}",
                    -1,
                    f"a newer controller's producer took over the output topics ({e})",
                )
                raise self._fenced from e
            raise SinkUnavailableError(f"could not write batch {batch_id} to {topic}: {e!r}") from e
        self._written[topic] = (batch_id, done | {m.identity for m in todo})
        return RequestBatchResult(batch_id, len(todo), len(msgs) - len(todo))

    def _partitions(self, topic: str) -> tuple[int, ...]:
        """The partition ids of ``topic`` as the producer knows them now (from its metadata: the same count
        its partitioner places the per-broker messages with)."""
        try:
            found = self._get_producer().partitions_for(topic)
        except (KafkaError, OSError) as e:
            self._drop_producer()
            raise SinkUnavailableError(f"could not read the partitions of {topic}: {e!r}") from e
        if not found:
            raise SinkUnavailableError(f"topic {topic} does not exist or has no partitions")
        return tuple(sorted(found))

    def _get_producer(self) -> KafkaProducer:
        with self._producer_lock:
            if self._producer is None:
                self._producer = self._new_producer()
            return self._producer

    def _new_producer(self) -> KafkaProducer:
        extra: dict[str, Any] = {}
        if self._transactional_id is not None:
            extra = {"transactional_id": self._transactional_id, "max_block_ms": int(self._timeout * 1000)}
            quiet_fencing_reports()
        if self._max_request_size is not None:
            extra["max_request_size"] = self._max_request_size
        producer = KafkaProducer(
            **self._client_config,
            **extra,
            bootstrap_servers=self._bootstrap,
            acks="all",
            retries=5,
            # one request in flight per connection: retries cannot reorder a broker's messages
            max_in_flight_requests_per_connection=1,
            linger_ms=2,
            # request bodies are repetitive JSON: every codec shrinks them several times over
            compression_type=self._compression_type,
            request_timeout_ms=int(self._timeout * 1000),
        )
        if self._transactional_id is not None:
            try:
                producer.init_transactions()  # fences every earlier producer with this id
            except BaseException:
                producer.close(timeout=0)
                raise
        return producer

    def _drop_producer(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            with contextlib.suppress(KafkaError, OSError):
                producer.close(timeout=0)

    def _tail_identities(self, topic: str, batch_id: int) -> set[tuple[int, str]]:
        """Identities of batch ``batch_id`` already on ``topic``, read from its tail."""
        try:
            return read_tail_identities(
                self._bootstrap,
                topic,
                batch_id=batch_id,
                window=self._tail_window,
                timeout_s=self._timeout,
                client_config=self._client_config,
            )
        except (KafkaError, OSError) as e:
            raise SinkUnavailableError(f"could not read the tail of {topic} to check batch {batch_id}: {e!r}") from e


#: the errors that say a newer producer took this transactional id
_FENCING_ERRORS = (ProducerFencedError, InvalidProducerEpochError)
_FENCING_NAMES = tuple(e.__name__ for e in _FENCING_ERRORS)
#: the kafka-python loggers that report a fenced transactional producer from its I/O thread (ERROR), or
#: each of its batches in flight when the fence came (WARNING)
_FENCING_LOGGERS = (
    "kafka.producer.transaction_manager",
    "kafka.producer.sender",
    "kafka.producer.producer_batch",
    "kafka.producer.record_accumulator",
)


class _FencingReportedByLivectl(logging.Filter):
    """Drops kafka-python's own lines about a fenced producer: the sink raises
    :class:`ControllerFencedError` for it and ``livectl run`` says it in one line, so the same fact twice
    (from the producer's I/O thread, timing-dependent) is noise. Every other record passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        if any(isinstance(a, _FENCING_ERRORS) for a in (record.msg, *_record_args(record))):
            return False
        try:
            text = record.getMessage()
        except Exception:  # a malformed record is not ours to judge: let logging report it
            return True
        return not any(name in text for name in _FENCING_NAMES)


def _record_args(record: logging.LogRecord) -> tuple[Any, ...]:
    args = record.args
    if isinstance(args, tuple):
        return args
    return () if args is None else (args,)


_FENCING_FILTER = _FencingReportedByLivectl()


def quiet_fencing_reports() -> None:
    """Installs :class:`_FencingReportedByLivectl` on kafka-python's producer loggers (once)."""
    for name in _FENCING_LOGGERS:
        logger = logging.getLogger(name)
        if _FENCING_FILTER not in logger.filters:
            logger.addFilter(_FENCING_FILTER)


def _producer_fenced(producer: KafkaProducer | None, error: BaseException) -> bool:
    """Whether ``error`` (or the transactional state it left) says a newer producer took the id."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, _FENCING_ERRORS):
            return True
        seen = seen.__cause__ or seen.__context__
    # kafka-python reports later calls as a plain KafkaError naming the state's cause: ask the state
    manager = getattr(producer, "_transaction_manager", None)
    return isinstance(getattr(manager, "last_error", None), _FENCING_ERRORS)


def read_tail_identities(
    bootstrap_servers: str,
    topic: str,
    *,
    batch_id: int,
    window: int,
    timeout_s: float = 30.0,
    client_config: Mapping[str, Any] | None = None,
) -> set[tuple[int, str]]:
    """Per partition of ``topic``, the messages at the end with a batch id of at least ``batch_id``: their
    identities if they are all of ``batch_id``; nothing at all if a later batch (an earlier run) is found
    in any partition."""
    consumer = _tail_consumer(bootstrap_servers, timeout_s, client_config)
    try:
        tps, begins, ends = _tail_partitions(consumer, topic)
        found: set[tuple[int, str]] = set()
        for tp in tps:
            if ends[tp] <= begins[tp]:
                continue  # empty (tansu, the earlier local broker, reported ends short but never 0 for a non-empty log)
            consumer.assign([tp])
            got = _scan_partition(
                consumer,
                tp,
                begin=begins[tp],
                end=ends[tp],
                batch_id=batch_id,
                window=window,
                timeout_s=timeout_s,
            )
            if got is None:
                return set()  # one controller writes batch ids in order: a later one means an earlier run
            found |= got
        return found
    finally:
        consumer.close()


@dataclass(frozen=True)
class TailAhead:
    """A topic's tail as read before its batch id was known (:func:`read_tail_ahead`): per partition, its
    beginning offset, where the read began, and the records from there to the end, each with its batch id."""

    partitions: tuple[tuple[int, int, tuple[Any, ...], tuple[int | None, ...]], ...]

    def identities(self, batch_id: int) -> set[tuple[int, str]] | None:
        """What :func:`read_tail_identities` returns for ``batch_id`` from these records, or ``None`` when they
        do not reach back far enough to settle it (a replay of a batch longer than the window): read again."""
        found: set[tuple[int, str]] = set()
        for begin, start, records, batches in self.partitions:
            if _later_batch(batches, batch_id):
                return set()  # one controller writes batch ids in order: a later one means an earlier run
            if not _window_settles(begin, start, batches, batch_id):
                return None
            found |= _identities_of_batch(records, batches, batch_id)
        return found


def read_tail_ahead(
    bootstrap_servers: str,
    topic: str,
    *,
    window: int,
    timeout_s: float = 30.0,
    client_config: Mapping[str, Any] | None = None,
) -> TailAhead:
    """The last ``window`` committed records of each partition of ``topic`` (:class:`TailAhead`)."""
    consumer = _tail_consumer(bootstrap_servers, timeout_s, client_config)
    try:
        tps, begins, ends = _tail_partitions(consumer, topic)
        partitions = []
        for tp in tps:
            start = max(begins[tp], ends[tp] - window)
            records: list[Any] = []
            if ends[tp] > begins[tp]:
                consumer.assign([tp])
                records = _read_range(consumer, tp, start, ends[tp], timeout_s)
            batches = tuple(_batch_of_record(r) for r in records)
            partitions.append((begins[tp], start, tuple(records), batches))
        return TailAhead(tuple(partitions))
    finally:
        consumer.close()


def _tail_consumer(bootstrap_servers: str, timeout_s: float, client_config: Mapping[str, Any] | None) -> KafkaConsumer:
    return KafkaConsumer(
        **dict(client_config or {}),
        bootstrap_servers=bootstrap_servers,
        enable_auto_commit=False,
        # an aborted transaction (a controller fenced or killed mid-write) was not written
        isolation_level="read_committed",
        request_timeout_ms=int(timeout_s * 1000),
        # an empty fetch at the end of a partition should not wait long
        fetch_max_wait_ms=50,
    )


def _tail_partitions(
    consumer: KafkaConsumer, topic: str
) -> tuple[list[TopicPartition], dict[TopicPartition, int], dict[TopicPartition, int]]:
    parts = consumer.partitions_for_topic(topic)
    if not parts:
        raise SinkUnavailableError(f"topic {topic} does not exist or has no partitions")
    tps = [TopicPartition(topic, p) for p in sorted(parts)]
    return tps, consumer.beginning_offsets(tps), consumer.end_offsets(tps)


def _later_batch(batches: Sequence[int | None], batch_id: int) -> bool:
    return any(b is not None and b > batch_id for b in batches)


def _window_settles(begin: int, start: int, batches: Sequence[int | None], batch_id: int) -> bool:
    """Whether records read from ``start`` reach back far enough for ``batch_id``: to the log's beginning, or
    to a message of an earlier batch (none read: an empty log, or a tail reported short, as tansu did)."""
    return start <= begin or not batches or batches[0] is None or batches[0] < batch_id


def _identities_of_batch(records: Sequence[Any], batches: Sequence[int | None], batch_id: int) -> set[tuple[int, str]]:
    found: set[tuple[int, str]] = set()
    occurrences: dict[str, int] = {}
    for r, b in zip(records, batches, strict=True):
        if b != batch_id:
            continue
        ident = _identity_of(r.value) or _admin_identity(r.value, occurrences, batch_id)
        if ident is not None:
            found.add(ident)
    return found


def _read_range(consumer: KafkaConsumer, tp: TopicPartition, start: int, end: int, timeout_s: float) -> list[Any]:
    """Every record of ``tp`` from ``start`` up to ``end`` (its end as read before; the consumer's position
    passes transaction markers too). An empty poll is no end: the first fetch of a new connection can take
    longer than a poll (a TLS and SASL handshake), and reading less would make a replay write a batch
    twice. Raises :class:`SinkUnavailableError` when ``end`` is not reached within ``timeout_s``."""
    consumer.seek(tp, start)
    records: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while consumer.position(tp) < end:
        if time.monotonic() >= deadline:
            raise SinkUnavailableError(
                f"could not read {tp.topic} partition {tp.partition} from offset {start} to {end} in {timeout_s:g} s"
            )
        got = consumer.poll(timeout_ms=200, max_records=2000)
        records.extend(got.get(tp, []))
    return records


def _scan_partition(
    consumer: KafkaConsumer,
    tp: TopicPartition,
    *,
    begin: int,
    end: int,
    batch_id: int,
    window: int,
    timeout_s: float,
) -> set[tuple[int, str]] | None:
    """The identities of ``batch_id`` at the end of ``tp``, or None if a later batch is there."""
    start = max(begin, end - window)
    while True:
        records = _read_range(consumer, tp, start, end, timeout_s)
        batches = [_batch_of_record(r) for r in records]
        if _later_batch(batches, batch_id):
            return None  # the tail is from an earlier run
        if _window_settles(begin, start, batches, batch_id):
            break
        start = max(begin, start - window * 2)
        window *= 2
    return _identities_of_batch(records, batches, batch_id)


def _admin_identity(value: bytes, occurrences: dict[str, int], batch_id: int) -> tuple[int, str] | None:
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


def _batch_of_record(record: Any) -> int | None:
    # the sink's messages carry their batch id in a header: the tail after a failover can hold hundreds of
    # MB of the previous controller's requests, which then need no decoding at all
    for k, v in record.headers or ():
        if k == "batch_id":
            with contextlib.suppress(ValueError):
                return int(v)
    return _batch_of(record.value)


def _batch_of(value: bytes) -> int | None:
    try:
        v = orjson.loads(value)
        return int(v["batchId"] if "batchId" in v else v["batch_id"])
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def ensure_topics(
    bootstrap_servers: str,
    topics: Iterable[str],
    partitions: int = 1,
    replication: int = 1,
    client_config: Mapping[str, Any] | None = None,
) -> None:
    """Create whichever of ``topics`` do not exist, with ``partitions``: a broker may not create topics on
    first use (``auto.create.topics.enable=false``), and one that does gives them its default partitions."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError

    admin = KafkaAdminClient(**dict(client_config or {}), bootstrap_servers=bootstrap_servers)
    try:
        existing = set(admin.list_topics())
        missing = [NewTopic(t, partitions, replication) for t in topics if t not in existing]
        if missing:
            with contextlib.suppress(TopicAlreadyExistsError):
                admin.create_topics(missing)
    finally:
        admin.close()
