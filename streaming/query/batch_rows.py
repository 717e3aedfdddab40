"""What the rows of one micro-batch's output become on the driver, before ``foreachBatch``
(:mod:`streaming.query.dispatch`) carries them out: decoded decisions, the topic znodes the ZooKeeper writes make,
one admin result per request id, and the answer to a rejected command. Pure functions of the rows.

**Rows are decoded once, request entries not at all.** A row's decision is parsed once (orjson:
:func:`decode_row`). A LeaderAndIsr, UpdateMetadata or StopReplica row carries each ``topicStates``
entry as its own line, the JSON text the message will hold
(:func:`core.codec.decision_rows.decision_row_text`): only the first line is parsed, and the body is a
:class:`core.kafka.requests.SplicedBody` — its small fields parsed, its entries text — which the request
sink merges by concatenating entries and splices into each message's bytes. Entries are parsed only
where something needs them as values: an entry cut by a message's size limit, the requests of a topic
ZooKeeper refused a write for (:func:`streaming.query.refusals.withhold`), the audit log's per-partition
lines; counts come from the row. Other bodies stay the parsed JSON object
(:class:`core.kafka.requests.WireBody`). Rebuilding typed values (``decode_decision(..., typed=True)``)
costs 5–6.5× the wire decode and was not taken (``docs/decisions/2026-11-24-request-bodies-as-values.md``). An admin
result's ``details``, also a JSON object in the row, is decoded with it, and the parts of one command from
several buckets merge as those objects (:func:`merge_admin_results`), never re-encoded on the driver.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from core import decisions as dc
from core import jsonform as jf
from core.codec.decision_rows import decode_row_text
from core.codec.decisions import decode_decision
from core.errors import FormatError
from core.kafka import zkdata
from core.kafka.error_codes import KafkaError as Errors
from core.limits import MAX_NAME_LENGTH, MAX_REQUEST_ID_LENGTH
from sinks.ports import FailedWrite
from streaming.query.refusals import classify, withhold

__all__ = [
    "decode_row",
    "merge_admin_results",
    "rejected_result",
    "request_id_of",
    "topic_writes",
    "withhold_refused",
]


def decode_row(payload: str | bytes) -> dc.Decision:
    """One decision row, decoded once. A broker request's body stays the parsed JSON object
    (:class:`core.kafka.requests.WireBody`), which the request sink merges and serialises as it is; a row
    of several lines (:func:`core.codec.decision_rows.decision_row_text`) keeps its ``topicStates`` entries as
    their text (:class:`core.kafka.requests.SplicedBody`)."""
    text = payload.decode() if isinstance(payload, bytes) else payload
    # one split, not the head and then the rest (a failover's rows are megabytes each: a copy of the rest
    # was one more fresh copy of them all)
    lines = text.split("\n")
    try:
        raw = orjson.loads(lines[0])
    except orjson.JSONDecodeError as e:
        raise FormatError("$", f"not valid JSON: {e}") from None
    if len(lines) > 1:
        return decode_row_text(raw, lines[1:])
    return decode_decision(raw)


def topic_writes(writes: Sequence[dc.ZkWrite]) -> dict[str, frozenset[int]]:
    """The topics whose znode (``/brokers/topics/<t>``) ``writes`` create or rewrite, with the partition ids
    each then holds."""
    prefix = zkdata.BROKER_TOPICS + "/"
    out: dict[str, frozenset[int]] = {}
    for w in writes:
        if w.data is None or w.op is dc.ZkOp.DELETE or not w.path.startswith(prefix):
            continue
        topic = w.path[len(prefix) :]
        if "/" in topic:
            continue  # a partition's znode, not the topic's
        znode = zkdata.decode_topic_znode(topic, w.data)
        out[topic] = out.get(topic, frozenset()) | frozenset(p for p, _ in znode.partitions)
    return out


_STATUS_RANK = {dc.AdminStatus.ERROR: 2, dc.AdminStatus.IN_PROGRESS: 1, dc.AdminStatus.OK: 0}


def merge_admin_results(
    results: Sequence[dc.AdminResult], buckets: Sequence[int] | None = None
) -> list[dc.AdminResult]:
    """One result per request id. ``buckets`` (when given) names the bucket of each result: a bucket's
    results for one request id in one micro-batch are successive answers (``in_progress`` when a
    reassignment or deletion starts, then ``ok`` when it completes in the same batch, or a superseded
    reassignment's final answer), so only its last one counts; without ``buckets`` every result is a
    part. Then the parts merge: the worst status wins (error > in_progress > ok); messages and details
    of the parts are kept in bucket order."""
    by_id: dict[str, list[dc.AdminResult]] = {}
    if buckets is None:
        for r in results:
            by_id.setdefault(r.request_id, []).append(r)
    else:
        latest: dict[str, dict[int, dc.AdminResult]] = {}
        for r, b in zip(results, buckets, strict=True):
            latest.setdefault(r.request_id, {})[b] = r
        by_id = {rid: list(per_bucket.values()) for rid, per_bucket in latest.items()}
    merged = []
    for rid, parts in by_id.items():
        if len(parts) == 1:
            merged.append(parts[0])
            continue
        worst = max(parts, key=lambda r: _STATUS_RANK[r.status])
        errors = [p.error for p in parts if p.error]
        messages = [p.message for p in parts if p.message]
        # the parts' details are frozen JSON (arrays tuples, objects mappings); the merge grows a plain list
        # or dict per key in place, and AdminResult freezes the result again, reusing the frozen values
        details: dict[str, Any] = {}
        for p in parts:
            for k, v in p.details.items():
                cur = details.get(k)
                if k not in details:
                    details[k] = list(v) if isinstance(v, tuple) else dict(v) if isinstance(v, Mapping) else v
                elif isinstance(v, tuple) and isinstance(cur, list):
                    cur.extend(v)
                elif isinstance(v, Mapping) and isinstance(cur, dict):
                    cur.update(v)
                elif isinstance(v, int | float) and isinstance(cur, int | float):
                    details[k] = cur + v
        merged.append(
            dc.AdminResult(
                rid,
                worst.command,
                worst.status,
                errors[0] if errors else None,
                "; ".join(dict.fromkeys(messages)),
                details,
            )
        )
    return merged


def withhold_refused(requests: Sequence[dc.BrokerRequest], failed: Sequence[FailedWrite]) -> list[dc.BrokerRequest]:
    """``requests`` without the partition states built on writes ZooKeeper refused
    (:mod:`streaming.query.refusals`: Kafka sends LeaderAndIsr and UpdateMetadata only for writes that
    succeeded)."""
    return withhold(requests, classify(failed))


def rejected_result(rid: str, row: dict[str, Any], reasons: Sequence[str]) -> dc.AdminResult:
    """The answer to a rejected command. Input refused at the edge is ``INVALID_REQUEST`` (what
    ``--wait`` and scripts test for), with the limit's own Kafka error name (``INVALID_TOPIC_EXCEPTION``,
    ``INVALID_PARTITIONS``, ``INVALID_REPLICATION_FACTOR``, …) leading the message and in
    ``details.kafka_error``; a command whose processing raised is ``UNKNOWN_SERVER_ERROR``."""
    kafka_error = str(row.get("error") or Errors.INVALID_REQUEST.name)
    internal = any(str(e).startswith("internal:") for e in row.get("expectations", ()))
    error = kafka_error if internal else Errors.INVALID_REQUEST.name
    message = "; ".join(reasons)
    if kafka_error != error:
        message = f"{kafka_error}: {message}"
    details = {"kafka_error": kafka_error}
    return dc.AdminResult(rid, _type_of(row["payload"]), dc.AdminStatus.ERROR, error, message, details)


def request_id_of(payload: str) -> str | None:
    """The ``request_id`` of a rejected record, when it is one a result can carry (valid UTF-8, within
    :data:`core.limits.MAX_REQUEST_ID_LENGTH`); a record without one gets no admin result."""
    try:
        o = json.loads(payload)
        return jf.string(o, "request_id", max_length=MAX_REQUEST_ID_LENGTH)
    except (ValueError, RecursionError, AttributeError, TypeError):
        return None


def _type_of(payload: str) -> str:
    try:
        o = json.loads(payload)
        return jf.string(o, "type", max_length=MAX_NAME_LENGTH)
    except (ValueError, RecursionError, AttributeError, TypeError):
        return "unknown"
