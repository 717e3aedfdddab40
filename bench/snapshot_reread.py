"""Benchmark: a new controller's ZooKeeper read (``SnapshotReader.read``), the code of ``--base`` beside this
tree's, alternating in one process on a real local ZooKeeper.

Two reads, each timed per arm in ABBA order:

* ``cold`` — a fresh reader (a cold start's read: every znode read and decoded);
* ``warm`` — the read after winning the lease: one reader read the tree ahead once (a data watch on every
  partition-state znode, as a waiting standby does), then before each timed read ``--changes``
  partition-state znodes are rewritten (the active controller's last writes); the topic and admin znodes
  are read afresh, of the state znodes only those whose watch fired, and only what changed is decoded.

The ``before`` arm runs this tree's reader with what ``--base`` had in place of what this change touches:
``core.kafka.zksnapshot.snapshot_from_znodes`` loaded from ``git show BASE:…``, Python's cyclic collector
left running through the read (``streaming.zk_snapshot.gc_paused`` replaced by a no-op), and the topic,
admin and config znodes read with one ``get`` each (``read_znodes`` replaced by one that does so for them).
Every snapshot read is checked equal to a fresh ``read_snapshot`` (outside the timing).

Run: ``.venv/bin/python bench/snapshot_reread.py [--partitions 100000] [--rounds 3] [--changes 1000]
[--base f2b53b0]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import tempfile
import time
import types
from pathlib import Path
from typing import Any

from _common import (
    close,
    machine_info,
    plan_layout,
    prepare_tree,
    register_brokers,
    rewrite_states,
    write_results,
    zk_client,
)

from livectl import local
from streaming import zk_snapshot
from streaming.zk_snapshot import SnapshotReader, read_snapshot

ROOT = Path(__file__).resolve().parent.parent


def base_module(rev: str) -> types.ModuleType:
    """``core/kafka/zksnapshot.py`` as it was at ``rev``, as a module of its own."""
    text = subprocess.run(
        ["git", "show", f"{rev}:core/kafka/zksnapshot.py"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout
    mod = types.ModuleType("zksnapshot_base")
    exec(compile(text, f"{rev}:core/kafka/zksnapshot.py", "exec"), mod.__dict__)
    return mod


@contextlib.contextmanager
def arm(name: str, base: types.ModuleType) -> Any:
    """This tree's reader as it is (``after``) or with what ``--base`` had in place of what the change touched."""
    if name == "after":
        yield
        return
    states_read = zk_snapshot.read_znodes

    def read_znodes(client: Any, paths: list[str], window: int = 5000, per_request: int = 100) -> Any:
        # the base read topic, admin and config znodes with one get each, state znodes with multiRead
        if per_request != zk_snapshot.MULTI_READ_SIZE:
            return zk_snapshot._get_all(client, paths, window)
        return states_read(client, paths, window)

    swaps = {
        "snapshot_from_znodes": base.snapshot_from_znodes,
        "gc_paused": contextlib.nullcontext,
        "read_znodes": read_znodes,
    }
    saved = {k: vars(zk_snapshot)[k] for k in swaps}
    for k, v in swaps.items():
        setattr(zk_snapshot, k, v)
    try:
        yield
    finally:
        for k, v in saved.items():
            setattr(zk_snapshot, k, v)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3, help="ABBA rounds per read kind")
    ap.add_argument("--changes", type=int, default=1000, help="state znodes rewritten before each warm read")
    ap.add_argument("--base", default="f2b53b0", help="git revision of the 'before' arm")
    ap.add_argument("--only", choices=("cold", "warm"), help="one read kind only")
    args = ap.parse_args()
    base = base_module(args.base)
    work = Path(tempfile.mkdtemp(prefix="livectl-bench-reread-"))
    svc = local.start_zookeeper(work / "zookeeper", local.free_port())
    out: dict[str, Any] = {"benchmark": "snapshot_reread", "partitions": args.partitions, "base": args.base}
    runs: dict[str, dict[str, list[float]]] = {
        f"{k}{c}": {"before": [], "after": []} for k in ("cold", "warm") for c in ("", "_cpu")
    }
    try:
        out["machine"] = machine_info(svc.port)
        zk = zk_client(svc.connect)
        layout = plan_layout(args.partitions, 10, 3)
        prepare_tree(zk, layout)
        brokers = register_brokers(svc.connect, list(range(10)))
        order = ["before", "after", "after", "before"]
        for r in range(args.rounds if args.only != "warm" else 0):
            for name in order:
                with arm(name, base):
                    t0, c0 = time.perf_counter(), time.process_time()
                    snap = SnapshotReader(zk).read()
                    took, cpu = time.perf_counter() - t0, time.process_time() - c0
                assert snap == read_snapshot(zk), name
                runs["cold"][name].append(took)
                runs["cold_cpu"][name].append(cpu)
                print(f"cold round {r} {name:6s} {took:.3f} s ({cpu:.3f} s CPU)", flush=True)
        reader = SnapshotReader(zk)
        if args.only != "cold":
            t0 = time.perf_counter()
            reader.read(ahead=True)
            out["read_ahead_s"] = round(time.perf_counter() - t0, 1)
        epoch = 10
        for r in range(args.rounds if args.only != "cold" else 0):
            for name in order:
                epoch += 1
                rewrite_states(zk, layout, args.changes, epoch)
                with arm(name, base):
                    t0, c0 = time.perf_counter(), time.process_time()
                    snap = reader.read()
                    took, cpu = time.perf_counter() - t0, time.process_time() - c0
                assert snap == read_snapshot(zk), name
                assert reader.last_state_reads == args.changes, reader.last_state_reads
                runs["warm"][name].append(took)
                runs["warm_cpu"][name].append(cpu)
                read = f"{cpu:.3f} s CPU; {args.changes} state znodes read"
                print(f"warm round {r} {name:6s} {took:.3f} s ({read})", flush=True)
        for c in brokers.values():
            close(c)
        close(zk)
    finally:
        local.stop_process(svc.pid, svc.marker)
    out["runs"] = runs
    out["median_s"] = {
        k: {a: round(statistics.median(v), 3) for a, v in arms.items()} for k, arms in runs.items() if arms["after"]
    }
    out["ratio_after_over_before"] = {
        k: round(m["after"] / m["before"], 2) for k, m in out["median_s"].items() if m["before"] > 0
    }
    print(json.dumps({k: out[k] for k in ("median_s", "ratio_after_over_before")}, indent=1))
    print(f"results: {write_results('snapshot_reread', out)}")


if __name__ == "__main__":
    main()
