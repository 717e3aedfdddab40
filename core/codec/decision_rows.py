"""A decision as a bucket's output row carries it (:func:`decision_row_text`), and back
(:func:`decode_row_text`).

A LeaderAndIsr, UpdateMetadata or StopReplica puts each ``topicStates`` entry on a line of its own, which the
driver keeps as text (:class:`core.kafka.requests.SplicedBody`); every other decision is its JSON form
(:mod:`core.codec.decisions`), one line. This module owns the row's encoding whole (the entries' sorted-key
texts included, :func:`sorted_entries`); the body's wire form is :mod:`core.kafka.request_encoding`'s, which
knows nothing of rows."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from typing import Any

from core import jsonform as jf
from core.codec.decisions import decision_to_json, decode_decision
from core.decisions import BrokerRequest, Decision
from core.errors import FormatError
from core.kafka.request_encoding import EncodeMemo, encoded_once, ints_text, topic_runs
from core.kafka.requests import (
    LeaderAndIsrRequest,
    LisrPartitionState,
    MetadataPartitionState,
    RequestBody,
    SplicedBody,
    StopReplicaPartition,
    StopReplicaRequest,
    UpdateMetadataRequest,
    WireBody,
)


def _json_bool(v: bool) -> str:
    return "true" if v else "false"


#: one ``topicStates`` entry as a row carries it: ``(topicName, partition count, JSON text)``
TextEntry = tuple[str, int, str]


def _lisr_sorted(p: LisrPartitionState, memo: EncodeMemo | None) -> str:
    ints = ints_text if memo is None else memo.ints
    return (
        f'{{"addingReplicas":{ints(p.adding_replicas)},"controllerEpoch":{p.controller_epoch},'
        f'"isNew":{_json_bool(p.is_new)},"isr":{ints(p.isr)},"leader":{p.leader},"leaderEpoch":{p.leader_epoch},'
        f'"leaderRecoveryState":{p.leader_recovery_state},"partitionEpoch":{p.partition_epoch},'
        f'"partitionIndex":{p.partition},"removingReplicas":{ints(p.removing_replicas)},'
        f'"replicas":{ints(p.replicas)}}}'
    )


def _lisr_sorted_once(p: LisrPartitionState, memo: EncodeMemo | None) -> str:
    return _lisr_sorted(p, None) if memo is None else memo.once(_lisr_sorted, p)


def _metadata_sorted(p: MetadataPartitionState, memo: EncodeMemo | None) -> str:
    ints = ints_text if memo is None else memo.ints
    return (
        f'{{"controllerEpoch":{p.controller_epoch},"isr":{ints(p.isr)},"leader":{p.leader},'
        f'"leaderEpoch":{p.leader_epoch},"offlineReplicas":{ints(p.offline_replicas)},'
        f'"partitionIndex":{p.partition},"replicas":{ints(p.replicas)},"zkVersion":{p.zk_version}}}'
    )


def _stop_sorted(p: StopReplicaPartition, memo: EncodeMemo | None) -> str:
    delete = _json_bool(p.delete_partition)
    return f'{{"deletePartition":{delete},"leaderEpoch":{p.leader_epoch},"partitionIndex":{p.partition}}}'


def _plain(v: str) -> bool:
    # text every JSON encoder writes alike (no escapes, no non-ASCII): Kafka's topic names and ids
    return v.isascii() and v.isprintable() and '"' not in v and "\\" not in v


def _entries(
    parts: tuple[Any, ...], state: Callable[[Any, EncodeMemo | None], str], memo: EncodeMemo | None, *, with_id: bool
) -> list[TextEntry] | None:
    out: list[TextEntry] = []
    for first, run in topic_runs(parts, with_id=with_id):
        if not _plain(first.topic) or (with_id and not _plain(first.topic_id)):
            return None
        states = ",".join(state(p, memo) for p in run)
        tid = f',"topicId":"{first.topic_id}"' if with_id else ""
        out.append((first.topic, len(run), f'{{"partitionStates":[{states}]{tid},"topicName":"{first.topic}"}}'))
    return out


def _lisr_entries(parts: tuple[LisrPartitionState, ...], memo: EncodeMemo | None) -> list[TextEntry] | None:
    return _entries(parts, _lisr_sorted_once, memo, with_id=True)


def _metadata_entries(parts: tuple[MetadataPartitionState, ...], memo: EncodeMemo | None) -> list[TextEntry] | None:
    return _entries(parts, _metadata_sorted, memo, with_id=True)


def _stop_entries(parts: tuple[StopReplicaPartition, ...], memo: EncodeMemo | None) -> list[TextEntry] | None:
    return _entries(parts, _stop_sorted, memo, with_id=False)


def sorted_entries(body: RequestBody, memo: EncodeMemo | None = None) -> list[TextEntry] | None:
    """The ``topicStates`` entries of a LeaderAndIsr, UpdateMetadata or StopReplica body, each as the
    JSON text with its keys sorted and no spaces (what the request sink writes for it, byte for byte:
    ``orjson.dumps(entry, option=OPT_SORT_KEYS)``), with its topic name and partition count; ``None`` for
    another body, or one naming a topic or topic id that is not plain ASCII text. ``memo``: entries of
    a tuple of partition states and LeaderAndIsr states encoded once (see
    :func:`core.kafka.request_encoding.encode_text`).

    The driver keeps these texts unparsed (:class:`~core.kafka.requests.SplicedBody`, whose docstring
    states the form its readers rely on: canonical sorted-key JSON whose partition states are flat — only
    integers, booleans and arrays of integers); a state field of another kind breaks them."""
    if isinstance(body, LeaderAndIsrRequest):
        return encoded_once(body.partitions, _lisr_entries, memo)
    if isinstance(body, UpdateMetadataRequest):
        return encoded_once(body.partitions, _metadata_entries, memo)
    if isinstance(body, StopReplicaRequest):
        return encoded_once(body.partitions, _stop_entries, memo)
    return None


_WITH_TOPIC_STATES = (LeaderAndIsrRequest, UpdateMetadataRequest, StopReplicaRequest)
#: the field of a row's first line that lists its ``topicStates`` entries (name, partition count)
ENTRIES_FIELD = "topic_entries"


def decision_row_text(d: Decision, memo: EncodeMemo | None = None) -> str:
    """A decision as a bucket's output row carries it. A LeaderAndIsr, UpdateMetadata or StopReplica with
    partition states is several lines (JSON text never holds a raw newline): first the decision with its
    body's ``topicStates`` empty and ``"topic_entries": [[topicName, partitions], …]``, then each
    ``topicStates`` entry's JSON, keys sorted, as the message carries it
    (:func:`sorted_entries`). The driver keeps those entries as text
    (:func:`decode_row_text`); the request sink splices them into its messages. Any other decision is
    :func:`decision_to_json`, one line."""
    if isinstance(d, BrokerRequest) and isinstance(d.body, _WITH_TOPIC_STATES) and d.body.partitions:
        body = d.body
        entries = sorted_entries(body, memo)
        if entries:
            empty: Any = dataclasses.replace(body, partitions=())  # type: ignore[arg-type]
            head = decision_to_json(dataclasses.replace(d, body=empty))
            listed = json.dumps([[name, count] for name, count, _ in entries], separators=(",", ":"))
            lines = [f'{head[:-1]},"{ENTRIES_FIELD}":{listed}}}', *(text for _, _, text in entries)]
            return "\n".join(lines)
    return decision_to_json(d, memo)


def decode_row_text(raw: Any, texts: Sequence[str]) -> Decision:
    """The decision of a row (:func:`decision_row_text`) from its first line, parsed, and the lines after
    it: a broker request whose body is a :class:`~core.kafka.requests.SplicedBody`."""
    o = jf.obj(raw, "$")
    listed = o.get(ENTRIES_FIELD)
    if not isinstance(listed, list) or len(listed) != len(texts):
        raise FormatError(ENTRIES_FIELD, f"must list the row's {len(texts)} topicStates entries")
    names: list[str] = []
    counts: list[int] = []
    for i, e in enumerate(listed):
        if not (isinstance(e, list) and len(e) == 2 and isinstance(e[0], str) and type(e[1]) is int and e[1] >= 0):
            raise FormatError(f"{ENTRIES_FIELD}[{i}]", "must be [topicName, partition count]")
        names.append(e[0])
        counts.append(e[1])
    d = decode_decision({k: v for k, v in o.items() if k != ENTRIES_FIELD})
    if not isinstance(d, BrokerRequest) or not isinstance(d.body, WireBody) or d.body.obj.get("topicStates") != []:
        raise FormatError("body", "a row with topicStates entries must be a broker request with empty topicStates")
    body = SplicedBody(d.body.obj, tuple(names), tuple(counts), tuple(texts))
    return dataclasses.replace(d, body=WireBody(body))
