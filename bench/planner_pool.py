"""Profile: a query's first micro-batch with Spark's Python planner processes cold and warm.

Spark plans a Python streaming source's read once per run of a query, at its first micro-batch, in planner
processes (``pyspark.sql.worker.plan_data_source_read``) forked from pyspark's own daemon, which preloads
nothing: each imports pyspark's SQL worker, pyarrow and livectl's source. Spark pools them per Python
executable, worker module and environment, and closes one idle for a minute. A takeover's first batch met
them cold (``bench/README.md``, "Where a takeover's failover batch waits"). This script runs three queries
of livectl's ``livectl-kafka`` source, one after the other, on a real Apache Kafka broker (free loopback port,
stopped by PID) in one local SparkSession (shipped ``spark-defaults.conf``): the first with no planner
process yet, the second right after it (the pool holds the first's), the third after ``--idle`` seconds
(Spark's idle timeout is a minute), and a fourth after as long idle while livectl's
:class:`streaming.read_planning.ReadPlanning` planned the source's read every 40 s (what a standby does
while it waits). Each: from ``start()`` to its first ``foreachBatch`` call, the first batch's ``addBatch``,
and the planner processes forked for it.

Run: ``.venv/bin/python bench/planner_pool.py [--idle 75]``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine_info, print_table, spark_session, wait_quiet, write_results
from kafka import KafkaProducer

from livectl import local
from sinks.requests import ensure_topics
from streaming.query import load_source, register_source
from streaming.read_planning import INTERVAL_S, ReadPlanning
from streaming.source_options import SOURCE_NAME

TOPICS = ("planner.a", "planner.b")


def planner_pids() -> set[str]:
    """The live read-planning processes."""
    found = subprocess.run(["pgrep", "-f", "plan_data_source_read"], capture_output=True, text=True, check=False)
    return set(found.stdout.split())


def source_options(bootstrap: str) -> dict[str, str]:
    return {
        "bootstrap_servers": bootstrap,
        "topics": ",".join(TOPICS),
        "starting_offsets": "earliest",
        "max_records_per_batch": "1000",
        "fail_on_data_loss": "false",
    }


def first_batch(spark: Any, producer: KafkaProducer, bootstrap: str, checkpoint: Path) -> dict[str, Any]:
    """One query of the source: a record sent after its start, timed to its first batch."""
    frame = load_source(spark, source_options(bootstrap))
    called: list[float] = []

    def on_batch(df: Any, batch_id: int) -> None:
        called.append(time.monotonic())
        df.count()

    before = planner_pids()
    started = time.monotonic()
    query = frame.writeStream.foreachBatch(on_batch).option("checkpointLocation", str(checkpoint)).start()
    try:
        producer.send(TOPICS[0], b"x").get(timeout=10)
        while not called and time.monotonic() - started < 120:
            time.sleep(0.02)
        forked = sorted(planner_pids() - before)
        while query.lastProgress is None and time.monotonic() - started < 120:
            time.sleep(0.1)
        progress = query.lastProgress or {}
    finally:
        query.stop()
    return {
        "to_first_foreach_batch_s": round(called[0] - started, 2) if called else None,
        "first_add_batch_ms": progress.get("durationMs", {}).get("addBatch"),
        "planner_processes_forked": len(forked),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--idle", type=float, default=75.0, help="seconds before the third query")
    ap.add_argument("--no-wait-quiet", action="store_true")
    args = ap.parse_args()
    load = None if args.no_wait_quiet else wait_quiet()
    run_dir = Path(tempfile.mkdtemp(prefix="livectl-bench-planner-"))
    broker = local.start_kafka(run_dir / "broker")
    results: dict[str, Any] = {"args": vars(args), "load_at_start": load}
    try:
        ensure_topics(broker.bootstrap, list(TOPICS))
        spark, _ = spark_session(2)
        register_source(spark)
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
        runs: dict[str, dict[str, Any]] = {}
        runs["cold (no planner process yet)"] = first_batch(spark, producer, broker.bootstrap, run_dir / "q1")
        runs["warm (right after a query)"] = first_batch(spark, producer, broker.bootstrap, run_dir / "q2")
        print(f"idle {args.idle:.0f} s", flush=True)
        time.sleep(args.idle)
        runs[f"after {args.idle:.0f} s idle"] = first_batch(spark, producer, broker.bootstrap, run_dir / "q3")
        options = source_options(broker.bootstrap)
        planning = ReadPlanning(spark, SOURCE_NAME, options, load_source(spark, options))
        planning.plan()
        planning.start()
        print(f"idle {args.idle:.0f} s, the read planned every {INTERVAL_S:.0f} s", flush=True)
        time.sleep(args.idle)
        planning.stop()
        run = first_batch(spark, producer, broker.bootstrap, run_dir / "q4")
        run["plannings_s"] = [round(s, 3) for s in planning.seconds]
        runs[f"after {args.idle:.0f} s idle, read planned every {INTERVAL_S:.0f} s"] = run
        results["runs"] = runs
        results["machine"] = machine_info(spark=spark)
        producer.close()
        spark.stop()
    finally:
        local.stop_kafka(broker)
    rows = [
        [name, r["to_first_foreach_batch_s"], r["first_add_batch_ms"], r["planner_processes_forked"]]
        for name, r in results["runs"].items()
    ]
    print_table(["planner processes", "start -> first foreachBatch s", "first addBatch ms", "forked"], rows)
    print(f"results: {write_results('planner_pool', results)}")


if __name__ == "__main__":
    main()
