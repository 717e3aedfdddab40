"""How the replay of the micro-batch a previous controller planned is going: what the driver can see of it
while it runs, for the wait that bounds the time without progress (``replay_stall_timeout_ms``,
:func:`streaming.driver.wiring.wait_committed`) and for its log lines.

A replay is one micro-batch (Spark re-runs exactly the offsets the previous controller planned), so no offset
moves until it commits. What moves while it is worked on: the Spark jobs of the query's run (Spark's job group
is the run id) — a job begun, a task of one of their stages done — and the driver's steps of the batch
(:class:`streaming.query.dispatch.Activity`: ZooKeeper writes, broker requests, admin results, the state-change
log) and, within them, the sinks' counts (ZooKeeper transactions committed, messages the broker acknowledged).
On Spark's side the finest grain is a task: a bucket's stateful task shows no progress until it is done.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from streaming.query.dispatch import Activity
from streaming.runtime.checkpoint_fs import CheckpointError, CheckpointStore, child
from streaming.source.options import Ahead, ahead_of

log = logging.getLogger("livectl.app")


@dataclass(frozen=True)
class ReplaySample:
    """One look at a replay: ``marks`` change whenever work was done; ``said`` is what the log shows."""

    marks: tuple[int, ...]
    said: str


def planned_records(store: CheckpointStore, batch_id: int) -> str:
    """The records of planned micro-batch ``batch_id`` as its offset log says them (its end offsets against
    the previous batch's, per topic-partition), e.g. ``210155 records (t-0 40074→250229)``; "" when the log
    cannot say (no earlier batch, a form it does not know)."""
    try:
        end_sources = _sources(store, batch_id)
        start_sources = _sources(store, batch_id - 1) if batch_id > 0 else None
        if end_sources is None or start_sources is None:
            return ""
        end, start = _positions(end_sources), _positions(start_sources)
        handed, before = _ahead(end_sources), _ahead(start_sources)
    except (CheckpointError, ValueError, OSError, KeyError, TypeError):
        return ""
    if not end:
        return ""
    moved = {tp: (start.get(tp, 0), o) for tp, o in sorted(end.items()) if o != start.get(tp, 0)}
    total = sum(b - a for a, b in moved.values())
    parts = [f"{t}-{p} {a}→{b}" for (t, p), (a, b) in moved.items()]
    if handed is not None and handed != before:
        # the failover barrier's batch: the reference alone, ahead of the records before it
        total += 1
        parts.append(f"the failover reference at {handed.topic}-{handed.partition} {handed.offset}")
    return f"{total} record{'' if total == 1 else 's'} ({', '.join(parts)})" if parts else "no records"


def _sources(store: CheckpointStore, batch_id: int) -> list[dict[str, Any]] | None:
    """The sources' offsets of offset-log entry ``batch_id``; ``None`` when it is not there."""
    path = child(store.root, "offsets", str(batch_id))
    if not store.exists(path):
        return None
    # "v1", the batch's metadata, then one line per source
    return [s for s in map(json.loads, store.read_text(path).splitlines()[2:]) if isinstance(s, dict)]


def _positions(sources: list[dict[str, Any]]) -> dict[tuple[str, int], int]:
    """(topic, partition) → offset of every source (Spark's Kafka source's form and livectl's source's, whose
    ``@`` entries are left out; other sources' offsets are not read)."""
    out: dict[tuple[str, int], int] = {}
    for source in sources:
        for topic, parts in source.items():
            if topic.startswith("@") or not isinstance(parts, dict):
                continue
            for p, o in parts.items():
                if isinstance(o, int):
                    out[(topic, int(p))] = o
    return out


def _ahead(sources: list[dict[str, Any]]) -> Ahead | None:
    """The record livectl's source names as handed out ahead (:data:`streaming.source.options.AHEAD`), if any."""
    return next((a for a in map(ahead_of, sources) if a is not None), None)


class ReplayWatch:
    """Samples the replay of ``batch_id`` by ``query``: Spark's status tracker for the jobs of the query's
    run, the dispatcher's :class:`Activity` and, when given, ``sinks`` whose counts grow as they write
    (the ZooKeeper sink's ``transactions_committed``, the request sink's ``messages_acked``)."""

    def __init__(self, spark: Any, query: Any, batch_id: int, activity: Activity, sinks: Sequence[Any] = ()) -> None:
        self.tracker = spark.sparkContext.statusTracker()
        self.group = str(query.runId)
        self.batch_id = batch_id
        self.activity = activity
        self.sinks = tuple(sinks)

    def _written(self) -> tuple[int, int]:
        """(ZooKeeper transactions committed, messages acknowledged) by the sinks so far."""
        txns = sum(int(getattr(s, "transactions_committed", 0)) for s in self.sinks)
        acked = sum(int(getattr(s, "messages_acked", 0)) for s in self.sinks)
        return txns, acked

    def __call__(self) -> ReplaySample:
        jobs = self.tracker.getJobIdsForGroup(self.group)
        done = failed = running = tasks = 0
        for job in jobs:
            info = self.tracker.getJobInfo(job)
            for stage in info.stageIds if info is not None else ():
                s = self.tracker.getStageInfo(stage)
                if s is None:
                    continue
                tasks += s.numTasks
                done += s.numCompletedTasks
                failed += s.numFailedTasks
                running += s.numActiveTasks
        steps, batch, step = self.activity.seen()
        mine = batch == self.batch_id
        txns, acked = self._written()
        said = f"Spark: {len(jobs)} jobs, {done} of {tasks} tasks done, {running} running"
        if failed:
            said += f", {failed} failed"
        if mine:
            said += f"; driver: {step} ({txns} ZooKeeper transactions committed, {acked} messages sent so far)"
        return ReplaySample((len(jobs), done, failed, steps if mine else 0, txns, acked), said)
