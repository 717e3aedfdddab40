"""Profile: what a Python worker's start costs a task, with pyspark's daemon and with livectl's.

Each round starts a fresh Spark driver (a subprocess: ``local[2]``, the shipped ``spark-defaults.conf``,
Python workers on this interpreter) and runs the warm-up job of :mod:`streaming.warm.warmup` (one task per core,
each importing what the query's tasks import and building the input validator) three times: first in the
session (the daemon and its workers start), right after (the workers reused), and after ``--idle-gap``
seconds without a job (Spark has closed the idle workers after its minute: new ones come from the daemon).
Each job's wall time and each task's in-worker import time are recorded. Variants, interleaved ABBA:

* ``pyspark``: ``spark.python.daemon.module=pyspark.daemon`` (pyspark's own, which imports nothing);
* ``livectl``: the shipped default, :mod:`streaming.warm.worker_daemon` (imports once, before forking).

``--variants A,B`` picks the order (default ``pyspark,livectl``).

Run::

    .venv/bin/python -m bench worker_start --no-wait-quiet            # 2 rounds of each, ~10 min
    .venv/bin/python -m bench worker_start --rounds 1 --idle-gap 0    # quick: first job only

Writes ``bench/results/worker_start-<UTC stamp>.json`` (and ``…-latest.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

from bench.harness import machine_info, print_table, spark_session, wait_quiet, write_results

VARIANTS = {
    "pyspark": "pyspark.daemon",
    "livectl": "streaming.warm.worker_daemon",
}


def one_round(daemon: str, idle_gap: float) -> dict[str, Any]:
    """In this (child) process: a fresh session, the three jobs."""
    import core
    from streaming.warm.warmup import warm_workers

    spark, spark_s = spark_session(2, {"spark.python.daemon.module": daemon})
    try:
        out: dict[str, Any] = {"daemon": daemon, "core_file": core.__file__, "spark_startup_s": round(spark_s, 1)}
        out["machine"] = machine_info(None, spark)
        for label, gap in (("first", 0.0), ("reused", 0.0), ("after_idle", idle_gap)):
            if label == "after_idle" and idle_gap <= 0:
                continue
            time.sleep(gap)
            w = warm_workers(spark)
            out[label] = {
                "job_s": round(w.job_seconds, 3),
                "task_import_s": [round(s, 3) for s in w.task_seconds],
                "workers": len(set(w.pids)),
                "pids": list(w.pids),
            }
        return out
    finally:
        spark.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=2, help="ABBA pairs: each variant runs 2 × rounds times")
    ap.add_argument("--idle-gap", type=float, default=75.0, help="seconds idle before the third job (0: none)")
    ap.add_argument("--no-wait-quiet", action="store_true", help="do not wait for load average < 1.5")
    ap.add_argument("--variants", default="pyspark,livectl", help="the two variants to alternate (A,B)")
    ap.add_argument("--child", choices=sorted(VARIANTS), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print("RESULT " + json.dumps(one_round(VARIANTS[args.child], args.idle_gap)), flush=True)
        return
    if not args.no_wait_quiet:
        wait_quiet()
    a, b = args.variants.split(",")
    if a not in VARIANTS or b not in VARIANTS:
        raise SystemExit(f"--variants: two of {', '.join(VARIANTS)}")
    order: list[str] = []
    for r in range(args.rounds):
        order += [a, b, b, a] if r % 2 == 0 else [b, a, a, b]
    runs: list[dict[str, Any]] = []
    for variant in order:
        load = os.getloadavg()[0]
        proc = subprocess.run(
            [sys.executable, __file__, "--child", variant, "--idle-gap", str(args.idle_gap)],
            capture_output=True,
            text=True,
            check=False,
        )
        line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
        if line is None:
            raise RuntimeError(f"{variant} round failed:\n{proc.stderr[-3000:]}")
        run = json.loads(line[len("RESULT ") :])
        run["variant"] = variant
        run["load_at_start"] = round(load, 2)
        runs.append(run)
        print(json.dumps({k: run.get(k) for k in ("variant", "load_at_start", "first", "reused", "after_idle")}))
    results: dict[str, Any] = {"benchmark": "worker_start", "idle_gap_s": args.idle_gap, "runs": runs}
    results["machine"] = runs[0].pop("machine")
    for run in runs[1:]:
        run.pop("machine", None)
    rows = []
    summary: dict[str, Any] = {}
    for variant in (a, b):
        mine = [r for r in runs if r["variant"] == variant]
        s: dict[str, Any] = {}
        for label in ("first", "reused", "after_idle"):
            jobs = [r[label]["job_s"] for r in mine if label in r]
            tasks = [max(r[label]["task_import_s"]) for r in mine if label in r]
            if jobs:
                s[label] = {
                    "job_s_median": round(statistics.median(jobs), 3),
                    "task_s_median": round(statistics.median(tasks), 3),
                }
        summary[variant] = s
        rows.append(
            [variant, len(mine)]
            + [
                s.get(lbl, {}).get(k)
                for lbl in ("first", "reused", "after_idle")
                for k in ("job_s_median", "task_s_median")
            ]
        )
    results["summary"] = summary
    results["loads"] = [r["load_at_start"] for r in runs]
    print_table(
        ["daemon", "runs", "first job s", "its tasks s", "reused job s", "tasks s", "after idle job s", "tasks s"],
        rows,
    )
    print(f"load averages at each start: {results['loads']}")
    print(f"results: {write_results('worker_start', results)}")


if __name__ == "__main__":
    main()
