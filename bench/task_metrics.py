"""Profile: Spark's own task metrics of a benchmark run, per stage, from its event log.

Run a benchmark with ``LIVECTL_BENCH_EVENT_LOG=<dir>`` (``bench/_common.py`` then keeps Spark's event log
there, uncompressed), then ``.venv/bin/python bench/task_metrics.py <dir or event-log file> [--min-s 1]``.
Per stage of every job that took at least ``--min-s``: its tasks, their wall time (launch to finish,
the longest and the sum), executor run and CPU time, deserialisation, JVM GC, result size, shuffle read
and write, and the Python workers' peak memory where Spark reports it. Reads the newest log in a folder.
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


def summarise(lines: list[str], min_s: float) -> list[dict[str, Any]]:
    stage_job: dict[int, int] = {}
    jobs: dict[int, dict[str, Any]] = {}
    stages: dict[int, dict[str, Any]] = defaultdict(lambda: defaultdict(float))
    for line in lines:
        e = json.loads(line)
        kind = e["Event"]
        if kind == "SparkListenerJobStart":
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
            rows.append({"stage": sid, **{k: (round(v, 3) if isinstance(v, float) else v) for k, v in st.items()}})
        out.append({"job": jid, "job_s": round(took, 3), "description": job["desc"], "stages": rows})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log", type=Path)
    ap.add_argument("--min-s", type=float, default=1.0, help="only jobs that took at least this long")
    args = ap.parse_args()
    print(json.dumps(summarise(_lines(args.log), args.min_s), indent=1))


if __name__ == "__main__":
    main()
