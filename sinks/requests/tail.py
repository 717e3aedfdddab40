"""Reading what of a batch a topic already holds, from its tail: the request sink's idempotent replay.

Before a sink instance's first write of a topic, and again after any failed write, the sink reads the tail
of each partition of the topic (:func:`read_tail_identities`): the messages at the end whose batch id is at
least the one being written. If they are all of that batch, their identities
(:mod:`sinks.requests.messages`) are not sent again, whichever controller epoch wrote them (Spark's replay of
a batch id gives the same decisions; after a crash the replaying controller has a new epoch). If the tail
holds a *later* batch id, it comes from an earlier run (a new checkpoint restarts batch ids at 0) and
nothing is skipped. :func:`read_tail_ahead` reads the same tail before the batch id is known (a new
controller, once its producer has fenced every earlier one) and settles it later (:class:`TailAhead`).
Reads are ``read_committed``: an aborted transaction (a controller fenced or killed mid-write) was not
written.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from kafka import KafkaConsumer, TopicPartition

from sinks.errors import SinkUnavailableError
from sinks.requests.messages import admin_identity, identity_of

#: the first window of the tail read (messages per partition, doubled until a message of an earlier batch is in
#: it). The write of a new batch id (every write but a replay's) needs one window, whose first message is of an
#: earlier batch: a controller's first write after a failover then decompresses 8 of the previous controller's
#: ~1 MB messages instead of 128 (the first write of a 100k-partition failover's 86 messages, median 1.48 s with
#: 128 and 1.21 s with 8 on a 2-core machine: ``bench/first_write.py``)
TAIL_WINDOW = 8


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
        ident = identity_of(r.value) or admin_identity(r.value, occurrences, batch_id)
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
