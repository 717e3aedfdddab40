"""Profile: the Python cost of one bucket's ``applyInPandasWithState`` call, without Spark.

The controller query runs :func:`streaming.query.stateful.step_bucket` once per bucket per micro-batch. With
the shipped 8 buckets, each holds 1/8 of the partitions (100k partitions: 12.5k per bucket), and local[2]
runs two buckets at a time. This script builds one bucket's state as the query holds it (10 brokers,
replication factor 3, Kafka's default placement, all online) and times, in this process, the parts of
one call that handles a broker failure, plus the driver's side of ``foreachBatch``:

* ``load_state`` — zstd-decompress + JSON parse + ``ControllerState.from_dict`` of the bucket's blob;
* ``step`` — ``core.controller.step(state, [BrokerFailure(1)])``;
* ``dump_state`` — ``to_dict`` + JSON + zstd of the new state (written back to the state store);
* ``decision_rows`` — the decisions as JSON rows (the call's output);
* ``dispatch decode`` — the driver decoding those rows once (:func:`streaming.query.batch_rows.decode_row`);
* ``failover load`` — reading the bucket's failover snapshot file and stepping ``ControllerFailover`` (the
  takeover / cold-start batch);
* ``tick call`` — the whole call in a batch that leaves the bucket unchanged, beside what it cost when such
  a call re-serialised the state;
* ``failover call`` — the whole call of a failover batch's bucket (its failover reference and a tick in,
  the snapshot slice read from the shipped file, on an empty state), first as one call, then part by part
  in the same process so that the parts account for every second of it: reading the file, decoding it,
  the ``ControllerFailover`` step, the state dump, the decision rows, metrics, the output frame (large
  payloads packed: :func:`streaming.query.stateful.output_frame`) and its Arrow conversion (what
  ``applyInPandasWithState``'s serializer does with the frame), CPU and wall seconds; with ``--profile``
  also the call's top functions (cProfile). ``--trees A,B`` runs it in fresh processes importing each
  source tree in turn (A B B A ...), for a before/after in one session;
* ``whole call`` — the whole call as a Python worker makes it, with ``--held`` buckets' states cached and
  the collector as in a worker, in fresh processes: the collector paused during the call (shipped) and
  running (before), alternating, CPU seconds per call (the parts above run after ``gc.collect()``, which
  hides the collector's cost).

The per-batch floor of the query is about ``buckets / 2`` times the per-bucket sum (2 cores).

Run: ``.venv/bin/python -m bench bucket_cost [--partitions 100000] [--buckets 8]``; the failover call
alone: ``--failover-call [--profile] [--trees /path/to/main,/path/to/branch --rounds 2]``.
``--failure-call --state-not-cached`` times a broker failure's call whose worker has not cached the bucket's
state (Spark gave the bucket's task to the other Python worker): the call decodes the stored blob.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

if "--tree" in sys.argv:  # a fresh process of --trees: import that source tree's product code (this benchmark's
    # own harness still comes from this checkout: the tree's bench/ folder is no package before it)
    _tree = sys.argv[sys.argv.index("--tree") + 1]
    sys.path[:0] = [_tree]

from bench.harness import RESULTS_DIR, ROOT, machine_info, write_results
from bench.harness.bucket_calls import (
    FAILURE_SCENARIOS,
    HASH_SCENARIOS,
    decode_payloads,
    failover_call,
    failure_call,
    scenario_hashes,
    tick_call,
    timed,
    whole_call,
)
from bench.harness.workloads import build_state, snapshot_for
from core import controller
from core import decisions as dc
from core import events as ev
from core.kafka.request_encoding import encode_body
from core.kafka.requests import WireBody
from streaming.query import failover
from streaming.query.stateful import decision_rows, dump_state, load_state
from streaming.runtime.checkpoint_fs import MemoryCheckpointStore


def whole_call_ab(args: argparse.Namespace) -> dict[str, Any]:
    """:func:`whole_call` in fresh processes, collector paused and running alternately (ABBA ...); medians."""
    import statistics
    import subprocess

    runs: dict[str, list[dict[str, float]]] = {"paused": [], "running": []}
    for r in range(args.rounds):
        for mode in ("paused", "running") if r % 2 == 0 else ("running", "paused"):
            cmd = [sys.executable, "-m", "bench", "bucket_cost"]
            cmd += ["--partitions", str(args.partitions), "--buckets", str(args.buckets)]
            cmd += ["--held", str(args.held), "--calls", str(args.calls), "--whole-call-only", mode]
            done = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT)
            runs[mode].append(json.loads(done.stdout.strip().splitlines()[-1]))
    out: dict[str, Any] = {"whole_call_buckets_held": args.held, "whole_call_runs_per_mode": args.rounds}
    for mode, got in runs.items():
        for k in ("cpu_s_per_call", "wall_s_per_call"):
            out[f"whole_call_{k}_collector_{mode}"] = statistics.median(g[k] for g in got)
    out["whole_call_cpu_ratio_paused_to_running"] = round(
        out["whole_call_cpu_s_per_call_collector_paused"] / out["whole_call_cpu_s_per_call_collector_running"], 3
    )
    return out


def failure_call_trees(args: argparse.Namespace) -> dict[str, Any]:
    """:func:`failure_call` in fresh processes per source tree, alternating (A B B A ...); medians, and
    whether each tree gave the same output and state bytes."""
    import statistics
    import subprocess

    trees = args.trees.split(",")
    runs: dict[str, list[dict[str, Any]]] = {t: [] for t in trees}
    for r in range(args.rounds):
        for tree in trees if r % 2 == 0 else list(reversed(trees)):
            cmd = [sys.executable, "-m", "bench", "bucket_cost"]
            cmd += ["--partitions", str(args.partitions), "--buckets", str(args.buckets)]
            cmd += ["--failure-call-only", "--scenario", args.scenario, "--tree", tree]
            cmd += ["--state-not-cached"] if args.state_not_cached else []
            done = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT)
            got = json.loads(done.stdout.strip().splitlines()[-1])
            if not str(got["core_file"]).startswith(str(Path(tree).resolve())):
                raise SystemExit(f"the run for {tree} imported {got['core_file']}")
            print(f"{tree}: whole call {got['whole_call_cpu_s']:.3f} s CPU", file=sys.stderr)
            runs[tree].append(got)
    out: dict[str, Any] = {"failure_call_rounds": args.rounds, "order": "A B B A ...", "scenario": args.scenario}
    out["state_cached"] = not args.state_not_cached
    hashes: set[tuple[Any, Any]] = set()
    for tree, got in runs.items():
        med: dict[str, Any] = {"core_file": got[0]["core_file"]}
        for k in ("whole_call_cpu_s", "whole_call_wall_s", "arrow_after_call_cpu_s", "parts_cpu_sum_s"):
            med[k] = statistics.median(g[k] for g in got)
        med["parts_cpu_s"] = {p: statistics.median(g["parts_cpu_s"][p] for g in got) for p in got[0]["parts_cpu_s"]}
        med["runs_whole_call_cpu_s"] = [g["whole_call_cpu_s"] for g in got]
        med["output_hash"], med["state_hash"] = got[0]["output_hash"], got[0]["state_hash"]
        hashes.update((g["output_hash"], g["state_hash"]) for g in got)
        out[tree] = med
    out["same_bytes_in_every_run"] = len(hashes) == 1
    base = out[trees[0]]["whole_call_cpu_s"]
    for tree in trees[1:]:
        out[f"ratio_whole_call_cpu_{Path(tree).name}_to_{Path(trees[0]).name}"] = round(
            out[tree]["whole_call_cpu_s"] / base, 3
        )
    return out


def failover_call_trees(args: argparse.Namespace) -> dict[str, Any]:
    """:func:`failover_call` in fresh processes per source tree, alternating (A B B A ...); medians."""
    import statistics
    import subprocess

    trees = args.trees.split(",")
    runs: dict[str, list[dict[str, Any]]] = {t: [] for t in trees}
    for r in range(args.rounds):
        for tree in trees if r % 2 == 0 else list(reversed(trees)):
            cmd = [sys.executable, "-m", "bench", "bucket_cost"]
            cmd += ["--partitions", str(args.partitions), "--buckets", str(args.buckets)]
            cmd += ["--failover-call-only", "--tree", tree]
            done = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT)
            got = json.loads(done.stdout.strip().splitlines()[-1])
            if not str(got["core_file"]).startswith(str(Path(tree).resolve())):
                raise SystemExit(f"the run for {tree} imported {got['core_file']}")
            print(f"{tree}: whole call {got['whole_call_cpu_s']:.2f} s CPU", file=sys.stderr)
            runs[tree].append(got)
    out: dict[str, Any] = {"failover_call_rounds": args.rounds, "order": "A B B A ..."}
    for tree, got in runs.items():
        med: dict[str, Any] = {"core_file": got[0]["core_file"]}
        for k in ("whole_call_cpu_s", "whole_call_wall_s", "call_then_arrow_cpu_s", "parts_cpu_sum_s"):
            med[k] = statistics.median(g[k] for g in got)
        med["parts_cpu_s"] = {p: statistics.median(g["parts_cpu_s"][p] for g in got) for p in got[0]["parts_cpu_s"]}
        med["runs_whole_call_cpu_s"] = [g["whole_call_cpu_s"] for g in got]
        med["output_hash"], med["state_hash"] = got[0].get("output_hash"), got[0].get("state_hash")
        out[tree] = med
    out["same_bytes_in_every_run"] = (
        len({(g.get("output_hash"), g.get("state_hash")) for t in trees for g in runs[t]}) == 1
    )
    base = out[trees[0]]["whole_call_cpu_s"]
    for tree in trees[1:]:
        out[f"ratio_whole_call_cpu_{Path(tree).name}_to_{Path(trees[0]).name}"] = round(
            out[tree]["whole_call_cpu_s"] / base, 3
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=100_000, help="cluster size")
    ap.add_argument("--buckets", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=2, help="whole-call processes per mode, alternating (ABBA)")
    ap.add_argument("--held", type=int, default=4, help="buckets' states one Python worker keeps (8 / 2 cores)")
    ap.add_argument("--calls", type=int, default=2, help="whole-call rounds per process (failure + return each)")
    ap.add_argument("--whole-call-only", choices=["paused", "running"], help=argparse.SUPPRESS)
    ap.add_argument("--failover-call", action="store_true", help="only the failover call's parts")
    ap.add_argument("--profile", action="store_true", help="with --failover-call: cProfile's top functions")
    ap.add_argument("--trees", help="with --failover-call: source trees to compare, comma-separated")
    ap.add_argument("--failover-call-only", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--failure-call", action="store_true", help="only a broker failure's call, part by part")
    ap.add_argument("--scenario", choices=FAILURE_SCENARIOS, default="failure", help="with --failure-call")
    ap.add_argument("--failure-call-only", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument(
        "--state-not-cached",
        action="store_true",
        help="with --failure-call: the bucket's state not in the worker's cache (the call decodes its blob)",
    )
    ap.add_argument("--output", help="with --failure-call: the results' name (default bucket_cost_failure_call)")
    ap.add_argument(
        "--hashes",
        action="store_true",
        help="the SHA-256 of every output row and of the state for each of HASH_SCENARIOS (with --tree: that tree's)",
    )
    ap.add_argument("--tree", help=argparse.SUPPRESS)
    args = ap.parse_args()
    per_bucket = args.partitions // args.buckets
    if args.hashes:
        import core

        state = build_state(10, per_bucket, 3, 100)
        hashes = {"core_file": core.__file__, "partitions_per_bucket": per_bucket}
        hashes.update({s: scenario_hashes(state, s) for s in HASH_SCENARIOS})
        print(json.dumps(hashes, indent=1))
        return
    if args.failover_call and args.trees:
        res = {"benchmark": "bucket_cost_failover_call", "machine": machine_info(), "partitions": args.partitions}
        res.update(buckets=args.buckets, partitions_per_bucket=per_bucket, **failover_call_trees(args))
        print(json.dumps({k: v for k, v in res.items() if k != "machine"}, indent=2))
        write_results(args.output or "bucket_cost_failover_call", res)
        return
    if args.failure_call and args.trees:
        res = {"benchmark": "bucket_cost_failure_call", "machine": machine_info(), "partitions": args.partitions}
        res.update(buckets=args.buckets, partitions_per_bucket=per_bucket, **failure_call_trees(args))
        print(json.dumps({k: v for k, v in res.items() if k != "machine"}, indent=2))
        write_results(args.output or "bucket_cost_failure_call", res)
        return
    state = build_state(10, per_bucket, 3, 100)
    if args.failure_call_only or args.failure_call:
        got = failure_call(state, args.profile, args.scenario, cached=not args.state_not_cached)
        if args.failure_call_only:
            print(json.dumps(got))
            return
        profile_text = got.pop("profile_tottime_top30", "")
        print(json.dumps(got, indent=2))
        print(profile_text)
        name = args.output or "bucket_cost_failure_call"
        write_results(name, {"machine": machine_info(), "partitions": args.partitions, **got})
        return
    if args.failover_call_only or args.failover_call:
        got = failover_call(state, args.profile)
        if args.failover_call_only:
            print(json.dumps(got))
            return
        profile_text = got.pop("profile_tottime_top25", "")
        print(json.dumps(got, indent=2))
        print(profile_text)
        write_results("bucket_cost_failover_call", {"machine": machine_info(), "partitions": args.partitions, **got})
        return
    if args.whole_call_only:
        print(json.dumps(whole_call(state, args.calls, args.held, args.whole_call_only == "paused")))
        return
    fmt, size, blob = dump_state(state)
    out: dict[str, Any] = {
        "benchmark": "bucket_cost",
        "machine": machine_info(),
        "partitions": args.partitions,
        "buckets": args.buckets,
        "partitions_per_bucket": per_bucket,
        "state_json_bytes": size,
        "state_blob_bytes": len(blob),
    }
    loaded, out["load_state_s"] = timed(load_state, fmt, size, blob)
    (new_state, decisions), out["step_s"] = timed(controller.step, loaded, [ev.BrokerFailure(1, 1001)])
    _, out["dump_state_s"] = timed(dump_state, new_state)
    rows, out["decision_rows_s"] = timed(decision_rows, 0, decisions)
    payloads = [r[3] for r in rows]
    _, out["dispatch_decode_s"] = timed(lambda: decode_payloads(payloads))
    out["decisions"] = len(decisions)
    out["zk_writes"] = sum(isinstance(d, dc.ZkWrite) for d in decisions)
    out["output_json_bytes"] = sum(len(p) for p in payloads)
    per_call = out["load_state_s"] + out["step_s"] + out["dump_state_s"] + out["decision_rows_s"]
    out["per_bucket_call_s"] = round(per_call, 3)
    out["batch_floor_s_2_cores"] = round(per_call * args.buckets / 2, 3)

    # the failover batch: read the bucket's snapshot file and step ControllerFailover on an empty state
    # (the checkpoint in memory: on executors the slice is read from the copy the driver shipped)
    snap = snapshot_for(state)
    if snap.partition_states:
        store = MemoryCheckpointStore()
        ref = failover.write_snapshot(store, 1000, snap, 1)
        loaded_fo, t_file = timed(failover.load_bucket_failover, ref, 0, failover.StoreSnapshots(store))
        (fo_state, fo_decisions), t_step = timed(controller.step, controller.ControllerState(), [loaded_fo])
        _, t_dump = timed(dump_state, fo_state)
        fo_rows, t_rows = timed(decision_rows, 0, fo_decisions)
        out["failover_file_load_s"] = round(t_file, 3)
        out["failover_step_s"] = round(t_step, 3)
        out["failover_dump_state_s"] = round(t_dump, 3)
        out["failover_decision_rows_s"] = round(t_rows, 3)
        out["failover_decisions"] = len(fo_decisions)
        out["failover_output_json_bytes"] = sum(len(r[3]) for r in fo_rows)
        reqs = [d for d in fo_decisions if isinstance(d, dc.BrokerRequest)]
        out["failover_largest_request_bytes"] = max(
            (len(encode_body(r.body)) for r in reqs if not isinstance(r.body, WireBody)), default=0
        )
    out.update(tick_call(state))
    out.update(whole_call_ab(args))
    for k, v in list(out.items()):
        if isinstance(v, float):
            out[k] = round(v, 3)
    print(json.dumps({k: v for k, v in out.items() if k != "machine"}, indent=2))
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    write_results("bucket_cost", out)


if __name__ == "__main__":
    main()
