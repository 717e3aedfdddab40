"""The replay wait against a real Spark streaming query replaying a planned micro-batch (issue 41 b).

A query on a real checkpoint plans micro-batch 1 and fails in it (planned, not committed: what a killed
controller leaves); a second run of the query on that checkpoint replays it, and the controller's wait
(:func:`streaming.driver.wiring.wait_committed` with :class:`streaming.driver.replay_progress.ReplayWatch`, as
``livectl run`` calls it) watches the replay through Spark's status tracker and the dispatcher's
:class:`streaming.query.dispatch.Activity`. A replay that works throughout is waited for past the stall timeout;
one that stops working is refused once the stall timeout has passed without progress.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from streaming.driver.replay_progress import ReplayWatch
from streaming.driver.wiring import wait_committed
from streaming.errors import StreamingError
from streaming.query.dispatch import Activity
from streaming.runtime.checkpoint_fs import FileSystemCheckpointStore, batch_ids, child

pytestmark = pytest.mark.spark

STALL_S = 3.0


class _FailedError(Exception):
    pass


def _start(spark: Any, src: Path, ckpt: Path, handle: Any) -> Any:
    frame = spark.readStream.schema("n long").option("maxFilesPerTrigger", 1).json(str(src))
    return frame.writeStream.option("checkpointLocation", str(ckpt)).foreachBatch(handle).start()


def _planned_not_committed(spark: Any, tmp_path: Path) -> tuple[Path, Path, FileSystemCheckpointStore]:
    """A checkpoint whose micro-batch 0 is committed and micro-batch 1 planned but not committed."""
    src, ckpt = tmp_path / "in", tmp_path / "checkpoint"
    src.mkdir()
    for i in range(2):
        (src / f"{i}.json").write_text(f'{{"n": {i}}}\n')

    def first_run(frame: Any, batch_id: int) -> None:
        if batch_id == 1:
            raise _FailedError("the controller dies in micro-batch 1")

    query = _start(spark, src, ckpt, first_run)
    with pytest.raises(Exception, match="the controller dies in micro-batch 1"):
        query.awaitTermination(120)
    store = FileSystemCheckpointStore.for_spark(spark, str(ckpt))
    assert batch_ids(store, child(store.root, "offsets")) == [0, 1]
    assert batch_ids(store, child(store.root, "commits")) == [0]
    return src, ckpt, store


def _sleeping_tasks(spark: Any, tasks: int, ms: int) -> None:
    """A Spark job of ``tasks`` tasks, each ``ms`` long (in the JVM: no Python worker to wait for)."""
    spark.range(0, tasks, 1, tasks).selectExpr(
        f"reflect('java.lang.Thread', 'sleep', cast({ms} as bigint)) AS r"
    ).collect()


def test_a_replay_that_works_throughout_outlasts_the_stall_timeout(
    spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    src, ckpt, store = _planned_not_committed(spark, tmp_path)
    activity = Activity()

    def replay(frame: Any, batch_id: int) -> None:
        if batch_id != 1:
            return
        activity.note(batch_id, "the buckets' step (Spark)")
        frame.collect()
        # one job of 40 tasks of 0.4 s on 2 cores: ~8 s, with no step of the driver's in it (only Spark's
        # tasks show the progress), a task done every ~0.2 s
        _sleeping_tasks(spark, 40, 400)
        for step in range(3):
            # then steps of the driver's alone, one every 1 s
            activity.note(batch_id, f"writes, part {step + 1}")
            time.sleep(1.0)

    query = _start(spark, src, ckpt, replay)
    began = time.monotonic()
    try:
        with caplog.at_level(logging.INFO, logger="livectl.app"):
            watch = ReplayWatch(spark, query, 1, activity)
            assert wait_committed(store, query, 1, threading.Event(), STALL_S, progress=watch, report_every=1.0)
        took = time.monotonic() - began
    finally:
        query.stop()
    assert took > 2 * STALL_S, f"the replay took {took:.1f} s: not longer than the stall timeout in all"
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("replaying micro-batch 1")]
    assert said, "no progress line"
    # Spark's status tracker saw the run's jobs and their tasks done (the job group is the query's run id)
    assert any(re.search(r"Spark: [1-9]\d* jobs, [1-9]\d* of \d+ tasks done", m) for m in said), said
    assert any("driver: writes, part" in m for m in said), said


def test_a_replay_that_stops_working_is_refused_after_the_stall_timeout(spark: Any, tmp_path: Path) -> None:
    src, ckpt, store = _planned_not_committed(spark, tmp_path)
    activity = Activity()
    release = threading.Event()

    def replay(frame: Any, batch_id: int) -> None:
        if batch_id != 1:
            return
        activity.note(batch_id, "the buckets' step (Spark)")
        frame.collect()
        _sleeping_tasks(spark, 4, 300)
        activity.note(batch_id, "broker requests")
        release.wait(60)  # a step that never ends, as a hung write

    query = _start(spark, src, ckpt, replay)
    began = time.monotonic()
    try:
        watch = ReplayWatch(spark, query, 1, activity)
        with pytest.raises(StreamingError) as refused:
            wait_committed(store, query, 1, threading.Event(), STALL_S, progress=watch, report_every=1.0)
        took = time.monotonic() - began
    finally:
        release.set()
        query.stop()
    message = str(refused.value)
    assert message.startswith(
        f"the replay of micro-batch 1 made no progress for {STALL_S:g} s (replay_stall_timeout_ms;"
    )
    assert "driver: broker requests" in message, message
    assert STALL_S < took < STALL_S + 60
