"""Profile: where a Python worker's cyclic garbage collector costs a broker failure's bucket task.

A reused Python worker (``spark.python.worker.reuse``) keeps the states of the buckets it ran
(:data:`streaming.stateful._STATE_CACHE`, ~0.6M objects per 50k-partition bucket), and pyspark's daemon runs
``gc.collect()`` in it after every task. This script plays such a worker in a fresh process per run: ``--held``
buckets' states cached (decoded from their blobs, as a worker does), then ``--calls`` rounds of a broker
failure and its return in each bucket, each round a task as Spark runs it: the bucket's ``step_bucket`` call and
the output's Arrow serialisation (the task: what the next stage and the driver wait for), then the daemon's
``gc.collect()`` (after the task has reported, so beside the other bucket's task on the other core). Modes:

* ``enabled`` — the collector on in the worker, paused inside the call (``streaming.collector.gc_paused``):
  re-enabled as the call returns, with the new state's objects pending, so a full pass can land inside the task;
* ``off`` — the collector off in the worker (``streaming.worker_daemon``'s ``disable_collector``): the daemon's
  ``gc.collect()`` after each task still frees the task's garbage cycles;
* ``off_frozen`` — as ``off``, and after that collection everything left is frozen (``gc.freeze``), so the next
  collection walks only what later tasks make;
* ``shipped`` — as ``enabled``, with livectl's worker daemon's collection after the task
  (``streaming.worker_daemon.TaskEndCollector``: the collection, then the survivors frozen, a full collection
  once the frozen objects have doubled since the last one).

Per mode, ABBA over fresh processes (``--rounds`` each): the task's wall seconds (the median call), the
collection's after it, the collections that ran inside the tasks (count and seconds, from ``gc.callbacks``),
the process's peak RSS, and its RSS and frozen objects after the first and the last task (whether what is
frozen grows task after task). Reproduce: ``.venv/bin/python bench/worker_collector.py [--partitions 100000]
[--buckets 2] [--held 2] [--calls 3] [--rounds 2]``.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine_info, print_table, wait_quiet, write_results

MODES = ("enabled", "off", "off_frozen", "shipped")
DEFAULT_MODES = ("enabled", "shipped")


def one_run(mode: str, partitions: int, buckets: int, held: int, calls: int) -> dict[str, Any]:
    """One worker process's rounds (see the module docstring); run in a fresh process."""
    import pandas as pd
    import pyarrow as pa
    from bucket_cost import _GroupState, cached_load
    from core_step import build_state

    from core import events as ev
    from core.codec.events import event_to_json
    from core.model import Endpoint
    from streaming import stateful
    from streaming.routing import KIND_EVENT, KIND_TICK
    from streaming.worker_daemon import TaskEndCollector

    state = build_state(10, partitions // buckets, 3, 100)
    blobs = [stateful.dump_state(state)]
    for _ in range(held - 1):  # the worker's other buckets: the same size, their own objects
        blobs.append(stateful.dump_state(stateful.load_state(*blobs[0])))
    del state
    for b, blob in enumerate(blobs):
        cached_load(b, *blob)
    gc.collect()
    collector = TaskEndCollector()
    if mode != "enabled":
        gc.disable()
    if mode == "off_frozen":
        gc.freeze()
    inside: list[float] = []
    started: list[float] = []

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started.append(time.perf_counter())
        elif started:
            inside.append(time.perf_counter() - started.pop())

    endpoints = (Endpoint("PLAINTEXT", "broker1", 9092),)
    columns = ["bucket", "ts", "src", "offset", "sub", "kind", "payload"]
    tasks: list[float] = []
    after: list[float] = []
    rss: list[float] = []
    frozen: list[int] = []
    in_task_gc: list[float] = []
    ts = 0
    for c in range(calls):
        # broker 1 fails and comes back with a new epoch (its registration's czxid) in each round
        for payload in (
            event_to_json(ev.BrokerFailure(1)),
            event_to_json(ev.BrokerStartup(1, 2000 + c, None, endpoints)),
        ):
            for b in range(held):
                ts += 1
                gs = _GroupState(blobs[b])
                frame = pd.DataFrame(
                    [
                        (b, ts, "bench/0", ts, 0, KIND_EVENT, payload),
                        (b, ts + 1, "~tick", 0, 0, KIND_TICK, event_to_json(ev.Tick(ts + 1))),
                    ],
                    columns=columns,
                )
                inside.clear()
                gc.callbacks.append(on_gc)
                t0 = time.perf_counter()
                for out in stateful.step_bucket((b,), iter([frame]), gs):
                    pa.RecordBatch.from_pandas(out, preserve_index=False)
                del out, frame
                tasks.append(time.perf_counter() - t0)
                gc.callbacks.remove(on_gc)
                in_task_gc.append(sum(inside))
                blobs[b] = gs.value
                t1 = time.perf_counter()
                if mode == "shipped":
                    collector.collect()  # livectl's worker daemon, after the task
                else:
                    gc.collect()  # pyspark's daemon, after the task
                    if mode == "off_frozen":
                        gc.freeze()
                after.append(time.perf_counter() - t1)
                rss.append(_rss_mib())
                frozen.append(gc.get_freeze_count())
                ts += 1
    return {
        "mode": mode,
        "task_s": tasks,
        "after_task_collect_s": after,
        "in_task_gc_s": in_task_gc,
        "task_s_median": statistics.median(tasks),
        "after_task_collect_s_median": statistics.median(after),
        "in_task_gc_s_median": statistics.median(in_task_gc),
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "rss_mib": rss,
        "frozen": frozen,
        "full_collections": collector.full_collections,
    }


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=100_000)
    ap.add_argument("--buckets", type=int, default=2)
    ap.add_argument("--held", type=int, default=2, help="buckets' states one worker keeps")
    ap.add_argument("--calls", type=int, default=3, help="rounds of failure + return per bucket")
    ap.add_argument("--rounds", type=int, default=2, help="fresh processes per mode, ABBA")
    ap.add_argument("--modes", default=",".join(DEFAULT_MODES), help=f"of {','.join(MODES)}")
    ap.add_argument("--no-wait-quiet", action="store_true")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one_run(args.one, args.partitions, args.buckets, args.held, args.calls)))
        return
    modes = args.modes.split(",")
    load = None if args.no_wait_quiet else wait_quiet()
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
    for r in range(args.rounds):
        for mode in modes if r % 2 == 0 else list(reversed(modes)):
            cmd = [sys.executable, __file__, "--one", mode, "--partitions", str(args.partitions)]
            cmd += ["--buckets", str(args.buckets), "--held", str(args.held), "--calls", str(args.calls)]
            got = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
            runs[mode].append(got)
            print(
                f"round {r} {mode}: task {got['task_s_median']:.3f} s, in-task collections "
                f"{got['in_task_gc_s_median']:.3f} s, after-task collect {got['after_task_collect_s_median']:.3f} s, "
                f"RSS {got['rss_mib'][0]:.0f} -> {got['rss_mib'][-1]:.0f} MiB, "
                f"frozen {got['frozen'][0]} -> {got['frozen'][-1]}",
                flush=True,
            )
    rows = []
    summary: dict[str, Any] = {}
    base = statistics.median(t for g in runs[modes[0]] for t in g["task_s"])
    for mode in modes:
        task = statistics.median(t for g in runs[mode] for t in g["task_s"])
        coll = statistics.median(t for g in runs[mode] for t in g["after_task_collect_s"])
        ingc = statistics.median(t for g in runs[mode] for t in g["in_task_gc_s"])
        rss = max(g["peak_rss_mib"] for g in runs[mode])
        # RSS after the first task and after the last, the run's median of each
        rss_first = statistics.median(g["rss_mib"][0] for g in runs[mode])
        rss_last = statistics.median(g["rss_mib"][-1] for g in runs[mode])
        summary[mode] = {
            "task_s": task,
            "after_task_collect_s": coll,
            "in_task_gc_s": ingc,
            "peak_rss_mib": rss,
            "rss_after_first_task_mib": rss_first,
            "rss_after_last_task_mib": rss_last,
        }
        rows.append(
            [
                mode,
                f"{task:.3f}",
                f"{ingc:.3f}",
                f"{coll:.3f}",
                f"{task / base:.2f}",
                f"{rss:.0f}",
                f"{rss_first:.0f} -> {rss_last:.0f}",
            ]
        )
    print_table(
        [
            "mode",
            "task s",
            "in-task gc s",
            "collect after s",
            f"task / {modes[0]}",
            "peak RSS MiB",
            "RSS first -> last task MiB",
        ],
        rows,
    )
    path = write_results(
        "worker_collector",
        {"args": vars(args), "load_at_start": load, "summary": summary, "runs": runs, "machine": machine_info()},
    )
    print(f"results: {path}")


if __name__ == "__main__":
    main()
