"""Benchmark: what an idle controller costs in CPU, per trigger interval — the shipped trigger of 0 (the
source's read waits for records) beside a processing-time trigger (``1 second``, the default before).

On real local services (ZooKeeper + Apache Kafka, free ports, stopped by PID) and one SparkSession (``local[2]``,
shipped defaults otherwise): for each ``--triggers`` value in turn (ABBA over ``--rounds``), a fresh
ZooKeeper chroot gets ``--partitions`` partitions in Kafka's layout and ten broker registrations, the
controller starts on an empty checkpoint and loads them, then nothing happens for ``--seconds``: the CPU
seconds the controller's process tree (this process, its Spark JVM, its Python workers and source
runner) and the services (ZooKeeper, Kafka) used meanwhile, read from ``/proc``, are reported as a share
of one core, with the ratio against the first trigger.

Run::

    .venv/bin/python -m bench idle_cost                                  # 0 s and 1 s, 60 s each, 2 rounds
    .venv/bin/python -m bench idle_cost --triggers "0 seconds,500 milliseconds" --rounds 1 --seconds 30

Writes ``bench/results/idle_cost-<UTC stamp>.json`` (and ``…-latest.json``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid
from typing import Any

from bench.harness import (
    SinkClock,
    close,
    machine_info,
    make_chroot,
    plan_layout,
    prepare_tree,
    print_table,
    progress_list,
    register_brokers,
    services,
    settings_for,
    shipped_buckets,
    spark_session,
    start_controller,
    wait_quiet,
    work_dir,
    write_results,
    zk_client,
)

_TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int | str) -> tuple[int, float]:
    """(parent pid, CPU seconds user + system) of a process, from ``/proc/<pid>/stat``."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICK


def tree_cpu_s(root: int) -> float:
    """CPU seconds of ``root`` and every live descendant."""
    procs: dict[int, tuple[int, float]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                procs[int(d)] = _stat(d)
            except OSError:  # gone meanwhile
                continue
    tree = {root}
    grew = True
    while grew:
        grew = False
        for pid, (ppid, _) in procs.items():
            if ppid in tree and pid not in tree:
                tree.add(pid)
                grew = True
    return sum(procs[p][1] for p in tree if p in procs)


def one(spark: Any, svc: Any, trigger: str, *, partitions: int, seconds: float, buckets: int) -> dict[str, Any]:
    name = f"idle{uuid.uuid4().hex[:6]}"
    make_chroot(svc, name)
    settings = settings_for(
        svc, name, work_dir("livectl-bench-idle-") / "checkpoint", num_buckets=buckets, trigger_interval=trigger
    )
    admin = zk_client(settings.zookeeper_connect)
    prepare_tree(admin, plan_layout(partitions, 10, 3, prefix="idle"))
    brokers = register_brokers(settings.zookeeper_connect, list(range(10)))
    rc = start_controller(spark, settings, SinkClock(track_paths=False))
    try:
        deadline = time.monotonic() + 600
        while not any(p.get("numInputRows", 0) > 0 for p in progress_list(rc.app.query)):
            if time.monotonic() > deadline or rc.failed is not None:
                raise RuntimeError(f"the controller did not load: {rc.failed!r}")
            time.sleep(0.2)
        time.sleep(10)  # the failover batch's aftermath (its echo events) is not idling
        batches = len(progress_list(rc.app.query))
        services_pids = (svc.zookeeper.pid, svc.broker.pid)
        c0, s0, t0 = tree_cpu_s(os.getpid()), sum(_stat(p)[1] for p in services_pids), time.monotonic()
        time.sleep(seconds)
        c1, s1, t1 = tree_cpu_s(os.getpid()), sum(_stat(p)[1] for p in services_pids), time.monotonic()
        return {
            "trigger": trigger,
            "controller_pct": round(100 * (c1 - c0) / (t1 - t0), 2),
            "services_pct": round(100 * (s1 - s0) / (t1 - t0), 2),
            "progress_events_meanwhile": len(progress_list(rc.app.query)) - batches,
        }
    finally:
        rc.stop()
        for c in brokers.values():
            close(c)
        close(admin)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--triggers", default="0 seconds,1 second", help="comma-separated; the first is the baseline")
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=60.0, help="idle time measured per run")
    ap.add_argument("--rounds", type=int, default=2, help="ABBA: the order alternates between rounds")
    ap.add_argument("--buckets", type=int, default=shipped_buckets())
    ap.add_argument("--no-wait-quiet", action="store_true", help="do not wait for load average < 1.5")
    args = ap.parse_args()
    triggers = [t.strip() for t in args.triggers.split(",") if t.strip()]
    if not args.no_wait_quiet:
        wait_quiet()
    results: dict[str, Any] = {"benchmark": "idle_cost", "workload": vars(args)}
    runs: list[dict[str, Any]] = []
    with services() as svc:
        spark, _ = spark_session(args.buckets)
        try:
            results["machine"] = machine_info(svc.zookeeper.port, spark)
            for r in range(args.rounds):
                for trigger in triggers if r % 2 == 0 else list(reversed(triggers)):
                    run = one(
                        spark, svc, trigger, partitions=args.partitions, seconds=args.seconds, buckets=args.buckets
                    )
                    run["round"] = r
                    print(run, flush=True)
                    runs.append(run)
        finally:
            spark.stop()
    results["runs"] = runs
    base = statistics.median(r["controller_pct"] for r in runs if r["trigger"] == triggers[0])
    rows = []
    for trigger in triggers:
        mine = [r for r in runs if r["trigger"] == trigger]
        ctl = statistics.median(r["controller_pct"] for r in mine)
        rows.append(
            [
                trigger,
                len(mine),
                f"{ctl:.1f}",
                f"{statistics.median(r['services_pct'] for r in mine):.1f}",
                f"{ctl / base:.2f}" if base else "-",
            ]
        )
    print()
    print_table(["trigger", "runs", "controller % of a core", "ZooKeeper + Kafka %", "ratio to first"], rows)
    print(f"\nresults: {write_results('idle_cost', results)}")


if __name__ == "__main__":
    main()
