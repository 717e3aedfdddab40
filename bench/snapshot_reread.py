"""Benchmark: a new controller's ZooKeeper read (``SnapshotReader.read``), the reader of ``--base`` beside this
tree's, alternating in one process on a real local ZooKeeper.

Two reads, each timed per arm in ABBA order:

* ``cold`` — a fresh reader (a cold start's read: every znode read and decoded);
* ``warm`` — the read after winning the lease: each arm's reader read the tree ahead once (a data watch on
  every partition-state znode, as a waiting standby does), then before each timed read ``--changes``
  partition-state znodes are rewritten (the active controller's last writes, in the first topics); the topic
  and admin znodes are read afresh, of the state znodes only those whose watch fired.

The ``before`` arm is ``--base``'s reader: ``streaming/zk/snapshot_reader.py`` and ``core/kafka/zksnapshot.py`` as they
were at that revision (``git show``), loaded as modules of their own beside this tree's. Every snapshot read is
checked equal to a fresh ``read_snapshot`` (outside the timing).

Run: ``.venv/bin/python -m bench snapshot_reread [--partitions 100000] [--rounds 3] [--changes 1000]
[--base 6bcf6cd] [--only cold|warm]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any

from bench.harness import (
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
from streaming.zk.snapshot_reader import SnapshotReader, read_snapshot

ROOT = Path(__file__).resolve().parent.parent


def _module_at(rev: str, path: str, name: str, **overrides: Any) -> types.ModuleType:
    text = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, check=True, capture_output=True, text=True).stdout
    mod = types.ModuleType(name)
    sys.modules[name] = mod  # dataclasses look their module up
    exec(compile(text, f"{rev}:{path}", "exec"), mod.__dict__)
    for k, v in overrides.items():  # names the module imported from this tree: the base's own instead
        setattr(mod, k, v)
    return mod


def base_reader(rev: str) -> Any:
    """``SnapshotReader`` as it was at ``rev``, with ``snapshot_from_znodes`` of the same revision."""
    zks = _module_at(rev, "core/kafka/zksnapshot.py", "zksnapshot_base")
    return _module_at(
        rev, "streaming/zk/snapshot_reader.py", "zk_snapshot_base", snapshot_from_znodes=zks.snapshot_from_znodes
    ).SnapshotReader


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3, help="ABBA rounds per read kind")
    ap.add_argument("--changes", type=int, default=1000, help="state znodes rewritten before each warm read")
    ap.add_argument("--base", default="6bcf6cd", help="git revision of the 'before' arm's reader")
    ap.add_argument("--only", choices=("cold", "warm"), help="one read kind only")
    args = ap.parse_args()
    readers = {"before": base_reader(args.base), "after": SnapshotReader}
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
                t0, c0 = time.perf_counter(), time.process_time()
                snap = readers[name](zk).read()
                took, cpu = time.perf_counter() - t0, time.process_time() - c0
                assert snap == read_snapshot(zk), name
                runs["cold"][name].append(took)
                runs["cold_cpu"][name].append(cpu)
                print(f"cold round {r} {name:6s} {took:.3f} s ({cpu:.3f} s CPU)", flush=True)
        warm = {name: cls(zk) for name, cls in readers.items()}
        if args.only != "cold":
            for name, reader in warm.items():
                t0 = time.perf_counter()
                reader.read(ahead=True)
                out[f"read_ahead_s_{name}"] = round(time.perf_counter() - t0, 1)
        epoch = 10
        for r in range(args.rounds if args.only != "cold" else 0):
            for name in order:
                epoch += 1
                rewrite_states(zk, layout, args.changes, epoch)
                reader = warm[name]
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
