"""Benchmark: what the state-change log (the audit table, :mod:`streaming.monitoring.audit_log`) adds to a micro-batch.

One real controller (:class:`streaming.driver.app.ControllerApp`, shipped defaults: 8 buckets, 1 s trigger) on real
local services (ZooKeeper + Apache Kafka, free ports, stopped by PID), on a cluster of ``--partitions`` partitions
(default 10k; 10 brokers, replication factor 3, 100 partitions per topic) prepared in ZooKeeper in Kafka's
layout. After the cold start, ``--rounds`` rounds of: broker ``b`` hard-killed (its session closed: a third
of its partitions re-elected, every one of its partitions' ISRs shrunk — ~3k ZooKeeper writes and their
LeaderAndIsr / UpdateMetadata at 10k), then ``b`` registered again (LeaderAndIsr for its replicas). The
audit log is switched on and off *between rounds of the same run* (``Dispatcher.audit`` set or ``None``;
ABBA order, so that a drift of the machine's load falls on both sides alike); the same work, the same
JVM, the same state sizes.

For every micro-batch that did work it records Spark's ``triggerExecution`` (the whole micro-batch: read,
step, ``foreachBatch`` with its sinks and the audit write, commit) and, for the audit side, the time spent
inside the audit call itself (rows, Parquet, Hadoop FileSystem write and rename, progress file, log lines).
Prints both means, the ratio (with / without) and the audit call's share of the batches it ran in.

Run::

    .venv/bin/python bench/audit_cost.py                      # 10k partitions, 4 rounds (~5 min here)
    .venv/bin/python bench/audit_cost.py --partitions 1000 --rounds 2   # quick

Writes ``bench/results/audit_cost-<UTC stamp>.json`` (and ``…-latest.json``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    close,
    machine_info,
    make_chroot,
    plan_layout,
    prepare_tree,
    progress_list,
    register_brokers,
    registration,
    services,
    settings_for,
    spark_session,
    start_controller,
    wait_quiet,
    write_results,
    zk_client,
)
from broker_failure import wait_loaded

N_BROKERS = 10
RF = 3


class TimedAudit:
    """Wraps the app's :class:`streaming.monitoring.audit_log.AuditLog`: the seconds of each call, by batch id."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.seconds: dict[int, float] = {}

    def __call__(self, batch: Any) -> None:
        started = time.perf_counter()
        try:
            self.inner(batch)
        finally:
            self.seconds[int(batch.batch_id)] = self.seconds.get(int(batch.batch_id), 0.0) + (
                time.perf_counter() - started
            )


def work_batches(query: Any, after: int) -> list[dict[str, Any]]:
    """The progress of micro-batches past ``after`` that read input."""
    return [p for p in progress_list(query) if int(p["batchId"]) > after and int(p.get("numInputRows") or 0) > 0]


def settle(query: Any, after: int, quiet_s: float = 3.0, timeout: float = 300.0) -> list[dict[str, Any]]:
    """Wait until the query has run at least one batch past ``after`` and then none for ``quiet_s``."""
    deadline = time.monotonic() + timeout
    last_seen = -1
    last_change = time.monotonic()
    while time.monotonic() < deadline:
        batches = work_batches(query, after)
        newest = max((int(p["batchId"]) for p in batches), default=-1)
        if newest != last_seen:
            last_seen, last_change = newest, time.monotonic()
        elif newest >= 0 and time.monotonic() - last_change >= quiet_s:
            return batches
        time.sleep(0.2)
    raise TimeoutError(f"no quiet query after batch {after} in {timeout:.0f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=4, help="kill + restart rounds (even: ABBA order)")
    ap.add_argument("--buckets", type=int, default=8)
    ap.add_argument("--no-wait-quiet", action="store_true", help="do not wait for load average < 1.5")
    args = ap.parse_args()
    if not args.no_wait_quiet:
        wait_quiet()
    work = Path(tempfile.mkdtemp(prefix="livectl-bench-audit-"))
    results: dict[str, Any] = {"benchmark": "audit_cost", "partitions": args.partitions, "rounds": []}
    with services() as svc:
        spark, spark_s = spark_session(args.buckets)
        try:
            results["machine"] = machine_info(svc.zookeeper.port, spark)
            results["spark_startup_s"] = round(spark_s, 1)
            name = f"ac{args.partitions}x{uuid.uuid4().hex[:6]}"
            make_chroot(svc, name)
            settings = settings_for(svc, name, work / name / "checkpoint", num_buckets=args.buckets)
            admin = zk_client(settings.zookeeper_connect)
            layout = plan_layout(args.partitions, N_BROKERS, RF)
            prepare_tree(admin, layout)
            brokers = register_brokers(settings.zookeeper_connect, list(range(N_BROKERS)))
            rc = start_controller(spark, settings)
            try:
                loaded = wait_loaded(rc, layout.partitions, timeout=900)
                results["cold_start_batch_ms"] = loaded["durationMs"]
                time.sleep(3)
                dispatcher = rc.app.dispatcher
                assert dispatcher is not None and dispatcher.audit is not None
                timed = TimedAudit(dispatcher.audit)
                last = max(int(p["batchId"]) for p in progress_list(rc.app.query))
                # ABBA: on, off, off, on, on, off, ...
                plan = [(i // 2 + i % 2) % 2 == 0 for i in range(args.rounds)]
                for i, audit_on in enumerate(plan):
                    dispatcher.audit = timed if audit_on else None
                    victim = 1 + i % (N_BROKERS - 1)
                    for what in ("failure", "startup"):
                        if what == "failure":
                            close(brokers.pop(victim))
                        else:
                            c = zk_client(settings.zookeeper_connect)
                            c.create(f"/brokers/ids/{victim}", registration(victim, 9000 + victim), ephemeral=True)
                            brokers[victim] = c
                        batches = settle(rc.app.query, last)
                        last = max(int(p["batchId"]) for p in batches)
                        for p in batches:
                            bid = int(p["batchId"])
                            results["rounds"].append(
                                {
                                    "round": i,
                                    "event": what,
                                    "broker": victim,
                                    "audit": audit_on,
                                    "batch_id": bid,
                                    "input_rows": int(p.get("numInputRows") or 0),
                                    "trigger_ms": int(p["durationMs"]["triggerExecution"]),
                                    "audit_ms": round(timed.seconds.get(bid, 0.0) * 1000, 1) if audit_on else None,
                                }
                            )
                        times = ", ".join(f"{p['batchId']}: {p['durationMs']['triggerExecution']} ms" for p in batches)
                        side = "audit" if audit_on else "no audit"
                        print(f"round {i} ({side}): broker {victim} {what}: {times}", flush=True)
                if rc.failed is not None:
                    raise RuntimeError(f"the controller failed: {rc.failed!r}")
            finally:
                rc.stop()
                close(admin)
                for c in brokers.values():
                    close(c)
        finally:
            spark.stop()
    rows = results["rounds"]
    on = [r["trigger_ms"] for r in rows if r["audit"]]
    off = [r["trigger_ms"] for r in rows if not r["audit"]]
    audit_ms = [r["audit_ms"] for r in rows if r["audit"] and r["audit_ms"] is not None]
    summary = {
        "batches_with_audit": len(on),
        "batches_without_audit": len(off),
        "mean_batch_ms_with_audit": round(statistics.fmean(on), 1) if on else None,
        "mean_batch_ms_without_audit": round(statistics.fmean(off), 1) if off else None,
        "ratio_with_over_without": round(statistics.fmean(on) / statistics.fmean(off), 3) if on and off else None,
        "mean_audit_call_ms": round(statistics.fmean(audit_ms), 1) if audit_ms else None,
        "audit_call_share_of_its_batches": round(sum(audit_ms) / sum(on), 4) if on else None,
    }
    results["summary"] = summary
    path = write_results("audit_cost", results)
    print(f"\n{args.partitions:,} partitions, {args.rounds} rounds (results: {path})")
    print(f"  micro-batch, audit on : {summary['mean_batch_ms_with_audit']} ms (mean of {len(on)})")
    print(f"  micro-batch, audit off: {summary['mean_batch_ms_without_audit']} ms (mean of {len(off)})")
    print(f"  ratio on/off          : {summary['ratio_with_over_without']}")
    print(
        f"  the audit call itself : {summary['mean_audit_call_ms']} ms per batch, "
        f"{(summary['audit_call_share_of_its_batches'] or 0) * 100:.1f} % of those batches"
    )


if __name__ == "__main__":
    main()
