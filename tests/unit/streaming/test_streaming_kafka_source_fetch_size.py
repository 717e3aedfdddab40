"""The read's fetch size (:mod:`streaming.source.fetch_size`), rule by rule, on given times (no clock): back to the
least a third of the request timeout after a poll first brought nothing while records waited, four times bigger
after a fetch size's worth came within a 24th of it. Over a real slow link:
``tests/integration/streaming/test_streaming_kafka_source_slow_link.py``."""

from __future__ import annotations

import pytest

from streaming.source.fetch_size import READ_FETCH_MAX_BYTES, READ_FETCH_MIN_BYTES, FetchSize

pytestmark = pytest.mark.unit

#: a 30 s request timeout: stalled 10 s after the first empty poll while records waited, grown when a size's worth
#: came within 1.25 s
TIMEOUT_MS = 30_000


def _empty_polls(f: FetchSize, seconds: float, waiting: bool, at: float = 0.0, each: float = 0.5) -> list[bool]:
    out = []
    t = at
    while t < at + seconds:
        out.append(f.polled(0, t, t + each, waiting))
        t += each
    return out


def test_the_size_falls_back_to_the_least_after_a_third_of_the_timeout_of_polls_bringing_nothing() -> None:
    f = FetchSize(TIMEOUT_MS)
    assert f.bytes == READ_FETCH_MAX_BYTES
    changed = _empty_polls(f, 10.0, waiting=True)
    assert changed[-1] and not any(changed[:-1]) and f.bytes == READ_FETCH_MIN_BYTES and f.stalls == 1
    # at the least already: it stays there, however long nothing comes
    assert not any(_empty_polls(f, 30.0, waiting=True, at=10.0)) and f.stalls == 1


def test_only_a_wait_while_records_wait_counts_and_a_record_or_nothing_waiting_ends_it() -> None:
    f = FetchSize(TIMEOUT_MS)
    assert not any(_empty_polls(f, 9.5, waiting=True))
    # nothing known to wait (the read is at the high watermark): an idle read, not a stall
    assert not f.polled(0, 9.5, 30.0, waiting=False)
    assert not any(_empty_polls(f, 9.5, waiting=True, at=30.0))
    assert not f.polled(100, 39.5, 39.6, waiting=True)  # a record came
    assert not any(_empty_polls(f, 9.5, waiting=True, at=40.0))
    assert f.bytes == READ_FETCH_MAX_BYTES and f.stalls == 0


def test_the_time_between_polls_counts() -> None:
    # reads apart (the reader's check of its start, Spark's loop): the fetch in flight is late all the same
    f = FetchSize(TIMEOUT_MS)
    assert not f.polled(0, 0.0, 0.5, True)
    assert not f.polled(0, 9.0, 9.5, True)
    assert f.polled(0, 10.0, 10.5, True) and f.bytes == READ_FETCH_MIN_BYTES


def test_the_size_grows_back_to_the_most_while_answers_come_quickly() -> None:
    f = FetchSize(TIMEOUT_MS, start=READ_FETCH_MIN_BYTES)
    t, sizes = 0.0, []
    while f.bytes < READ_FETCH_MAX_BYTES:
        # a size's worth in two polls, 0.1 s apart
        assert not f.polled(f.bytes // 2, t, t + 0.05, waiting=False)
        assert f.polled(f.bytes - f.bytes // 2, t + 0.05, t + 0.1, waiting=False)
        sizes.append(f.bytes)
        t += 0.1
    assert sizes == [64 * 1024, 256 * 1024, 1024 * 1024] and f.grown == 3
    assert not f.polled(READ_FETCH_MAX_BYTES, t, t + 0.1, waiting=False)  # never above the most


def test_answers_that_come_slowly_or_apart_do_not_grow_it() -> None:
    f = FetchSize(TIMEOUT_MS, start=READ_FETCH_MIN_BYTES)
    # a size's worth in 1.5 s: more than a 24th of the timeout
    assert not f.polled(READ_FETCH_MIN_BYTES // 2, 0.0, 0.75, waiting=False)
    assert not f.polled(READ_FETCH_MIN_BYTES // 2, 0.75, 1.5, waiting=False)
    # two halves, quick, but an empty poll between them: not one flow
    assert not f.polled(READ_FETCH_MIN_BYTES // 2, 10.0, 10.1, waiting=False)
    assert not f.polled(0, 10.1, 10.2, waiting=False)
    assert not f.polled(READ_FETCH_MIN_BYTES // 2, 10.2, 10.3, waiting=False)
    assert f.bytes == READ_FETCH_MIN_BYTES and f.grown == 0


def test_the_rules_scale_with_the_request_timeout() -> None:
    f = FetchSize(10_000)
    assert f.stalled_s == pytest.approx(10 / 3) and f.grow_s == pytest.approx(10 / 24)
    assert _empty_polls(f, 3.5, waiting=True)[-1] and f.bytes == READ_FETCH_MIN_BYTES
