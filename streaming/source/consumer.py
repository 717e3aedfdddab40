"""The ``livectl-kafka`` source's consumer (:mod:`streaming.source.kafka_source`): the partitions of its topics,
their log start and end offsets (the ends read to the true end), where the consumer stands, and the data-loss
check before each read ("Data loss" in :mod:`streaming.source.kafka_source`). Two kafka-python consumers, the
read's (its fetch size follows what comes back: :mod:`streaming.source.fetch_size`) and the check's (small
fetches, :data:`CHECK_FETCH_BYTES`), no consumer group (``assign`` + ``seek``), nothing committed to Kafka."""

from __future__ import annotations

import logging
import time
import zlib
from collections.abc import Collection, Mapping
from typing import Any

from sinks.security import KafkaSecurity
from streaming.source.fetch_size import FetchSize
from streaming.source.options import KafkaSourceError, Marks, Positions, SourceOptions

log = logging.getLogger("livectl.kafka_source")

#: the consumer's ``fetch_max_wait_ms`` (at most the poll timeout)
FETCH_MAX_WAIT_MS = 50

#: how long each poll of the read to the true ends waits (:meth:`SourceConsumer.true_ends`): an empty
#: answer comes after :data:`FETCH_MAX_WAIT_MS`, so this sees one
ENDS_POLL_MS = 100


#: the largest answer per partition the data-loss check's consumer asks for (its ``max_partition_fetch_bytes``): a
#: fetch always returns at least the first whole record batch (KIP-74), so the record the check needs comes however
#: small this is; the read's consumer asks for up to 1 MiB (:mod:`streaming.source.fetch_size`), the whole backlog
#: behind the start, which over a slow link took longer than the check's ``poll_timeout_ms`` and even than the
#: request timeout (30 s) to arrive
CHECK_FETCH_BYTES = 4 * 1024

#: how long a partition the broker answered without an offset is asked again before it is an error
OFFSETS_RETRY_S = 30.0


def record_mark(r: Any) -> str:
    """What tells a record from another written at the same offset of a log written again: its timestamp
    and a checksum of its key and value (``"<timestamp>-<crc32>"``)."""
    crc = zlib.crc32(r.value or b"", zlib.crc32(r.key or b""))
    return f"{r.timestamp}-{crc:08x}"


#: data-loss checks in a row left unanswered by the broker before the source says so as a warning (info before)
UNANSWERED_CHECKS_WARNED = 3


def poll_until(consumer: Any, deadline: float, timeout_ms: int, max_records: int, retry_ms: int) -> Any:
    """``consumer.poll(timeout_ms, max_records)``, polled again (``retry_ms`` each) while it brings nothing and
    ``time.monotonic()`` has not reached ``deadline``: the first read's wait for a record."""
    got = consumer.poll(timeout_ms=timeout_ms, max_records=max_records)
    while not got and time.monotonic() < deadline:
        got = consumer.poll(timeout_ms=retry_ms, max_records=max_records)
    return got


class SourceConsumer:
    """The consumer of one reader (``options``); ``consumer``: the kafka-python consumer, made on first use
    (:meth:`client`) unless one is given."""

    def __init__(self, options: SourceOptions, consumer: Any = None, checker: Any = None) -> None:
        self.options = options
        self.consumer: Any = consumer
        #: the data-loss check's own consumer (:meth:`check_client`), made on first use unless one is given
        self.checker: Any = checker
        #: where the consumer stands per (topic, partition), to avoid needless seeks
        self.positions: dict[tuple[str, int], int] = {}
        #: the same for the check's consumer
        self.check_positions: dict[tuple[str, int], int] = {}
        #: data-loss checks in a row that the broker did not answer in time (see :meth:`check_data_loss`)
        self._unanswered_checks = 0
        #: how much the read's consumer asks for per fetch (:mod:`streaming.source.fetch_size`)
        self.fetch = FetchSize(options.request_timeout_ms)

    def _new_consumer(self, **config: Any) -> Any:
        from kafka import KafkaConsumer

        return KafkaConsumer(
            **KafkaSecurity(self.options.security).client_kwargs(),
            bootstrap_servers=self.options.bootstrap_servers,
            enable_auto_commit=False,
            group_id=None,
            auto_offset_reset="earliest",
            request_timeout_ms=self.options.request_timeout_ms,
            # a consumer made while no broker answers (the fetch size changed during a broker restart) gives up
            # on its first connection as a request would
            bootstrap_timeout_ms=self.options.request_timeout_ms,
            # the Java client's default: kafka-python's (30 s) left a restarted broker unread for half a minute
            reconnect_backoff_max_ms=1000,
            **config,
        )

    def client(self) -> Any:
        if self.consumer is None:
            self.consumer = self._new_consumer(
                # how soon a record is seen while a read waits: tansu answered a parked fetch only when its
                # wait was over, whatever arrived meanwhile (Kafka answers at once); shorter costs the idle
                # controller CPU in fetches (docs/decisions/2026-11-25-trigger-zero.md)
                fetch_max_wait_ms=min(self.options.poll_timeout_ms, FETCH_MAX_WAIT_MS),
                max_poll_records=min(self.options.max_records_per_batch, 5000),
                # per partition and for the whole answer, which must come within the request timeout
                max_partition_fetch_bytes=self.fetch.bytes,
                fetch_max_bytes=self.fetch.bytes,
            )
        return self.consumer

    def poll(self, timeout_ms: int, max_records: int) -> Any:
        """The read's consumer's ``poll``, and where it now stands per partition (:attr:`positions`); the fetch
        size follows what came (:mod:`streaming.source.fetch_size`): when it changes, the consumer is made again
        with the new size, assigned the same partitions at the same positions."""
        c = self.client()
        began = time.monotonic()
        got = c.poll(timeout_ms=timeout_ms, max_records=max_records)
        ended = time.monotonic()
        size = 0
        for tp, records in got.items():
            if records:
                self.positions[(tp.topic, tp.partition)] = records[-1].offset + 1
            size += sum(len(r.key or b"") + len(r.value or b"") for r in records)
        if self.fetch.polled(size, began, ended, not got and self._records_wait()):
            log.info(
                "the read's fetch size is now %d bytes (%s); its consumer is made again",
                self.fetch.bytes,
                "records came quickly" if got else "no records came while records waited",
            )
            tps, paused = list(c.assignment()), set(c.paused())
            starts = dict(self.positions)
            c.close()
            self.consumer = None
            self.positions = {}
            if tps:
                self.assign(tps, starts, paused)
        return got

    def _records_wait(self) -> bool:
        """Whether records wait that the read's consumer has not brought: a high watermark, from its own last
        answers or the data-loss check's, past where it stands, or no answer at all since it was assigned; on a
        paused partition too (one whose check the broker has not answered yet: its fetch is still asked)."""
        c = self.consumer
        if c is None:
            return False
        checker = self.checker
        checked = set(checker.assignment()) if checker is not None else set()
        for tp in c.assignment():
            at = self.positions.get((tp.topic, tp.partition))
            hw = c.highwater(tp)
            if hw is None or at is None:
                return True
            if tp in checked:
                hw = max(hw, checker.highwater(tp) or hw)
            if hw > at:
                return True
        return False

    def check_client(self) -> Any:
        """The consumer of the data-loss check, apart from the read's (:meth:`client`): its fetches are small
        (:data:`CHECK_FETCH_BYTES`), and the read's consumer is no longer moved back one offset and forth
        again around each read, which threw away its fetch in flight. A fetch at the end of a log is answered
        at once (``fetch_max_wait_ms=0``): the fetch it sends on its own once the check has its answer then
        holds up no later check."""
        if self.checker is None:
            self.checker = self._new_consumer(
                fetch_max_wait_ms=0, max_partition_fetch_bytes=CHECK_FETCH_BYTES, max_poll_records=5000
            )
        return self.checker

    def partitions(self) -> list[Any]:
        from kafka import TopicPartition

        c = self.client()
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

    def assign(self, tps: list[Any], starts: Mapping[tuple[str, int], int], paused: Collection[Any] = ()) -> None:
        """The read's consumer on ``tps`` at ``starts``, those of ``paused`` paused (their records not handed
        out, a fetch answer of theirs in flight kept for when they are resumed) and the others resumed."""
        c = self.client()
        if set(c.assignment()) != set(tps):
            c.assign(tps)
            self.positions = {}
        for tp in tps:
            want = starts[(tp.topic, tp.partition)]
            if self.positions.get((tp.topic, tp.partition)) != want:
                c.seek(tp, want)
                self.positions[(tp.topic, tp.partition)] = want
        c.resume(*[tp for tp in tps if tp not in paused])
        if paused:
            c.pause(*paused)

    def list_offsets(self, which: str, tps: list[Any]) -> dict[Any, int]:
        """The log start (``which="beginning"``) or end offsets of ``tps``. kafka-python leaves out of its
        answer a partition the broker answered without an offset and no error, then fails looking it up
        (``KeyError``; seen with tansu, the earlier local broker, for a topic that exists): such partitions
        are asked again, one at a time, for up to :data:`OFFSETS_RETRY_S` — a transient answer must not stop
        the controller's query — and only then is it an error naming the partitions."""
        c = self.client()
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

    def true_ends(self) -> tuple[Positions, Marks]:
        """The next offset to be written per partition, read to the real end (tansu under-reported it), and the
        marks of the last records."""
        tps = self.partitions()
        reported = self.list_offsets("end", tps)
        self.assign(tps, {(tp.topic, tp.partition): reported[tp] for tp in tps})
        ends = {(tp.topic, tp.partition): reported[tp] for tp in tps}
        marks: Marks = {}
        while True:
            got = self.poll(timeout_ms=min(self.options.poll_timeout_ms, ENDS_POLL_MS), max_records=5000)
            if not got:
                break
            for tp, records in got.items():
                key = (tp.topic, tp.partition)
                if records and records[-1].offset + 1 >= ends[key]:
                    ends[key] = records[-1].offset + 1
                    marks[key] = record_mark(records[-1])
                if records:
                    self.positions[key] = records[-1].offset + 1
        return ends, marks

    def behind(self, tps: list[Any]) -> bool:
        """Whether the broker's last fetch answers put a partition's high watermark past where the consumer
        stands (records it has that this read has not had yet). Fetch answers carry the true high
        watermark, unlike tansu's ListOffsets (the earlier local broker)."""
        c = self.client()
        for tp in tps:
            hw = c.highwater(tp)
            if hw is not None and hw > self.positions.get((tp.topic, tp.partition), hw):
                return True
        return False

    def with_beginnings(self, positions: Positions, tps: list[Any]) -> Positions:
        missing = [tp for tp in tps if (tp.topic, tp.partition) not in positions]
        begins = self.list_offsets("beginning", missing) if missing else {}
        return {
            (tp.topic, tp.partition): begins[tp] if tp in begins else positions[(tp.topic, tp.partition)] for tp in tps
        }

    def _records_before(self, todo: list[Any], starts: Positions) -> dict[tuple[str, int], Any]:
        """Per partition of ``todo``, the first record at or after the offset just before its start — that
        record itself when the log holds it — or ``None`` when the log has none there (it ends before it); a
        partition the broker did not answer for within ``poll_timeout_ms`` is left out. One fetch answers a log
        that holds the record at once. On the check's own consumer (:meth:`check_client`), which keeps ``todo``
        assigned and seeks only when the offset wanted changed: an answer that comes after ``poll_timeout_ms``
        counts for the next check of the same offset. A partition answered is paused until the next check, so
        that the partitions still waited for are the only ones fetched."""
        c = self.check_client()
        wanted = {(tp.topic, tp.partition): starts[(tp.topic, tp.partition)] - 1 for tp in todo}
        if set(c.assignment()) != set(todo):
            c.assign(todo)
            self.check_positions = {}
        c.resume(*todo)
        for tp in todo:
            key = (tp.topic, tp.partition)
            if self.check_positions.get(key) != wanted[key]:
                c.seek(tp, wanted[key])
                self.check_positions[key] = wanted[key]
        pending = {(tp.topic, tp.partition): tp for tp in todo}
        out: dict[tuple[str, int], Any] = {}
        #: partitions whose high watermark said the log ends before the offset wanted but a ListOffsets did not
        going_on: set[tuple[str, int]] = set()
        deadline = time.monotonic() + self.options.poll_timeout_ms / 1000
        while pending:
            left_ms = int((deadline - time.monotonic()) * 1000)
            if left_ms <= 0:
                break
            got = c.poll(timeout_ms=min(left_ms, ENDS_POLL_MS), max_records=5000)
            for tp, records in got.items():
                key = (tp.topic, tp.partition)
                if records:
                    self.check_positions[key] = records[-1].offset + 1
                if key not in pending or not records:
                    continue
                # only earlier records: the consumer was moved to the log's beginning (Kafka answers a fetch
                # out of the log's range with an error, and the consumer resets to the earliest offset)
                at = [r for r in records if r.offset >= wanted[key]]
                out[key] = at[0] if at else None
                del pending[key]
                c.pause(tp)
            for key, tp in list(pending.items()):
                # a fetch past the end answered with nothing (tansu's way): the high watermark says the log ends
                # earlier — if it is not from an old answer (below)
                hw = c.highwater(tp)
                if (
                    hw is not None
                    and hw <= wanted[key]
                    and key not in going_on
                    and self._log_ends_by(c, tp, wanted[key])
                ):
                    out[key] = None
                    del pending[key]
                    c.pause(tp)
                elif hw is not None and hw <= wanted[key]:
                    going_on.add(key)
        return out

    def _log_ends_by(self, c: Any, tp: Any, offset: int) -> bool:
        """Whether ``tp``'s log ends at or before ``offset`` by a ListOffsets asked now. A high watermark is from
        the last fetch answer, which may be old: a paused partition's answer is kept until it is resumed, so the
        answer to the fetch sent after the last check, at the offset after its record, may come only at this
        check, from before the read's record there was written. Over a slow link that said "the log now ends at
        offset 4" of a log of 6 records, a data loss that was not there, before the answer at the offset wanted
        came. No answer in time: not ended (the check goes on waiting)."""
        from kafka.errors import KafkaError

        try:
            end = c.end_offsets([tp], timeout_ms=self.options.poll_timeout_ms).get(tp)
        except (KafkaError, KeyError):
            return False
        return end is not None and end <= offset

    def check_data_loss(
        self, tps: list[Any], starts: Positions, marks: Marks
    ) -> tuple[Positions, Marks, set[tuple[str, int]]]:
        """``starts`` and ``marks`` with lost offsets handled (see "Data loss" in the module docstring), and
        the partitions that could not be checked this time (the broker did not answer: they are not read)."""
        # checked on every read, not remembered: a broker that restarts empty makes any offset lost again
        todo = [tp for tp in tps if starts[(tp.topic, tp.partition)] > 0]
        if not todo:
            return starts, marks, set()
        before = self._records_before(todo, starts)
        found = {
            (tp.topic, tp.partition)
            for tp in todo
            if before.get((tp.topic, tp.partition)) is not None
            and before[(tp.topic, tp.partition)].offset == starts[(tp.topic, tp.partition)] - 1
        }
        absent = [tp for tp in todo if (tp.topic, tp.partition) in before and (tp.topic, tp.partition) not in found]
        begins = self.list_offsets("beginning", absent) if absent else {}
        c = self.check_client()
        lost: dict[Any, str] = {}
        for tp in todo:
            key = (tp.topic, tp.partition)
            if key not in before:
                continue
            start, r = starts[key], before[key]
            if key in found:
                if key not in marks or record_mark(r) == marks[key]:
                    continue
                lost[tp] = f"the record at offset {start - 1} is not the one it read there (the log was written again)"
            elif begins[tp] == start:
                continue  # the records before it were deleted (retention): none it has not read
            elif begins[tp] > start:
                lost[tp] = f"the log now begins at offset {begins[tp]}"
            elif r is not None and key not in marks:
                # the log holds later records but gives none at that offset (a transaction marker): nothing
                # read there to compare, and the offset is inside the log
                continue
            elif r is not None:
                lost[tp] = (
                    f"the record at offset {start - 1}, the last it read, is not there (the log was written again)"
                )
            else:
                hw = c.highwater(tp)
                lost[tp] = f"the log now ends at offset {hw if hw is not None and hw < start else start - 1}"
        unchecked = {(tp.topic, tp.partition) for tp in todo} - set(before)
        self._unanswered_checks = self._unanswered_checks + 1 if unchecked else 0
        if unchecked:
            # once is a slow answer (a process resumed after a pause meets its stale connections first: a
            # controller paused past a takeover then exits as fenced, and says only that); a warning when it
            # goes on, since those partitions are not read meanwhile
            log.log(
                logging.WARNING if self._unanswered_checks >= UNANSWERED_CHECKS_WARNED else logging.INFO,
                "could not check the offsets of %s within %d ms (the broker did not answer; %d time(s) in a row):"
                " not read this time",
                ", ".join(f"{t}-{p}" for t, p in sorted(unchecked)),
                self.options.poll_timeout_ms,
                self._unanswered_checks,
            )
        if not lost:
            return starts, marks, unchecked
        out, kept = dict(starts), dict(marks)
        unlisted = [tp for tp in lost if tp not in begins]
        firsts = self.list_offsets("beginning", unlisted) if unlisted else {}
        for tp, reason in lost.items():
            key = (tp.topic, tp.partition)
            what = (
                f"{tp.topic}-{tp.partition}: the checkpoint reads from offset {starts[key]} but {reason}"
                " (the broker lost data: restarted without storage, the topic was deleted and created again,"
                " or records were deleted)"
            )
            if self.options.fail_on_data_loss:
                raise KafkaSourceError(
                    "fail_on_data_loss",
                    f"data loss on {what}; set fail_on_data_loss=false to go on from the earliest offset"
                    " (the records in between are lost), or start on a new checkpoint_dir",
                )
            begin = begins[tp] if tp in begins else firsts[tp]
            log.warning("data loss on %s; fail_on_data_loss=false: reading it again from offset %d", what, begin)
            out[key] = begin
            kept.pop(key, None)
        return out, kept, unchecked

    def close(self) -> None:
        if self.consumer is not None:
            self.consumer.close()
            self.consumer = None
        if self.checker is not None:
            self.checker.close()
            self.checker = None
