"""``wait_committed``: the wait for the replay of the micro-batch a previous controller planned. A query
that stops first is no error of the wait's own (the caller reports the query's outcome, which names its
failure); only a replay that goes without progress for the stall timeout is refused — one that progresses may
take longer (issue 41: a takeover's replay of a 210,155-record failover batch at 100k partitions outlasted a
fixed 300 s while it worked)."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

import pytest

from streaming.driver.replay_progress import ReplaySample, planned_records
from streaming.driver.wiring import wait_committed
from streaming.errors import StreamingError
from streaming.runtime.checkpoint_fs import MemoryCheckpointStore, child

pytestmark = pytest.mark.unit


@dataclass
class _Query:
    isActive: bool = True  # noqa: N815 - Spark's name


def _store(*committed: int) -> MemoryCheckpointStore:
    store = MemoryCheckpointStore("memory:/ckpt")
    for b in committed:
        store.write_text(child(store.root, "commits", str(b)), "v1\n{}")
    return store


class _WatchedQuery:
    """An active query that tells when the wait has looked at it: the wait does so after each look at the
    checkpoint that did not find the batch committed."""

    def __init__(self) -> None:
        self.looked = threading.Event()

    @property
    def isActive(self) -> bool:
        self.looked.set()
        return True


def test_a_committed_replay_is_waited_for() -> None:
    store = _store(25)
    query = _WatchedQuery()

    def replay() -> None:
        # the replay commits once the wait has found batch 26 missing: it waits, it did not return at once
        if query.looked.wait(10):
            store.write_text(child(store.root, "commits", "26"), "v1\n{}")

    done = threading.Thread(target=replay, daemon=True)
    done.start()
    try:
        assert wait_committed(store, query, 26, threading.Event(), stall_timeout=10) is True
        assert query.looked.is_set()
    finally:
        done.join(10)


def test_a_query_that_stopped_in_the_replay_is_left_to_the_outcome() -> None:
    assert wait_committed(_store(25), _Query(isActive=False), 26, threading.Event(), stall_timeout=10) is False


def test_a_stop_request_ends_the_wait() -> None:
    stop = threading.Event()
    stop.set()
    assert wait_committed(_store(), _Query(), 26, stop, stall_timeout=10) is False


def test_a_replay_without_progress_is_refused_with_the_batch_and_the_time() -> None:
    with pytest.raises(StreamingError, match=r"micro-batch 26 made no progress for 0.2 s \(replay_stall_timeout_ms"):
        wait_committed(_store(25), _Query(), 26, threading.Event(), stall_timeout=0.2)


def test_a_replay_that_progresses_may_outlast_the_stall_timeout(caplog: pytest.LogCaptureFixture) -> None:
    """Progress every ~0.1 s for 1.5 s against a stall timeout of 0.5 s: waited for, and its progress logged."""
    store = _store(25)
    ticks = [0]
    began = time.monotonic()

    def progress() -> ReplaySample:
        if time.monotonic() - began > 1.5:
            store.write_text(child(store.root, "commits", "26"), "v1\n{}")
        ticks[0] += 1
        return ReplaySample((ticks[0],), f"step {ticks[0]}")

    with caplog.at_level(logging.INFO, logger="livectl.app"):
        assert wait_committed(
            store, _Query(), 26, threading.Event(), 0.5, progress=progress, report_every=0.3, sample_every=0.05
        )
    assert time.monotonic() - began > 1.5
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("replaying micro-batch 26")]
    assert said and all("last progress 0 s ago; step " in m for m in said), said


def test_progress_that_stops_is_refused_after_the_stall_timeout_naming_the_last_sample() -> None:
    began = time.monotonic()

    def progress() -> ReplaySample:
        # progress for 0.6 s, then none
        moved = min(time.monotonic() - began, 0.6)
        return ReplaySample((int(moved * 10),), "Spark: 1 jobs, 3 of 4 tasks done, 1 running")

    with pytest.raises(StreamingError, match=r"no progress for 0.4 s .*; Spark: 1 jobs, 3 of 4 tasks done, 1 running"):
        wait_committed(_store(25), _Query(), 26, threading.Event(), 0.4, progress=progress, sample_every=0.05)
    assert time.monotonic() - began >= 1.0


def test_the_planned_records_come_from_the_offset_log() -> None:
    store = _store(24)
    meta = '{"batchWatermarkMs":0}'
    store.write_text(
        child(store.root, "offsets", "25"),
        f'v1\n{meta}\n{{"a": {{"0": 71}}, "e": {{"0": 40074}}, "@last": {{"e": {{"0": "m"}}}}}}',
    )
    store.write_text(
        child(store.root, "offsets", "26"),
        f'v1\n{meta}\n{{"a": {{"0": 71}}, "e": {{"0": 250229}}, "@last": {{"e": {{"0": "n"}}}}}}',
    )
    assert planned_records(store, 26) == "210155 records (e-0 40074→250229)"
    assert planned_records(store, 25) == ""  # no batch before it in the log
    # a takeover's barrier batch: its reference alone, handed out ahead of the records before it
    ahead = '"@ahead": {"topic": "e", "partition": 0, "offset": 250400, "mark": "r"}'
    store.write_text(
        child(store.root, "offsets", "27"),
        f'v1\n{meta}\n{{"a": {{"0": 71}}, "e": {{"0": 250229}}, "@last": {{"e": {{"0": "n"}}}}, {ahead}}}',
    )
    assert planned_records(store, 27) == "1 record (the failover reference at e-0 250400)"


def test_the_stall_timeout_setting_is_at_least_one_ms() -> None:
    from streaming.settings import Settings, SettingsError

    assert Settings.load(overrides=["replay_stall_timeout_ms=1500"]).replay_stall_timeout_ms == 1500
    with pytest.raises(SettingsError) as e:
        Settings.load(overrides=["replay_stall_timeout_ms=0"])
    assert e.value.key == "replay_stall_timeout_ms" and "at least 1" in e.value.reason
