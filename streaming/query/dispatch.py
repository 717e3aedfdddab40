"""``foreachBatch``: carry out one micro-batch of decisions, exactly once, in Kafka's order.

For micro-batch ``B`` (rows of :data:`streaming.query.stateful.OUTPUT_SCHEMA`, sorted by bucket and sequence):

1. ZooKeeper writes through the ZooKeeper sink — fenced multi-ops, compare-and-set, idempotent by ``B``.
   A fencing failure (another controller was elected) marks this controller fenced and raises: the query
   stops without writing anything more;
2. broker requests through the request sink to ``livectl.requests`` (one message per broker per request
   type, LeaderAndIsr, UpdateMetadata, StopReplica, then controller responses; the UpdateMetadata once
   for all its addressees: :mod:`sinks.requests`);
3. admin results to ``livectl.admin-results`` — one per request id and batch: a command that was split
   over several buckets gets one merged answer; then rejected input to ``livectl.rejected`` (and, for a
   rejected admin command with a ``request_id``, an ``INVALID_REQUEST`` admin result so ``--wait`` ends —
   except for one refused for reusing a request id, whose id is another record's: :mod:`streaming.query.request_ids`).

Spark only commits ``B`` after this returns; a crash anywhere in it replays ``B`` with the same rows, and
both sinks skip what the first attempt already wrote.

**Fencing before every topic write.** ZooKeeper fences step 1 by itself, but a topic write has no
fence of its own: a controller paused past its session and resumed after a takeover would otherwise
still send its batch's requests, admin results and rejected records stamped with its old epoch. So
before each non-empty topic write the dispatcher calls ``fence_check`` (the app wires the lease's state
and :meth:`sinks.zookeeper.ZooKeeperSink.check_fence`); the first refusal marks the dispatcher fenced
and raises :class:`ControllerFencedError` — nothing after it is sent.

**Unavailable services.** A step that raises :class:`SinkUnavailableError` (ZooKeeper or Kafka
restarting) is tried again, fence check first, every ``retry_backoff_s`` until ``retry_timeout_s`` has
passed; each sink's replay by batch id makes the retry exactly-once. After that the error propagates
and the query fails.

**ZooKeeper's rows first.** The ZooKeeper writes are decoded and written before any other row is
decoded (a plain write by a lean decoder that gives what the strict one gives); the requests, results
and the rest are decoded after, while nothing waits on them. The cyclic collector is off for the whole
batch (:func:`gc_paused`) and comes back once its decoded rows are freed: a pass over millions of
acyclic objects right after the decode was a fifth of a large batch's driver time
(``docs/decisions/2026-11-24-collector-paused.md``).
Each row's decision is decoded once and a broker request's entries not at all; the parts of one admin
result are merged as values (:mod:`streaming.query.batch_rows`).

The driver keeps every bucket's latest metrics row; :attr:`Dispatcher.metrics` is the cluster-wide sum.

**The state-change log.** After the steps above, ``audit`` (when set, :class:`streaming.monitoring.audit_log.AuditLog`)
gets the batch's decisions and what became of them — before Spark commits the batch, so a replay finds the
batch written and writes nothing twice. Its rows depend on the batch alone, known once ZooKeeper answered:
a log that makes them apart (:class:`PreparesAudit`) makes them on a thread of their own while the request
sink writes (most of that step waits on Kafka), and writes nothing before the topics are written.
**The Spark UI** (:mod:`streaming.monitoring.spark_ui`): the batch's job is
described ``livectl c<id> e<epoch> batch <B>: deciding``; once the batch is carried out a job of one task
says the figures after it, in its description and as named accumulators.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

import pandas as pd

from core import decisions as dc
from core.kafka import zkdata
from core.kafka.zkdata import CONTROLLER_EPOCH_PATH
from sinks.errors import ControllerFencedError, SinkUnavailableError
from sinks.ports import FailedWrite, Rejected, RequestSinkPort, ZkSinkPort
from streaming.monitoring import observability
from streaming.monitoring.audit_rows import AuditBatch, PreparedRows
from streaming.monitoring.spark_ui import batch_head, batch_summary, publish_figures
from streaming.query.batch_rows import decode_row, merge_admin_results, rejected_result, request_id_of, topic_writes
from streaming.query.refusals import answer_existing_topics, classify, withhold
from streaming.query.request_ids import NOT_ANSWERED
from streaming.query.stateful import (
    IMBALANCE_KEY,
    KIND_ADMIN_RESULT,
    KIND_FAILURE,
    KIND_METRICS,
    KIND_REQUEST,
    KIND_ZK,
    LEADER_MOVES_KEY,
    METRIC_COLUMNS,
)
from streaming.query.stateful import payloads as row_payloads
from streaming.runtime.background import in_background
from streaming.runtime.collector import gc_paused

log = logging.getLogger("livectl.dispatch")


_T = TypeVar("_T")


@runtime_checkable
class PreparesAudit(Protocol):
    """A state-change log that makes a batch's rows apart from writing them
    (:class:`streaming.monitoring.audit_log.AuditLog`): the dispatcher calls :meth:`prepare` on a thread while the
    request sink writes, then the log with what it made."""

    def prepare(self, batch: AuditBatch) -> PreparedRows: ...

    def __call__(self, batch: AuditBatch, prepared: PreparedRows | None = None) -> object: ...


class OwnTopicWrites(Protocol):
    """Who is told of the topic znodes this controller writes (:class:`streaming.zk.admin_watch.AdminPathWatcher`),
    so that its own creations and partition additions do not come back to it as events: :meth:`expect`
    before the ZooKeeper sink writes them, :meth:`settle` after, with the topics whose write failed."""

    def expect(self, topics: Mapping[str, frozenset[int]]) -> None: ...

    def settle(self, topics: Mapping[str, frozenset[int]], failed: Collection[str]) -> None: ...


@dataclass
class BatchReport:
    batch_id: int
    zk_applied: int = 0
    zk_skipped: int = 0
    zk_failed: int = 0
    requests: int = 0
    admin_results: int = 0
    rejected: int = 0
    failures: int = 0
    seconds: float = 0.0


@dataclass(frozen=True)
class BatchTiming:
    """When one ``foreachBatch`` call ran, wall-clock (``time.time()``): called, the micro-batch's Spark
    job done (``toPandas()`` returned), the batch carried out (sinks written) or failed."""

    batch_id: int
    start: float
    to_pandas_end: float
    end: float


class Activity:
    """What the dispatcher is doing, for a watcher on another thread (the wait for a replayed micro-batch,
    :mod:`streaming.driver.replay_progress`): the batch, its current step and how many steps were begun so
    far (a count that grows while work is done)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: tuple[int, int, str] = (0, -1, "")

    def note(self, batch_id: int, step: str) -> None:
        with self._lock:
            self._seen = (self._seen[0] + 1, batch_id, step)

    def seen(self) -> tuple[int, int, str]:
        """(steps begun, batch id or -1, the current step)."""
        with self._lock:
            return self._seen


@dataclass
class Dispatcher:
    """Callable given to ``foreachBatch``. Holds the sinks of the current controller lease."""

    zk_sink: ZkSinkPort
    request_sink: RequestSinkPort
    on_fenced: Callable[[ControllerFencedError], None] | None = None
    #: called with the writes ZooKeeper refused (not fenced), after they are logged: the app re-reads the
    #: refused partition states for their buckets (:mod:`streaming.query.refresh`)
    on_refused: Callable[[Sequence[FailedWrite]], object] | None = None
    #: told of the topic znodes each batch writes (the admin-path watcher, once it runs): without it, the
    #: controller's own topic creation comes back as a ``ZkTopicChange`` that costs a micro-batch to ignore
    own_writes: OwnTopicWrites | None = None
    #: raises :class:`ControllerFencedError` when this controller no longer holds its epoch (or
    #: :class:`SinkUnavailableError` when that cannot be known); called before each topic write
    fence_check: Callable[[], None] | None = None
    #: how long a step is retried while a service is unavailable (0: not retried)
    retry_timeout_s: float = 0.0
    retry_backoff_s: float = 0.5
    fenced: bool = False
    #: the state-change log (:class:`streaming.monitoring.audit_log.AuditLog`): called once the batch is carried out
    audit: Callable[[AuditBatch], object] | None = None
    #: who this controller is, for the Spark UI's job descriptions
    controller_id: int = -1
    controller_epoch: int = -1
    bucket_metrics: dict[int, dict[str, int]] = field(default_factory=dict)
    #: per bucket, its latest per-broker leader imbalance counts (not led by, preferred by)
    bucket_imbalance: dict[int, dict[int, tuple[int, int]]] = field(default_factory=dict)
    #: per bucket, its latest leader-balance report: movable partitions per preferred broker, and whether an
    #: ``elect-leaders --all`` is queued there (core.leader_balance)
    bucket_leader_moves: dict[int, tuple[dict[int, int], bool]] = field(default_factory=dict)
    #: called when a bucket reports an ``elect-leaders --all`` newly queued (the rebalance schedule's wake)
    on_leader_moves_queued: Callable[[], object] | None = None
    last_report: BatchReport | None = None
    #: called after every micro-batch with what operators watch (the metrics endpoint and status page)
    observer: Callable[[observability.BatchObservation], None] | None = None
    #: called after every ``foreachBatch`` call, carried out or failed, with its :class:`BatchTiming`
    #: (benchmarks split a micro-batch's time into its Spark job and its sinks)
    on_batch_timed: Callable[[BatchTiming], object] | None = None
    #: the Spark job's share of the current micro-batch (``toPandas``), for the observer
    _spark_s: float = 0.0
    #: the latest batch's figures job in the Spark UI (:func:`streaming.monitoring.spark_ui.publish_figures`)
    figures_job: Any = None
    #: the current batch's step, for the replay wait's progress (:class:`Activity`)
    activity: Activity = field(default_factory=Activity)

    @property
    def metrics(self) -> dict[str, int]:
        """Every gauge of the buckets' metrics payloads (Kafka's :data:`METRIC_COLUMNS` always present, the
        partition figures of :mod:`core.figures` and ``TopicsIneligibleToDeleteCount`` beside them), each summed
        once, with ``ActiveControllerCount``: what the Spark UI, the status page and the endpoint show."""
        total = dict.fromkeys(METRIC_COLUMNS, 0)
        for m in self.bucket_metrics.values():
            for k, v in m.items():
                total[k] = total.get(k, 0) + int(v)
        total["ActiveControllerCount"] = 0 if self.fenced else 1
        return total

    def imbalance(self) -> dict[int, tuple[int, int]]:
        """Per preferred broker, the buckets' counts summed (Kafka's auto leader rebalance inputs)."""
        total: dict[int, list[int]] = {}
        for counts in list(self.bucket_imbalance.values()):
            for b, (bad, all_) in counts.items():
                t = total.setdefault(b, [0, 0])
                t[0] += bad
                t[1] += all_
        return {b: (t[0], t[1]) for b, t in sorted(total.items())}

    def leader_move_reports(self) -> tuple[dict[int, dict[int, int]], dict[int, bool]]:
        """The buckets' latest leader-balance reports: (per bucket its movable partitions per preferred
        broker, per bucket whether an ``elect-leaders --all`` is queued)."""
        reports = dict(self.bucket_leader_moves)
        return {b: dict(m) for b, (m, _) in reports.items()}, {b: q for b, (_, q) in reports.items()}

    def __call__(self, batch_df: Any, batch_id: int) -> None:
        sc = batch_df.sparkSession.sparkContext
        # the batch's own job runs the buckets' step: its figures are known only once it has run, so the
        # Jobs tab gets them from the job announced after it (streaming.monitoring.spark_ui.publish_figures)
        sc.setJobDescription(f"{batch_head(self.controller_id, self.controller_epoch, int(batch_id))}: deciding")
        wall_start = time.time()
        started = time.monotonic()
        self.activity.note(int(batch_id), "the buckets' step (Spark)")
        frame: pd.DataFrame = batch_df.toPandas()
        self._spark_s = time.monotonic() - started
        wall_spark_end = time.time()
        try:
            self.dispatch(frame, int(batch_id))
        finally:
            if self.on_batch_timed is not None:
                self.on_batch_timed(BatchTiming(int(batch_id), wall_start, wall_spark_end, time.time()))
        self.figures_job = publish_figures(
            batch_df.sparkSession, self.describe(int(batch_id)), self.metrics, int(batch_id)
        )

    def describe(self, batch_id: int) -> str:
        """The controller's figures after ``batch_id`` (:func:`streaming.monitoring.spark_ui.batch_summary`)."""
        return batch_summary(self.controller_id, self.controller_epoch, batch_id, self.metrics)

    def dispatch(self, frame: pd.DataFrame, batch_id: int) -> BatchReport:
        if self.fenced:
            raise ControllerFencedError(CONTROLLER_EPOCH_PATH, -1, "this controller was fenced earlier")
        # the collector stays off until the batch's decoded rows are freed (when _dispatch returns): they
        # are millions of acyclic objects in a large batch, and a pass over them as soon as the decode
        # ended cost a fifth of the driver's time (bench/dispatch_cost.py)
        with gc_paused():
            return self._dispatch(frame, batch_id)

    def _dispatch(self, frame: pd.DataFrame, batch_id: int) -> BatchReport:
        started = time.monotonic()
        report = BatchReport(batch_id)
        frame = frame.sort_values(["bucket", "seq"], kind="stable") if not frame.empty else frame
        buckets: Any = frame.get("bucket", [])
        kinds: Any = frame.get("kind", [])
        payloads: Any = row_payloads(frame)
        # ZooKeeper's writes first: the other rows are decoded while nothing waits on them
        zk_writes: list[dc.ZkWrite] = []
        for kind, payload in zip(kinds, payloads, strict=True):
            if kind == KIND_ZK:
                d = decode_row(payload)
                assert isinstance(d, dc.ZkWrite)
                zk_writes.append(d)
        zk_started = time.monotonic()
        self.activity.note(batch_id, f"{len(zk_writes)} ZooKeeper writes")
        own = self.own_writes
        # nobody listens before the side threads start (the failover batch, the largest)
        topics = topic_writes(zk_writes) if own is not None else {}
        if own is not None and topics:
            own.expect(topics)
        try:
            zk = self.retried(batch_id, "ZooKeeper writes", lambda: self.zk_sink.write_batch(batch_id, zk_writes))
        except BaseException:
            if own is not None and topics:
                own.settle(topics, failed=topics.keys())  # whatever is there now is read as anyone's
            raise
        if own is not None and topics:
            refused = {f.write.path for f in zk.failed}
            own.settle(topics, failed=[t for t in topics if zkdata.topic_path(t) in refused])
        zk_s = time.monotonic() - zk_started
        requests: list[dc.BrokerRequest] = []
        results: list[dc.AdminResult] = []
        result_buckets: list[int] = []
        rejected_by_source: dict[tuple[str, int, int], Rejected] = {}
        failures: list[dc.StateChangeFailure] = []
        summaries: dict[int, str] = {}
        newly_queued = False
        for bucket, kind, payload in zip(buckets, kinds, payloads, strict=True):
            if kind == KIND_ZK:
                continue
            if kind == KIND_REQUEST:
                d = decode_row(payload)
                assert isinstance(d, dc.BrokerRequest)
                requests.append(d)
            elif kind == KIND_ADMIN_RESULT:
                d = decode_row(payload)
                assert isinstance(d, dc.AdminResult)
                results.append(d)
                result_buckets.append(int(bucket))
            elif kind == KIND_FAILURE:
                report.failures += 1
                log.info("state change failure (bucket %s): %s", bucket, payload)
                d = decode_row(payload)
                assert isinstance(d, dc.StateChangeFailure)
                failures.append(d)
            elif kind == observability.KIND_SUMMARY:
                summaries[int(bucket)] = payload
            elif kind == KIND_METRICS:
                m = json.loads(payload)
                counts = m.pop(IMBALANCE_KEY, {})
                self.bucket_imbalance[int(bucket)] = {int(b): (int(c[0]), int(c[1])) for b, c in counts.items()}
                moves = m.pop(LEADER_MOVES_KEY, {})
                queued = bool(moves.get("queued", False))
                was = self.bucket_leader_moves.get(int(bucket), ({}, False))[1]
                movable = {int(b): int(n) for b, n in moves.get("movable", {}).items()}
                self.bucket_leader_moves[int(bucket)] = (movable, queued)
                newly_queued = newly_queued or (queued and not was)
                self.bucket_metrics[int(bucket)] = {k: int(v) for k, v in m.items()}
            elif kind == "rejected":
                r = json.loads(payload)
                reasons = tuple(f"{n}: {why}" for n, why in zip(r["expectations"], r["reasons"], strict=True))
                source = (str(r["source_topic"]), int(r["source_partition"]), int(r["source_offset"]))
                seen = rejected_by_source.get(source)
                if seen is not None:
                    # a cluster-wide event left out by several buckets: one rejected message, every reason
                    reasons = tuple(dict.fromkeys((*seen.reasons, *reasons)))
                rejected_by_source[source] = Rejected(*source, r["payload"], reasons)
                rid = request_id_of(r["payload"])
                # a record refused for reusing a request id gets no answer under it: the id is another's
                if rid is not None and not r.get(NOT_ANSWERED):
                    results.append(rejected_result(rid, r, reasons))
                    result_buckets.append(int(bucket))

        if newly_queued and self.on_leader_moves_queued is not None:
            self.on_leader_moves_queued()  # once per batch, however many buckets queued it
        report.zk_applied, report.zk_skipped, report.zk_failed = zk.applied, zk.skipped, len(zk.failed)
        for f in zk.failed:
            log.warning(
                "ZooKeeper refused %s %s (expected version %d): %s",
                f.write.op.value,
                f.write.path,
                f.write.expected_version,
                f.error,
            )
        if zk.failed and self.on_refused is not None:
            self.on_refused(zk.failed)
        merged = merge_admin_results(results, result_buckets)
        if zk.failed:
            refusals = classify(zk.failed)
            requests = withhold(requests, refusals)
            merged = answer_existing_topics(merged, refusals)
        rejected = list(rejected_by_source.values())
        audit_batch = AuditBatch(batch_id, zk_writes, zk.failed, requests, merged, failures)
        # the state-change log's rows come from the batch alone: made on a thread while the request sink
        # waits on Kafka (its tail read, the producer, the flush), written after the topics as before
        preparing = self._prepare_audit(audit_batch) if requests else None
        topics_started = time.monotonic()
        if requests:
            self.activity.note(batch_id, f"{len(requests)} broker requests")
            report.requests = self._topic_step(
                batch_id, "requests", lambda: self.request_sink.write_requests(batch_id, requests)
            ).written
        if merged:
            self.activity.note(batch_id, f"{len(merged)} admin results")
            report.admin_results = self._topic_step(
                batch_id, "admin results", lambda: self.request_sink.write_admin_results(batch_id, merged)
            ).written
        if rejected:
            self.activity.note(batch_id, f"{len(rejected)} rejected records")
            report.rejected = self._topic_step(
                batch_id, "rejected records", lambda: self.request_sink.write_rejected(batch_id, rejected)
            ).written
        topics_s = time.monotonic() - topics_started
        audit_s = 0.0
        if self.audit is not None:
            self.activity.note(batch_id, "the state-change log")
            audit_started = time.monotonic()
            prepared = preparing.result() if preparing is not None else None
            if prepared is not None:
                audit_log = self.audit
                assert isinstance(audit_log, PreparesAudit)
                audit_log(audit_batch, prepared)
            else:
                self.audit(audit_batch)
            audit_s = time.monotonic() - audit_started
        report.seconds = time.monotonic() - started
        self.last_report = report
        if self.observer is not None:
            seconds = {"spark_job": self._spark_s, "zookeeper_sink": zk_s, "request_sink": topics_s}
            if self.audit is not None:
                seconds["audit_log"] = audit_s
            self.observer(
                observability.observation(
                    batch_id,
                    # every gauge the payloads carry, each summed once: the sums the Spark UI shows
                    self.metrics,
                    summaries,
                    rejected=len(rejected),
                    decisions=[*zk_writes, *requests, *merged, *failures],
                    seconds=seconds,
                )
            )
        return report

    def _prepare_audit(self, batch: AuditBatch) -> Future[PreparedRows] | None:
        """:meth:`PreparesAudit.prepare` of ``batch`` on a thread of its own, when the log has it."""
        audit_log = self.audit
        if not isinstance(audit_log, PreparesAudit):
            return None
        return in_background(lambda: audit_log.prepare(batch), f"livectl-audit-rows-{batch.batch_id}")

    def _topic_step(self, batch_id: int, what: str, write: Callable[[], _T]) -> _T:
        """``write`` behind the fence check (see the module docstring)."""

        def checked() -> _T:
            if self.fence_check is not None:
                self.fence_check()
            return write()

        return self.retried(batch_id, what, checked)

    def retried(self, batch_id: int, what: str, run: Callable[[], _T]) -> _T:
        """``run``, retried while a service is unavailable; a fencing error marks this dispatcher fenced."""
        deadline = time.monotonic() + self.retry_timeout_s
        attempt = 0
        while True:
            attempt += 1
            try:
                try:
                    return run()
                except SinkUnavailableError:
                    # first ask whether this controller is still the controller: a process paused past
                    # its session (its clock ran on, so its deadline may be gone too) must learn that it
                    # was replaced, not report an outage
                    self._fence_still_held()
                    raise
            except ControllerFencedError as e:
                self.fenced = True
                # said once, by the entry point, as the process exits (code 3)
                log.debug("controller fenced before the %s of batch %d: %s", what, batch_id, e)
                if self.on_fenced is not None:
                    self.on_fenced(e)
                raise
            except SinkUnavailableError as e:
                if time.monotonic() + self.retry_backoff_s > deadline:
                    raise
                log.warning("batch %d, %s (attempt %d): %s; trying again", batch_id, what, attempt, e)
                time.sleep(self.retry_backoff_s)

    def _fence_still_held(self, grace_s: float = 2.0) -> None:
        """Raise :class:`ControllerFencedError` if the fence check says so within ``grace_s`` (a client
        that was paused learns of its expired session on its first reconnection); return when it passes or
        cannot tell."""
        if self.fence_check is None:
            return
        until = time.monotonic() + grace_s
        while True:
            try:
                self.fence_check()
                return
            except SinkUnavailableError:
                if time.monotonic() >= until:
                    return
                time.sleep(0.1)
