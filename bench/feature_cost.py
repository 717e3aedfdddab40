"""Benchmark: what an optional feature costs the micro-batch — with and without it, at 10k partitions.

The issue's cost clause: the observability features (the metrics endpoint and status page; the audit table,
``--features audit``) must keep the micro-batch time within 5 % of the controller without them. For each
configuration — the baseline (every feature off) and the chosen features on — interleaved ``--rounds``
times on real local services (ZooKeeper + Apache Kafka, free ports, stopped by PID) and one SparkSession:

The order alternates between rounds (baseline first, then the features first: ABBA), because the first
configuration in a session also pays warm-up. Per configuration:

1. a fresh ZooKeeper chroot gets ``--partitions`` partitions in Kafka's layout (10 brokers, replication
   factor 3, 100 per topic) and ten broker registrations; the controller starts on an empty checkpoint
   and loads them (its cold start is not measured);
2. ``--commands`` small admin commands (create a one-partition topic), each waited for in ZooKeeper, so
   each is one micro-batch of little input: there the feature's fixed cost per batch shows most;
3. one broker hard-killed (its session closed): the micro-batch that re-elects and shrinks the ISR of
   the 3k partitions it hosted.

While a feature with an HTTP endpoint is on, a scraper reads its ``/metrics`` and ``/`` every second, as
Prometheus and a browser would. Each micro-batch's time is Spark's ``triggerExecution`` from the query's
progress. Prints, per configuration, the median small-batch time, the broker-failure batch time, and the
ratio with / without: pooled over the rounds, and each round's own ratio (median, min, max). On a loaded
machine that ratio is noise; what holds there is the features' own share of their batches, measured in
the same batches (:class:`OwnTime`: the audit call and the endpoint's per-batch record, per batch, over
``triggerExecution``), and the scrapes' time over the run's batch time (served beside the batches).

**Adding a feature**: one entry in :data:`FEATURES` — its settings overrides (given a free port) and the
paths to scrape — then ``--features metrics,<yours>`` measures them together, ``--features <yours>``
alone.

Run::

    .venv/bin/python -m bench feature_cost                       # metrics, 10k partitions, 2 rounds (ABBA)
    .venv/bin/python -m bench feature_cost --features metrics,audit --rounds 4   # the endpoint and the audit table
    .venv/bin/python -m bench feature_cost --partitions 1000 --commands 10 --rounds 1 --no-wait-quiet

Writes ``bench/results/feature_cost-<UTC stamp>.json`` (and ``…-latest.json``).
"""

from __future__ import annotations

import argparse
import functools
import statistics
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.harness import (
    Services,
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
    spark_session,
    start_controller,
    wait_quiet,
    write_results,
    zk_client,
)
from core import events as ev
from core.codec.events import event_to_json
from livectl.local import free_port

N_BROKERS = 10
RF = 3
VICTIM = 1


@dataclass(frozen=True)
class Feature:
    """``overrides(port)``: the settings that turn the feature on; ``scrape``: HTTP paths read every second."""

    overrides: Callable[[int], dict[str, Any]]
    scrape: tuple[str, ...] = ()


FEATURES: dict[str, Feature] = {
    "metrics": Feature(lambda port: {"metrics_port": port}, scrape=("/metrics", "/")),
    "audit": Feature(lambda _port: {"audit_log": True}),
}
#: the baseline: every feature off (the state-change log is on in the shipped defaults)
BASELINE: dict[str, Any] = {"metrics_port": 0, "audit_log": False}


class Scraper(threading.Thread):
    def __init__(self, urls: list[str]) -> None:
        super().__init__(daemon=True)
        self.urls = urls
        self.stopped = threading.Event()
        self.scrapes = 0
        self.errors = 0
        #: each scrape's time, request to last byte: an upper bound of the driver's time serving it
        self.seconds: list[float] = []

    def run(self) -> None:
        while not self.stopped.wait(1.0):
            for u in self.urls:
                started = time.monotonic()
                try:
                    with urllib.request.urlopen(u, timeout=5) as r:
                        r.read()
                    self.scrapes += 1
                    self.seconds.append(time.monotonic() - started)
                except OSError:
                    self.errors += 1


class OwnTime:
    """Per micro-batch, the driver's seconds inside the features' own per-batch code: the state-change log's
    call and the endpoint's record of the batch. Measured inside the same batches as their
    ``triggerExecution``, so the machine's load weighs on both alike: the share this gives holds on a
    loaded machine where the with / without ratio is noise."""

    def __init__(self) -> None:
        self.by_batch: dict[int, float] = {}
        #: the same, per wrapped callable
        self.by_part: dict[str, dict[int, float]] = {}

    def wrap(self, part: str, fn: Callable[[Any], Any], batch_of: Callable[[Any], int]) -> Callable[[Any], Any]:
        mine = self.by_part.setdefault(part, {})

        def timed(arg: Any) -> Any:
            started = time.monotonic()
            try:
                return fn(arg)
            finally:
                b, spent = batch_of(arg), time.monotonic() - started
                self.by_batch[b] = self.by_batch.get(b, 0.0) + spent
                mine[b] = mine.get(b, 0.0) + spent

        return timed


def wait_for(what: str, check: Callable[[], Any], timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.1)
    raise TimeoutError(f"{what}: not within {timeout:.0f} s")


def run_config(spark: Any, svc: Services, work: Path, features: list[str], args: argparse.Namespace) -> dict[str, Any]:
    name = f"fc{uuid.uuid4().hex[:8]}"
    make_chroot(svc, name)
    overrides: dict[str, Any] = dict(BASELINE)
    urls: list[str] = []
    for f in features:
        port = free_port()
        overrides.update(FEATURES[f].overrides(port))
        urls.extend(f"http://127.0.0.1:{port}{p}" for p in FEATURES[f].scrape)
    settings = settings_for(svc, name, work / name / "checkpoint", num_buckets=args.buckets, **overrides)
    connect = settings.zookeeper_connect
    admin = zk_client(connect)
    layout = plan_layout(args.partitions, N_BROKERS, RF)
    prepare_tree(admin, layout)
    brokers = register_brokers(connect, list(range(N_BROKERS)))
    label = "+".join(features) or "baseline"
    out: dict[str, Any] = {"config": label, "features": features, "partitions": layout.partitions}
    rc = start_controller(spark, settings)
    scraper = Scraper(urls)
    try:
        q = wait_for("the query", lambda: rc.app.query, args.timeout)
        own = OwnTime()
        d = rc.app.dispatcher
        assert d is not None, "the query is running: its dispatcher is made"
        if d.audit is not None:
            d.audit = own.wrap("audit_log", d.audit, lambda a: int(a.batch_id))
        if d.observer is not None:
            d.observer = own.wrap("metrics_record", d.observer, lambda o: int(o.batch_id))
        wait_for(
            "the tree loaded",
            lambda: any(
                int(((p.get("observedMetrics") or {}).get("livectl") or {}).get("GlobalPartitionCount", -1))
                == layout.partitions
                for p in progress_list(q)
            ),
            args.timeout,
        )
        time.sleep(3)
        scraper.start()
        first = max((int(p["batchId"]) for p in progress_list(q)), default=-1)
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=svc.broker.bootstrap, acks="all", linger_ms=0)
        try:
            for i in range(args.commands):
                topic = f"bench-{i}"
                cmd = ev.CreateTopic(f"c{i}", topic, 1, 3, replica_assignment=((2, 3, 4),))
                producer.send(settings.admin_topic, event_to_json(cmd).encode()).get(timeout=30)
                wait_for(
                    topic, functools.partial(admin.exists, f"/brokers/topics/{topic}/partitions/0/state"), args.timeout
                )
        finally:
            producer.close()
        small_last = max(int(p["batchId"]) for p in progress_list(q))
        time.sleep(2)
        close(brokers.pop(VICTIM))
        led = layout.led_by(VICTIM)
        t, p = led[-1]
        state_path = f"/brokers/topics/{t}/partitions/{p}/state"
        wait_for("the failure handled", lambda: b'"leader":1,' not in admin.get(state_path)[0], args.timeout)
        time.sleep(3)
        progress = [x for x in progress_list(q) if int(x["batchId"]) > first]
        small = [
            float(x["durationMs"]["triggerExecution"])
            for x in progress
            if int(x["batchId"]) <= small_last and int(x.get("numInputRows", 0)) > 0
        ]
        failure = [
            float(x["durationMs"]["triggerExecution"])
            for x in progress
            if int(x["batchId"]) > small_last and int(x.get("numInputRows", 0)) > 0
        ]

        def shares(keep: Callable[[int], bool]) -> list[float]:
            return [
                own.by_batch.get(int(x["batchId"]), 0.0) * 1000 / float(x["durationMs"]["triggerExecution"])
                for x in progress
                if keep(int(x["batchId"])) and int(x.get("numInputRows", 0)) > 0
            ]

        out["own_ms_median"] = {
            part: statistics.median(1000 * v for v in per.values()) if per else None
            for part, per in own.by_part.items()
        }
        out["small_own_shares"] = shares(lambda b: b <= small_last)
        out["failure_own_shares"] = shares(lambda b: b > small_last)
        window_s = sum(float(x["durationMs"]["triggerExecution"]) for x in progress) / 1000
        out["scrape_ms_mean"] = 1000 * statistics.mean(scraper.seconds) if scraper.seconds else None
        out["scrape_share"] = sum(scraper.seconds) / window_s if scraper.seconds and window_s else None
        out["small_batches_ms"] = small
        out["failure_batches_ms"] = failure
        out["small_median_ms"] = statistics.median(small) if small else None
        out["failure_ms"] = max(failure) if failure else None
        out["scrapes"] = scraper.scrapes
        out["scrape_errors"] = scraper.errors
    finally:
        scraper.stopped.set()
        rc.stop()
        for c in brokers.values():
            close(c)
        close(admin)
    print(
        f"[{label}] small batches: median {out.get('small_median_ms')} ms over {len(out.get('small_batches_ms', []))}; "
        f"broker failure batch {out.get('failure_ms')} ms; {out.get('scrapes', 0)} scrapes; features' own time "
        f"{_pct(out.get('small_own_shares'))} of small batches, {_pct(out.get('failure_own_shares'))} of the "
        f"failure's; scrapes {_pct([out['scrape_share']] if out.get('scrape_share') else [])} of the time; "
        f"own ms per batch (median) {out.get('own_ms_median')}, per scrape {out.get('scrape_ms_mean')}",
        flush=True,
    )
    return out


def _pct(values: list[float] | None) -> str:
    return f"{100 * statistics.median(values):.2f} %" if values else "-"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--features", default="metrics", help=f"comma-separated, of: {', '.join(FEATURES)}")
    ap.add_argument("--partitions", type=int, default=10_000)
    ap.add_argument("--commands", type=int, default=20, help="small micro-batches per configuration")
    ap.add_argument("--rounds", type=int, default=2, help="baseline / features pairs, interleaved")
    ap.add_argument("--buckets", type=int, default=8)
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--no-wait-quiet", action="store_true", help="do not wait for load average < 1.5")
    args = ap.parse_args()
    features = [f for f in args.features.split(",") if f]
    unknown = [f for f in features if f not in FEATURES]
    if unknown:
        ap.error(f"--features: unknown {unknown[0]!r}; known: {', '.join(FEATURES)}")
    work = Path(tempfile.mkdtemp(prefix="livectl-bench-fc-"))
    results: dict[str, Any] = {"benchmark": "feature_cost", "features": features, "runs": []}
    with services() as svc:
        spark, _ = spark_session(args.buckets)
        try:
            results["machine"] = machine_info(svc.zookeeper.port, spark)
            for r in range(args.rounds):
                # ABBA: the first configuration of a session also pays the Python workers' and the query
                # plan's warm-up, so the order alternates between rounds
                for config in ([], features) if r % 2 == 0 else (features, []):
                    if not args.no_wait_quiet:
                        wait_quiet()
                    results["runs"].append(run_config(spark, svc, work, config, args))
                    write_results("feature_cost", results)
        finally:
            spark.stop()

    def pooled(config: list[str], key: str) -> float | None:
        values = [v for r in results["runs"] if r["features"] == config for v in r.get(key, [])]
        return statistics.median(values) if values else None

    def per_round(key: str) -> list[float]:
        """Each round's ratio, features / baseline, of the two configurations' own medians (same round,
        back to back): their spread says how far the pooled ratio can be trusted on a loaded machine."""
        base = [r for r in results["runs"] if r["features"] == []]
        feat = [r for r in results["runs"] if r["features"] == features]
        return [f[key] / b[key] for b, f in zip(base, feat, strict=False) if b.get(key) and f.get(key)]

    def own_share(key: str) -> float | None:
        """The features' own share of their batches, pooled over the feature runs (per batch, median)."""
        values: list[float] = []
        for r in results["runs"]:
            if r["features"] == features and r.get(key) is not None:
                v = r[key]
                values.extend(v if isinstance(v, list) else [v])
        return statistics.median(values) if values else None

    base_small, feat_small = pooled([], "small_batches_ms"), pooled(features, "small_batches_ms")
    base_fail, feat_fail = pooled([], "failure_batches_ms"), pooled(features, "failure_batches_ms")
    results["summary"] = {
        "small_median_ms": {"baseline": base_small, "features": feat_small},
        "failure_median_ms": {"baseline": base_fail, "features": feat_fail},
        "small_ratio": feat_small / base_small if base_small and feat_small else None,
        "failure_ratio": feat_fail / base_fail if base_fail and feat_fail else None,
        "small_own_share_median": own_share("small_own_shares"),
        "failure_own_share_median": own_share("failure_own_shares"),
        "scrape_share_median": own_share("scrape_share"),
        "small_round_ratios": per_round("small_median_ms"),
        "failure_round_ratios": per_round("failure_ms"),
    }
    path = write_results("feature_cost", results)
    s = results["summary"]
    print_table(
        ["micro-batch", "baseline ms", f"{'+'.join(features)} ms", "ratio"],
        [
            ["small (one command)", base_small, feat_small, s["small_ratio"]],
            [f"broker failure ({args.partitions:,} partitions)", base_fail, feat_fail, s["failure_ratio"]],
        ],
    )
    for key in ("small_own_share_median", "failure_own_share_median", "scrape_share_median"):
        if s[key] is not None:
            print(f"{key}: {100 * s[key]:.2f} %")
    for key in ("small_round_ratios", "failure_round_ratios"):
        ratios = s[key]
        if ratios:
            print(
                f"{key}: median {statistics.median(ratios):.3f}, min {min(ratios):.3f}, max {max(ratios):.3f} "
                f"over {len(ratios)} rounds"
            )
    print(f"results: {path}")


if __name__ == "__main__":
    main()
