"""Benchmark: broker failure end to end, beside the raw ZooKeeper write rate of the same machine.

For each size (default 1k, 10k, 100k partitions; 10 brokers; replication factor 3; 100 partitions per
topic, Kafka's default placement) on real local services (ZooKeeper + Apache Kafka, free ports, stopped by PID):

1. a fresh ZooKeeper chroot gets the cluster in Kafka's layout (``/brokers/topics/<t>``, every
   ``…/partitions/<p>/state``; leader = first replica, ISR = all) and ten broker registrations, each
   held by its own kazoo session;
2. the controller (:class:`streaming.driver.app.ControllerApp`, shipped defaults: a bucket per core, trigger 0) starts
   on an empty checkpoint and loads the tree (cold start; timed too);
3. broker 1 is hard-killed: its kazoo session is closed, so ZooKeeper deletes ``/brokers/ids/1``. A watch
   of an observer session stamps ``t0`` when the znode disappears. Then, from ``t0``:

   (a) every affected state znode rewritten — every partition with broker 1 among its replicas (it led
       a third of them; the others lose it from their ISR): the end of the ZooKeeper sink call that
       completes the set (timed inside ``foreachBatch`` by a ``wrap_sinks`` wrapper; fenced multi-ops
       committed), then checked by reading every affected znode back;
   (b) every LeaderAndIsr for those partitions in ``livectl.requests``: the end of the request sink
       call (``acks=all``, flushed) whose LeaderAndIsr entries complete the set.

4. the limit, in the same run, against the same ZooKeeper: the same number of writes to the same state
   znodes done directly with kazoo — (i) fenced multi-ops of 100 (one ``check(/controller_epoch)`` + 99
   ``set_data``), 8 in flight (the ZooKeeper sink's mechanism), (ii) plain ``set_async``, 5,000 in
   flight. The ratio is the controller's end-to-end write rate over the better raw rate.

Run::

    .venv/bin/python -m bench broker_failure                 # 1k, 10k, 100k
    .venv/bin/python -m bench broker_failure --sizes 1000    # quick (~2 min)

Prints a table; writes ``bench/results/broker_failure-<UTC stamp>.json`` (and ``…-latest.json``).
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from collections import deque
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

from bench.harness import (
    DISPATCH_CALLS,
    Layout,
    MemoryPeaks,
    RunningController,
    Services,
    SinkClock,
    ZnodeDeletion,
    add_scale_options,
    add_source_option,
    batch_end,
    close,
    large_request_sinks,
    machine_info,
    make_chroot,
    parse_confs,
    plan_layout,
    prepare_tree,
    print_table,
    progress_list,
    read_states,
    register_brokers,
    services,
    settings_for,
    shipped_buckets,
    spark_session,
    start_controller,
    wait_quiet,
    write_results,
    zk_client,
)
from core.kafka import zkdata
from core.kafka.zkdata import CONTROLLER_EPOCH_PATH

N_BROKERS = 10
RF = 3
VICTIM = 1


# ---------------------------------------------------------------------------- the raw ZooKeeper rate


def raw_multi(
    client: KazooClient, paths: list[str], data: dict[str, bytes], per_txn: int = 100, in_flight: int = 8
) -> float:
    """Fenced multi-ops: check(/controller_epoch) + (per_txn - 1) set_data, ``in_flight`` pipelined."""
    _, stat = client.get(CONTROLLER_EPOCH_PATH)
    version = stat.version
    started = time.perf_counter()
    pending: deque[Any] = deque()
    step = per_txn - 1
    for i in range(0, len(paths), step):
        t = client.transaction()
        t.check(CONTROLLER_EPOCH_PATH, version)
        for p in paths[i : i + step]:
            t.set_data(p, data[p], version=-1)
        pending.append(t.commit_async())
        if len(pending) >= in_flight:
            _ok(pending.popleft().get(timeout=60))
    while pending:
        _ok(pending.popleft().get(timeout=60))
    return time.perf_counter() - started


def raw_async(client: KazooClient, paths: list[str], data: dict[str, bytes], in_flight: int = 5000) -> float:
    """Plain pipelined ``set_async`` (no fencing, one transaction-log write each)."""
    started = time.perf_counter()
    pending: deque[Any] = deque()
    for p in paths:
        pending.append(client.set_async(p, data[p], version=-1))
        if len(pending) >= in_flight:
            pending.popleft().get(timeout=60)
    while pending:
        pending.popleft().get(timeout=60)
    return time.perf_counter() - started


def _ok(results: list[Any]) -> None:
    bad = [r for r in results if isinstance(r, Exception)]
    if bad:
        raise RuntimeError(f"raw multi-op failed: {bad[0]!r}")


# ---------------------------------------------------------------------------- one size


def wait_loaded(rc: RunningController, n_partitions: int, timeout: float) -> dict[str, Any]:
    """Wait for the micro-batch that loaded the failover snapshot (GlobalPartitionCount == n, no offline)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if rc.failed is not None:
            raise RuntimeError(f"the controller failed while loading: {rc.failed!r}")
        q = rc.app.query
        for p in progress_list(q):
            m = (p.get("observedMetrics") or {}).get("livectl") or {}
            if int(m.get("GlobalPartitionCount", -1)) == n_partitions:
                return p
        time.sleep(0.2)
    raise TimeoutError(f"the controller did not load {n_partitions} partitions in {timeout:.0f} s")


def covered_at(
    calls: list[Any], sets: dict[int, set[Any]], want: set[Any], since: float
) -> tuple[float | None, list[int]]:
    """The end time of the sink call after which every item of ``want`` was written, and the batches used."""
    left = set(want)
    batches: list[int] = []
    for c in sorted(calls, key=lambda c: c.end):
        if c.start < since or not c.ok:
            continue
        got = sets.get(c.batch_id, set()) & left
        if got:
            batches.append(c.batch_id)
            left -= got
        if not left:
            return c.end, batches
    return None, batches


def run_size(
    spark: Any, svc: Services, n_partitions: int, work: Path, args: argparse.Namespace, *, prototype: bool = False
) -> dict[str, Any]:
    name = f"bf{n_partitions}x{uuid.uuid4().hex[:6]}"
    make_chroot(svc, name)
    settings = settings_for(
        svc,
        name,
        work / name / "checkpoint",
        num_buckets=args.buckets,
        trigger_interval=args.trigger,
        query_source=args.source,
    )
    connect = settings.zookeeper_connect
    admin = zk_client(connect)
    layout: Layout = plan_layout(n_partitions, N_BROKERS, RF)
    prep_s = prepare_tree(admin, layout)
    brokers = register_brokers(connect, list(range(N_BROKERS)))
    print(
        f"[{n_partitions}] tree of {layout.partitions} partitions prepared in {prep_s:.1f} s; {N_BROKERS} brokers",
        flush=True,
    )

    out: dict[str, Any] = {"partitions": layout.partitions, "brokers": N_BROKERS, "replication_factor": RF}
    out["settings"] = {k: settings.to_dict()[k] for k in ("num_buckets", "trigger_interval", "zk_ops_per_transaction")}
    out["prototype_large_requests"] = prototype
    clock = SinkClock(inner_wrap=large_request_sinks() if prototype else None)
    rc: RunningController | None = None
    try:
        t_run = time.time()
        rc = start_controller(spark, settings, clock)
        try:
            loaded = wait_loaded(rc, layout.partitions, timeout=args.timeout)
        except (RuntimeError, TimeoutError) as e:
            out["load_error"] = repr(e)[:3000]
            out["sink_errors"] = [
                {"batch_id": c.batch_id, "n": c.n, "error": c.error} for c in clock.requests + clock.zk if not c.ok
            ]
            print(f"[{n_partitions}] the controller did not load the tree: {e!r:.600}", flush=True)
            close(admin)
            return out
        out["cold_start_s"] = round(batch_end(loaded) - t_run, 3)
        out["cold_start_batch_ms"] = loaded["durationMs"]
        print(f"[{n_partitions}] controller loaded the tree: {out['cold_start_s']:.1f} s from run()", flush=True)
        # let the failover batch's requests finish and the query go idle
        time.sleep(3)
        if rc.failed is not None:
            raise RuntimeError(f"the controller failed after loading: {rc.failed!r}")

        affected = layout.hosted_by(VICTIM)
        affected_paths = {zkdata.partition_state_path(t, p) for t, p in affected}
        affected_tps = set(affected)
        out["affected_partitions"] = len(affected)
        out["led_by_victim"] = len(layout.led_by(VICTIM))

        # ---- the failure
        observer = zk_client(connect)
        registration_gone = ZnodeDeletion(observer, zkdata.broker_path(VICTIM))
        t_kill = time.time()
        victim = brokers.pop(VICTIM)
        close(victim)
        t0 = registration_gone.wait(30)
        out["kill_to_znode_gone_s"] = round(t0 - t_kill, 3)

        def done() -> bool:
            if rc is not None and rc.failed is not None:
                return True
            zk_t, _ = covered_at(clock.zk, clock.zk_paths, affected_paths, t0 - 0.5)
            rq_t, _ = covered_at(clock.requests, clock.lisr_partitions, affected_tps, t0 - 0.5)
            return zk_t is not None and rq_t is not None

        try:
            clock.wait("the failure handled", done, timeout=args.timeout)
        except TimeoutError as e:
            out["timeout"] = str(e)
        zk_t, zk_batches = covered_at(clock.zk, clock.zk_paths, affected_paths, t0 - 0.5)
        rq_t, rq_batches = covered_at(clock.requests, clock.lisr_partitions, affected_tps, t0 - 0.5)
        out["zk_rewritten_s"] = None if zk_t is None else round(zk_t - t0, 3)
        out["lisr_written_s"] = None if rq_t is None else round(rq_t - t0, 3)
        out["zk_batches"] = zk_batches
        out["request_batches"] = rq_batches
        if rc.errors:  # the controller may have failed while handling the failure
            out["controller_error"] = repr(rc.errors[0])[:2000]
        failed_calls = [c for c in clock.zk + clock.requests if not c.ok and c.end >= t0 - 0.5]
        if failed_calls:
            out["sink_errors"] = [{"batch_id": c.batch_id, "n": c.n, "error": c.error} for c in failed_calls]

        # breakdown of the failure batches: Spark's durationMs and the sink times
        time.sleep(1.5)  # progress of the last batch is published after foreachBatch returns
        batches = sorted(set(zk_batches) | set(rq_batches))
        progress = {p["batchId"]: p for p in progress_list(rc.app.query)}
        # which source ran (Spark's "KafkaV2[Subscribe[…]]" or the Python source), as Spark names it
        out["source_description"] = next((p["sources"][0]["description"] for p in progress.values()), None)
        out["batches"] = []
        for b in batches:
            p = progress.get(b, {})
            zk_call = next((c for c in clock.zk if c.batch_id == b and c.ok), None)
            dcall = next((c for c in DISPATCH_CALLS if c.batch_id == b and c.start >= t0 - 0.5), None)
            rq_call = next((c for c in clock.requests if c.batch_id == b and c.ok), None)
            out["batches"].append(
                {
                    "batch_id": b,
                    "trigger_at_minus_t0_s": round(_ts(p["timestamp"]) - t0, 3) if p else None,
                    "foreach_batch_at_minus_t0_s": round(dcall.start - t0, 3) if dcall else None,
                    "to_pandas_s": round(dcall.to_pandas_end - dcall.start, 3) if dcall else None,
                    "decode_before_zk_sink_s": round(zk_call.start - dcall.to_pandas_end, 3)
                    if dcall and zk_call
                    else None,
                    "dispatch_s": round(dcall.end - dcall.to_pandas_end, 3) if dcall else None,
                    "durationMs": p.get("durationMs"),
                    "numInputRows": p.get("numInputRows"),
                    "zk_sink_s": round(zk_call.end - zk_call.start, 3) if zk_call else None,
                    "zk_writes": zk_call.n if zk_call else None,
                    "request_sink_s": round(rq_call.end - rq_call.start, 3) if rq_call else None,
                    "requests": rq_call.n if rq_call else None,
                }
            )

        # verification: read every affected znode back
        if zk_t is not None:
            states = read_states(observer, sorted(affected_paths))
            ok = sum(1 for s in states.values() if s["leader"] != VICTIM and VICTIM not in s["isr"])
            out["verified_znodes"] = ok
        close(observer)
    finally:
        if rc is not None:
            rc.stop()
            if rc.thread.is_alive():
                print("warning: the controller thread did not stop", flush=True)
        for c in brokers.values():
            close(c)
    # ---- the limit: the same writes, on the same znodes, directly
    paths = sorted(zkdata.partition_state_path(t, part) for t, part in layout.hosted_by(VICTIM))
    data = {}
    for t, part in layout.hosted_by(VICTIM):
        reps = layout.topics[t][part]
        isr = tuple(r for r in reps if r != VICTIM)
        data[zkdata.partition_state_path(t, part)] = (
            f'{{"version":1,"leader":{isr[0]},"leader_epoch":1,"controller_epoch":1,"isr":[{",".join(map(str, isr))}]}}'
        ).encode()
    raw_multi(admin, paths[: min(len(paths), 2000)], data)  # warm-up
    out["raw_multi_s"] = round(raw_multi(admin, paths, data), 3)
    out["raw_async_s"] = round(raw_async(admin, paths, data), 3)
    n = len(paths)
    out["raw_multi_writes_per_s"] = round(n / out["raw_multi_s"])
    out["raw_async_writes_per_s"] = round(n / out["raw_async_s"])
    best = min(out["raw_multi_s"], out["raw_async_s"])
    out["raw_best_s"] = best
    sink_call = next((b for b in out.get("batches", []) if b.get("zk_writes")), None)
    if sink_call and sink_call.get("zk_sink_s"):
        out["zk_sink_writes_per_s"] = round(sink_call["zk_writes"] / sink_call["zk_sink_s"])
        out["zk_sink_ratio_to_raw"] = round(best / sink_call["zk_sink_s"] * sink_call["zk_writes"] / n, 4)
    if out.get("zk_rewritten_s"):
        out["controller_writes_per_s"] = round(n / out["zk_rewritten_s"])
        out["ratio_to_raw"] = round(best / out["zk_rewritten_s"], 4)
    close(admin)
    return out


def _ts(text: str) -> float:
    import datetime as dt

    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000,100000", help="partition counts, comma-separated")
    ap.add_argument(
        "--buckets",
        type=int,
        default=shipped_buckets(),
        help="state buckets = spark.sql.shuffle.partitions (default: livectl's for local[2], one per core: 2)",
    )
    ap.add_argument("--trigger", default=None, help="trigger interval (default: the shipped default)")
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument(
        "--prototype",
        choices=["auto", "off", "on"],
        default="auto",
        help="bench-only request sink allowing messages over 1 MB: auto = only when the product fails on a size",
    )
    ap.add_argument("--no-wait-quiet", action="store_true", help="do not wait for load average < 1.5")
    add_scale_options(ap)
    add_source_option(ap)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    if args.trigger is None:
        from streaming.settings import Settings

        args.trigger = Settings.load().trigger_interval
    if not args.no_wait_quiet:
        wait_quiet()

    import tempfile

    work = Path(tempfile.mkdtemp(prefix="livectl-bench-bf-"))
    results: dict[str, Any] = {"benchmark": "broker_failure", "sizes": []}
    with services(zk_heap=args.zk_heap) as svc:
        spark, spark_s = spark_session(args.buckets, parse_confs(args.conf), args.source)
        try:
            results["machine"] = machine_info(svc.zookeeper.port, spark)
            results["query_source"] = args.source
            results["spark_startup_s"] = round(spark_s, 1)
            results["spark_conf"] = parse_confs(args.conf)  # --conf over the shipped spark-defaults.conf
            for n in sizes:
                wait_quiet() if not args.no_wait_quiet else None
                with MemoryPeaks(svc.zookeeper.pid) as mem:
                    r = run_size(spark, svc, n, work, args, prototype=args.prototype == "on")
                r["peak_rss_gib"] = mem.gib()
                print(f"[{n}] peak resident memory (GiB): {r['peak_rss_gib']}", flush=True)
                results["sizes"].append(r)
                print(json.dumps(r, default=str), flush=True)
                write_results("broker_failure", results)
                if "load_error" in r and args.prototype == "auto":
                    print(f"[{n}] again with the bench-only prototype: request messages over 1 MB allowed", flush=True)
                    r = run_size(spark, svc, n, work, args, prototype=True)
                    results["sizes"].append(r)
                    print(json.dumps(r, default=str), flush=True)
                    write_results("broker_failure", results)
        finally:
            spark.stop()
    rows = []
    for r in results["sizes"]:
        rows.append(
            [
                f"{r['partitions']:,}" + (" (proto)" if r.get("prototype_large_requests") else ""),
                r.get("affected_partitions"),
                r.get("zk_rewritten_s"),
                r.get("lisr_written_s"),
                r.get("controller_writes_per_s"),
                r.get("raw_multi_writes_per_s"),
                r.get("raw_async_writes_per_s"),
                r.get("ratio_to_raw"),
                r.get("zk_sink_writes_per_s"),
                r.get("zk_sink_ratio_to_raw"),
                r.get("cold_start_s") if "load_error" not in r else "FAILED",
            ]
        )
    print()
    print_table(
        [
            "partitions",
            "affected",
            "(a) znodes s",
            "(b) LeaderAndIsr s",
            "ctl writes/s",
            "raw multi/s",
            "raw async/s",
            "ratio",
            "sink writes/s",
            "sink ratio",
            "cold start s",
        ],
        rows,
    )
    path = write_results("broker_failure", results)
    print(f"\nresults: {path}")


if __name__ == "__main__":
    main()
