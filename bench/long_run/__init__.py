"""A long run (issue 41, item 6): a cluster of ``--partitions`` partitions under a steady mix for ``--minutes``.

Every process is real, on the crash matrix's harness (:mod:`bench.harness`): ZooKeeper (Debian's) and Apache
Kafka, ``--brokers`` simulated broker processes (``python -m simbrokers``, one each) and two ``livectl run``
controllers on one checkpoint, the active one and a standby waiting for the lease. The partitions are written
in Kafka's layout before the first controller starts (``--per-topic`` partitions a topic, replication factor
``--replication-factor``); the first controller loads them from ZooKeeper and sends them to the brokers.

The mix, on a schedule from the start of the run:

- an admin command every ``--command-interval`` seconds, in turn: create a topic (3 partitions, replication
  factor 2, placed by the controller), alter a topic's config, add a partition, reassign a partition (one
  replica moved to a live broker), delete a topic. Each takes a created topic with no command in flight
  (the oldest for a deletion); with none, it creates one. Each command has a request id of its own.
- a fault every ``--fault-interval`` seconds, in turn: a simulated broker SIGKILLed (its session expires) and
  started again ``--broker-down-seconds`` later, the brokers in turn; then a controller takeover: the
  active controller's process group SIGKILLed, the standby elected once its session expires, and a new
  standby started (the next takeover waits until it waits for the lease).

Sampled every ``--sample-seconds``, per process, from ``/proc/PID/status`` (``VmRSS``, ``Threads``) and
``/proc/PID/fd`` (:mod:`bench.harness.procstat`): the active and the standby controller's Python, Spark JVM
(the driver; in ``local[2]`` the executors too) and Python workers (Spark's worker daemon and the workers it
forked), and every simulated broker process. Per window of ``--window-seconds``: each of those (memory: the
median of the window's samples; threads and descriptors: the most seen), and the admin latency (the command
sent → its final answer on the admin-results topic, read committed) p50 / p99 of the commands sent in it.
At each window's end, ZooKeeper's partition states, ``/controller_epoch`` and each broker's own view (its
status file) are read for the epoch checks.

Checked (each failure is a problem; the exit code is 1 with any):

- every admin command answered exactly once with its final result (the admin-results topic read back from the
  start, read committed: one ``ok`` per request id, at most one ``in_progress`` before it, nothing else);
- leader epochs only grow (each partition in ZooKeeper, window to window; each broker incarnation's own
  view), the controller epoch only grows and goes up at every takeover, and no two brokers lead one
  partition at one leader epoch in their views;
- at the end, every broker back and the commands drained: ZooKeeper and the brokers agree (every partition's
  leader and ISR live replicas, the ISR every replica; each replica's view at ZooKeeper's leader and leader
  epoch, the leader's at ZooKeeper's ISR; no broker hosting what is not assigned to it; no reassignment or
  deletion left; the created topics there with their partitions, the deleted ones gone).

Growth per hour: the least-squares slope of each per-window figure over the windows after the first
``--warmup-windows``, and, for memory, the slope within each process's life pooled over processes (a
takeover replaces the active controller's JVM and a broker's restart its process: the windows' figures then
jump, which the pooled slope leaves out; a process's first window of life, or of being active, is its
warm-up).

Run::

    .venv/bin/python -m bench long_run                                   # one hour at 100k partitions
    .venv/bin/python -m bench long_run --short                           # the CI short form: 75 s at 2,000

Prints a table per window and the growth per hour; writes ``bench/results/long_run-<UTC stamp>.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.harness.matrix import Matrix, MatrixError, wait_until
from bench.harness.services import prepare_tree
from bench.long_run.checks import Epochs, Tree, agreement_problems, layout, read_tree
from bench.long_run.config import SHORT, SHORT_SLACK, Config, within_slack
from bench.long_run.driver import LongRun, cpu_cores
from bench.long_run.growth import slope, window_growth, within_process_growth
from bench.long_run.records import Report, Sample, Window

#: the names tests and callers use: the run, its settings and its arithmetic
__all__ = [
    "SHORT",
    "SHORT_SLACK",
    "Config",
    "Epochs",
    "Report",
    "Sample",
    "Tree",
    "Window",
    "cpu_cores",
    "main",
    "run",
    "slope",
    "window_growth",
    "within_process_growth",
    "within_slack",
]


@contextlib.contextmanager
def cluster(
    zk_root: str, bootstrap: str, work: Path, cfg: Config, log: Callable[[str], None] = print
) -> Iterator[Matrix]:
    """The brokers, the prepared partitions and the first controller, loaded and sent to every broker; every
    process stopped after."""
    ids = tuple(range(1, cfg.brokers + 1))
    m = Matrix(
        zk_root,
        bootstrap,
        work,
        session_timeout_ms=cfg.session_timeout_ms,
        broker_ids=ids,
        broker_args=cfg.broker_args(),
    )
    try:
        m.open()
        assert m.zk is not None
        started = time.monotonic()
        prepare_tree(m.zk, layout(cfg, ids))
        log(f"cluster {m.name}: {cfg.partitions:,} partitions written in {time.monotonic() - started:.1f} s")
        first = m.start_controller(cfg.controller_extra())
        m.wait_loaded(first, timeout=900)
        last: list[str] = []

        def agreed() -> bool:
            assert m.zk is not None
            last[:] = agreement_problems(m, read_tree(m.zk), {}, ())
            return not last

        try:
            wait_until("every partition on its brokers", agreed, 900, interval=5)
        except MatrixError:
            raise MatrixError(f"the cluster never came up in agreement: {last[:5]}") from None
        log(f"controller {first.controller_id} loaded, every broker in agreement ({time.monotonic() - started:.0f} s)")
        yield m
    finally:
        m.close(at_once=True)


def run(
    zk_root: str,
    bootstrap: str,
    work: Path,
    cfg: Config,
    *,
    log: Callable[[str], None] = print,
    on_window: Callable[[LongRun], None] | None = None,
    services: Mapping[str, int] | None = None,
) -> Report:
    """The whole long run on services already running (``zk_root``: ZooKeeper's connect string; ``services``:
    their pids by role, whose CPU time the windows count too)."""
    import datetime as dt

    report = Report(config=asdict(cfg), started_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"))
    t0 = time.monotonic()
    with cluster(zk_root, bootstrap, work, cfg, log) as m:
        lr = LongRun(m, cfg, log, services)
        lr.on_window = on_window
        report.setup_s = round(time.monotonic() - t0, 1)
        lr.run(report)
    return report


def print_report(report: Report) -> None:
    from bench.harness import print_table

    roles = ("active_jvm", "active_python", "active_workers", "standby_jvm", "brokers")
    print_table(
        ["window", "min", "cmds", "p50 s", "p99 s", "max s", "events"],
        [
            [
                w.index,
                round(w.end / 60, 1),
                f"{w.answered}/{w.commands}",
                w.p50_s,
                w.p99_s,
                w.max_s,
                ", ".join(w.events),
            ]
            for w in report.windows
        ],
    )
    print()
    print_table(
        ["window", *(f"{r} MiB/thr/fd" for r in roles)],
        [
            [w.index]
            + [
                (
                    f"{w.roles[r]['rss_mib']:.0f}/{w.roles[r]['threads']:.0f}/{w.roles[r]['fds']:.0f}"
                    if r in w.roles
                    else "-"
                )
                for r in roles
            ]
            for w in report.windows
        ],
    )
    print()
    cpu_roles = sorted({r for w in report.windows for r in w.cpu_cores}, key=lambda r: (r in ("other", "machine"), r))
    print("busy cores per window (CPU seconds / window seconds), by role:")
    print_table(
        ["window", *cpu_roles],
        [[w.index, *(w.cpu_cores.get(r, "-") for r in cpu_roles)] for w in report.windows],
    )
    print()
    print("growth per hour after the warm-up (least-squares slope of the windows' figures):")
    for k, v in report.growth_per_hour.items():
        print(f"  {k:28} {v}")
    print("memory growth within each process's life, pooled (MiB per hour):")
    for k, fit in report.memory_growth_within_process.items():
        print(f"  {k:28} {fit}")
    print(f"commands: {report.commands}; latency: {report.latency_s}; controller epochs: {report.controller_epochs}")
    print(f"broker-events records: {report.broker_events}")
    print(f"problems: {len(report.problems)}")
    for p in report.problems[:30]:
        print(f"  {p}")


def config_from(args: argparse.Namespace) -> Config:
    sets = []
    for s in args.set:
        k, sep, v = s.partition("=")
        if not sep or not k:
            raise SystemExit(f"--set: expected key=value, got {s!r}")
        sets.append((k, v))
    return Config(
        minutes=args.minutes,
        partitions=args.partitions,
        brokers=args.brokers,
        replication_factor=args.replication_factor,
        per_topic=args.per_topic,
        window_seconds=args.window_seconds,
        warmup_windows=args.warmup_windows,
        sample_seconds=args.sample_seconds,
        command_interval=args.command_interval,
        fault_interval=args.fault_interval,
        first_fault=args.first_fault,
        broker_down_seconds=args.broker_down_seconds,
        session_timeout_ms=args.session_timeout_ms,
        produce_rate=args.produce_rate,
        broker_tick_ms=args.broker_tick_ms,
        broker_fetch_interval_ms=args.broker_fetch_interval_ms,
        broker_status_interval_ms=args.broker_status_interval_ms,
        replica_lag_time_max_ms=args.replica_lag_time_max_ms,
        broker_proposals_per_record=args.broker_proposals_per_record,
        controller_settings=tuple(sets),
        settle_seconds=args.settle_seconds,
    )


def _positive(kind: type[Any]) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a {kind.__name__}, got {text!r}") from None
        if v <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
        return v

    return parse


def main() -> int:
    # --short: the CI short form's settings as the defaults (any option given still wins)
    d = SHORT if "--short" in sys.argv[1:] else Config()
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--short", action="store_true", help="the short form CI runs: 75 s at 2,000 partitions")
    f, i = _positive(float), _positive(int)
    ap.add_argument("--minutes", type=f, default=d.minutes, help="how long the mix runs (default: %(default)s)")
    ap.add_argument("--partitions", type=i, default=d.partitions, help="prepared partitions (default: %(default)s)")
    ap.add_argument("--brokers", type=i, default=d.brokers, help="simulated broker processes (default: %(default)s)")
    ap.add_argument("--replication-factor", type=i, default=d.replication_factor, help="(default: %(default)s)")
    ap.add_argument(
        "--per-topic", type=i, default=d.per_topic, help="partitions per prepared topic (default: %(default)s)"
    )
    ap.add_argument("--window-seconds", type=f, default=d.window_seconds, help="(default: %(default)s)")
    ap.add_argument(
        "--warmup-windows", type=int, default=d.warmup_windows, help="left out of the growth (default: %(default)s)"
    )
    ap.add_argument("--sample-seconds", type=f, default=d.sample_seconds, help="(default: %(default)s)")
    ap.add_argument(
        "--command-interval",
        type=f,
        default=d.command_interval,
        help="seconds between admin commands (default: %(default)s)",
    )
    ap.add_argument(
        "--fault-interval", type=f, default=d.fault_interval, help="seconds between faults (default: %(default)s)"
    )
    ap.add_argument(
        "--first-fault",
        type=float,
        default=d.first_fault,
        help="seconds into the run; 0: half a fault interval (default: %(default)s)",
    )
    ap.add_argument("--broker-down-seconds", type=f, default=d.broker_down_seconds, help="(default: %(default)s)")
    ap.add_argument(
        "--session-timeout-ms",
        type=i,
        default=d.session_timeout_ms,
        help="controllers' and brokers' ZooKeeper sessions (default: %(default)s)",
    )
    ap.add_argument(
        "--produce-rate",
        type=float,
        default=d.produce_rate,
        help="records/s per led partition; a producing broker's log grows by design (default: %(default)s)",
    )
    ap.add_argument(
        "--broker-tick-ms", type=i, default=d.broker_tick_ms, help="simbrokers --tick-ms (default: %(default)s)"
    )
    ap.add_argument(
        "--broker-fetch-interval-ms",
        type=i,
        default=d.broker_fetch_interval_ms,
        help="simbrokers --fetch-interval-ms (default: %(default)s)",
    )
    ap.add_argument(
        "--broker-status-interval-ms",
        type=i,
        default=d.broker_status_interval_ms,
        help="simbrokers --status-interval-ms (default: %(default)s)",
    )
    ap.add_argument(
        "--replica-lag-time-max-ms", type=i, default=d.replica_lag_time_max_ms, help="(default: %(default)s, Kafka's)"
    )
    ap.add_argument(
        "--broker-proposals-per-record",
        type=int,
        default=d.broker_proposals_per_record,
        help="simbrokers --proposals-per-record; 0: one AlterPartition record per partition, the form before "
        "requests (default: %(default)s)",
    )
    ap.add_argument(
        "--settle-seconds",
        type=f,
        default=d.settle_seconds,
        help="the end's wait for answers and agreement (default: %(default)s)",
    )
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a controller setting (repeatable)")
    ap.add_argument("--zk-heap", default="1g", help="ZooKeeper's maximum heap (default: %(default)s)")
    ap.add_argument("--no-wait-quiet", action="store_true", help="do not wait for a quiet machine first")
    ap.add_argument("--keep", action="store_true", help="keep the run's folder (processes' logs) afterwards")
    args = ap.parse_args()
    if args.warmup_windows < 0:
        ap.error("--warmup-windows: must be >= 0")
    if args.first_fault < 0:
        ap.error("--first-fault: must be >= 0")
    cfg = config_from(args)
    from bench.harness import interruptible, machine_info, services, wait_quiet, write_results

    if not args.no_wait_quiet:
        wait_quiet()
    with interruptible(), services(keep=args.keep, zk_heap=args.zk_heap) as svc:
        work = Path(tempfile.mkdtemp(prefix="livectl-long-run-"))
        try:
            machine = machine_info(svc.zookeeper.port)

            def partial(lr: LongRun) -> None:
                # the windows so far, rewritten after each: a run cut short still leaves its figures
                windows = lr.windows(upto=lr.now() // cfg.window_seconds * cfg.window_seconds)
                progress = {"partial": True, "config": asdict(cfg), "windows": [asdict(w) for w in windows]}
                write_results("long_run", {"machine": machine, "command": " ".join(sys.argv), **progress})

            report = run(
                svc.zookeeper.connect,
                svc.broker.bootstrap,
                work,
                cfg,
                on_window=partial,
                services={"zookeeper": svc.zookeeper.pid, "kafka": svc.broker.pid},
            )
        finally:
            if not args.keep:
                shutil.rmtree(work, ignore_errors=True)
    print()
    print_report(report)
    path = write_results("long_run", {"machine": machine, "command": " ".join(sys.argv), **asdict(report)})
    print(f"results: {path}")
    return 0 if not report.problems else 1


if __name__ == "__main__":
    sys.exit(main())
