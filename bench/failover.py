"""Benchmark: controller failover with 100k partitions — standby takeover and cold start.

On real local services (ZooKeeper + Apache Kafka, free ports, stopped by PID), a ZooKeeper chroot gets a
cluster in Kafka's layout (default 100k partitions: 1,000 topics × 100, replication factor 3, 10
brokers each holding its registration with its own kazoo session). Then:

(b) **cold start** — a controller (:class:`streaming.driver.app.ControllerApp`, shipped defaults: a bucket per core,
    trigger 0) on an empty checkpoint, in this process, with the SparkSession already started: from
    ``run()`` to the end of the first completed micro-batch carrying the failover reference (the one
    that loads every bucket from the ZooKeeper snapshot: ``GlobalPartitionCount`` = all partitions).
    Spark's own start-up is measured separately.

(a) **standby takeover** — the active controller runs as its own process, the product's entry point
    (``python -m streaming --master local[2] …``, its own Spark driver) on a shared checkpoint; once it
    has loaded the cluster, a standby :class:`ControllerApp` starts in this process (SparkSession already
    up) and waits for the lease. The active process is killed (SIGKILL to its process group); its
    ZooKeeper session ends after the session timeout and ZooKeeper deletes ``/controller``. From that
    moment (``t0``, stamped by an observer's watch; the session closing *is* the controller's death as
    ZooKeeper sees it) to the end of the standby's first completed micro-batch carrying the failover
    reference. The standby's log lines (elected, snapshot read) and Spark's ``durationMs`` of that batch
    break it down; the ZooKeeper and request sinks are timed inside ``foreachBatch`` by a ``wrap_sinks``
    wrapper.

Run::

    .venv/bin/python -m bench failover                       # 100k partitions
    .venv/bin/python -m bench failover --partitions 1000     # quick (~3 min)

Prints a table; writes ``bench/results/failover-<UTC stamp>.json`` (and ``…-latest.json``).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import logging
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import core
from bench.harness import (
    DISPATCH_CALLS,
    ROOT,
    MemoryPeaks,
    RunningController,
    SinkClock,
    ZnodeDeletion,
    add_scale_options,
    batch_end,
    bench_python,
    close,
    end_offsets,
    large_request_sinks,
    machine_info,
    make_chroot,
    parse_confs,
    plan_layout,
    prepare_tree,
    print_table,
    progress_list,
    register_brokers,
    request_bytes,
    services,
    settings_for,
    shipped_buckets,
    spark_session,
    start_controller,
    topic_settings,
    wait_quiet,
    work_dir,
    write_results,
    zk_client,
)
from core.kafka.zkdata import CONTROLLER_PATH
from streaming.settings import Settings, SettingsError

N_BROKERS = 10
RF = 3


class LogTimes(logging.Handler):
    """Wall-clock times of the controller's log lines in this process."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[tuple[float, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append((record.created, record.getMessage()))

    def first(self, text: str, since: float = 0.0) -> tuple[float, str] | None:
        return next(((t, m) for t, m in self.lines if t >= since and text in m), None)


def failover_batch(
    rc: RunningController, n_partitions: int, since: float, timeout: float, logs: LogTimes
) -> dict[str, Any]:
    """The micro-batch of ``rc`` that carried its failover reference: the first one that ended after the
    reference was sent (the app logs "failover snapshot" right after the send is flushed), had input and
    loaded every partition. Ended after, not planned after: a batch's trigger can start before the
    reference is sent and still read it (a cold start whose reference is ready before the query's first
    batch reads its input; the barrier batch's poll); a replayed batch ends before the snapshot is read."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if rc.failed is not None:
            raise RuntimeError(f"the controller failed: {rc.failed!r}")
        sent = logs.first("failover snapshot", since)
        if sent is not None:
            for p in sorted(progress_list(rc.app.query), key=lambda p: p["batchId"]):
                m = (p.get("observedMetrics") or {}).get("livectl") or {}
                if (
                    batch_end(p) >= sent[0]
                    and p.get("numInputRows", 0) > 0
                    and int(m.get("GlobalPartitionCount", -1)) == n_partitions
                ):
                    return p
        time.sleep(0.1)
    raise TimeoutError(f"no micro-batch loaded {n_partitions} partitions within {timeout:.0f} s")


def sink_times(clock: SinkClock, batch_id: int) -> dict[str, Any]:
    zk = next((c for c in clock.zk if c.batch_id == batch_id), None)
    rq = next((c for c in clock.requests if c.batch_id == batch_id), None)
    return {
        "zk_sink_s": None if zk is None else round(zk.end - zk.start, 3),
        "zk_writes": None if zk is None else zk.n,
        "zk_ok": None if zk is None else zk.ok,
        "request_sink_s": None if rq is None else round(rq.end - rq.start, 3),
        "requests": None if rq is None else rq.n,
        "request_ok": None if rq is None else rq.ok,
        "request_error": None if rq is None or rq.ok else rq.error,
    }


def cold_start(
    spark: Any, settings: Settings, n: int, *, logs: LogTimes, timeout: float, prototype: bool
) -> dict[str, Any]:
    clock = SinkClock(track_paths=False, inner_wrap=large_request_sinks() if prototype else None)
    before = end_offsets(settings.bootstrap_servers, settings.requests_topic)
    t_run = time.time()
    rc = start_controller(spark, settings, clock, wait_ready=None)
    out: dict[str, Any] = {"prototype_large_requests": prototype}
    try:
        p = failover_batch(rc, n, t_run, timeout, logs)
        end = batch_end(p)
        out["cold_start_s"] = round(end - t_run, 3)
        elected = logs.first("elected", t_run)
        snap = logs.first("failover snapshot", t_run)
        out["elected_s"] = None if elected is None else round(elected[0] - t_run, 3)
        out["snapshot_logged_s"] = None if snap is None else round(snap[0] - t_run, 3)
        out["snapshot_log"] = None if snap is None else snap[1]
        out["ref_sent_s"] = None if rc.ready_at is None else round(rc.ready_at - t_run, 3)
        out["batch_id"] = p["batchId"]
        out["batch_trigger_s"] = round(end - p["durationMs"]["triggerExecution"] / 1000 - t_run, 3)
        out["durationMs"] = p["durationMs"]
        # every controller log line from run() to the batch's end, at its second: where the time went
        # (the warm-up's job, the bucket count, the source's start, the query's start, the hand-off)
        out["log_s"] = [(round(t - t_run, 2), m[:160]) for t, m in logs.lines if t_run <= t <= end]
        time.sleep(1.0)
        out.update(sink_times(clock, p["batchId"]))
        out.update(request_bytes(settings.bootstrap_servers, settings.requests_topic, before))
    finally:
        rc.stop()
    if rc.failed is not None:
        out["controller_error"] = repr(rc.failed)[:2000]
    return out


def start_active(
    settings: Settings,
    log: Path,
    *,
    prototype: bool,
    conf: dict[str, str] | None = None,
    sets: Sequence[str] = (),
) -> subprocess.Popen[bytes]:
    """The active controller in its own process group (own Spark driver): the product's entry point
    (``python -m streaming``), or ``python -m bench.harness.large_request_controller`` (the same app with the
    large-request prototype)."""
    overrides = [
        f"{key}={getattr(settings, key)}"
        for key in (
            "zookeeper_connect",
            "bootstrap_servers",
            "num_buckets",
            "checkpoint_dir",
            "admin_topic",
            "broker_events_topic",
            "requests_topic",
            "admin_results_topic",
            "rejected_topic",
            "query_name",
            "zookeeper_session_timeout_ms",
            "trigger_interval",
        )
    ]
    overrides.append("controller_id=1")
    overrides += sets
    if prototype:
        cmd = [sys.executable, "-m", "bench.harness.large_request_controller", "--master", "local[2]"]
    else:
        cmd = [sys.executable, "-m", "streaming", "--master", "local[2]"]
    for o in overrides:
        cmd += ["--set", o]
    for key, value in (conf or {}).items():
        cmd += ["--conf", f"{key}={value}"]
    env = {**os.environ, "PYSPARK_PYTHON": bench_python()}
    with log.open("ab") as f:
        return subprocess.Popen(
            cmd,
            cwd=str(ROOT),
            stdout=f,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process group we created for ``proc`` (its Python and its Spark JVM)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(30)


def wait_active_loaded(settings: Settings, log: Path, proc: subprocess.Popen[bytes], timeout: float) -> float:
    """Until the active's log says the snapshot was sent and its checkpoint committed a batch planned after
    that (the failover batch ran) with none planned beyond it; returns seconds waited."""
    started = time.monotonic()
    offsets = Path(settings.checkpoint_dir) / "offsets"
    commits = Path(settings.checkpoint_dir) / "commits"

    def ids(d: Path) -> list[int]:
        return sorted(int(p.name) for p in d.iterdir() if p.name.isdigit()) if d.is_dir() else []

    sent_at: float | None = None
    while time.monotonic() - started < timeout:
        if proc.poll() is not None:
            raise RuntimeError(f"the active controller exited with {proc.returncode}; see {log}")
        if sent_at is None and log.exists():
            text = log.read_text(errors="replace")
            line = next((x for x in text.splitlines() if "failover snapshot" in x), None)
            if line is not None:
                # the reference is flushed just before this line: a batch planned (offsets file written)
                # after the line's time carries it
                sent_at = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
        if sent_at is not None:
            # that batch has committed and nothing is in flight: the takeover starts from a loaded, idle
            # controller, with no batch to replay
            o, c = ids(offsets), ids(commits)
            if c and o[-1] == c[-1] and (offsets / str(c[-1])).stat().st_mtime >= sent_at:
                return time.monotonic() - started
        time.sleep(0.5)
    raise TimeoutError(f"the active controller did not load within {timeout:.0f} s; see {log}")


def takeover(
    spark: Any,
    settings: Settings,
    n: int,
    *,
    logs: LogTimes,
    work: Path,
    timeout: float,
    prototype: bool,
    conf: dict[str, str] | None = None,
    sets: Sequence[str] = (),
) -> dict[str, Any]:
    out: dict[str, Any] = {"prototype_large_requests": prototype}
    log = work / f"active-{uuid.uuid4().hex[:6]}.log"
    proc = start_active(settings, log, prototype=prototype, conf=conf, sets=sets)
    out["active_log"] = str(log)
    rc: RunningController | None = None
    observer = zk_client(settings.zookeeper_connect)
    # the active controller is the product's entry point in a process of its own: its whole tree's memory
    active_mem = MemoryPeaks(trees={"active_controller_process_tree": proc.pid}).__enter__()
    try:
        out["active_load_s"] = round(wait_active_loaded(settings, log, proc, timeout), 1)
        print(f"[takeover] active controller (pid {proc.pid}) loaded in {out['active_load_s']} s", flush=True)
        time.sleep(3)  # idle
        clock = SinkClock(track_paths=False, inner_wrap=large_request_sinks() if prototype else None)
        rc = start_controller(spark, settings, clock, wait_ready=None)
        time.sleep(3)  # the standby is waiting for the lease
        if importlib.util.find_spec("streaming.warm.failover_warm") is not None:
            # a standby that reads ahead (streaming.warm.failover_warm): killed once it has read the tree ahead,
            # as a standby that has been waiting for a while has (its first read ahead sets a watch on
            # every state znode, one get each); a tree without it just waits as before
            t_ready = time.time()
            while logs.first("standby: read ahead", t_ready - 3) is None and time.time() - t_ready < 300:
                time.sleep(0.5)
            out["standby_read_ahead_s"] = round(time.time() - t_ready + 3, 1)
        decide_off = str(spark.conf.get("spark.livectl.failover.decideAhead", "true")).strip().lower() == "false"
        if importlib.util.find_spec("streaming.query.decided") is not None and not decide_off:
            # and once it has decided the buckets' failover batch for that tree (streaming.query.decided), unless
            # switched off (--conf spark.livectl.failover.decideAhead=false)
            t_ready = time.time()
            while logs.first("standby: decided") is None and time.time() - t_ready < 120:
                time.sleep(0.5)
            out["standby_decided_wait_s"] = round(time.time() - t_ready, 1)
        if rc.failed is not None:
            raise RuntimeError(f"the standby failed while waiting: {rc.failed!r}")
        controller_gone = ZnodeDeletion(observer, CONTROLLER_PATH)  # the active controller's
        before = end_offsets(settings.bootstrap_servers, settings.requests_topic)  # the active is idle
        active_mem.__exit__(None, None, None)
        out["active_peak_rss_gib"] = active_mem.gib()["active_controller_process_tree"]
        t_kill = time.time()
        kill_group(proc)
        t0 = controller_gone.wait(settings.zookeeper_session_timeout_ms / 1000 * 3 + 10)
        out["kill_to_session_end_s"] = round(t0 - t_kill, 3)
        p = failover_batch(rc, n, t0 - 1, timeout, logs)
        end = batch_end(p)
        out["takeover_s"] = round(end - t0, 3)
        elected = logs.first("elected", t0 - 1)
        snap = logs.first("failover snapshot", t0 - 1)
        out["elected_s"] = None if elected is None else round(elected[0] - t0, 3)
        out["snapshot_logged_s"] = None if snap is None else round(snap[0] - t0, 3)
        out["snapshot_log"] = None if snap is None else snap[1]
        out["ref_sent_s"] = None if rc.ready_at is None else round(rc.ready_at - t0, 3)
        out["batch_id"] = p["batchId"]
        out["batch_trigger_s"] = round(end - p["durationMs"]["triggerExecution"] / 1000 - t0, 3)
        out["durationMs"] = p["durationMs"]
        # the standby's log lines from the controller's death to the batch's end, as the cold start's
        out["log_s"] = [(round(t - t0, 2), m[:160]) for t, m in logs.lines if t0 - 1 <= t <= end]
        # what the standby did ahead while it waited (its read ahead, source, plan, workers), before the death
        ahead = ("read ahead", "prepared ahead", "rehearsed", "warmed", "decided")
        out["standby_ahead_s"] = [
            (round(t - t0, 2), m[:160]) for t, m in logs.lines if t < t0 - 1 and any(k in m for k in ahead)
        ]
        first = min((x for x in progress_list(rc.app.query)), key=lambda x: x["batchId"], default=None)
        if first is not None:
            out["first_standby_batch"] = {"batch_id": first["batchId"], "durationMs": first["durationMs"]}
        time.sleep(1.0)
        out.update(sink_times(clock, p["batchId"]))
        call = next((c for c in DISPATCH_CALLS if c.batch_id == p["batchId"]), None)
        if call is not None:
            # the failover batch's foreachBatch: its Spark job (toPandas), then the driver's own work after it
            out["foreach_batch"] = {
                "to_pandas_s": round(call.to_pandas_end - call.start, 3),
                "after_job_s": round(call.end - call.to_pandas_end, 3),
            }
        out.update(request_bytes(settings.bootstrap_servers, settings.requests_topic, before))
    finally:
        active_mem.__exit__(None, None, None)
        kill_group(proc)
        if rc is not None:
            rc.stop()
            if rc.failed is not None:
                out["controller_error"] = repr(rc.failed)[:2000]
        close(observer)
    return out


def attempt(fn: Any, *a: Any, **kw: Any) -> dict[str, Any]:
    """Run one measurement; a failure of the product is a result too (with its error)."""
    try:
        out: dict[str, Any] = fn(*a, **kw)
    except (RuntimeError, TimeoutError) as e:
        print(f"failed: {e!r:.800}", flush=True)
        return {"prototype_large_requests": kw.get("prototype"), "error": repr(e)[:3000]}
    if "controller_error" in out and "takeover_s" not in out and "cold_start_s" not in out:
        out["error"] = out["controller_error"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=100_000)
    ap.add_argument(
        "--buckets",
        type=int,
        default=shipped_buckets(),
        help="state buckets = spark.sql.shuffle.partitions (default: livectl's for local[2], one per core: 2)",
    )
    ap.add_argument(
        "--session-timeout-ms", type=int, default=6000, help="ZooKeeper session timeout of both controllers"
    )
    ap.add_argument("--only", choices=["cold", "takeover"], default=None)
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument(
        "--prototype",
        choices=["auto", "off", "on"],
        default="auto",
        help="bench-only request sink allowing messages over 1 MB: auto = only after the product fails",
    )
    ap.add_argument("--no-wait-quiet", action="store_true", help="do not wait for load average < 1.5")
    ap.add_argument("--tag", default="", help="suffix of the results file name (experiments)")
    ap.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a livectl setting over the shipped defaults, for every controller of the run, e.g. audit_log=false "
        "(repeatable; read as `livectl run --set` reads it)",
    )
    add_scale_options(ap)
    args = ap.parse_args()
    sets: list[str] = args.sets
    try:  # a wrong key or value is said now, before the services start
        Settings.load().with_overrides(sets)
    except SettingsError as e:
        raise SystemExit(f"--set: {e}") from e
    if not args.no_wait_quiet:
        wait_quiet()
    logs = LogTimes()
    logging.getLogger("livectl").addHandler(logs)
    logging.getLogger("livectl").setLevel(logging.INFO)

    work = work_dir("livectl-bench-fo-")
    results: dict[str, Any] = {"benchmark": "failover", "partitions": args.partitions}
    with services(zk_heap=args.zk_heap) as svc:
        spark, spark_s = spark_session(args.buckets, parse_confs(args.conf))
        try:
            results["machine"] = machine_info(svc.zookeeper.port, spark)
            results["spark_conf"] = parse_confs(args.conf)
            results["core_file"] = core.__file__
            results["spark_startup_s"] = round(spark_s, 1)
            name = f"fo{args.partitions}x{uuid.uuid4().hex[:6]}"
            make_chroot(svc, name)
            base = settings_for(
                svc,
                name,
                work / "checkpoint-cold",
                num_buckets=args.buckets,
                zookeeper_session_timeout_ms=args.session_timeout_ms,
            ).with_overrides(sets)
            results["settings_set"] = sets
            results["settings"] = {
                k: base.to_dict()[k]
                for k in ("num_buckets", "trigger_interval", "zk_ops_per_transaction", "zookeeper_session_timeout_ms")
            }
            admin = zk_client(base.zookeeper_connect)
            layout = plan_layout(args.partitions, N_BROKERS, RF)
            prep = prepare_tree(admin, layout)
            brokers = register_brokers(base.zookeeper_connect, list(range(N_BROKERS)))
            print(f"tree of {layout.partitions} partitions prepared in {prep:.1f} s", flush=True)
            modes = {"off": [False], "on": [True], "auto": [False, True]}[args.prototype]
            if args.only in (None, "cold"):
                for proto in modes:
                    wait_quiet() if not args.no_wait_quiet else None
                    cold = Settings.from_mapping(
                        {
                            **base.to_dict(),
                            **topic_settings(f"{name}c{int(proto)}"),
                            "checkpoint_dir": str(work / f"checkpoint-cold-{int(proto)}"),
                        }
                    )
                    with MemoryPeaks(svc.zookeeper.pid) as mem:
                        r = attempt(
                            cold_start, spark, cold, layout.partitions, logs=logs, timeout=args.timeout, prototype=proto
                        )
                    r["peak_rss_gib"] = mem.gib()
                    results.setdefault("cold_start_runs", []).append(r)
                    print(json.dumps(r), flush=True)
                    write_results("failover" + (f"-{args.tag}" if args.tag else ""), results)
                    if "error" not in r:
                        results["cold_start"] = r
                        break
            if args.only in (None, "takeover"):
                for proto in modes:
                    wait_quiet() if not args.no_wait_quiet else None
                    shared = Settings.from_mapping(
                        {
                            **base.to_dict(),
                            **topic_settings(f"{name}t{int(proto)}"),
                            "checkpoint_dir": str(work / f"checkpoint-shared-{int(proto)}"),
                        }
                    )
                    with MemoryPeaks(svc.zookeeper.pid) as mem:  # the standby's (the active runs apart)
                        r = attempt(
                            takeover,
                            spark,
                            shared,
                            layout.partitions,
                            logs=logs,
                            work=work,
                            timeout=args.timeout,
                            prototype=proto,
                            conf=parse_confs(args.conf),
                            sets=sets,
                        )
                    r["peak_rss_gib"] = mem.gib()
                    results.setdefault("takeover_runs", []).append(r)
                    print(json.dumps(r), flush=True)
                    write_results("failover" + (f"-{args.tag}" if args.tag else ""), results)
                    if "error" not in r:
                        results["takeover"] = r
                        break
            for c in brokers.values():
                close(c)
            close(admin)
        finally:
            spark.stop()
    cs, tk = results.get("cold_start", {}), results.get("takeover", {})
    print()
    print_table(
        [
            "figure",
            "partitions",
            "total s",
            "elected at s",
            "snapshot read + ref sent at s",
            "failover batch planned at s",
            "failover batch s",
            "zk sink s",
            "req sink s",
            "requests MB (values)",
            "on the topic MB",
        ],
        [
            [
                "(a) standby takeover",
                args.partitions,
                tk.get("takeover_s"),
                tk.get("elected_s"),
                tk.get("snapshot_logged_s"),
                tk.get("batch_trigger_s"),
                (tk.get("durationMs") or {}).get("triggerExecution", 0) / 1000 if tk else None,
                tk.get("zk_sink_s"),
                tk.get("request_sink_s"),
                tk.get("request_values_mb"),
                tk.get("request_topic_mb"),
            ],
            [
                "(b) cold start",
                args.partitions,
                cs.get("cold_start_s"),
                cs.get("elected_s"),
                cs.get("snapshot_logged_s"),
                cs.get("batch_trigger_s"),
                (cs.get("durationMs") or {}).get("triggerExecution", 0) / 1000 if cs else None,
                cs.get("zk_sink_s"),
                cs.get("request_sink_s"),
                cs.get("request_values_mb"),
                cs.get("request_topic_mb"),
            ],
        ],
    )
    print(f"(Spark start-up, not included above: {results.get('spark_startup_s')} s)")
    path = write_results("failover" + (f"-{args.tag}" if args.tag else ""), results)
    print(f"\nresults: {path}")


if __name__ == "__main__":
    main()
