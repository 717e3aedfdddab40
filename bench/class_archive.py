"""Benchmark: the driver's class-data-sharing archive (setting ``spark_class_archive``) — the product's cold start,
a standby's start and its takeover, each controller a process of its own, with the archive and without.

On real local services (ZooKeeper + Apache Kafka, free ports, stopped by PID) a ZooKeeper chroot gets a cluster in
Kafka's layout (default 10k partitions, 10 brokers, RF 3; prepared once). Each round runs both modes, in turns
(``--start-with``'s mode first in the first round, the other first in the next, …), on a fresh checkpoint and
topics:

- **cold start**: the product's entry point (``python -m streaming --master local[2]``, shipped defaults) from
  its process' start to its first committed micro-batch carrying the failover reference (every bucket loaded
  from ZooKeeper): the JVM's start, the session, the election, the read and the batch;
- **standby start**: a second controller on the same checkpoint, from its start to the last of its log's
  lines that say it is ready (:data:`STANDBY_READY`: the tree read and the failover batch decided ahead, the
  query's plan rehearsed, the Python workers warmed);
- **takeover**: the active one SIGKILLed; from ZooKeeper's deletion of ``/controller`` (an observer's watch) to
  the standby's first committed micro-batch carrying its failover reference (the commit file's time).

Prints each round and the medians with the ratio without/with; writes
``bench/results/class_archive-<UTC stamp>.json``. The archive must have been made (``livectl class-archive``).

    .venv/bin/python -m bench class_archive --partitions 10000 --rounds 2
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.failover import N_BROKERS, RF, kill_group, start_active, wait_active_loaded
from bench.harness import (
    ZnodeDeletion,
    close,
    machine_info,
    make_chroot,
    plan_layout,
    prepare_tree,
    print_table,
    register_brokers,
    services,
    settings_for,
    topic_settings,
    wait_quiet,
    work_dir,
    write_results,
    zk_client,
)
from core.kafka.zkdata import CONTROLLER_PATH
from streaming.runtime import class_archive
from streaming.settings import Settings

MODES = ("on", "off")
#: the log lines of a standby that has done everything it does ahead
STANDBY_READY = ("standby: decided", "query plan rehearsed", "Python workers warmed")


def _log_time(line: str) -> float:
    return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()


def _first_line(log: Path, text: str, since: float = 0.0) -> tuple[float, str] | None:
    if not log.exists():
        return None
    for line in log.read_text(errors="replace").splitlines():
        if text in line and len(line) > 23 and line[:2] == "20":
            t = _log_time(line)
            if t >= since:
                return t, line
    return None


def session_start(log: Path, spawned: float) -> float | None:
    """Seconds from the process' start to its log's ``waiting for the controller lease``: Python's imports, the
    checks of ZooKeeper and Kafka, then the driver's JVM and SparkSession, which the archive speeds up."""
    after = _first_line(log, "waiting for the controller lease")
    return None if after is None else round(after[0] - spawned, 2)


def _last_commit_time(settings: Settings) -> float:
    commits = Path(settings.checkpoint_dir) / "commits"
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    return (commits / str(last)).stat().st_mtime


def _wait_line(log: Path, text: str, proc: Any, timeout: float, since: float = 0.0) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = _first_line(log, text, since)
        if found is not None:
            return found[0]
        if proc.poll() is not None:
            raise RuntimeError(f"the controller exited with {proc.returncode} before {text!r}; see {log}")
        time.sleep(0.2)
    raise TimeoutError(f"no {text!r} within {timeout:.0f} s; see {log}")


def one_round(settings: Settings, mode: str, work: Path, timeout: float) -> dict[str, Any]:
    """Cold start, standby start and takeover of two product processes with ``spark_class_archive=mode``."""
    sets = [f"spark_class_archive={'true' if mode == 'on' else 'false'}"]
    tag = uuid.uuid4().hex[:6]
    out: dict[str, Any] = {"mode": mode}
    active_log, standby_log = work / f"active-{mode}-{tag}.log", work / f"standby-{mode}-{tag}.log"
    t_spawn = time.time()
    active = start_active(settings, active_log, prototype=False, sets=sets)
    standby = None
    observer = zk_client(settings.zookeeper_connect)
    try:
        wait_active_loaded(settings, active_log, active, timeout)
        out["cold_start_s"] = round(_last_commit_time(settings) - t_spawn, 2)
        elected = _first_line(active_log, "elected")
        out["cold_elected_s"] = None if elected is None else round(elected[0] - t_spawn, 2)
        out["archive_mapped"] = _first_line(active_log, "maps the class-data-sharing archive") is not None
        out["cold_session_s"] = session_start(active_log, t_spawn)
        time.sleep(2)  # idle
        t_standby = time.time()
        standby = start_active(settings, standby_log, prototype=False, sets=[*sets, "controller_id=2"])
        # ready: everything a standby does ahead done (its tree read and batch decided, its query's plan
        # rehearsed, its Python workers warmed), so that the takeover measures the takeover alone
        ready = max(_wait_line(standby_log, line, standby, timeout) for line in STANDBY_READY)
        out["standby_start_s"] = round(ready - t_standby, 2)
        out["standby_session_s"] = session_start(standby_log, t_standby)
        time.sleep(2)
        controller_gone = ZnodeDeletion(observer, CONTROLLER_PATH)  # the active controller's
        kill_group(active)
        t0 = controller_gone.wait(settings.zookeeper_session_timeout_ms / 1000 * 3 + 10)
        wait_active_loaded(settings, standby_log, standby, timeout)
        out["takeover_s"] = round(_last_commit_time(settings) - t0, 2)
        took = _first_line(standby_log, "elected", t0 - 1)
        out["takeover_elected_s"] = None if took is None else round(took[0] - t0, 2)
    finally:
        kill_group(active)
        if standby is not None:
            kill_group(standby)
        close(observer)
    out["logs"] = [str(active_log), str(standby_log)]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=2, help="rounds, each running both modes (default: %(default)s)")
    ap.add_argument("--start-with", choices=MODES, default="on", help="the first round's first mode (then in turns)")
    ap.add_argument("--buckets", type=int, default=2, help="state buckets (livectl's for local[2]: 2)")
    ap.add_argument("--session-timeout-ms", type=int, default=6000, help="ZooKeeper session timeout (both)")
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--no-wait-quiet", action="store_true", help="do not wait for load average < 1.5")
    args = ap.parse_args()
    archive = class_archive.find(class_archive.default_folder(), class_archive.archive_key())
    if archive is None:
        raise SystemExit("no class-data-sharing archive for this Java and Spark: run `livectl class-archive` first")
    work = work_dir("livectl-bench-cds-")
    results: dict[str, Any] = {"benchmark": "class_archive", "partitions": args.partitions, "archive": str(archive)}
    runs: list[dict[str, Any]] = []
    with services() as svc:
        results["machine"] = machine_info(svc.zookeeper.port)
        name = f"cds{args.partitions}x{uuid.uuid4().hex[:6]}"
        make_chroot(svc, name)
        base = settings_for(
            svc,
            name,
            work / "checkpoint",
            num_buckets=args.buckets,
            zookeeper_session_timeout_ms=args.session_timeout_ms,
        )
        admin = zk_client(base.zookeeper_connect)
        layout = plan_layout(args.partitions, N_BROKERS, RF)
        prep = prepare_tree(admin, layout)
        brokers = register_brokers(base.zookeeper_connect, list(range(N_BROKERS)))
        print(f"tree of {layout.partitions} partitions prepared in {prep:.1f} s", flush=True)
        try:
            for r in range(args.rounds):
                first = MODES if args.start_with == "on" else tuple(reversed(MODES))
                for mode in first if r % 2 == 0 else tuple(reversed(first)):
                    if not args.no_wait_quiet:
                        wait_quiet()
                    prefix = f"{name}r{r}{mode}"
                    settings = Settings.from_mapping(
                        {
                            **base.to_dict(),
                            **topic_settings(prefix),
                            "checkpoint_dir": str(work / f"checkpoint-{prefix}"),
                        }
                    )
                    try:
                        run = {"round": r, **one_round(settings, mode, work, args.timeout)}
                    except (RuntimeError, TimeoutError) as e:
                        run = {"round": r, "mode": mode, "error": repr(e)[:2000]}
                    runs.append(run)
                    print(json.dumps(run), flush=True)
                    results["runs"] = runs
                    write_results("class_archive", results)
        finally:
            for c in brokers.values():
                close(c)
            close(admin)
    figures = (
        "cold_session_s",
        "cold_start_s",
        "cold_elected_s",
        "standby_session_s",
        "standby_start_s",
        "takeover_s",
        "takeover_elected_s",
    )
    medians: dict[str, dict[str, float | None]] = {}
    for mode in MODES:
        ok = [x for x in runs if x["mode"] == mode and "error" not in x]
        medians[mode] = {
            f: statistics.median([x[f] for x in ok if x.get(f) is not None] or [0.0]) if ok else None for f in figures
        }
    results["medians"] = medians
    rows = []
    for f in figures:
        on, off = medians["on"][f], medians["off"][f]
        ratio = round(off / on, 2) if on and off else None
        rows.append([f, args.partitions, on, off, ratio])
    print()
    print_table(["figure (median)", "partitions", "with archive s", "without s", "without / with"], rows)
    path = write_results("class_archive", results)
    print(f"\nresults: {path}")


if __name__ == "__main__":
    main()
