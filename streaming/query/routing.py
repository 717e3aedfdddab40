"""Routing input records to state buckets (docs/design/decisions.md, decision 1).

A **bucket** is a stable hash of the *topic* name modulo the bucket count, so all of a topic's
partitions, its znode and its deletion or reassignment live in one bucket's state. Topic-scoped events go
to their topic's bucket; an event naming several topics (a reassignment file, a LeaderAndIsr response)
is split into one event per bucket its topics live in (the partitions of that bucket's topics), same
``request_id``: a bucket answers a command once. Cluster-scoped events (broker startup and
failure, controlled shutdown, log-dir failure, failover, "all partitions" elections, ticks) are copied to
every bucket. Rejected records go to :data:`REJECTED_BUCKET`, which holds no state. Every admin command
also gives each bucket a claim row (its request id: :mod:`streaming.query.request_ids`).

:func:`prepare` is the first step of the query (``mapInPandas``): Kafka records in, routed rows out, in
the order of :data:`ROUTED_SCHEMA`. Each micro-batch also gets one :class:`core.events.Tick` per bucket so
that every bucket runs, reports its metrics and retries pending deletions once per batch.
"""

from __future__ import annotations

import functools
import json
import zlib
from collections.abc import Collection, Iterable, Iterator
from dataclasses import replace
from typing import Any

import pandas as pd

from core import events as ev
from core.codec.events import event_to_json
from core.kafka.error_codes import KafkaError as Errors
from core.zk_path_events import ZkPreferredElection, ZkReassignment
from streaming.query.request_ids import claim_rows

REJECTED_BUCKET = -1

#: Spark DDL of the rows :func:`prepare` yields
ROUTED_SCHEMA = "bucket int, ts long, src string, offset long, sub int, kind string, payload string"
#: the columns of :data:`ROUTED_SCHEMA`, in order
ROUTED_COLUMNS = ["bucket", "ts", "src", "offset", "sub", "kind", "payload"]

KIND_EVENT = "event"
KIND_FAILOVER_REF = "failover_ref"
KIND_REJECTED = "rejected"
KIND_TICK = "tick"


def bucket_of(topic: str, num_buckets: int) -> int:
    """Stable across processes and Python versions (CRC-32, not ``hash()``)."""
    return zlib.crc32(topic.encode("utf-8")) % num_buckets


#: the event types that may name several topics, each split by topic (and joined again per bucket)
_SPLITTABLE = (
    ev.ReassignPartitions,
    ev.CancelReassignment,
    ev.ElectLeaders,
    ev.LeaderAndIsrResponse,
    ev.StopReplicaResponse,
    ev.AlterPartitionRequest,
    ZkReassignment,
    ZkPreferredElection,
)


def split_by_topic(event: ev.Event) -> list[tuple[str, ev.Event]]:
    """One ``(topic, event)`` per topic the event names; ``[]`` for cluster-scoped events."""
    topics = event.topics()
    if event.SCOPE == "cluster" or not topics:
        return []
    if len(topics) == 1:
        return [(topics[0], event)]
    return [(t, _restricted(event, {t})) for t in topics]


def _restricted(event: ev.Event, topics: Collection[str]) -> ev.Event:
    """``event`` with only the partitions of ``topics``, in its order."""
    if not isinstance(event, _SPLITTABLE):  # pragma: no cover - every multi-topic event type is listed
        raise TypeError(f"cannot split {type(event).__name__} by topic")
    parts = tuple(p for p in event.partitions if p.topic in topics)
    return replace(event, partitions=parts)  # type: ignore[arg-type]


def route(event: ev.Event, num_buckets: int) -> list[tuple[int, ev.Event]]:
    """``(bucket, event)`` pairs for one decoded event: at most one per bucket. The topic parts of a
    multi-topic event whose topics share a bucket are one event there (their partitions in its order), so
    that the bucket answers the command once for all of them."""
    if isinstance(event, ev.AutoRebalanceTick) and event.bucket_limits:
        # a bounded rebalance pass: each bucket gets its own share of the bound (core.leader_balance)
        return [(b, event.for_bucket(b)) for b in range(num_buckets)]
    topics = event.topics()
    if event.SCOPE == "cluster" or not topics:
        return [(b, event) for b in range(num_buckets)]
    by_bucket: dict[int, list[str]] = {}
    for t in topics:
        by_bucket.setdefault(bucket_of(t, num_buckets), []).append(t)
    if len(by_bucket) == 1:
        return [(b, event) for b in by_bucket]
    # one pass over the partitions per bucket, not per topic: an AlterPartition request names up to a
    # thousand topics. Two topics in one bucket are one event there: the driver keeps a bucket's last answer
    # to a request, so parts answered apart would lose one
    return [(b, _restricted(event, set(ts))) for b, ts in by_bucket.items()]


def encode_routed(routed: list[tuple[int, ev.Event]]) -> list[tuple[int, str]]:
    """``(bucket, payload)`` for each routed event, each distinct event encoded once: a cluster-scoped event
    is the same object in every bucket (measured with ``bench/event_round_trip.py``)."""
    texts: dict[int, str] = {}
    out: list[tuple[int, str]] = []
    for bucket, event in routed:
        text = texts.get(id(event))
        if text is None:
            text = texts[id(event)] = event_to_json(event)
        out.append((bucket, text))
    return out


def prepare_frame(frame: pd.DataFrame, num_buckets: int, admin_topic: str, validator: Any) -> pd.DataFrame:
    """Validate and route one pandas batch of Kafka records (columns ``topic, partition, offset,
    timestamp, value``)."""
    rows: list[tuple[int, int, str, int, int, str, str]] = []
    if frame.empty:
        return pd.DataFrame([], columns=ROUTED_COLUMNS)
    values = [v if v is None or isinstance(v, str) else bytes(v).decode("utf-8", "replace") for v in frame["value"]]
    sources = ["admin" if t == admin_topic else "broker-events" for t in frame["topic"]]
    checked = _check(validator, values, sources)
    partitions = frame["partition"].astype("int64").tolist()
    offsets = frame["offset"].astype("int64").tolist()
    for i, outcome in enumerate(checked):
        topic = str(frame["topic"].iat[i])
        partition = int(partitions[i])
        offset = int(offsets[i])
        ts = _millis(frame["timestamp"].iat[i])
        src = f"{topic}/{partition}"
        if isinstance(outcome, dict):  # the driver's failover reference: every bucket
            text = json.dumps(outcome, separators=(",", ":"), sort_keys=True)
            rows.extend((b, ts, src, offset, 0, KIND_FAILOVER_REF, text) for b in range(num_buckets))
            continue
        rejection = outcome
        if isinstance(outcome, ev.Event):
            try:
                routed = encode_routed(route(outcome, num_buckets))
            except Exception as e:  # a bug must cost this record only, never the query
                rejection = _internal_rejection("route", e)
            else:
                rows.extend((b, ts, src, offset, sub, KIND_EVENT, text) for sub, (b, text) in enumerate(routed))
                # every bucket learns the record's request id: a later record reusing it is refused
                # (streaming.query.request_ids)
                rows.extend(
                    claim_rows(
                        outcome, [b for b, _ in routed], num_buckets, position=(ts, src, offset), record=values[i]
                    )
                )
                continue
        rows.append(
            (
                REJECTED_BUCKET,
                ts,
                src,
                offset,
                0,
                KIND_REJECTED,
                rejected_row(topic, partition, offset, values[i], rejection),
            )
        )
    return pd.DataFrame(rows, columns=ROUTED_COLUMNS)


def rejected_row(topic: str, partition: int, offset: int, payload: str | None, rejection: Any) -> str:
    """The ``rejected`` row's payload (read by :mod:`streaming.query.dispatch`): the source position, the
    record as received, the expectation names, reasons and Kafka error name of ``rejection`` (a
    :class:`streaming.query.validation.Rejection`)."""
    rejected = {
        "source_topic": topic,
        "source_partition": partition,
        "source_offset": offset,
        "payload": payload or "",
        "expectations": list(rejection.expectations),
        "reasons": list(rejection.reasons),
        "error": rejection.error,
    }
    return json.dumps(rejected)


def _internal_rejection(stage: str, error: BaseException) -> Any:
    from streaming.query.validation import Rejection

    return Rejection(
        (f"internal:{stage}",), (f"processing the record raised {error!r}"[:2000],), Errors.UNKNOWN_SERVER_ERROR.name
    )


def _check(validator: Any, values: list[str | None], sources: list[str]) -> list[Any]:
    """``validator.check`` over the batch; should it raise (a bug, not bad input: bad input is rejected),
    each record is checked alone and only the records that still raise are rejected with the error."""
    try:
        return list(validator.check(values, sources))
    except Exception:
        out: list[Any] = []
        for v, s in zip(values, sources, strict=True):
            try:
                out.extend(validator.check([v], [s]))
            except Exception as e:
                out.append(_internal_rejection("validate", e))
        return out


def tick_rows(now_ms: int, num_buckets: int) -> pd.DataFrame:
    text = event_to_json(ev.Tick(now_ms))
    rows = [(b, now_ms, "~tick", 0, 0, KIND_TICK, text) for b in range(num_buckets)]
    return pd.DataFrame(rows, columns=ROUTED_COLUMNS)


def _millis(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, pd.Timestamp):
        return int(value.value // 1_000_000)
    if hasattr(value, "timestamp"):
        return int(value.timestamp() * 1000)
    return int(value)


@functools.cache
def shared_validator() -> Any:
    """One great-expectations context per Python worker (its import costs seconds: livectl's worker daemon
    builds it before forking, :mod:`streaming.warm.worker_daemon`, so a forked worker inherits it)."""
    from streaming.query.validation import InputValidator

    return InputValidator()


def validator_built() -> bool:
    """Whether this worker has :func:`shared_validator` (built here, or by the daemon it was forked from)."""
    return shared_validator.cache_info().currsize > 0


def make_prepare(num_buckets: int, admin_topic: str) -> Any:
    """The ``mapInPandas`` function of the query's first step."""

    def prepare(batches: Iterable[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        validator = shared_validator()
        latest = 0
        for frame in batches:
            out = prepare_frame(frame, num_buckets, admin_topic, validator)
            if not out.empty:
                latest = max(latest, int(out["ts"].max()))
                yield out
        # ticks carry the batch's newest record time, so a replay makes the same ticks
        yield tick_rows(latest, num_buckets)

    return prepare
