"""The controller query's construction, once the lease is held: the fenced sinks, the dispatcher that
drives them from ``foreachBatch``, the listeners that report each micro-batch, and the query's start
(after any previous run of it in this driver has stopped, and after the micro-batch a previous
controller planned but did not commit has been replayed)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sinks.errors import ControllerFencedError
from sinks.ports import RequestSinkPort, ZkSinkPort
from streaming.driver.replay_progress import ReplaySample, planned_records
from streaming.driver.shutdown import fence_check, fenced_reason
from streaming.driver.startup import checkpoint_identity
from streaming.errors import StreamingError
from streaming.monitoring.audit_log import AuditLog, FileSystemAuditFiles, default_audit_dir
from streaming.query.dispatch import BatchTiming, Dispatcher
from streaming.query.listener import MetricsListener
from streaming.runtime.checkpoint_fs import CheckpointStore, batch_ids, child
from streaming.settings import Settings

if TYPE_CHECKING:
    from streaming.query.pipeline import PreparedSource, SourceStart

log = logging.getLogger("livectl.app")

SinkWrapper = Callable[[ZkSinkPort, RequestSinkPort], tuple[ZkSinkPort, RequestSinkPort]]


def fenced_sinks(zk: Any, fence: Any, s: Settings, store: CheckpointStore) -> tuple[Any, Any]:
    """The ZooKeeper sink (every write a multi-op behind ``check(/controller_epoch)``) and the request-topic
    sink (transactional, one id for every controller of the cluster)."""
    from sinks.requests import RequestSink, transactional_id
    from sinks.zookeeper import ZooKeeperSink

    zk_sink = ZooKeeperSink(
        zk,
        fence,
        s.query_name,
        ops_per_transaction=s.zk_ops_per_transaction,
        acl_for=s.zookeeper_security().acl_for,
        checkpoint_id=checkpoint_identity(store),
    )
    request_sink = RequestSink(
        s.bootstrap_servers,
        fence,
        requests_topic=s.requests_topic,
        admin_results_topic=s.admin_results_topic,
        rejected_topic=s.rejected_topic,
        client_config=s.kafka_security().client_kwargs(),
        # one id for every controller of this cluster: a successor's first write fences the rest
        transactional_id=transactional_id(s.query_name),
        compression=s.request_compression,
    )
    return zk_sink, request_sink


def build_dispatcher(
    sinks: tuple[ZkSinkPort, RequestSinkPort],
    *,
    zk: Any,
    producer: Any,
    lease: Any,
    zk_sink: Any,
    s: Settings,
    fence: Any,
    audit: AuditLog | None,
    on_fenced: Callable[[str], None],
    on_batch_timed: Callable[[BatchTiming], object] | None,
) -> Dispatcher:
    """The ``foreachBatch`` dispatcher over ``sinks``: refused writes re-read from ZooKeeper
    (:class:`streaming.query.refresh.StatesRefresher`), the fence checked before each topic write, fencing
    reported through ``on_fenced`` with its one line."""
    from streaming.query.refresh import StatesRefresher

    def fenced(e: ControllerFencedError) -> None:
        on_fenced(fenced_reason(e))

    return Dispatcher(
        *sinks,
        on_refused=StatesRefresher(zk, producer, s.broker_events_topic, controller_epoch=fence.controller_epoch),
        on_fenced=fenced,
        fence_check=fence_check(lease, zk_sink),
        retry_timeout_s=s.sink_retry_timeout_ms / 1000,
        audit=audit,
        controller_id=s.controller_id,
        controller_epoch=fence.controller_epoch,
        on_batch_timed=on_batch_timed,
    )


def audit_log(spark: Any, s: Settings, store: CheckpointStore, epoch: int) -> AuditLog | None:
    """The state-change log of this controller's batches (``audit_log`` setting), in ``audit_dir`` or
    beside the checkpoint, through ``pyarrow.fs`` for its URI."""
    if not s.audit_log:
        return None
    files = FileSystemAuditFiles.for_spark(spark, s.audit_dir or default_audit_dir(store.root))
    log.info("state-change log: %s", files.root)
    return AuditLog(files, store, s.controller_id, epoch)


def add_listeners(spark: Any, dispatcher: Dispatcher, observatory: Any) -> list[Any]:
    """Spark's per-batch reports: the metrics listener, and with a metrics endpoint, its figures. Returns
    the listeners added, for the run to remove when it ends (:class:`streaming.driver.side_threads.Opened`)."""
    from streaming.monitoring.metrics_http import progress_listener

    listeners: list[Any] = [MetricsListener()]
    if observatory is not None:
        dispatcher.observer = observatory.record_batch
        listeners.append(progress_listener(observatory))
    for listener in listeners:
        spark.streams.addListener(listener)
    return listeners


def start_query_when_free(
    spark: Any,
    s: Settings,
    dispatcher: Dispatcher,
    where: SourceStart,
    *,
    stop: threading.Event,
    timeout: float = 60.0,
    prepared: PreparedSource | None = None,
) -> Any:
    """Start the query (its source ``prepared`` ahead when given: :func:`streaming.query.pipeline.controller_frame`);
    a previous controller in the same driver may still be stopping its query on the shared checkpoint
    (Spark refuses two active runs of one query id), so wait for it."""
    from streaming.query.pipeline import StartTimes, start_query

    started = time.monotonic()
    deadline = started + timeout
    while True:
        times = StartTimes()
        try:
            query = start_query(spark, s, dispatcher, where, times=times, prepared=prepared)
        except Exception as e:
            if "already active" not in str(e) or time.monotonic() > deadline or stop.is_set():
                raise
            log.info("the previous run of query %s is still stopping; waiting", s.query_name)
            time.sleep(0.5)
            continue
        # a cold start's failover batch waits for this (the plan built, the stream's thread started)
        log.info("query %s: started in %.1f s (%s)", s.query_name, time.monotonic() - started, times)
        return query


def wait_committed(
    store: CheckpointStore,
    query: Any,
    batch_id: int,
    stop: threading.Event,
    stall_timeout: float = 300.0,
    *,
    progress: Callable[[], ReplaySample] | None = None,
    report_every: float = 30.0,
    sample_every: float = 1.0,
) -> bool:
    """Wait until micro-batch ``batch_id`` is committed in the checkpoint (the replay of the batch a
    previous controller planned). False when the query stopped first or this controller was asked to stop
    (the caller reports the query's outcome: its failure, if that is why). The wait is bounded by the time
    without progress, not by the replay's length: ``progress`` (:class:`streaming.driver.replay_progress.ReplayWatch`)
    is sampled as the wait goes, and the wait is refused once its marks have not changed for ``stall_timeout``
    seconds (without ``progress``, once ``stall_timeout`` has passed); it is sampled every ``sample_every``
    seconds (a sample is a few calls into Spark's JVM). Every ``report_every`` seconds the log says how it goes."""
    commits = child(store.root, "commits")
    started = last_change = last_report = last_sample = time.monotonic()
    records = planned_records(store, batch_id)
    sample = progress() if progress is not None else None
    while batch_id not in batch_ids(store, commits):
        if not query.isActive or stop.is_set():
            log.info("the replay of micro-batch %d did not complete: the query stopped", batch_id)
            return False
        now = time.monotonic()
        if progress is not None and now - last_sample >= sample_every:
            last_sample = now
            seen = progress()
            if sample is None or seen.marks != sample.marks:
                last_change = now
            sample = seen
        if now - last_report >= report_every:
            last_report = now
            log.info(
                "replaying micro-batch %d%s: %.0f s in, last progress %.0f s ago%s",
                batch_id,
                f" ({records})" if records else "",
                now - started,
                now - last_change,
                f"; {sample.said}" if sample is not None else "",
            )
        if now - last_change > stall_timeout:
            error = StreamingError(
                f"the replay of micro-batch {batch_id} made no progress for {stall_timeout:g} s"
                f" (replay_stall_timeout_ms; {now - started:.0f} s in all"
                + (f"; {sample.said}" if sample is not None else "")
                + ")"
            )
            # said now: stopping the query can take long when what stalled it is still away
            log.warning("%s; stopping the query", error)
            raise error
        time.sleep(0.1)
    log.info("micro-batch %d replayed in %.1f s", batch_id, time.monotonic() - started)
    return True
