"""Profile: who uses the CPU during each Spark job of a benchmark run — per process kind and thread.

On 2 cores every CPU-second that another thread takes is one the Python workers wait for. This script
samples every thread of every process from ``/proc`` (user + system ticks) while a benchmark runs, then
splits the CPU by Spark job using the run's event log (``LIVECTL_BENCH_EVENT_LOG``): per job, the seconds
of the Python workers, the JVM's compiler threads (``C1/C2 CompilerThread``), its garbage collector, the
rest of the JVM, the benchmark's own process (the driver's Python), ZooKeeper, and this sampler.

Run, beside a benchmark::

    .venv/bin/python -m bench cpu_threads record /tmp/cpu.jsonl --seconds 900 &
    LIVECTL_BENCH_EVENT_LOG=/tmp/evlog .venv/bin/python -m bench broker_failure --sizes 100000
    kill %1
    .venv/bin/python -m bench cpu_threads report /tmp/cpu.jsonl /tmp/evlog/local-*

``--interval`` (default 0.5 s): a shorter one costs the sampler itself more (0.1 s: a quarter of a core).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import time
from pathlib import Path
from typing import Any

#: process kinds by what their command line holds, first match wins (the JVM is Spark's: launched through
#: pyspark's scripts, its command line names pyspark's jars)
KINDS = (
    ("sampler", "cpu_threads.py"),
    ("zookeeper", "zookeeper"),
    ("python_worker", "worker_daemon"),
    # the Python processes the JVM starts for the query's Python data source: its reads (latestOffset) and
    # its planning (lookup, create, plan the read)
    ("python_source", "python_streaming_source_runner"),
    ("python_planner", "pyspark.sql.worker."),
    ("python_worker", "pyspark.daemon"),
    ("spark_jvm", "pyspark"),
    ("driver", "bench/"),
)


def _threads() -> dict[str, tuple[int, str, int]]:
    """tid -> (pid, thread name, CPU ticks) of every thread now."""
    out: dict[str, tuple[int, str, int]] = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
                name = stat[stat.find("(") + 1 : stat.rfind(")")]
                fields = stat[stat.rfind(")") + 2 :].split()
                out[tid] = (int(pid), name, int(fields[11]) + int(fields[12]))
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
    return out


def record(path: Path, seconds: float, interval: float) -> None:
    """Samples to ``path`` (one JSON line per sample) and each process's command line to ``path``.cmd."""
    seen: set[int] = set()
    end = time.time() + seconds
    with path.open("w") as out, Path(f"{path}.cmd").open("w") as cmds:
        while time.time() < end:
            started = time.time()
            sample = _threads()
            for pid, _, _ in sample.values():
                if pid not in seen:
                    seen.add(pid)
                    try:
                        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                    except OSError:
                        cmd = ""
                    cmds.write(json.dumps([pid, cmd[:400]]) + "\n")
            out.write(json.dumps([started, sample]) + "\n")
            out.flush()
            cmds.flush()
            time.sleep(max(0.0, interval - (time.time() - started)))


def _kind(cmd: str, thread: str) -> str | None:
    for kind, marker in KINDS:
        if marker in cmd:
            if kind == "spark_jvm" and "Compiler" in thread:
                return "jvm_compiler"
            if kind == "spark_jvm" and "GC" in thread:
                return "jvm_gc"
            return kind
    return None


def jobs_of(event_log: Path) -> list[tuple[int, float, float, str]]:
    """(job id, start, end, description) of each finished job in a Spark event log."""
    started: dict[int, tuple[float, str]] = {}
    out: list[tuple[int, float, float, str]] = []
    for line in event_log.read_text().splitlines():
        e = json.loads(line)
        if e["Event"] == "SparkListenerJobStart":
            desc = e.get("Properties", {}).get("spark.job.description", "")
            started[e["Job ID"]] = (e["Submission Time"] / 1000, desc)
        elif e["Event"] == "SparkListenerJobEnd" and e["Job ID"] in started:
            t0, desc = started[e["Job ID"]]
            out.append((e["Job ID"], t0, e["Completion Time"] / 1000, desc))
    return out


def report(path: Path, event_log: Path, min_s: float) -> list[dict[str, Any]]:
    """CPU seconds per process kind within each job of at least ``min_s`` seconds."""
    cmds = {int(p): c for p, c in (json.loads(ln) for ln in Path(f"{path}.cmd").read_text().splitlines())}
    samples = [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]
    hz = os.sysconf("SC_CLK_TCK")
    rows: list[dict[str, Any]] = []
    for job, t0, t1, desc in jobs_of(event_log):
        if t1 - t0 < min_s or not samples:
            continue
        first = min(samples, key=lambda s: abs(s[0] - t0))
        last = min(samples, key=lambda s: abs(s[0] - t1))
        cpu: collections.Counter[str] = collections.Counter()
        for tid, (pid, thread, ticks) in last[1].items():
            before = first[1].get(tid)
            used = (ticks - (before[2] if before else 0)) / hz
            kind = _kind(cmds.get(pid, ""), thread)
            if used > 0 and kind is not None:
                cpu[kind] += used
        rows.append(
            {
                "job": job,
                "description": desc,
                "job_s": round(t1 - t0, 2),
                "sampled_s": round(last[0] - first[0], 2),
                "cpu_s": {k: round(v, 2) for k, v in cpu.most_common()},
            }
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="sample every thread's CPU until --seconds have passed")
    rec.add_argument("output", type=Path)
    rec.add_argument("--seconds", type=float, default=900.0)
    rec.add_argument("--interval", type=float, default=0.5)
    rep = sub.add_parser("report", help="CPU per process kind within each Spark job of the event log")
    rep.add_argument("samples", type=Path)
    rep.add_argument("event_log", type=Path)
    rep.add_argument("--min-s", type=float, default=2.0, help="only jobs that took at least this long")
    args = ap.parse_args()
    if args.command == "record":
        record(args.output, args.seconds, args.interval)
        return
    for row in report(args.samples, args.event_log, args.min_s):
        cpu = "  ".join(f"{k} {v:.2f}" for k, v in row["cpu_s"].items())
        print(f"job {row['job']} {row['job_s']:.2f} s {row['description'][:48]!r}: {cpu}")


if __name__ == "__main__":
    main()
