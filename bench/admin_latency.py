"""Benchmark: admin latency — a create-topic command to all of its partitions Online in ZooKeeper.

On real local services (ZooKeeper + Apache Kafka, free ports, stopped by PID): ten brokers registered (each
with its own kazoo session), an optional background cluster in Kafka's layout (``--background``
partitions), and the controller (:class:`streaming.driver.app.ControllerApp`, shipped defaults: a bucket per core,
trigger 0) on an empty checkpoint, in this process. Once it has loaded and is idle, ``--commands``
create-topic commands (``--topic-partitions`` partitions, replication factor 3, Kafka's default
placement) are sent one at a time to ``livectl.admin`` as the CLI sends them (keyed by request id,
acknowledged by the broker). Each is timed from just before the send to the moment ZooKeeper holds every
one of its ``/brokers/topics/<t>/partitions/<p>/state`` znodes (an ``exists`` watch per znode, set
before the send, on an observer session): that is "all partitions Online" in ZooKeeper. Between commands
the script waits a random fraction of the trigger interval (of a second with a trigger of 0), so commands
arrive at every phase of the trigger; ``--warmup`` commands first are not counted (the Python workers' first use). With
``--idle-gap 75`` each counted command comes after 75 s without any, longer than the minute after which
Spark closes idle Python workers: the latency of a command to a controller that idled.

Run::

    .venv/bin/python -m bench admin_latency                    # 200 commands
    .venv/bin/python -m bench admin_latency --commands 20      # quick (~2 min)
    .venv/bin/python -m bench admin_latency --commands 4 --idle-gap 75   # after idle minutes (~7 min)

Prints p50 / p90 / p99 / max; writes ``bench/results/admin_latency-<UTC stamp>.json`` (and ``…-latest.json``).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import threading
import time
import urllib.request
import uuid
from datetime import datetime
from typing import Any

from kafka import KafkaProducer
from kazoo.client import KazooClient

import core
from bench.harness import (
    SinkClock,
    add_source_option,
    close,
    machine_info,
    make_chroot,
    parse_confs,
    percentile,
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
from core import events as ev
from core.codec.events import event_to_json
from core.kafka import zkdata
from livectl import local
from streaming.settings import Settings

N_BROKERS = 10
RF = 3


def trigger_seconds(text: str) -> float:
    value, _, unit = text.strip().partition(" ")
    scale = {"millisecond": 0.001, "milliseconds": 0.001, "second": 1.0, "seconds": 1.0, "minute": 60.0}
    return float(value) * scale.get(unit.strip(), 1.0)


def one_command(
    producer: KafkaProducer, observer: KazooClient, settings: Settings, topic: str, *, partitions: int, timeout: float
) -> tuple[float, float]:
    """(seconds from send to every state znode present, seconds the send itself took)."""
    paths = [zkdata.partition_state_path(topic, p) for p in range(partitions)]
    left = set(paths)
    lock = threading.Lock()
    all_there = threading.Event()
    done_at: list[float] = []

    def seen(path: str) -> None:
        with lock:
            left.discard(path)
            if not left and not all_there.is_set():
                done_at.append(time.time())
                all_there.set()

    def make_watch(path: str) -> Any:
        def watch(event: Any) -> None:
            if event is not None and event.type == "CREATED":
                seen(path)

        return watch

    for p in paths:
        if observer.exists(p, watch=make_watch(p)) is not None:
            seen(p)
    rid = f"bench-{uuid.uuid4().hex[:12]}"
    cmd = ev.CreateTopic(rid, topic, partitions, RF)
    t_send = time.time()
    producer.send(settings.admin_topic, key=rid.encode(), value=event_to_json(cmd).encode()).get(timeout=30)
    t_acked = time.time()
    if not all_there.wait(timeout):
        raise TimeoutError(f"{topic}: {len(left)} of {partitions} partitions not online after {timeout:.0f} s")
    return done_at[0] - t_send, t_acked - t_send


def state_operator_medians(progress: list[dict[str, Any]]) -> dict[str, float]:
    """Median over micro-batches of the stateful operator's figures in Spark's progress (each a sum over the
    batch's state-store tasks): ``commitTimeMs``, ``allUpdatesTimeMs`` and RocksDB's latencies and counts."""
    per_key: dict[str, list[float]] = {}
    for p in progress:
        for op in p.get("stateOperators") or []:
            figures = {k: v for k, v in op.items() if k.endswith("TimeMs") or k == "numRowsTotal"}
            figures.update({f"rocksdb.{k}": v for k, v in (op.get("customMetrics") or {}).items()})
            for k, v in figures.items():
                if isinstance(v, int | float):
                    per_key.setdefault(k, []).append(float(v))
    return {k: round(statistics.median(v), 1) for k, v in sorted(per_key.items())}


def _ui_get(spark: Any, path: str) -> Any:
    base = spark.sparkContext.uiWebUrl
    with urllib.request.urlopen(f"{base}/api/v1/applications/{spark.sparkContext.applicationId}/{path}") as r:
        return json.loads(r.read())


def last_stage_id(spark: Any) -> int:
    return max((s["stageId"] for s in _ui_get(spark, "stages")), default=-1)


def stage_profile(spark: Any, after_stage: int) -> dict[str, Any]:
    """Where a micro-batch's time goes, from the Spark UI's REST API: the stages completed after
    ``after_stage``, grouped by (name, tasks); per group the median stage duration and per task the median
    scheduler delay, deserialisation, run and CPU time, and result serialisation (ms)."""
    groups: dict[str, dict[str, list[float]]] = {}
    for st in _ui_get(spark, "stages?status=complete"):
        if st["stageId"] <= after_stage:
            continue
        # batch numbers and source lines in stage names would make one group per batch
        key = f"{re.sub(r'[0-9]+', 'N', st['name'])[:60]} | {st['numTasks']} tasks"
        g = groups.setdefault(key, {})
        start = datetime.fromisoformat(st["submissionTime"].replace("GMT", "+00:00"))
        end = datetime.fromisoformat(st["completionTime"].replace("GMT", "+00:00"))
        g.setdefault("stage_ms", []).append((end - start).total_seconds() * 1000)
        summary = _ui_get(spark, f"stages/{st['stageId']}/{st['attemptId']}/taskSummary?quantiles=0.5")
        for field in (
            "schedulerDelay",
            "executorDeserializeTime",
            "executorRunTime",
            "executorCpuTime",
            "resultSerializationTime",
            "gettingResultTime",
        ):
            value = summary.get(field)
            if value:
                scale = 1e-6 if field == "executorCpuTime" else 1.0  # ns
                g.setdefault(f"task_{field}_ms", []).append(float(value[0]) * scale)
    return {
        k: {"stages": len(v["stage_ms"]), **{f: round(statistics.median(x), 1) for f, x in v.items()}}
        for k, v in sorted(groups.items(), key=lambda kv: -statistics.median(kv[1]["stage_ms"]))
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--commands", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--topic-partitions", type=int, default=10)
    ap.add_argument("--background", type=int, default=1000, help="partitions already in the cluster")
    ap.add_argument(
        "--buckets",
        type=int,
        default=shipped_buckets(),
        help="state buckets = spark.sql.shuffle.partitions (default: livectl's for local[2], one per core: 2)",
    )
    ap.add_argument("--trigger", default=None, help="trigger interval (default: the shipped default)")
    ap.add_argument("--timeout", type=float, default=120.0, help="per command")
    ap.add_argument("--tag", default="", help="suffix of the results file name (experiments)")
    ap.add_argument("--no-wait-quiet", action="store_true", help="do not wait for load average < 1.5")
    ap.add_argument(
        "--idle-gap",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait this long before each counted command (the controller idle meanwhile; Spark closes Python "
        "workers idle for a minute: 75 measures a command that meets none) instead of a fraction of the trigger",
    )
    ap.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting over the shipped spark-defaults.conf (repeatable)",
    )
    ap.add_argument(
        "--stages",
        action="store_true",
        help="turn the Spark UI on and profile the counted batches' stages and tasks through its REST API",
    )
    add_source_option(ap)
    args = ap.parse_args()
    extra_conf = parse_confs(args.conf)
    if args.stages:
        extra_conf.setdefault("spark.ui.enabled", "true")
        extra_conf.setdefault("spark.ui.port", str(local.free_port()))
    if args.trigger is None:
        args.trigger = Settings.load().trigger_interval
    if not args.no_wait_quiet:
        wait_quiet()

    work = work_dir("livectl-bench-admin-")
    results: dict[str, Any] = {"benchmark": "admin_latency"}
    with services() as svc:
        spark, spark_s = spark_session(args.buckets, extra_conf, args.source)
        try:
            results["machine"] = machine_info(svc.zookeeper.port, spark)
            results["spark_conf"] = extra_conf
            results["core_file"] = core.__file__
            results["spark_startup_s"] = round(spark_s, 1)
            name = f"adm{uuid.uuid4().hex[:6]}"
            make_chroot(svc, name)
            settings = settings_for(
                svc,
                name,
                work / "checkpoint",
                num_buckets=args.buckets,
                trigger_interval=args.trigger,
                query_source=args.source,
            )
            results["query_source"] = args.source
            results["settings"] = {
                k: settings.to_dict()[k] for k in ("num_buckets", "trigger_interval", "zk_ops_per_transaction")
            }
            results["workload"] = {
                "commands": args.commands,
                "warmup": args.warmup,
                "topic_partitions": args.topic_partitions,
                "replication_factor": RF,
                "brokers": N_BROKERS,
                "background_partitions": args.background,
                "idle_gap_s": args.idle_gap,
            }
            admin = zk_client(settings.zookeeper_connect)
            if args.background:
                prepare_tree(admin, plan_layout(args.background, N_BROKERS, RF, prefix="bg"))
            brokers = register_brokers(settings.zookeeper_connect, list(range(N_BROKERS)))
            clock = SinkClock(track_paths=False)
            rc = start_controller(spark, settings, clock)
            observer = zk_client(settings.zookeeper_connect)
            producer = KafkaProducer(bootstrap_servers=settings.bootstrap_servers, acks="all", linger_ms=0)
            latencies: list[float] = []
            sends: list[float] = []
            try:
                if rc.failed is not None:
                    raise RuntimeError(f"the controller failed to start: {rc.failed!r}")
                # until the failover batch has run
                deadline = time.monotonic() + 600
                while not any(p.get("numInputRows", 0) > 0 for p in progress_list(rc.app.query)):
                    if time.monotonic() > deadline or rc.failed is not None:
                        raise RuntimeError(f"the controller did not load: {rc.failed!r}")
                    time.sleep(0.2)
                time.sleep(2)
                # with a trigger of 0 (batches as soon as records come) the gap still varies over a second, so
                # commands also meet the controller busy with the batch the previous command caused
                period = trigger_seconds(args.trigger) or 1.0
                rng = random.Random(42)
                first_batch = max((p["batchId"] for p in progress_list(rc.app.query)), default=0)
                first_stage = last_stage_id(spark) if args.stages else 0
                for i in range(args.warmup + args.commands):
                    time.sleep(args.idle_gap if args.idle_gap > 0 and i >= args.warmup else rng.uniform(0, period))
                    lat, send = one_command(
                        producer,
                        observer,
                        settings,
                        f"bench-{i:04d}",
                        partitions=args.topic_partitions,
                        timeout=args.timeout,
                    )
                    if i >= args.warmup:
                        latencies.append(lat)
                        sends.append(send)
                    if (i + 1) % 20 == 0:
                        print(f"{i + 1} commands; last {lat:.2f} s", flush=True)
                    if rc.failed is not None:
                        raise RuntimeError(f"the controller failed: {rc.failed!r}")
                progress = [p for p in progress_list(rc.app.query) if p["batchId"] > first_batch]
                # which source ran (Spark's "KafkaV2[Subscribe[…]]" or the Python source), as Spark names it
                results["source_description"] = progress[-1]["sources"][0]["description"] if progress else None
                if args.stages:
                    results["stages"] = stage_profile(spark, first_stage)
            finally:
                producer.close()
                close(observer)
                rc.stop()
                for c in brokers.values():
                    close(c)
                close(admin)
        finally:
            spark.stop()

    busy = [p for p in progress if p.get("numInputRows", 0) > 0]
    phases: dict[str, float] = {}
    for key in ("triggerExecution", "addBatch", "latestOffset", "queryPlanning", "walCommit", "commitOffsets"):
        vals = [p["durationMs"].get(key, 0) for p in busy]
        phases[key] = round(statistics.median(vals), 1) if vals else float("nan")
    results["state_operator_median"] = state_operator_medians(busy)
    zk_calls = [c.end - c.start for c in clock.zk if c.n > 0]
    rq_calls = [c.end - c.start for c in clock.requests if c.n > 0]
    results["latency_s"] = {
        "p50": round(percentile(latencies, 0.5), 3),
        "p90": round(percentile(latencies, 0.9), 3),
        "p99": round(percentile(latencies, 0.99), 3),
        "max": round(max(latencies), 3),
        "min": round(min(latencies), 3),
        "mean": round(statistics.fmean(latencies), 3),
    }
    results["send_ack_s_p50"] = round(percentile(sends, 0.5), 4)
    results["batches_with_input"] = len(busy)
    results["batch_durationMs_median"] = phases
    results["zk_sink_s_median"] = round(statistics.median(zk_calls), 4) if zk_calls else None
    results["request_sink_s_median"] = round(statistics.median(rq_calls), 4) if rq_calls else None
    results["latencies_s"] = [round(x, 4) for x in latencies]
    print()
    print_table(
        [
            "commands",
            "partitions each",
            "p50 s",
            "p90 s",
            "p99 s",
            "max s",
            "batch median s",
            "zk sink s",
            "req sink s",
        ],
        [
            [
                len(latencies),
                args.topic_partitions,
                results["latency_s"]["p50"],
                results["latency_s"]["p90"],
                results["latency_s"]["p99"],
                results["latency_s"]["max"],
                phases["triggerExecution"] / 1000,
                results["zk_sink_s_median"],
                results["request_sink_s_median"],
            ]
        ],
    )
    print(json.dumps(results["batch_durationMs_median"]))
    print(json.dumps(results["state_operator_median"]))
    if args.stages:
        print(json.dumps(results["stages"], indent=1))
    path = write_results("admin_latency" + (f"-{args.tag}" if args.tag else ""), results)
    print(f"\nresults: {path}")


if __name__ == "__main__":
    main()
