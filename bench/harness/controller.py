"""A controller under measurement: :class:`streaming.driver.app.ControllerApp` on a thread of the benchmark's
process, its ZooKeeper sink and request sink timed inside ``foreachBatch`` through the app's ``wrap_sinks``
hook, and its micro-batches' progress. Nothing here changes product behaviour: the wrappers call the real
sinks and only record times."""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.decisions import BrokerRequest, ZkWrite
from core.kafka.requests import RequestApi
from sinks.ports import RequestBatchResult, RequestSinkPort, ZkBatchResult, ZkSinkPort
from streaming.driver.app import ControllerApp
from streaming.query.dispatch import BatchTiming
from streaming.settings import Settings


@dataclass
class SinkCall:
    batch_id: int
    start: float  # time.time()
    end: float
    n: int
    ok: bool = True
    error: str = ""


@dataclass
class SinkClock:
    """What the timing wrappers saw, per micro-batch (wall-clock ``time.time()``)."""

    zk: list[SinkCall] = field(default_factory=list)
    requests: list[SinkCall] = field(default_factory=list)
    #: state-znode paths each ZooKeeper sink call wrote (successfully), by batch id
    zk_paths: dict[int, set[str]] = field(default_factory=dict)
    #: (topic, partition) of LeaderAndIsr entries each request sink call wrote, by batch id
    lisr_partitions: dict[int, set[tuple[str, int]]] = field(default_factory=dict)
    #: callbacks run after each completed call (e.g. to wake a waiter)
    changed: threading.Condition = field(default_factory=threading.Condition)
    #: when set, only record (don't decode) — cheap for idle runs
    track_paths: bool = True

    #: applied before the timing wrappers (e.g. :func:`large_request_sinks`)
    inner_wrap: Callable[[Any, Any], tuple[Any, Any]] | None = None

    def wrap(self, zk_sink: ZkSinkPort, request_sink: RequestSinkPort) -> tuple[ZkSinkPort, RequestSinkPort]:
        if self.inner_wrap is not None:
            zk_sink, request_sink = self.inner_wrap(zk_sink, request_sink)
        return _TimedZk(zk_sink, self), _TimedRequests(request_sink, self)

    def notify(self) -> None:
        with self.changed:
            self.changed.notify_all()

    def wait(self, what: str, check: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self.changed:
            while not check():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
                self.changed.wait(min(left, 0.5))


class _TimedZk:
    def __init__(self, inner: ZkSinkPort, clock: SinkClock) -> None:
        self.inner = inner
        self.clock = clock

    def write_batch(self, batch_id: int, writes: Sequence[ZkWrite]) -> ZkBatchResult:
        t0 = time.time()
        try:
            result = self.inner.write_batch(batch_id, writes)
        except BaseException as e:
            self.clock.zk.append(SinkCall(batch_id, t0, time.time(), len(writes), False, repr(e)[:300]))
            self.clock.notify()
            raise
        t1 = time.time()
        if self.clock.track_paths and writes:
            refused = {f.index for f in result.failed}
            done = {w.path for i, w in enumerate(writes) if i not in refused and w.path.endswith("/state")}
            self.clock.zk_paths.setdefault(batch_id, set()).update(done)
        self.clock.zk.append(SinkCall(batch_id, t0, t1, len(writes)))
        self.clock.notify()
        return result


class _TimedRequests:
    def __init__(self, inner: RequestSinkPort, clock: SinkClock) -> None:
        self.inner = inner
        self.clock = clock

    def write_requests(self, batch_id: int, requests: Sequence[BrokerRequest]) -> RequestBatchResult:
        t0 = time.time()
        try:
            result = self.inner.write_requests(batch_id, requests)
        except BaseException as e:
            self.clock.requests.append(SinkCall(batch_id, t0, time.time(), len(requests), False, repr(e)[:300]))
            self.clock.notify()
            raise
        t1 = time.time()
        if self.clock.track_paths and requests:
            got: set[tuple[str, int]] = set()
            for r in requests:
                if r.api is RequestApi.LEADER_AND_ISR:
                    for ts in r.body_json().get("topicStates", []):
                        got.update((ts["topicName"], int(ps["partitionIndex"])) for ps in ts["partitionStates"])
            self.clock.lisr_partitions.setdefault(batch_id, set()).update(got)
        self.clock.requests.append(SinkCall(batch_id, t0, t1, len(requests)))
        self.clock.notify()
        return result

    def write_admin_results(self, batch_id: int, results: Any) -> RequestBatchResult:
        return self.inner.write_admin_results(batch_id, results)

    def write_rejected(self, batch_id: int, rejected: Any) -> RequestBatchResult:
        return self.inner.write_rejected(batch_id, rejected)


#: every foreachBatch call of the controllers :func:`start_controller` started in this process: when the
#: micro-batch's Spark job (``toPandas()``) and then its dispatch (decode + sinks) ended
#: (:class:`streaming.query.dispatch.BatchTiming`, from the dispatcher's ``on_batch_timed`` hook)
DISPATCH_CALLS: list[BatchTiming] = []


def large_request_sinks(max_bytes: int = 256 * 1024 * 1024) -> Callable[[Any, Any], tuple[Any, Any]]:
    """A ``wrap_sinks`` step that swaps the product's request sink for the same class with a producer that
    accepts messages up to ``max_bytes`` (kafka-python's default ``max_request_size`` is 1 MB, and a
    LeaderAndIsr / UpdateMetadata for tens of thousands of partitions is larger). A measurement
    prototype only: Apache Kafka's brokers refuse messages over ``message.max.bytes`` (1 MB by default),
    so the product fix is to split such requests into several messages."""
    from sinks.requests import RequestSink

    def wrap(zk_sink: Any, request_sink: Any) -> tuple[Any, Any]:
        big = RequestSink(
            request_sink.bootstrap_servers,
            request_sink.fence,
            requests_topic=request_sink.requests_topic,
            admin_results_topic=request_sink.admin_results_topic,
            rejected_topic=request_sink.rejected_topic,
            max_request_size=max_bytes,
        )
        return zk_sink, big

    return wrap


@dataclass
class RunningController:
    app: ControllerApp
    thread: threading.Thread
    errors: list[BaseException]
    started: float  # time.time() when run() was called
    ready_at: float | None = None  # time.time() when run() signalled ready (failover ref sent)

    def stop(self, timeout: float = 120) -> None:
        self.app.stop()
        self.thread.join(timeout)

    @property
    def failed(self) -> BaseException | None:
        return self.errors[0] if self.errors else None


def start_controller(
    spark: Any, settings: Settings, clock: SinkClock | None = None, wait_ready: float | None = 600
) -> RunningController:
    app = ControllerApp(
        settings,
        spark=spark,
        wrap_sinks=clock.wrap if clock is not None else None,
        on_batch_timed=DISPATCH_CALLS.append,
    )
    ready = threading.Event()
    errors: list[BaseException] = []
    rc = RunningController(app, threading.Thread(), errors, time.time())

    def target() -> None:
        try:
            app.run(ready=ready)
        except BaseException as e:  # reported by the benchmark
            errors.append(e)
        finally:
            if rc.ready_at is None:
                rc.ready_at = time.time()
            ready.set()

    def mark() -> None:
        ready.wait()
        if rc.ready_at is None:
            rc.ready_at = time.time()

    rc.thread = threading.Thread(target=target, name="livectl-controller", daemon=True)
    rc.thread.start()
    threading.Thread(target=mark, daemon=True).start()
    if wait_ready is not None:
        ready.wait(wait_ready)
    return rc


def progress_list(query: Any) -> list[dict[str, Any]]:
    """``query.recentProgress`` as plain dicts (it may be a list of dicts or of progress objects)."""
    out = []
    for p in query.recentProgress if query is not None else []:
        d = json.loads(p.json) if hasattr(p, "json") and isinstance(p.json, str) else dict(p)
        observed = d.get("observedMetrics") or {}
        d["observedMetrics"] = {k: (v.asDict() if hasattr(v, "asDict") else dict(v)) for k, v in observed.items()}
        out.append(d)
    return out


def batch_end(progress: dict[str, Any]) -> float:
    """Wall-clock end of a micro-batch: its trigger timestamp + triggerExecution."""
    ts = dt.datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00")).timestamp()
    return ts + float(progress["durationMs"].get("triggerExecution", 0)) / 1000.0


def percentile(values: Sequence[float], q: float) -> float:
    s = sorted(values)
    if not s:
        return float("nan")
    k = (len(s) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)
