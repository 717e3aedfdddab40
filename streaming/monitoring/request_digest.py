"""The requests of a micro-batch as the state-change log reads them: each request's partition states, read
once for both the audit rows (:mod:`streaming.monitoring.audit_rows`) and the log lines
(:mod:`streaming.monitoring.state_change_log`).

A LeaderAndIsr or StopReplica whose entries are still a bucket's text (:class:`core.kafka.requests.SplicedBody`)
is cut into its partition states' texts rather than parsed (:func:`state_spans`); any other request is parsed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import orjson

from core import decisions as dc
from core.kafka.request_encoding import wire_object
from core.kafka.requests import REQUEST_ORDER, RequestApi, SplicedBody, partition_count


def _partition_entries(body: Mapping[str, Any]) -> list[tuple[str | None, int | None, Mapping[str, Any]]]:
    """``(topic, partition, state)`` of each partition a request or response body names (Kafka's
    ``topicStates[].partitionStates[]``, ``remainingPartitions[]``, ``topics[].partitions[]``); one entry
    without a partition when it names none."""
    out: list[tuple[str | None, int | None, Mapping[str, Any]]] = []
    # a bucket's entries still as text: orjson reads them (the body's own parse is the standard library's,
    # as core imports nothing else, and at a failover's 300k LeaderAndIsr states it is seconds of the batch)
    topic_states = [orjson.loads(t) for t in body.texts] if isinstance(body, SplicedBody) else body.get("topicStates")
    for ts in topic_states or ():
        for ps in ts.get("partitionStates") or ():
            out.append((ts.get("topicName"), ps.get("partitionIndex"), ps))
    for ps in body.get("remainingPartitions") or ():
        out.append((ps.get("topicName"), ps.get("partitionIndex"), ps))
    for ts in body.get("topics") or ():
        for ps in ts.get("partitions") or ():
            out.append((ts.get("topicName"), ps.get("partitionIndex"), ps))
    if not out:
        rest = {k: v for k, v in body.items() if k not in ("liveBrokers", "liveLeaders")}
        out.append((None, None, rest))
    return out


#: requests whose partitions each get a row; an UpdateMetadata (the same partition states, to every live
#: broker) gets one row per broker with its partition count
_PER_PARTITION = frozenset(api for api in RequestApi if api is not RequestApi.UPDATE_METADATA)

#: requests whose ``topicStates`` entries, as a bucket wrote them, are read as text (:func:`state_spans`):
#: their partition states are flat objects (integers, booleans, arrays of integers), as
#: :class:`~core.kafka.requests.SplicedBody` states for its texts
_FLAT_STATES = frozenset((RequestApi.LEADER_AND_ISR, RequestApi.STOP_REPLICA))

_STATES_OPEN = '{"partitionStates":['
INDEX_KEY = '"partitionIndex":'
#: the partition index in a flat state's text as :func:`index_of` reads it (digits, then a comma or the end)
INDEX_PATTERN = '"partitionIndex":(?P<index>-?[0-9]+)(?:,|$)'


def state_spans(body: SplicedBody) -> list[tuple[int, int]] | None:
    """Where each entry's partition states are in its text: ``text[lo:hi]`` is the states' text from the
    first state's opening brace to the last one's closing brace, both left out (``lo == hi`` for an entry of
    none); ``None`` when an entry is not as expected (the caller parses the body instead).

    This relies on the form :class:`~core.kafka.requests.SplicedBody` documents for its texts (and
    ``tests/unit/core/kafka/test_core_kafka_spliced_entries.py`` pins): an entry's text is
    ``orjson.dumps(entry, option=OPT_SORT_KEYS)``, so a partition state's bytes in it are what
    ``orjson.dumps(state, option=OPT_SORT_KEYS)`` gives for the parsed state — the audit row's ``detail``;
    and its states are flat (integers, booleans, arrays of integers), so they are the pieces between
    ``{"partitionStates":[{`` and the first ``}]``, cut at ``},{``. The pieces must be as many as the entry's
    partition count (they are counted here by their separator, not cut)."""
    out: list[tuple[int, int]] = []
    start = len(_STATES_OPEN)
    for count, text in zip(body.counts, body.texts, strict=True):
        if not text.startswith(_STATES_OPEN):
            return None
        if count == 0:
            if text[start] != "]":
                return None
            out.append((start, start))
            continue
        end = text.find("}]", start)
        if end < 0 or text[start] != "{" or text.count("},{", start + 1, end) + 1 != count:
            return None
        out.append((start + 1, end))
    return out


def cut_states(body: SplicedBody, spans: Sequence[tuple[int, int]]) -> list[tuple[str, list[str]]]:
    """Each entry's topic and its partition states' texts without their braces, cut at ``spans``
    (:func:`state_spans` of ``body``)."""
    return [
        (topic, text[lo:hi].split("},{") if count else [])
        for topic, count, text, (lo, hi) in zip(body.names, body.counts, body.texts, spans, strict=True)
    ]


def index_of(state: str) -> int | None:
    """``partitionIndex`` of a flat partition state's text (without its braces)."""
    i = state.find(INDEX_KEY)
    if i < 0:
        return None
    i += len(INDEX_KEY)
    j = state.find(",", i)
    return int(state[i:] if j < 0 else state[i:j])


@dataclass(frozen=True)
class RequestDigest:
    """One request as the log needs it: its partitions' entries, parsed (``entries``), or for a LeaderAndIsr
    or StopReplica whose entries are still a bucket's text, that body and where each entry's states are in
    it (``spliced``: the body and its :func:`state_spans`; ``entries`` is then ``None``: :attr:`texts` cuts
    the states, :meth:`parsed` parses them). Both are ``None`` for an UpdateMetadata, whose body is not parsed:
    only its partitions are counted."""

    request: dc.BrokerRequest
    entries: list[tuple[str | None, int | None, Mapping[str, Any]]] | None
    partitions: int
    #: the request's body when its entries are a bucket's text, with its states' spans
    spliced: tuple[SplicedBody, list[tuple[int, int]]] | None = None

    @cached_property
    def texts(self) -> list[tuple[str, list[str]]] | None:
        """Each entry's topic and its states' texts without their braces (:func:`cut_states`), cut on first use: the
        rows made in Arrow and the INFO lines do not need them as Python strings."""
        return None if self.spliced is None else cut_states(*self.spliced)

    def parsed(self) -> list[tuple[str | None, int | None, Mapping[str, Any]]]:
        """The entries, parsed (for the DEBUG lines of a request digested as text)."""
        if self.entries is not None:
            return self.entries
        return _partition_entries(wire_object(self.request.body))

    def led_by(self, broker: int) -> int:
        """The partitions whose state names ``broker`` as the leader."""
        if self.spliced is None:
            return sum(1 for _t, _p, st in self.entries or () if st.get("leader") == broker)
        # a state's text names its leader as "leader":<id> followed by the next key or its end (an id's
        # digits are never followed by more digits); the sequence cannot occur inside a JSON string, and a
        # flat state (SplicedBody's texts) has no nested "leader" key
        one, last = f'"leader":{broker},', f'"leader":{broker}}}'
        return sum(t.count(one) + t.count(last) for t in self.spliced[0].texts)


def digest_requests(requests: Sequence[dc.BrokerRequest]) -> list[RequestDigest]:
    """The requests in Kafka's send order (LeaderAndIsr, UpdateMetadata, StopReplica, responses), each
    read once for both the rows and the log lines: a LeaderAndIsr or StopReplica whose entries are a
    bucket's text is checked to cut into its partition states' texts (:func:`state_spans`; cut when asked,
    :attr:`RequestDigest.texts`), any other parsed."""
    out = []
    for r in sorted(requests, key=lambda r: REQUEST_ORDER[r.api]):
        body = wire_object(r.body)
        # (a body of no partition state gets the parsed path's one row of its other fields)
        if r.api in _FLAT_STATES and isinstance(body, SplicedBody) and body.partition_count:
            spans = state_spans(body)
            if spans is not None:
                out.append(RequestDigest(r, None, sum(body.counts), spliced=(body, spans)))
                continue
        if r.api in _PER_PARTITION:
            entries = _partition_entries(body)
            out.append(RequestDigest(r, entries, sum(1 for _t, p, _s in entries if p is not None)))
        else:
            out.append(RequestDigest(r, None, partition_count(body)))
    return out


def per_broker(digests: Sequence[RequestDigest]) -> dict[tuple[RequestApi, int], tuple[int, int]]:
    """``(API, broker) -> (partitions, partitions it leads)``: the buckets' parts of one request summed, as
    the request sink merges them into one message per broker and API (Kafka's send order kept)."""
    out: dict[tuple[RequestApi, int], tuple[int, int]] = {}
    for d in digests:
        r = d.request
        for b in r.recipients():  # a shared request (one UpdateMetadata to a set of brokers) counts for each
            leaders = d.led_by(b)
            n, led = out.get((r.api, b), (0, 0))
            out[(r.api, b)] = (n + d.partitions, led + leaders)
    return out
