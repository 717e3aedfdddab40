"""Profile: Spark's own task metrics of a benchmark run, per stage, from its event log.

Run a benchmark with ``LIVECTL_BENCH_EVENT_LOG=<dir>`` (``bench/_common.py`` then keeps Spark's event log
there, uncompressed), then ``.venv/bin/python bench/task_metrics.py <dir or event-log file> [--min-s 1]``.
Per stage of every job that took at least ``--min-s``: its tasks, their wall time (launch to finish,
the longest and the sum), executor run and CPU time, deserialisation, JVM GC, result size, shuffle read
and write, and the Python workers' peak memory where Spark reports it. Reads the newest log in a folder.

``--tasks`` adds, per stage, every task whose wall time is at least ``--min-task-s``: where its wall time
went by Spark's own clocks (scheduler delay before run, deserialisation, executor run time split into CPU,
JVM GC and the rest, result serialisation, the driver's fetch of a large result) and the SQL metrics of
the plan's nodes that the task reported (the stateful operator's time to update and to commit its state
store, the Python runner's data sent and returned, rows), each named by its node. Metric names and node
names come from the log's ``SparkListenerSQLExecutionStart`` plans, so nothing is assumed of the version.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from collections import defaultdict
from pathlib import Path
from typing import Any


def _lines(path: Path) -> list[str]:
    if path.is_dir():
        files = sorted(
            (p for p in path.rglob("*") if p.is_file() and not p.name.startswith(".")), key=lambda p: p.stat().st_mtime
        )
        files = [p for p in files if "events" in p.name or p.name.startswith("local-")]
        path = files[-1]
    if path.suffix == ".zstd":
        return subprocess.run(
            ["zstd", "-dc", str(path)], check=True, capture_output=True, text=True
        ).stdout.splitlines()
    return path.read_text().splitlines()


#: SQL metric types (``SQLMetrics``): how an accumulator's value reads
_SCALE = {"timing": ("ms", 1.0), "nsTiming": ("ms", 1e-6), "size": ("MB", 1e-6), "sum": ("", 1.0), "average": ("", 1.0)}


def _plan_metrics(plan: dict[str, Any], out: dict[int, tuple[str, str]]) -> None:
    """Every SQL metric of a plan node and its children: accumulator id -> (``node: metric``, metric type)."""
    node = plan.get("nodeName", "?")
    for m in plan.get("metrics") or []:
        out[int(m["accumulatorId"])] = (f"{node}: {m['name']}", m.get("metricType", "sum"))
    for child in plan.get("children") or []:
        _plan_metrics(child, out)


def _sql_metrics(accumulables: list[dict[str, Any]], names: dict[int, tuple[str, str]]) -> dict[str, float]:
    """A task's updates of the plan's SQL metrics, named by node and scaled to ms / MB."""
    out: dict[str, float] = {}
    for acc in accumulables:
        known = names.get(int(acc.get("ID", -1)))
        if known is None or acc.get("Update") in (None, ""):
            continue
        label, kind = known
        unit, scale = _SCALE.get(kind, ("", 1.0))
        try:
            value = float(acc["Update"]) * scale
        except (TypeError, ValueError):
            continue
        key = f"{label} ({unit})" if unit else label
        out[key] = round(out.get(key, 0.0) + value, 3)
    return out


def _task_row(ti: dict[str, Any], tm: dict[str, Any], names: dict[int, tuple[str, str]]) -> dict[str, Any]:
    """One task's wall time split by Spark's clocks (seconds), and its SQL metrics."""
    wall = (ti["Finish Time"] - ti["Launch Time"]) / 1000
    run = tm.get("Executor Run Time", 0) / 1000
    cpu = tm.get("Executor CPU Time", 0) / 1e9
    gc = tm.get("JVM GC Time", 0) / 1000
    deser = tm.get("Executor Deserialize Time", 0) / 1000
    ser = tm.get("Result Serialization Time", 0) / 1000
    fetch = (ti["Finish Time"] - ti["Getting Result Time"]) / 1000 if ti.get("Getting Result Time") else 0.0
    sr = tm.get("Shuffle Read Metrics") or {}
    row: dict[str, Any] = {
        "task": ti.get("Task ID"),
        "partition": ti.get("Partition ID", ti.get("Index")),
        "wall_s": wall,
        "deser_s": deser,
        "run_s": run,
        "run_cpu_s": cpu,
        "run_gc_s": gc,
        # the executor's thread neither on the CPU nor collecting: waiting for the Python worker, I/O, locks
        "run_off_cpu_s": max(run - cpu - gc, 0.0),
        "result_ser_s": ser,
        "fetch_result_s": fetch,
        # launch to finish not covered above: scheduling delay, sending the result, the driver's bookkeeping
        "other_s": max(wall - deser - run - ser - fetch, 0.0),
        "result_mb": tm.get("Result Size", 0) / 1e6,
        "peak_exec_mem_mb": tm.get("Peak Execution Memory", 0) / 1e6,
        "shuffle_read_mb": (sr.get("Remote Bytes Read", 0) + sr.get("Local Bytes Read", 0)) / 1e6,
        "shuffle_fetch_wait_s": sr.get("Fetch Wait Time", 0) / 1000,
    }
    row = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items()}
    row["sql"] = _sql_metrics(ti.get("Accumulables") or [], names)
    return row


def summarise(lines: list[str], min_s: float, *, tasks: bool = False, min_task_s: float = 1.0) -> list[dict[str, Any]]:
    """Per job of at least ``min_s`` seconds, its stages' task metrics (and with ``tasks`` the long tasks)."""
    names: dict[int, tuple[str, str]] = {}
    task_rows: dict[int, list[dict[str, Any]]] = defaultdict(list)
    stage_job: dict[int, int] = {}
    jobs: dict[int, dict[str, Any]] = {}
    stages: dict[int, dict[str, Any]] = defaultdict(lambda: defaultdict(float))
    for line in lines:
        e = json.loads(line)
        kind = e["Event"]
        if kind.endswith("SparkListenerSQLExecutionStart") or kind.endswith("SparkListenerSQLAdaptiveExecutionUpdate"):
            _plan_metrics(e.get("sparkPlanInfo") or {}, names)
        elif kind.endswith("SparkListenerSQLAdaptiveSQLMetricUpdates"):
            for m in e.get("sqlPlanMetrics") or []:
                names[int(m["accumulatorId"])] = (m["name"], m.get("metricType", "sum"))
        elif kind == "SparkListenerJobStart":
            jobs[e["Job ID"]] = {
                "start": e["Submission Time"],
                "desc": (e.get("Properties") or {}).get("spark.job.description", ""),
            }
            for sid in e["Stage IDs"]:
                stage_job[sid] = e["Job ID"]
        elif kind == "SparkListenerJobEnd":
            jobs[e["Job ID"]]["end"] = e["Completion Time"]
        elif kind == "SparkListenerStageCompleted":
            info = e["Stage Info"]
            st = stages[info["Stage ID"]]
            st["name"] = info["Stage Name"]
            st["stage_s"] = (info.get("Completion Time", 0) - info.get("Submission Time", 0)) / 1000
        elif kind == "SparkListenerTaskEnd":
            st = stages[e["Stage ID"]]
            ti, tm = e["Task Info"], e.get("Task Metrics") or {}
            wall = (ti["Finish Time"] - ti["Launch Time"]) / 1000
            if tasks and wall >= min_task_s:
                task_rows[e["Stage ID"]].append(_task_row(ti, tm, names))
            st["tasks"] += 1
            st["task_wall_sum_s"] += wall
            st["task_wall_max_s"] = max(st["task_wall_max_s"], wall)
            st["run_s"] += tm.get("Executor Run Time", 0) / 1000
            st["cpu_s"] += tm.get("Executor CPU Time", 0) / 1e9
            st["deser_s"] += tm.get("Executor Deserialize Time", 0) / 1000
            st["jvm_gc_s"] += tm.get("JVM GC Time", 0) / 1000
            st["result_mb"] += tm.get("Result Size", 0) / 1e6
            if ti.get("Getting Result Time"):  # a timestamp: the result's fetch began then
                st["fetch_result_s"] += (ti["Finish Time"] - ti["Getting Result Time"]) / 1000
            sr = tm.get("Shuffle Read Metrics") or {}
            sw = tm.get("Shuffle Write Metrics") or {}
            st["shuffle_read_mb"] += (sr.get("Remote Bytes Read", 0) + sr.get("Local Bytes Read", 0)) / 1e6
            st["shuffle_write_mb"] += sw.get("Shuffle Bytes Written", 0) / 1e6
            st["shuffle_write_s"] += sw.get("Shuffle Write Time", 0) / 1e9
    out = []
    for jid, job in sorted(jobs.items()):
        took = (job.get("end", job["start"]) - job["start"]) / 1000
        if took < min_s:
            continue
        rows = []
        for sid in sorted(s for s, j in stage_job.items() if j == jid and s in stages):
            st = stages[sid]
            row = {"stage": sid, **{k: (round(v, 3) if isinstance(v, float) else v) for k, v in st.items()}}
            if task_rows.get(sid):
                row["long_tasks"] = task_rows[sid]
            rows.append(row)
        out.append({"job": jid, "job_s": round(took, 3), "description": job["desc"], "stages": rows})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log", type=Path)
    ap.add_argument("--min-s", type=float, default=1.0, help="only jobs that took at least this long")
    ap.add_argument("--tasks", action="store_true", help="also each long task's breakdown and SQL metrics")
    ap.add_argument("--min-task-s", type=float, default=1.0, help="with --tasks: tasks of at least this wall time")
    args = ap.parse_args()
    print(json.dumps(summarise(_lines(args.log), args.min_s, tasks=args.tasks, min_task_s=args.min_task_s), indent=1))


if __name__ == "__main__":
    main()
