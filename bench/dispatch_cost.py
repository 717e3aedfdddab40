"""Profile: the driver's whole side of one large micro-batch — from the Spark job's Arrow result to the
messages the request sink sends — without Spark, ZooKeeper or Kafka.

``foreachBatch`` (:class:`streaming.query.dispatch.Dispatcher`) collects the batch's decision rows
(``toPandas``: Arrow record batches, then pandas object columns), decodes them, writes the ZooKeeper
writes, then builds and sends the request messages (the producer compresses them). This script makes
the decision rows a failover or a broker failure gives (``--buckets`` buckets of ``--partitions /
--buckets`` partitions each, every bucket with its own topics, as :mod:`bench.request_sink_cost`), as the
buckets emit them (:func:`streaming.query.stateful.decision_rows`), puts them in an Arrow table of
:data:`streaming.query.stateful.OUTPUT_SCHEMA`, and times, per round:

* ``to_pandas_s`` — the Arrow table to the pandas frame the dispatcher gets (what ``toPandas()`` does on
  the driver once the job's Arrow batches have arrived);
* ``zk_start_s`` — from the dispatcher's start to the ZooKeeper sink's call (what precedes ZooKeeper on the
  critical path to "ZooKeeper rewritten");
* ``requests_s`` — the request sink's call (merge, split, JSON, envelopes);
* ``dispatch_s`` — the whole ``Dispatcher.dispatch``;
* ``compress_s`` — zstd of every request message (what kafka-python's producer then does, level 3).

The ZooKeeper sink is a recorder that accepts every write (its own cost is not the driver's Python);
the request sink is :class:`sinks.memory.MemoryRequestSink` (the product's message building, no send).
``--kafka`` sends the messages for real: the product's request sink (:class:`sinks.requests.RequestSink`,
transactional, zstd) to an Apache Kafka broker this script starts (with ZooKeeper, stopped by PID), a fresh sink
per round as a standby's first micro-batch has it (its producer made and initialised, the topic's tail read
for the batch's messages), after the same batch of a predecessor is on the topic (what the tail read then
scans); ``requests_s`` is then the whole request step, tail read, sends and ``flush``.
``--audit`` adds the state-change log as the product has it on by default
(:class:`streaming.monitoring.audit_log.AuditLog` with its log lines at INFO, into an in-memory table folder and
checkpoint, a fixed clock) and times it (``audit_s``: the call after the topic writes — rows, Parquet, log
lines — and ``audit_prepare_s``, the rows made on a thread beside the request sink, when the dispatcher
does that).
``--digest`` prints a SHA-256 of every message (topic, key, value, headers, partition, identity) of a
failover, a broker failure, a double broker failure and a broker's return, to compare two trees' messages
byte for byte; with ``--audit``, also a SHA-256 of the state-change log's table (every row, read back
from the Parquet file) and one of its log text with the DEBUG lines (every partition state sent).

Run: ``.venv/bin/python -m bench dispatch_cost [--partitions 100000] [--buckets 2] [--rounds 3]
[--event failover|failure|both] [--audit] [--kafka] [--profile] [--digest] [--out NAME]``.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import datetime as dt
import gc
import hashlib
import io
import json
import logging
import os
import pstats
import statistics
import time
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from bench.harness import machine_info, services, write_results
from bench.harness.workloads import event_decisions
from core import controller
from core import decisions as dc
from sinks.memory import MemoryRequestSink
from sinks.ports import Fence, ZkBatchResult
from streaming.monitoring.audit_log import AuditLog, MemoryAuditFiles
from streaming.monitoring.state_change_log import STATE_CHANGE_LOGGER
from streaming.query.dispatch import Dispatcher
from streaming.query.stateful import METRIC_COLUMNS, OUTPUT_COLUMNS, decision_rows
from streaming.runtime.checkpoint_fs import MemoryCheckpointStore

_ARROW_SCHEMA = pa.schema(
    [("bucket", pa.int32()), ("seq", pa.int32()), ("kind", pa.string()), ("payload", pa.string())]
    + [(m, pa.int64()) for m in METRIC_COLUMNS]
)


class AcceptingZkSink:
    """A ZooKeeper sink that accepts every write and records when it was called."""

    def __init__(self) -> None:
        self.called_at: float | None = None
        self.writes = 0

    def write_batch(self, batch_id: int, writes: Sequence[dc.ZkWrite]) -> ZkBatchResult:
        self.called_at = time.perf_counter()
        self.writes = len(writes)
        return ZkBatchResult(batch_id, len(writes), 0, (), 1)

    def check_fence(self) -> None:
        return None


class TimedRequestSink(MemoryRequestSink):
    """The memory request sink, timing its request write."""

    requests_s: float = 0.0

    def write_requests(self, batch_id: int, requests: Sequence[dc.BrokerRequest]) -> Any:
        t0 = time.perf_counter()
        try:
            return super().write_requests(batch_id, requests)
        finally:
            self.requests_s = time.perf_counter() - t0


ENCODE_S: list[float] = []


def bucket_rows(per_bucket: int, buckets: int, event: str) -> pa.Table:
    """The decision rows of ``buckets`` buckets (topic names made distinct per bucket) as an Arrow table;
    the time one bucket took to encode its rows is appended to :data:`ENCODE_S`."""
    decisions = event_decisions(per_bucket, event)
    gc.collect()
    t0 = time.perf_counter()
    rows = decision_rows(0, decisions)
    ENCODE_S.append(time.perf_counter() - t0)
    cols: dict[str, list[Any]] = {c: [] for c in OUTPUT_COLUMNS}
    for b in range(buckets):
        for row in rows:
            out = [b, row[1], row[2], row[3].replace("topic-", f"b{b}-topic-"), *row[4:]]
            for c, v in zip(OUTPUT_COLUMNS, out, strict=True):
                cols[c].append(v)
    return pa.table(cols, schema=_ARROW_SCHEMA)


class TimedAudit:
    """The state-change log of the product (in memory, fixed clock), timing its call."""

    def __init__(self) -> None:
        self.files = MemoryAuditFiles()
        self.log = AuditLog(
            self.files,
            MemoryCheckpointStore(),
            controller_id=2,
            controller_epoch=1,
            clock=lambda: dt.datetime(2026, 11, 24, 21, 0, 0, 123456, tzinfo=dt.UTC),
        )
        self.audit_s = 0.0
        #: the rows made on the dispatcher's thread beside the request sink (0 when made in the call)
        self.prepare_s = 0.0

    def prepare(self, batch: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return self.log.prepare(batch)
        finally:
            self.prepare_s = time.perf_counter() - t0

    def __call__(self, batch: Any, prepared: Any = None) -> None:
        t0 = time.perf_counter()
        try:
            self.log(batch, prepared) if prepared is not None else self.log(batch)
        finally:
            self.audit_s = time.perf_counter() - t0

    def table(self) -> pa.Table:
        (blob,) = self.files.blobs.values()
        return pq.read_table(pa.BufferReader(blob))


class LogText(logging.Handler):
    """Every state-change log line, as text."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname} {record.getMessage()}")


class TimedKafkaSink:
    """The product's request sink on a real broker, timing its request write."""

    def __init__(self, bootstrap: str) -> None:
        from sinks.requests import RequestSink

        self.inner = RequestSink(bootstrap, Fence(2, 1), transactional_id="livectl-dispatch-cost")
        self.requests_s = 0.0
        self.messages: list[Any] = []
        self.requests_topic = self.inner.requests_topic

    def write_requests(self, batch_id: int, requests: Sequence[dc.BrokerRequest]) -> Any:
        t0 = time.perf_counter()
        try:
            return self.inner.write_requests(batch_id, requests)
        finally:
            self.requests_s = time.perf_counter() - t0

    def write_admin_results(self, batch_id: int, results: Any) -> Any:
        return self.inner.write_admin_results(batch_id, results)

    def write_rejected(self, batch_id: int, rejected: Any) -> Any:
        return self.inner.write_rejected(batch_id, rejected)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


#: with ``--kafka``: the broker, and the batch id of the next round (each round a batch after the last)
KAFKA: dict[str, Any] = {}


def run_once(table: pa.Table, audit: bool = False) -> tuple[dict[str, float], list[Any], TimedAudit | None]:
    gc.collect()
    zk = AcceptingZkSink()
    batch_id = 7
    req: Any
    if KAFKA:
        batch_id = KAFKA["batch"] = KAFKA.get("batch", 0) + 2
        # the predecessor's batch (the one before) on the topic, then a fresh sink as a standby has it
        frame = table.to_pandas()
        with contextlib.closing(TimedKafkaSink(KAFKA["bootstrap"]).inner) as before:
            Dispatcher(AcceptingZkSink(), before).dispatch(frame, batch_id - 1)
        del frame
        req = TimedKafkaSink(KAFKA["bootstrap"])
    else:
        req = TimedRequestSink(Fence(2, 1))
    timed_audit = TimedAudit() if audit else None
    d = Dispatcher(zk, req, audit=timed_audit)
    gc.collect()
    t0 = time.perf_counter()
    frame = table.to_pandas()
    t1 = time.perf_counter()
    d.dispatch(frame, batch_id)
    t2 = time.perf_counter()
    if KAFKA:
        req.inner.close()
    assert zk.called_at is not None
    msgs = [m for m in req.messages if m.topic == req.requests_topic]
    times = {
        "to_pandas_s": t1 - t0,
        "zk_start_s": zk.called_at - t1,
        "requests_s": req.requests_s,
        "dispatch_s": t2 - t1,
        "driver_s": t2 - t0,
    }
    if timed_audit is not None:
        times["audit_s"] = timed_audit.audit_s
        times["audit_prepare_s"] = timed_audit.prepare_s
    return times, msgs, timed_audit


def audit_digest(table: pa.Table, lines: list[str]) -> dict[str, Any]:
    """SHA-256 of the table's rows (column by column, every value) and of the log text."""
    h = hashlib.sha256()
    h.update(repr(table.schema).encode())
    for name in table.column_names:
        h.update(name.encode())
        h.update(repr(table.column(name).to_pylist()).encode())
    return {
        "rows": table.num_rows,
        "table_sha256": h.hexdigest(),
        "log_lines": len(lines),
        "log_sha256": hashlib.sha256("\n".join(lines).encode()).hexdigest(),
    }


def compress_s(msgs: list[Any]) -> float:
    import zstandard

    c = zstandard.ZstdCompressor(level=3)
    t0 = time.perf_counter()
    for m in msgs:
        c.compress(m.value)
    return time.perf_counter() - t0


def digest(msgs: list[Any]) -> str:
    h = hashlib.sha256()
    for m in msgs:
        for part in (m.topic.encode(), m.key, m.value, repr(m.headers).encode(), repr(m.partition).encode()):
            h.update(len(part).to_bytes(8, "big"))
            h.update(part)
        h.update(repr(m.identity).encode())
    return h.hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=100_000)
    ap.add_argument("--buckets", type=int, default=2)
    ap.add_argument("--event", choices=["failover", "failure", "both"], default="both")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--audit", action="store_true", help="the state-change log on (the product's default)")
    ap.add_argument("--kafka", action="store_true", help="the product's request sink, to an Apache Kafka broker")
    ap.add_argument("--profile", action="store_true", help="print cProfile's top functions of one dispatch")
    ap.add_argument("--digest", action="store_true", help="only the messages' digests (4 events)")
    ap.add_argument("--out", default="dispatch_cost", help="results file name prefix under bench/results/")
    args = ap.parse_args()
    per_bucket = args.partitions // args.buckets
    results: dict[str, Any] = {
        "benchmark": "dispatch_cost",
        "machine": machine_info(),
        "load1": os.getloadavg()[0],
        "partitions": args.partitions,
        "buckets": args.buckets,
        "core_file": controller.__file__,
        "audit": args.audit,
        "kafka": args.kafka,
    }
    print("core from", controller.__file__)
    with contextlib.ExitStack() as stack:
        if args.kafka:
            from sinks.requests import ensure_topics

            svc = stack.enter_context(services())
            KAFKA["bootstrap"] = svc.broker.bootstrap
            ensure_topics(svc.broker.bootstrap, ["livectl.requests", "livectl.admin-results", "livectl.rejected"])
        measure(args, per_bucket, results)


def measure(args: argparse.Namespace, per_bucket: int, results: dict[str, Any]) -> None:
    if args.digest:
        logger = logging.getLogger(STATE_CHANGE_LOGGER)
        for event in ("failover", "failure", "double", "return"):
            lines = LogText()
            logger.addHandler(lines)
            logger.setLevel(logging.DEBUG)
            try:
                _, msgs, audit = run_once(bucket_rows(per_bucket, args.buckets, event), args.audit)
            finally:
                logger.removeHandler(lines)
            results[event] = {"messages": len(msgs), "sha256": digest(msgs)}
            if audit is not None:
                results[event]["audit"] = audit_digest(audit.table(), lines.lines)
            print(event, json.dumps(results[event]))
        write_results(args.out, results)
        return
    events = ["failover", "failure"] if args.event == "both" else [args.event]
    for event in events:
        table = bucket_rows(per_bucket, args.buckets, event)
        r: dict[str, Any] = {"rows": table.num_rows, "row_mb": round(table.nbytes / 1e6, 1)}
        r["bucket_encode_rows_s"] = round(ENCODE_S[-1], 3)
        runs = []
        for _ in range(args.rounds):
            t, msgs, _ = run_once(table, args.audit)
            runs.append(t)
        for k in runs[0]:
            r[k] = round(statistics.median(x[k] for x in runs), 3)
            r[k + "_all"] = [round(x[k], 3) for x in runs]
        r["compress_s"] = round(compress_s(msgs), 3)
        r["messages"] = len(msgs)
        r["sha256"] = digest(msgs)
        r["message_mb"] = round(sum(len(m.value) for m in msgs) / 1e6, 1)
        if args.profile:
            frame = table.to_pandas()
            prof = cProfile.Profile()
            prof.enable()
            audit = TimedAudit() if args.audit else None
            Dispatcher(AcceptingZkSink(), MemoryRequestSink(Fence(2, 1)), audit=audit).dispatch(frame, 7)
            prof.disable()
            buf = io.StringIO()
            pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(18)
            print(f"--- {event}: dispatch profile\n{buf.getvalue()}")
        results[event] = r
        print(event, json.dumps({k: v for k, v in r.items() if not k.endswith("_all")}))
    results["load1_end"] = os.getloadavg()[0]
    write_results(args.out, results)


if __name__ == "__main__":
    main()
