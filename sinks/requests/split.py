"""Splitting a request too large for one message, and the JSON of the sink's messages.

A request over :data:`MAX_MESSAGE_BYTES` is split at partition boundaries into complete requests of the
same API, sent one after the other (:func:`split_body`); :func:`split_dumped` gives each part with its JSON,
serialised once. :func:`dumps` writes every message value of the sink.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from core import limits
from core.kafka.requests import SplicedBody

#: largest message value the sink writes (before compression): below Kafka's default 1 MB
#: ``max.message.bytes`` / kafka-python's ``max_request_size``, whatever the compression
MAX_MESSAGE_BYTES = limits.MAX_MESSAGE_BYTES


def dumps(obj: Any) -> bytes:
    """A message value's JSON: compact, keys sorted, always writable (what orjson refuses is escaped)."""
    # orjson: the request bodies of a large batch are tens to hundreds of MB of JSON, and the standard
    # library's encoder and decoder were most of the sink's time (measured by request_sink_cost's
    # --stdlib-baseline, in git history: removed 2026-12-06, it patched this module's internals)
    try:
        return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:
        # orjson refuses what JSON allows but UTF-8 cannot carry (a lone surrogate) and integers beyond
        # 64 bits; the standard encoder escapes both to ASCII, so the message can always be written
        return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def split_body(body: Mapping[str, Any], max_bytes: int) -> list[Mapping[str, Any]]:
    """``body`` as one or more requests whose JSON each fits in ``max_bytes``, by splitting its
    ``topicStates`` at partition boundaries. Every part is a complete request of the same API (other
    fields, e.g. ``liveBrokers``, are repeated): a broker applies the parts in order as it would one
    request, since LeaderAndIsr, UpdateMetadata and StopReplica act partition by partition."""
    parts = []
    for part, _ in split_dumped(body, max_bytes):
        assert part is not None
        parts.append(part)
    return parts


def split_dumped(
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
        answers = _split_answers(body, max_bytes)
        return answers if answers is not None else [(body, dumps(body))]
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


def _split_answers(body: Mapping[str, Any], max_bytes: int) -> list[tuple[Mapping[str, Any] | None, bytes]] | None:
    """An AlterPartitionResponse body (``topics[].partitions[]``) cut at partition boundaries into parts
    whose JSON each fits in ``max_bytes``, halving a part until it fits; ``None`` when ``body`` holds no such
    list. Each partition entry answers its own request (it names it by ``correlationId``), so a part is
    as complete an answer as the whole: after a broker failure at 100k partitions one micro-batch answers
    10,000 ISR proposals from one leader, a message of over 1 MB that the producer refused."""
    topics = body.get("topics")
    if not isinstance(topics, list) or not all(
        isinstance(t, dict) and isinstance(t.get("partitions"), list) for t in topics
    ):
        return None
    flat = [(i, p) for i, t in enumerate(topics) for p in t["partitions"]]
    rest = {k: body[k] for k in body if k != "topics"}

    def part(lo: int, hi: int) -> tuple[Mapping[str, Any], bytes]:
        grouped: list[tuple[int, list[Any]]] = []
        for i, p in flat[lo:hi]:
            if grouped and grouped[-1][0] == i:
                grouped[-1][1].append(p)
            else:
                grouped.append((i, [p]))
        entries = [{**{k: v for k, v in topics[i].items() if k != "partitions"}, "partitions": ps} for i, ps in grouped]
        cut = {**rest, "topics": entries}
        return cut, dumps(cut)

    def fit(lo: int, hi: int) -> list[tuple[Mapping[str, Any] | None, bytes]]:
        cut, data = part(lo, hi)
        if hi - lo <= 1 or len(data) <= max_bytes:
            return [(cut, data)]
        half = (hi - lo) // 2
        return fit(lo, lo + half) + fit(lo + half, hi)

    whole = dumps(body)
    if len(whole) <= max_bytes or len(flat) <= 1:
        return [(body, whole)]
    return fit(0, len(flat))


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
        #: whether a part of entries held as text is also built as a request (see :func:`split_dumped`)
        self.mappings = True
        #: offsets[i]: the states before entry i; entry i holds [offsets[i], offsets[i + 1])
        self.offsets = [0]
        for n in counts:
            self.offsets.append(self.offsets[-1] + n)
        self.total = self.offsets[-1]

    @classmethod
    def of(cls, body: Mapping[str, Any]) -> _Split | None:
        """``None`` when ``topicStates`` is not a list of objects. When orjson cannot write the body (the
        standard encoder's escapes then apply to the whole message: :func:`dumps`) each part is written
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
        """The body's JSON, as :func:`dumps` writes it."""
        if self.texts is None:
            return dumps(self.body)
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
            return part, dumps(part)
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
