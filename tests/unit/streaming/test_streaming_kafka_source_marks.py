"""The source's data-loss check, case by case, against a log held in memory (the consumer's calls the check
makes: assign / seek / pause / resume / poll / highwater / beginning offsets; the one log stands for both the
read's consumer and the check's). The same check against a real broker restart:
``tests/integration/streaming/test_streaming_kafka_source_data_loss.py``."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import pytest
from kafka import TopicPartition

from streaming.source.consumer import UNANSWERED_CHECKS_WARNED, record_mark
from streaming.source.kafka_source import KafkaStreamReader
from streaming.source.options import KafkaSourceError, SourceOptions

pytestmark = pytest.mark.unit

TP = TopicPartition("t", 0)
KEY = ("t", 0)


@dataclass(frozen=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None


class Log:
    """One partition's log as a consumer sees it: ``records`` (offsets may have gaps: transaction markers),
    ``end`` the next offset. A fetch below the log's beginning resets to it (Kafka's out-of-range answer with
    ``auto_offset_reset=earliest``); past the end it returns nothing and tells the high watermark (as tansu answered).
    ``answers=False``: the broker answers nothing at all."""

    def __init__(self, records: list[Record], end: int, *, answers: bool = True) -> None:
        self.records = records
        self.end = end
        self.answers = answers
        self.position = 0
        self.seeks: list[int] = []
        self.hw: int | None = None
        self._assigned: list[Any] = []

    @property
    def begin(self) -> int:
        return self.records[0].offset if self.records else self.end

    def assignment(self) -> set[Any]:
        return set(self._assigned)

    def assign(self, tps: list[Any]) -> None:
        self._assigned = list(tps)

    def seek(self, tp: Any, offset: int) -> None:
        self.position = offset
        self.seeks.append(offset)

    def pause(self, *tps: Any) -> None:
        pass  # one partition: nothing else to fetch while it waits

    def resume(self, *tps: Any) -> None:
        pass

    def poll(self, timeout_ms: int, max_records: int) -> dict[Any, list[Record]]:
        if not self.answers:
            return {}
        self.hw = self.end
        self.position = max(self.position, self.begin)
        got = [r for r in self.records if r.offset >= self.position][:max_records]
        if got:
            self.position = got[-1].offset + 1
        return {TP: got} if got else {}

    def highwater(self, tp: Any) -> int | None:
        return self.hw

    def end_offsets(self, tps: list[Any], timeout_ms: int | None = None) -> dict[Any, int]:
        return dict.fromkeys(tps, self.end)

    def beginning_offsets(self, tps: list[Any]) -> dict[Any, int]:
        return dict.fromkeys(tps, self.begin)


def _records(offsets: range | list[int], stamp: int = 1000, tag: str = "old") -> list[Record]:
    return [Record(o, stamp + o, b"k", f"{tag}-{o}".encode()) for o in offsets]


def _reader(log: Log, fail: bool) -> KafkaStreamReader:
    options = {"bootstrap_servers": "h:1", "topics": "t", "fail_on_data_loss": str(fail).lower()}
    reader = KafkaStreamReader(SourceOptions.parse({**options, "poll_timeout_ms": "50"}))
    reader.kafka.consumer = reader.kafka.checker = log
    return reader


def _check(log: Log, start: int, mark: str | None, *, fail: bool = False) -> tuple[int, dict[Any, str], set[Any]]:
    marks = {KEY: mark} if mark is not None else {}
    starts, kept, unchecked = _reader(log, fail).kafka.check_data_loss([TP], {KEY: start}, marks)
    return starts[KEY], kept, unchecked


OLD = _records(range(5))


def test_the_record_read_last_still_there_is_no_loss() -> None:
    assert _check(Log(OLD, 5), 5, record_mark(OLD[4])) == (5, {KEY: record_mark(OLD[4])}, set())


def test_another_record_at_that_offset_is_a_log_written_again(caplog: pytest.LogCaptureFixture) -> None:
    rewritten = Log(_records(range(8), stamp=9000, tag="new"), 8)
    with pytest.raises(KafkaSourceError, match="reads from offset 5 but the record at offset 4 is not the one it read"):
        _check(rewritten, 5, record_mark(OLD[4]), fail=True)
    with caplog.at_level(logging.WARNING, logger="livectl.kafka_source"):
        assert _check(rewritten, 5, record_mark(OLD[4])) == (0, {}, set())
    assert "fail_on_data_loss=false: reading it again from offset 0" in caplog.text
    # the same offsets without a mark (a checkpoint from before marks): the offsets alone look fine
    assert _check(rewritten, 5, None) == (5, {}, set())


def test_records_already_read_deleted_by_retention_are_no_loss() -> None:
    assert _check(Log(_records(range(5, 9)), 9), 5, record_mark(OLD[4])) == (5, {KEY: record_mark(OLD[4])}, set())


def test_records_deleted_past_the_offset_are_a_loss() -> None:
    with pytest.raises(KafkaSourceError, match="reads from offset 5 but the log now begins at offset 7"):
        _check(Log(_records(range(7, 9)), 9), 5, record_mark(OLD[4]), fail=True)
    assert _check(Log(_records(range(7, 9)), 9), 5, record_mark(OLD[4]))[0] == 7


def test_a_log_that_ends_before_the_offset_is_a_loss() -> None:
    with pytest.raises(KafkaSourceError, match="reads from offset 5 but the log now ends at offset 2"):
        _check(Log(_records(range(2), tag="new"), 2), 5, record_mark(OLD[4]), fail=True)
    # an empty log too, mark or not
    with pytest.raises(KafkaSourceError, match="reads from offset 5 but the log now ends at offset 0"):
        _check(Log([], 0), 5, None, fail=True)


def test_a_transaction_marker_before_the_offset_is_no_loss_without_a_mark() -> None:
    # offset 4 holds no record a consumer gets (a marker); later ones are there
    gap = Log([*OLD[:4], *_records(range(5, 7))], 7)
    assert _check(gap, 5, None) == (5, {}, set())
    # but a record this checkpoint read there, gone, is a loss
    with pytest.raises(KafkaSourceError, match="the record at offset 4, the last it read, is not there"):
        _check(gap, 5, record_mark(OLD[4]), fail=True)


def test_a_broker_that_does_not_answer_leaves_the_partition_unread(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="livectl.kafka_source"):
        assert _check(Log(OLD, 5, answers=False), 5, record_mark(OLD[4]), fail=True) == (
            5,
            {KEY: record_mark(OLD[4])},
            {KEY},
        )
    assert "could not check the offsets of t-0 within 50 ms" in caplog.text


def test_a_broker_that_goes_on_not_answering_is_warned_of(caplog: pytest.LogCaptureFixture) -> None:
    # once is said at info (a process resumed after a pause meets its stale connections first); from the
    # UNANSWERED_CHECKS_WARNED-th check in a row a warning; an answered check starts the count again
    silent = _reader(Log(OLD, 5, answers=False), True)
    answering = Log(OLD, 5)
    levels: list[int] = []
    with caplog.at_level(logging.INFO, logger="livectl.kafka_source"):
        for consumer in [silent.kafka.checker] * UNANSWERED_CHECKS_WARNED + [answering, silent.kafka.checker]:
            silent.kafka.consumer = silent.kafka.checker = consumer
            caplog.clear()
            silent.kafka.check_data_loss([TP], {KEY: 5}, {KEY: record_mark(OLD[4])})
            levels.append(max((r.levelno for r in caplog.records), default=0))
    assert levels == [logging.INFO] * (UNANSWERED_CHECKS_WARNED - 1) + [logging.WARNING, 0, logging.INFO]


def test_a_check_left_unanswered_lets_a_late_answer_count_for_the_next() -> None:
    # the check's consumer seeks only when the offset wanted changed: a fetch still in flight is not thrown away
    log = Log(OLD, 5, answers=False)
    reader = _reader(log, True)
    assert reader.kafka.check_data_loss([TP], {KEY: 5}, {KEY: record_mark(OLD[4])})[2] == {KEY}
    log.answers = True
    assert reader.kafka.check_data_loss([TP], {KEY: 5}, {KEY: record_mark(OLD[4])})[2] == set()
    assert log.seeks == [4]
    # answered, the consumer stands past that record: the next check seeks back to it
    reader.kafka.check_data_loss([TP], {KEY: 5}, {KEY: record_mark(OLD[4])})
    assert log.seeks == [4, 4]


def test_a_partition_at_its_first_offset_needs_no_check() -> None:
    assert _check(Log([], 0, answers=False), 0, None, fail=True) == (0, {}, set())


def test_the_mark_tells_key_value_and_timestamp_apart() -> None:
    base = Record(4, 1000, b"k", b"v")
    marks = {record_mark(r) for r in (base, Record(4, 1001, b"k", b"v"), Record(4, 1000, b"k2", b"v"))}
    assert len(marks | {record_mark(Record(4, 1000, b"k", b"v2")), record_mark(Record(4, 1000, None, b"v"))}) == 5
    assert record_mark(base) == record_mark(Record(9, 1000, b"k", b"v"))
