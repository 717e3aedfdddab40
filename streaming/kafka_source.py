"""A PySpark streaming data source over kafka-python, with Kafka offsets as the source offsets.

PySpark's wheel has no Kafka connector (DESIGN.md, decision 3), so the controller reads its input topics
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

**Offsets.** A source offset is ``{topic: {partition: next_offset}}`` (partition ids as text, topics and
partitions in sorted order so that equal offsets serialise equally). Spark writes the end offset of each
micro-batch to the checkpoint's offset log before running it, so a query stopped and restarted from its
checkpoint resumes at exactly that offset: no record is read twice and none is skipped; a batch that was
planned but not committed is re-read with :meth:`KafkaStreamReader.readBetweenOffsets`, deterministically.
End offsets are taken from the records actually read (the offset of the last one + 1), never from the
broker's reported end, which the tansu broker under-reports. No consumer group is used (``assign`` +
``seek``); nothing is committed to Kafka. Partitions that appear later start at their beginning.

**Data loss** (Spark's ``failOnDataLoss``). Before each read the source checks that every partition still
holds the offset it is to read from: an offset below the log's beginning (records deleted) or beyond its
true end (the log went backwards: a broker that keeps no data restarted, or the topic was deleted and
created again) is data loss. With ``fail_on_data_loss=true`` (the default) the read raises
:class:`~streaming.source_options.KafkaSourceError` naming the topic-partition, both offsets and what to do;
with ``false`` it logs a warning and reads that partition again from its earliest offset. A new log that has
already grown past the checkpoint's offset cannot be told from the old one (Spark's source has the same
blind spot).

**Starting offsets** (a new checkpoint only): ``earliest``, ``latest`` (the true ends when the query
plans its first batch), or a JSON object ``{"topic": {"partition": offset}}`` as Spark's Kafka source
takes it (partitions it leaves out start at their beginning). The controller resolves ``latest`` itself
before it publishes its failover reference, so that the reference is inside the stream it reads.

**Failover barrier.** With ``barrier_topic`` and ``barrier_epoch`` set, the source hands out no record
past the start of the run (the end of the checkpoint's last planned micro-batch, which Spark re-reads
as usual) until a ``controller_failover_ref`` of controller epoch ``barrier_epoch`` or newer (and, when
``barrier_path`` is set, naming a snapshot folder under that folder) has been published on ``barrier_topic``. Its first
micro-batch then holds exactly the records of the reference's partition up to and including the
reference (whatever ``max_records_per_batch`` says): nothing is processed under the new controller epoch
before the buckets have its ZooKeeper snapshot (:mod:`streaming.failover`), and the records that waited
are processed after it (:func:`streaming.failover_refs.events_of`).

The options are parsed and checked by :class:`streaming.source_options.SourceOptions`.

**Waiting for records.** A read (Spark's ``latestOffset``) returns as soon as records have come and the
broker's fetch answers show none left behind them; with none, it waits up to ``poll_timeout_ms`` (500 ms)
for the first. With the controller's trigger of 0 an idle query therefore waits in the read, and a record
is in a micro-batch within about a fetch's wait (:data:`FETCH_MAX_WAIT_MS`) of reaching the broker.

Reads run in Spark's Python streaming-source worker (``SimpleDataSourceStreamReader``, the quickest
form here: DESIGN.md, decision 9). ``Trigger.AvailableNow`` is supported.
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

from sinks.security import KafkaSecurity
from streaming.source_options import SOURCE_NAME, KafkaSourceError, Offsets, SourceOptions, canonical

SCHEMA = "key string, value string, topic string, partition int, offset long, timestamp timestamp"

log = logging.getLogger("livectl.kafka_source")

#: the record type the barrier waits for (:data:`streaming.validation.FAILOVER_REF_TYPE`; not imported,
#: the source does not depend on the controller's validation)
_FAILOVER_REF_TYPE = "controller_failover_ref"


#: the consumer's ``fetch_max_wait_ms`` (at most the poll timeout)
FETCH_MAX_WAIT_MS = 50

#: how long each poll of the read to the true ends waits (:meth:`KafkaStreamReader._true_ends`): an empty
#: answer comes after :data:`FETCH_MAX_WAIT_MS`, so this sees one
ENDS_POLL_MS = 100

#: how long a read's last poll waits once records came and no partition is behind its high watermark: a
#: fetch the broker can answer from what it holds comes back in a few milliseconds on a LAN
CONFIRM_POLL_MS = 10

#: how long a partition the broker answered without an offset is asked again before it is an error
OFFSETS_RETRY_S = 30.0


def _text(b: bytes | None) -> str | None:
    return None if b is None else b.decode("utf-8", "replace")


def _row(r: Any) -> tuple[Any, ...]:
    ts = dt.datetime.fromtimestamp(r.timestamp / 1000, tz=dt.UTC) if r.timestamp is not None else None
    return (_text(r.key), _text(r.value), r.topic, r.partition, r.offset, ts)


class KafkaStreamReader(SimpleDataSourceStreamReader, SupportsTriggerAvailableNow):
    """Reads ``options.topics`` from ``start`` offsets (see the module docstring)."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._consumer: Any = None
        #: where the consumer stands per (topic, partition), to avoid needless seeks
        self._positions: dict[tuple[str, int], int] = {}
        self._target: Offsets | None = None
        #: the failover barrier: not yet passed; where the scan for the reference stands
        self._held = options.barrier_topic is not None
        self._scanned: dict[tuple[str, int], int] = {}
        #: the last poll of a read once records came and none is known to be left (see :meth:`read`)
        self._confirm_ms = min(options.poll_timeout_ms, CONFIRM_POLL_MS)

    # ------------------------------------------------------------------ kafka plumbing

    def _client(self) -> Any:
        if self._consumer is None:
            from kafka import KafkaConsumer

            self._consumer = KafkaConsumer(
                **KafkaSecurity(self.options.security).client_kwargs(),
                bootstrap_servers=self.options.bootstrap_servers,
                enable_auto_commit=False,
                group_id=None,
                # how soon a record is seen while a read waits: tansu answers a parked fetch only when its
                # wait is over, whatever arrives meanwhile (Kafka answers at once); shorter costs the idle
                # controller CPU in fetches (bench/README.md, "Fifth round of issue 15")
                fetch_max_wait_ms=min(self.options.poll_timeout_ms, FETCH_MAX_WAIT_MS),
                max_poll_records=min(self.options.max_records_per_batch, 5000),
                auto_offset_reset="earliest",
            )
        return self._consumer

    def _partitions(self) -> list[Any]:
        from kafka import TopicPartition

        c = self._client()
        out = []
        for topic in self.options.topics:
            parts = c.partitions_for_topic(topic)
            if not parts:
                # metadata may lag right after creation: ask once more
                c.topics()
                parts = c.partitions_for_topic(topic)
            if not parts:
                raise KafkaSourceError("topics", f"topic {topic!r} does not exist")
            out += [TopicPartition(topic, p) for p in sorted(parts)]
        return out

    def _assign(self, tps: list[Any], starts: Mapping[tuple[str, int], int]) -> None:
        c = self._client()
        if set(c.assignment()) != set(tps):
            c.assign(tps)
            self._positions = {}
        for tp in tps:
            want = starts[(tp.topic, tp.partition)]
            if self._positions.get((tp.topic, tp.partition)) != want:
                c.seek(tp, want)
                self._positions[(tp.topic, tp.partition)] = want

    def _list_offsets(self, which: str, tps: list[Any]) -> dict[Any, int]:
        """The log start (``which="beginning"``) or end offsets of ``tps``. kafka-python leaves out of its
        answer a partition the broker answered without an offset and no error, then fails looking it up
        (``KeyError``; seen with tansu on a loaded machine, for a topic that exists): such partitions are
        asked again, one at a time, for up to :data:`OFFSETS_RETRY_S` — a transient answer must not stop
        the controller's query — and only then is it an error naming the partitions."""
        c = self._client()
        ask = c.beginning_offsets if which == "beginning" else c.end_offsets
        try:
            return dict(ask(tps))
        except KeyError:
            pass
        out: dict[Any, int] = {}
        todo = list(tps)
        deadline = time.monotonic() + OFFSETS_RETRY_S
        while True:
            for tp in list(todo):
                try:
                    out.update(ask([tp]))
                    todo.remove(tp)
                except KeyError:
                    continue
            if not todo:
                return out
            if time.monotonic() >= deadline:
                names = ", ".join(f"{tp.topic}-{tp.partition}" for tp in todo)
                raise KafkaSourceError(
                    names, f"the broker gave no {which} offset for {OFFSETS_RETRY_S:.0f} s (asked again every 0.2 s)"
                )
            time.sleep(0.2)

    def _true_ends(self) -> Offsets:
        """The next offset to be written per partition, read to the real end (tansu under-reports)."""
        tps = self._partitions()
        c = self._client()
        reported = self._list_offsets("end", tps)
        self._assign(tps, {(tp.topic, tp.partition): reported[tp] for tp in tps})
        ends = {(tp.topic, tp.partition): reported[tp] for tp in tps}
        while True:
            got = c.poll(timeout_ms=min(self.options.poll_timeout_ms, ENDS_POLL_MS), max_records=5000)
            if not got:
                break
            for tp, records in got.items():
                if records:
                    ends[(tp.topic, tp.partition)] = max(ends[(tp.topic, tp.partition)], records[-1].offset + 1)
                    self._positions[(tp.topic, tp.partition)] = records[-1].offset + 1
        out: Offsets = {}
        for (t, p), o in ends.items():
            out.setdefault(t, {})[str(p)] = o
        return canonical(out)

    def _behind(self, tps: list[Any]) -> bool:
        """Whether the broker's last fetch answers put a partition's high watermark past where the consumer
        stands (records it has that this read has not had yet). Fetch answers carry the true high
        watermark, unlike tansu's ListOffsets."""
        c = self._client()
        for tp in tps:
            hw = c.highwater(tp)
            if hw is not None and hw > self._positions.get((tp.topic, tp.partition), hw):
                return True
        return False

    def _starts(self, start: Mapping[str, Mapping[str, int]], tps: list[Any]) -> dict[tuple[str, int], int]:
        missing = [tp for tp in tps if str(tp.partition) not in start.get(tp.topic, {})]
        begins = self._list_offsets("beginning", missing) if missing else {}
        return {
            (tp.topic, tp.partition): int(start[tp.topic][str(tp.partition)]) if tp not in begins else begins[tp]
            for tp in tps
        }

    def _check_data_loss(self, tps: list[Any], starts: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        """``starts`` with lost offsets handled (see "Data loss" in the module docstring)."""
        # checked on every read, not remembered: a broker that restarts empty makes any offset lost again
        todo = [tp for tp in tps if starts[(tp.topic, tp.partition)] > 0]
        if not todo:
            return starts
        begins = self._list_offsets("beginning", todo)
        reported = self._list_offsets("end", todo)
        out = dict(starts)
        for tp in todo:
            key = (tp.topic, tp.partition)
            start, begin = starts[key], begins[tp]
            end = reported[tp]
            if start > end and start > begin and self._holds(tp, start - 1):
                # tansu under-reports the end; the record just before the start is there, so it is not lost
                end = start
            if begin <= start <= end:
                continue
            where = f"ends at offset {end}" if start > end else f"begins at offset {begin}"
            what = (
                f"{tp.topic}-{tp.partition}: the checkpoint reads from offset {start} but the log now {where}"
                " (the broker lost data: restarted without storage, the topic was deleted and created again,"
                " or records were deleted)"
            )
            if self.options.fail_on_data_loss:
                raise KafkaSourceError(
                    "fail_on_data_loss",
                    f"data loss on {what}; set fail_on_data_loss=false to go on from the earliest offset"
                    " (the records in between are lost), or start on a new checkpoint_dir",
                )
            log.warning("data loss on %s; fail_on_data_loss=false: reading it again from offset %d", what, begin)
            out[key] = begin
        return out

    def _holds(self, tp: Any, offset: int) -> bool:
        """Whether the partition has a record at ``offset`` (read from there: quick when it has)."""
        c = self._client()
        c.assign([tp])
        self._positions = {}
        c.seek(tp, offset)
        for _ in range(3):
            records = c.poll(timeout_ms=self.options.poll_timeout_ms, max_records=1).get(tp, [])
            if records:
                return any(r.offset >= offset for r in records)
        return False

    # ------------------------------------------------------------------ Spark's interface

    def initialOffset(self) -> dict[str, Any]:  # noqa: N802 - Spark's name
        if self.options.starting_offsets == "latest":
            return self._true_ends()
        tps = self._partitions()
        begins = self._list_offsets("beginning", tps)
        given = {(t, p): o for t, p, o in self.options.starting_positions or ()}
        out: Offsets = {}
        for tp in tps:
            out.setdefault(tp.topic, {})[str(tp.partition)] = given.get((tp.topic, tp.partition), begins[tp])
        return canonical(out)

    def _find_barrier(self, starts: Mapping[tuple[str, int], int]) -> tuple[str, int, int] | None:
        """(topic, partition, offset) of the first failover reference that opens the barrier at or after
        ``starts`` on the barrier topic, or ``None``. The scan goes on from where the previous one ended."""
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
        self._assign(tps, positions)
        c = self._client()
        while True:
            got = c.poll(timeout_ms=self.options.poll_timeout_ms, max_records=5000)
            if not got:
                return None
            for tp, records in got.items():
                key = (tp.topic, tp.partition)
                if records:
                    # where the consumer now stands, before any early return: the barrier batch seeks back
                    self._positions[key] = records[-1].offset + 1
                for r in records:
                    if r.offset < positions[key]:
                        continue
                    if self._opens_barrier(r.value, least):
                        return (tp.topic, tp.partition, r.offset)
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
        read per partition (unchanged where nothing was read). Behind a failover barrier: nothing until
        the reference is there, then the reference's partition up to and including it."""
        tps = self._partitions()
        starts = self._check_data_loss(tps, self._starts(start, tps))
        if self._held:
            found = self._find_barrier(starts)
            if found is None:
                held: Offsets = {}
                for (t, p), o in starts.items():
                    held.setdefault(t, {})[str(p)] = o
                return iter([]), canonical(held)
            self._held = False
            topic, partition, offset = found
            barrier: Offsets = {}
            for (t, p), o in starts.items():
                barrier.setdefault(t, {})[str(p)] = offset + 1 if (t, p) == (topic, partition) else o
            barrier = canonical(barrier)
            # from ``starts``, not ``start``: a partition found lost above starts again at its beginning
            begun: Offsets = {}
            for (t, p), o in starts.items():
                begun.setdefault(t, {})[str(p)] = o
            return iter(list(self.readBetweenOffsets(dict(begun), dict(barrier)))), barrier
        limit = self.options.max_records_per_batch
        if self._target is not None:
            # Trigger.AvailableNow: never beyond the offsets recorded when it started
            caps = {(t, int(p)): o for t, parts in self._target.items() for p, o in parts.items()}
            tps = [tp for tp in tps if starts[(tp.topic, tp.partition)] < caps.get((tp.topic, tp.partition), 0)]
        else:
            caps = {}
        ends = dict(starts)
        rows: list[tuple[Any, ...]] = []
        if tps:
            self._assign(tps, starts)
            c = self._client()
            timeout = self.options.poll_timeout_ms
            while len(rows) < limit:
                got = c.poll(timeout_ms=timeout, max_records=limit - len(rows))
                if not got:
                    break
                for tp, records in got.items():
                    key = (tp.topic, tp.partition)
                    for r in records:
                        if r.offset < ends[key]:
                            continue
                        if len(rows) >= limit or (key in caps and r.offset >= caps[key]):
                            break
                        rows.append(_row(r))
                        ends[key] = r.offset + 1
                    if records:
                        # where the consumer now stands; when we kept fewer, the next read seeks back
                        self._positions[key] = records[-1].offset + 1
                # Once records came, a poll that waits its whole timeout only to find nothing more delays
                # every micro-batch (it was most of Spark's ``latestOffset``): what the broker already
                # holds comes at once, so only a partition behind its high watermark is waited for.
                timeout = self.options.poll_timeout_ms if self._behind(tps) else self._confirm_ms
        end: Offsets = {}
        for (t, p), o in ends.items():
            end.setdefault(t, {})[str(p)] = o
        return iter(rows), canonical(end)

    def readBetweenOffsets(self, start: dict[str, Any], end: dict[str, Any]) -> Iterator[tuple[Any, ...]]:  # noqa: N802 - Spark's name
        """Exactly the records in ``[start, end)`` per partition (re-reading a planned batch)."""
        tps = [tp for tp in self._partitions() if str(tp.partition) in end.get(tp.topic, {})]
        starts = self._starts(start, tps)
        stops = {(tp.topic, tp.partition): int(end[tp.topic][str(tp.partition)]) for tp in tps}
        todo = [tp for tp in tps if starts[(tp.topic, tp.partition)] < stops[(tp.topic, tp.partition)]]
        rows: list[tuple[Any, ...]] = []
        if not todo:
            return iter(rows)
        self._assign(todo, starts)
        c = self._client()
        reached = {(tp.topic, tp.partition): starts[(tp.topic, tp.partition)] for tp in todo}
        deadline = time.monotonic() + self.options.replay_timeout_s
        while any(reached[k] < stops[k] for k in reached):
            if time.monotonic() > deadline:
                behind = {f"{t}-{p}": (o, stops[(t, p)]) for (t, p), o in reached.items() if o < stops[(t, p)]}
                reason = f"could not re-read the planned batch within {self.options.replay_timeout_s} s: {behind}"
                raise KafkaSourceError("offsets", reason)
            got = c.poll(timeout_ms=self.options.poll_timeout_ms, max_records=5000)
            for tp, records in got.items():
                key = (tp.topic, tp.partition)
                for r in records:
                    if reached[key] <= r.offset < stops[key]:
                        rows.append(_row(r))
                        reached[key] = r.offset + 1
                    elif r.offset >= stops[key]:
                        reached[key] = stops[key]
                if records:
                    self._positions[key] = records[-1].offset + 1
        return iter(rows)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: offsets live in Spark's checkpoint, not in Kafka."""

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802 - Spark's name
        self._target = self._true_ends()

    def stop(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


class KafkaDataSource(DataSource):
    """The ``livectl-kafka`` streaming source (see the module docstring)."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return SCHEMA

    def simpleStreamReader(self, schema: StructType) -> SimpleDataSourceStreamReader:  # noqa: N802 - Spark's name
        return KafkaStreamReader(SourceOptions.parse(self.options))
