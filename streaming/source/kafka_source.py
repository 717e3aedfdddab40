"""A PySpark streaming data source over kafka-python, with Kafka offsets as the source offsets.

PySpark's wheel has no Kafka connector (docs/design/decisions.md, decision 3), so the controller reads its input topics
through this Python data source, registered as ``livectl-kafka``::

    spark.dataSource.register(KafkaDataSource)
    spark.readStream.format("livectl-kafka")
        .option("bootstrap_servers", "127.0.0.1:9092")
        .option("topics", "livectl.admin,livectl.broker-events")
        .option("starting_offsets", "earliest")          # or latest, or {"topic":{"0":42}}; new checkpoints only
        .option("max_records_per_batch", "10000")
        .load()

Kafka client security (``security.protocol``, SASL, SSL) is given as ``kafka.<property>`` options, as
with Spark's Kafka source (:class:`sinks.security.KafkaSecurity` lists the properties).

Columns, like Spark's Kafka source: ``key string`` (UTF-8, nullable), ``value string`` (UTF-8,
nullable), ``topic string``, ``partition int``, ``offset long``, ``timestamp timestamp``. Options are
also accepted under Spark's Kafka source names (``kafka.bootstrap.servers``, ``subscribe``,
``startingOffsets``, ``maxOffsetsPerTrigger``) and in camelCase.

**Offsets.** A source offset is ``{topic: {partition: next_offset}}`` (partition ids as text, topics and partitions in
sorted order so that equal offsets serialise equally), plus ``"@last": {topic: {partition: mark}}``: the mark
(:func:`~streaming.source.consumer.record_mark`: timestamp and checksum) of the record just before each position, for
the data-loss check. Spark writes the end offset of each micro-batch to the checkpoint's offset log before running it,
so a query stopped and restarted from its checkpoint resumes at exactly that offset: no record is read twice and none is
skipped; a batch that was planned but not committed is re-read with :meth:`KafkaStreamReader.readBetweenOffsets`,
deterministically. End offsets are taken from the records actually read (the offset of the last one + 1), never from the
broker's reported end, which tansu (the local broker before Apache Kafka) under-reported. No consumer group is used
(``assign`` + ``seek``); nothing is committed to Kafka. Partitions that appear later start at their beginning.

**Data loss** (Spark's ``failOnDataLoss``). Before each read the source fetches, per partition, the record
just before the offset it is to read from, and checks that it is the record it read there (its mark):
records deleted past that offset (the log begins later), a log that went backwards (a broker that keeps
no data restarted, or the topic was deleted and created again) and a log written again that has already
grown past the offset (which offsets alone cannot tell from the old one: Spark's source has that blind
spot) are all data loss. A log that begins exactly at the offset lost only records already read
(retention): not a loss. With ``fail_on_data_loss=true`` (the default) the read raises
:class:`~streaming.source.options.KafkaSourceError` naming the topic-partition, the offsets and what to do;
with ``false`` it logs a warning and reads that partition again from its earliest offset. Re-reading a
planned batch checks its last record's mark too. Offsets without marks (explicit starting offsets, a
checkpoint written before marks) are checked by the offsets alone until their first record is read. A
partition whose check the broker does not answer within ``poll_timeout_ms`` is not read that time; an answer that
comes later counts for the next check (the check has a consumer of its own, whose fetches are small). The check, and
the consumer's offsets and positions, are :class:`streaming.source.consumer.SourceConsumer`'s.

**Starting offsets** (a new checkpoint only): ``earliest``, ``latest`` (the true ends when the query
plans its first batch), or a JSON object ``{"topic": {"partition": offset}}`` as Spark's Kafka source
takes it (partitions it leaves out start at their beginning). The controller resolves ``latest`` itself
before it publishes its failover reference, so that the reference is inside the stream it reads.

**Failover barrier.** With ``barrier_topic`` and ``barrier_epoch`` set, the source hands out no record
past the start of the run (the end of the checkpoint's last planned micro-batch, which Spark re-reads
as usual) until a ``controller_failover_ref`` of controller epoch ``barrier_epoch`` or newer (and, when
``barrier_path`` is set, naming a snapshot folder under that folder) has been published on ``barrier_topic``. Its first
micro-batch then holds the reference alone: nothing is processed under the new controller epoch before the
buckets have its ZooKeeper snapshot (:mod:`streaming.query.failover`). The records that waited before it on
its partition follow in the next micro-batches, ``max_records_per_batch`` at a time, handled on that snapshot
(:func:`streaming.query.failover_refs.events_of`): the offset says the reference was handed out ahead
(:data:`streaming.source.options.AHEAD`) until the reads pass it, and they skip it. A takeover's first batch
is therefore one record whatever backlog it meets (the brokers' retries while no controller answered). The
first read waits for the reference longer than the later ones (see "Waiting for records").

**Kafka away.** A read that meets a Kafka client error (no broker answers: a broker restarting, a cut link)
returns no records and the offsets it was given, so Spark runs no micro-batch; the reads go on from there once
Kafka answers. Only once Kafka has not answered for ``unreachable_timeout_ms`` (60 s; the controller passes its
``sink_retry_timeout_ms``) does a read fail, with a :class:`~streaming.source.options.KafkaSourceError` naming that
option. (Spark's Kafka source fails the query once its offset fetches have failed ``fetchOffset.numRetries`` times.)

The options are parsed and checked by :class:`streaming.source.options.SourceOptions`.

**Waiting for records.** A read (Spark's ``latestOffset``) returns as soon as records have come and the
broker's fetch answers show none left behind them; with none, it waits up to ``poll_timeout_ms`` (500 ms)
for the first. With the controller's trigger of 0 an idle query therefore waits in the read, and a record
is in a micro-batch within about a fetch's wait (:data:`FETCH_MAX_WAIT_MS`) of reaching the broker.

The reader's first read waits up to ``first_read_wait_ms`` (10 s) for its first record — behind the
barrier, for the reference — and returns as soon as it has come. A query on a new checkpoint runs its
micro-batch 0 with whatever its first read returns (it has no committed offsets to compare with), so a
first read that came back empty made an empty batch 0: a new controller's query starts a few seconds
before its failover reference is published, and that empty batch paid every first-batch cost (~8 s at
100k partitions) before the failover batch could start. On a used checkpoint Spark runs no batch for
unchanged offsets, and the wait changes nothing but when the read returns.

**Slow links.** A fetch answer comes whole or not at all, and one not come within ``request_timeout_ms`` (30 s)
closes the connection and is asked again; the read's fetch size therefore falls back from 1 MiB to 16 KiB when
records wait and none come, and grows back while answers come quickly (:mod:`streaming.source.fetch_size`). A
partition whose data-loss check was not answered in time stays assigned to the read's consumer, paused, so that
its fetch in flight is not thrown away.

Reads run in Spark's Python streaming-source worker (``SimpleDataSourceStreamReader``, the quickest
form here: docs/design/decisions.md, decision 9). ``Trigger.AvailableNow`` is supported.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
from collections.abc import Iterator, Mapping
from typing import Any

from pyspark.sql.datasource import DataSource, SimpleDataSourceStreamReader
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from streaming.source.consumer import SourceConsumer, poll_until, record_mark
from streaming.source.options import (
    SOURCE_NAME,
    Ahead,
    KafkaSourceError,
    Positions,
    SourceOptions,
    ahead_of,
    source_offset,
    split_offset,
)

SCHEMA = "key string, value string, topic string, partition int, offset long, timestamp timestamp"

log = logging.getLogger("livectl.kafka_source")

#: the record type the barrier waits for (:data:`streaming.query.validation.FAILOVER_REF_TYPE`; not imported,
#: the source does not depend on the controller's validation)
_FAILOVER_REF_TYPE = "controller_failover_ref"


#: how long a read's last poll waits once records came and no partition is behind its high watermark: a
#: fetch the broker can answer from what it holds comes back in a few milliseconds on a LAN
CONFIRM_POLL_MS = 10


def _text(b: bytes | None) -> str | None:
    return None if b is None else b.decode("utf-8", "replace")


def _handed_out(ahead: Ahead | None, key: tuple[str, int], r: Any) -> bool:
    """Whether record ``r`` of partition ``key`` is the one handed out ahead (the same record: its mark)."""
    return ahead is not None and key == ahead.key and r.offset == ahead.offset and record_mark(r) == ahead.mark


def _row(r: Any) -> tuple[Any, ...]:
    ts = dt.datetime.fromtimestamp(r.timestamp / 1000, tz=dt.UTC) if r.timestamp is not None else None
    return (_text(r.key), _text(r.value), r.topic, r.partition, r.offset, ts)


class KafkaStreamReader(SimpleDataSourceStreamReader, SupportsTriggerAvailableNow):
    """Reads ``options.topics`` from ``start`` offsets (see the module docstring)."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        #: the consumer: partitions, offsets, where it stands, the data-loss check
        self.kafka = SourceConsumer(options)
        self._target: Positions | None = None
        #: the failover barrier: not yet passed; where the scan for the reference stands
        self._held = options.barrier_topic is not None
        #: whether a read has run yet: the first waits longer (``first_read_wait_ms``)
        self._first_read = True
        self._scanned: dict[tuple[str, int], int] = {}
        #: the last poll of a read once records came and none is known to be left (see :meth:`read`)
        self._confirm_ms = min(options.poll_timeout_ms, CONFIRM_POLL_MS)
        #: since when (``time.monotonic()``) the reads have met Kafka client errors, if they do
        self._away_since: float | None = None

    # ------------------------------------------------------------------ Spark's interface

    def initialOffset(self) -> dict[str, Any]:  # noqa: N802 - Spark's name
        if self.options.starting_offsets == "latest":
            return source_offset(*self.kafka.true_ends())
        tps = self.kafka.partitions()
        begins = self.kafka.list_offsets("beginning", tps)
        given = {(t, p): o for t, p, o in self.options.starting_positions or ()}
        marks = {(t, p): m for t, p, m in self.options.starting_marks}
        positions = {(tp.topic, tp.partition): given.get((tp.topic, tp.partition), begins[tp]) for tp in tps}
        return source_offset(positions, marks)

    def _find_barrier(self, starts: Mapping[tuple[str, int], int], wait_s: float = 0.0) -> Any | None:
        """The first failover reference (a consumer record) that opens the barrier at or after ``starts`` on
        the barrier topic, or ``None`` once a poll (``poll_timeout_ms``) has brought nothing and ``wait_s``
        seconds have passed. The scan goes on from where the previous one ended."""
        from kafka import TopicPartition

        topic = self.options.barrier_topic
        least = self.options.barrier_epoch
        assert topic is not None and least is not None
        tps = [TopicPartition(t, p) for (t, p) in sorted(starts) if t == topic]
        positions = {
            (tp.topic, tp.partition): max(
                starts[(tp.topic, tp.partition)], self._scanned.get((tp.topic, tp.partition), 0)
            )
            for tp in tps
        }
        self.kafka.assign(tps, positions)
        deadline = time.monotonic() + wait_s
        poll_ms = self.options.poll_timeout_ms
        while True:
            got = poll_until(self.kafka, deadline, poll_ms, 5000, poll_ms)
            if not got:
                return None
            for tp, records in got.items():
                key = (tp.topic, tp.partition)
                if records:
                    # where the consumer now stands, before any early return: the barrier batch seeks back
                    self.kafka.positions[key] = records[-1].offset + 1
                for r in records:
                    if r.offset < positions[key]:
                        continue
                    if self._opens_barrier(r.value, least):
                        return r
                    positions[key] = self._scanned[key] = r.offset + 1

    def _opens_barrier(self, value: bytes | None, least: int) -> bool:
        if value is None or _FAILOVER_REF_TYPE.encode() not in value:
            return False
        try:
            ref = json.loads(value)
            epoch = int(ref["controller_epoch"])
        except (ValueError, TypeError, KeyError, RecursionError):
            return False  # not a reference the controller wrote; the validation rejects it downstream
        if not isinstance(ref, dict) or ref.get("type") != _FAILOVER_REF_TYPE or epoch < least:
            return False
        folder = self.options.barrier_path
        return folder is None or str(ref.get("path", "")).startswith(folder.rstrip("/") + "/")

    def read(self, start: dict[str, Any]) -> tuple[Iterator[tuple[Any, ...]], dict[str, Any]]:
        """Records from ``start`` up to ``max_records_per_batch``; the end offset follows the last record
        read per partition (unchanged where nothing was read), the record handed out ahead skipped. Behind a
        failover barrier: nothing until the reference is there, then the reference alone. While Kafka does not
        answer: nothing, and ``start`` again, for up to ``unreachable_timeout_ms`` ("Kafka away")."""
        from kafka.errors import KafkaError

        try:
            out = self._read(start)
        except KafkaError as e:
            return self._kafka_away(start, e)
        self._away_since = None
        return out

    def _kafka_away(self, start: dict[str, Any], error: Exception) -> tuple[Iterator[tuple[Any, ...]], dict[str, Any]]:
        """A read that met a Kafka client error: nothing read, ``start`` again, or once Kafka has not answered
        for ``unreachable_timeout_ms`` a :class:`KafkaSourceError` naming that option."""
        now = time.monotonic()
        if self._away_since is None:
            self._away_since = now
        away_s = now - self._away_since
        limit_s = self.options.unreachable_timeout_ms / 1000
        if away_s >= limit_s:
            raise KafkaSourceError(
                "unreachable_timeout_ms",
                f"Kafka at {self.options.bootstrap_servers} did not answer for {away_s:.0f} s"
                f" (the limit is {limit_s:.0f} s): {error!r}",
            ) from None
        log.log(
            logging.WARNING if away_s == 0 else logging.INFO,
            "Kafka at %s did not answer (%r): nothing read this time; the reads fail after %.0f s of this (%.0f s now)",
            self.options.bootstrap_servers,
            error,
            limit_s,
            away_s,
        )
        # not a busy loop when the client fails at once (connection refused)
        time.sleep(min(self.options.poll_timeout_ms / 1000, limit_s - away_s))
        return iter([]), start

    def _read(self, start: dict[str, Any]) -> tuple[Iterator[tuple[Any, ...]], dict[str, Any]]:
        tps = self.kafka.partitions()
        positions, marks = split_offset(start)
        starts, marks, unchecked = self.kafka.check_data_loss(tps, self.kafka.with_beginnings(positions, tps), marks)
        first_wait_s = self.options.first_read_wait_ms / 1000 if self._first_read else 0.0
        self._first_read = False
        if self._held:
            ref = self._find_barrier(starts, first_wait_s) if not unchecked else None
            if ref is None:
                return iter([]), source_offset(starts, marks)
            self._held = False
            # from ``starts``, not ``start``: a partition found lost above starts again at its beginning
            key = (ref.topic, ref.partition)
            if ref.offset == starts[key]:
                return iter([_row(ref)]), source_offset(
                    {**starts, key: ref.offset + 1}, {**marks, key: record_mark(ref)}
                )
            # the records before it wait for the next batches, which handle them on the snapshot it names
            return iter([_row(ref)]), source_offset(
                starts, marks, Ahead(ref.topic, ref.partition, ref.offset, record_mark(ref))
            )
        ahead = ahead_of(start)
        # a partition whose check the broker has not answered yet stays assigned, paused: a fetch of its records
        # in flight is kept for the read after its check (on a slow link, dropping it each time it came late
        # meant its records never came)
        held = [tp for tp in tps if (tp.topic, tp.partition) in unchecked]
        tps = [tp for tp in tps if (tp.topic, tp.partition) not in unchecked]
        limit = self.options.max_records_per_batch
        if self._target is not None:
            # Trigger.AvailableNow: never beyond the offsets recorded when it started
            caps = self._target
            tps = [tp for tp in tps if starts[(tp.topic, tp.partition)] < caps.get((tp.topic, tp.partition), 0)]
        else:
            caps = {}
        ends = dict(starts)
        last: dict[tuple[str, int], Any] = {}
        rows: list[tuple[Any, ...]] = []
        if tps:
            self.kafka.assign(tps + held, starts, held)
            timeout = self.options.poll_timeout_ms
            deadline = time.monotonic() + first_wait_s
            while len(rows) < limit:
                # the first read waits for its first record; a read that has records waits no longer
                until = deadline if not rows else 0.0
                got = poll_until(self.kafka, until, timeout, limit - len(rows), self.options.poll_timeout_ms)
                if not got:
                    break
                for tp, records in got.items():
                    key = (tp.topic, tp.partition)
                    for r in records:
                        if r.offset < ends[key]:
                            continue
                        if len(rows) >= limit or (key in caps and r.offset >= caps[key]):
                            break
                        ends[key] = r.offset + 1
                        last[key] = r
                        if not _handed_out(ahead, key, r):
                            rows.append(_row(r))
                    if records:
                        # where the consumer now stands; when we kept fewer, the next read seeks back
                        self.kafka.positions[key] = records[-1].offset + 1
                # Once records came, a poll that waits its whole timeout only to find nothing more delays
                # every micro-batch (it was most of Spark's ``latestOffset``): what the broker already
                # holds comes at once, so only a partition behind its high watermark is waited for.
                timeout = self.options.poll_timeout_ms if self.kafka.behind(tps) else self._confirm_ms
        marks.update((key, record_mark(r)) for key, r in last.items())
        return iter(rows), source_offset(ends, marks, ahead)

    def readBetweenOffsets(self, start: dict[str, Any], end: dict[str, Any]) -> Iterator[tuple[Any, ...]]:  # noqa: N802 - Spark's name
        """Exactly the records in ``[start, end)`` per partition (re-reading a planned batch), but for the one
        ``start`` says was handed out ahead, and with the one ``end`` says is handed out ahead in this batch
        (the barrier's: :data:`streaming.source.options.AHEAD`). A partition whose last record is not the one
        the batch was planned with (its mark) was written again since: data loss (see the module docstring);
        with ``fail_on_data_loss=false`` its records are left out."""
        positions, _ = split_offset(start)
        stops, end_marks = split_offset(end)
        skip, handed = ahead_of(start), ahead_of(end)
        deadline = time.monotonic() + self.options.replay_timeout_s
        rows = self._read_ranges(positions, stops, end_marks, skip, deadline)
        if handed is not None and handed != skip:
            ref = self._read_at(handed.key, handed.offset, deadline)
            if ref is not None and record_mark(ref) == handed.mark:
                rows.append(_row(ref))
            else:
                self._lost(
                    f"{handed.topic}-{handed.partition}: the record at offset {handed.offset} is not the "
                    "failover reference the planned batch handed out (the log was written again since)"
                )
        return iter(rows)

    def _read_ranges(
        self,
        positions: Positions,
        stops: Positions,
        end_marks: Mapping[tuple[str, int], str],
        skip: Ahead | None,
        deadline: float,
    ) -> list[tuple[Any, ...]]:
        """The records of ``[positions, stops)`` per partition but ``skip``; a partition whose last record is
        not the one of its mark in ``end_marks`` is data loss (:meth:`_lost`)."""
        tps = [tp for tp in self.kafka.partitions() if (tp.topic, tp.partition) in stops]
        starts = self.kafka.with_beginnings(positions, tps)
        todo = [tp for tp in tps if starts[(tp.topic, tp.partition)] < stops[(tp.topic, tp.partition)]]
        rows: list[tuple[tuple[str, int], tuple[Any, ...]]] = []
        if not todo:
            return []
        self.kafka.assign(todo, starts)
        reached = {(tp.topic, tp.partition): starts[(tp.topic, tp.partition)] for tp in todo}
        last: dict[tuple[str, int], Any] = {}
        while any(reached[k] < stops[k] for k in reached):
            if time.monotonic() > deadline:
                raise self._not_reread({k: (o, stops[k]) for k, o in reached.items() if o < stops[k]})
            got = self.kafka.poll(timeout_ms=self.options.poll_timeout_ms, max_records=5000)
            for tp, records in got.items():
                key = (tp.topic, tp.partition)
                for r in records:
                    if reached[key] <= r.offset < stops[key]:
                        if not _handed_out(skip, key, r):
                            rows.append((key, _row(r)))
                        reached[key] = r.offset + 1
                        last[key] = r
                    elif r.offset >= stops[key]:
                        reached[key] = stops[key]
                if records:
                    self.kafka.positions[key] = records[-1].offset + 1
        left_out: set[tuple[str, int]] = set()
        for key, mark in end_marks.items():
            r = last.get(key)
            if r is None or r.offset != stops[key] - 1 or record_mark(r) == mark:
                continue
            self._lost(
                f"{key[0]}-{key[1]}: the record at offset {r.offset} is not the one the planned batch ended with"
                " (the log was written again since)"
            )
            left_out.add(key)
        return [row for key, row in rows if key not in left_out]

    def _lost(self, what: str) -> None:
        """Planned records gone: a :class:`KafkaSourceError` naming ``what``, or with ``fail_on_data_loss=false``
        a warning (the caller leaves them out)."""
        if self.options.fail_on_data_loss:
            raise KafkaSourceError(
                "fail_on_data_loss",
                f"data loss on {what}; set fail_on_data_loss=false to go on (the planned batch's records of"
                " that partition are left out, the next read starts it again from its earliest offset)",
            )
        log.warning("data loss on %s; fail_on_data_loss=false: its records are left out of the batch", what)

    def _read_at(self, key: tuple[str, int], offset: int, deadline: float) -> Any | None:
        """The record at ``offset`` of partition ``key``, or ``None`` when the log no longer holds it."""
        from kafka import TopicPartition

        tp = TopicPartition(*key)
        self.kafka.assign([tp], {key: offset})
        while time.monotonic() <= deadline:
            for r in self.kafka.poll(timeout_ms=self.options.poll_timeout_ms, max_records=1).get(tp, []):
                self.kafka.positions[key] = r.offset + 1
                return r if r.offset == offset else None
        raise self._not_reread({key: (offset, offset + 1)})

    def _not_reread(self, behind: Mapping[tuple[str, int], tuple[int, int]]) -> KafkaSourceError:
        """The error of a replay that did not reach its planned ends: partition -> (reached, planned end)."""
        named = {f"{t}-{p}": ends for (t, p), ends in behind.items()}
        return KafkaSourceError(
            "offsets", f"could not re-read the planned batch within {self.options.replay_timeout_s} s: {named}"
        )

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: offsets live in Spark's checkpoint, not in Kafka."""

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802 - Spark's name
        self._target = self.kafka.true_ends()[0]

    def stop(self) -> None:
        self.kafka.close()


class KafkaDataSource(DataSource):
    """The ``livectl-kafka`` streaming source (see the module docstring)."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return SCHEMA

    def simpleStreamReader(self, schema: StructType) -> SimpleDataSourceStreamReader:  # noqa: N802 - Spark's name
        return KafkaStreamReader(SourceOptions.parse(self.options))
