"""Where a Spark driver's thread spent a window: its samples and its lock waits, from a JDK Flight Recording.

Record the driver of a benchmark with Java's own profiler, then read one thread of it (by default Spark's
stream execution thread: the micro-batch's planning, ``addBatch`` and the call into ``foreachBatch``)::

    # the driver JVM records from its start; dump the recording while the benchmark runs (the JVM ends with it)
    .venv/bin/python bench/failover.py --only cold --conf \\
        "spark.driver.extraJavaOptions=-XX:StartFlightRecording=settings=profile" &
    jcmd $(pgrep -o -f org.apache.spark.deploy.SparkSubmit) JFR.dump filename=/tmp/cold.jfr   # repeat until it ends
    .venv/bin/python bench/jfr_waits.py /tmp/cold.jfr [--thread "stream execution"] [--from 21:09:47 --to 21:09:52]

Prints one line per sample of the thread (time, R = running Java / N = in native code such as a socket read,
the Spark steps found on its stack, its top frames), then every monitor the thread waited at least 20 ms to
enter (``jdk.JavaMonitorEnter``: the lock's class and how long), then the other threads sampled inside
``SparkEnv.createPythonWorker`` in the window (who may hold Spark's JVM-wide lock for Python processes). A
blocked thread is not sampled at all: a gap in its samples with a monitor wait over it is time spent on a
lock. Needs the JDK's ``jfr`` tool on the PATH.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from typing import Any

#: Spark steps named when they are on a sample's stack
STEPS = (
    "latestOffset",
    "executedPlan",
    "toRdd",
    "planInputPartitions",
    "createReadInfoInPython",
    "createPythonWorker",
    "startDaemon",
    "ForeachBatchSink.addBatch",
    "PythonForeachBatchHelper",
)


def events(path: str, kinds: str, depth: int = 80) -> list[dict[str, Any]]:
    out = subprocess.run(
        ["jfr", "print", "--json", "--events", kinds, "--stack-depth", str(depth), path],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found: list[dict[str, Any]] = json.loads(out)["recording"]["events"]
    return sorted(found, key=lambda e: e["values"]["startTime"])


def clock(e: dict[str, Any]) -> str:
    return str(e["values"]["startTime"])[11:23]


def thread_of(e: dict[str, Any]) -> str:
    t = e["values"].get("sampledThread") or e["values"].get("eventThread") or {}
    return str(t.get("javaName") or t.get("osName") or "?")


def frames(e: dict[str, Any]) -> list[str]:
    stack = e["values"].get("stackTrace") or {}
    return [f"{f['method']['type']['name'].rsplit('/', 1)[-1]}.{f['method']['name']}" for f in stack.get("frames", [])]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("recording")
    ap.add_argument("--thread", default="stream execution", help="part of the thread's name")
    ap.add_argument("--from", dest="start", default="", help="HH:MM:SS[.fff] (UTC), inclusive")
    ap.add_argument("--to", dest="end", default="99", help="HH:MM:SS[.fff] (UTC), inclusive")
    ap.add_argument("--frames", type=int, default=4, help="top frames printed per sample")
    args = ap.parse_args()

    def inside(e: dict[str, Any]) -> bool:
        return bool(args.start <= clock(e) <= args.end)

    samples = [e for e in events(args.recording, "jdk.ExecutionSample,jdk.NativeMethodSample") if inside(e)]
    for e in samples:
        if args.thread not in thread_of(e):
            continue
        stack = frames(e)
        steps = [s for s in STEPS if any(s in f for f in stack)]
        kind = "N" if e["type"] == "jdk.NativeMethodSample" else "R"
        print(clock(e), kind, ",".join(steps) or "-", " < ".join(stack[: args.frames]))
    print("\nlock waits of the thread (jdk.JavaMonitorEnter, >= 20 ms):")
    for e in events(args.recording, "jdk.JavaMonitorEnter", depth=12):
        if args.thread not in thread_of(e) or not inside(e):
            continue
        lock = (e["values"].get("monitorClass") or {}).get("name", "?")
        print(f"  {clock(e)} waited {e['values'].get('duration')} for {lock}")
    holders = {
        thread_of(s)
        for s in samples
        if args.thread not in thread_of(s) and any("createPythonWorker" in f for f in frames(s))
    }
    print(f"other threads sampled in SparkEnv.createPythonWorker in the window: {sorted(holders) or 'none'}")


if __name__ == "__main__":
    main()
