"""The failover batch decided ahead (:mod:`streaming.query.decided`): what each side costs, without Spark.

One bucket of ``--partitions / --buckets`` partitions (10 brokers, RF 3, Kafka's default placement, as
``bucket_cost.py`` builds it), its ZooKeeper snapshot as a standby reads it ahead, then:

* ``decide`` — the standby's :meth:`Decider.update` for that bucket: encode the next epoch's slice and run
  the bucket's own step on it (CPU seconds; the standby's driver pays it while it waits);
* ``outcome_bytes`` — the size of the outcome the hand-off ships (:meth:`Outcome.to_bytes`);
* ``hand_off`` — the winner's part: :func:`matching` (the digest of the slice it wrote) and the outcome's
  bytes (what :func:`ship_decided` writes);
* the bucket's call of the takeover's failover batch (its reference and a tick, on a stored state as a
  takeover finds it), **A** as before (the slice decoded and stepped) and **B** with the outcome shipped
  (:func:`streaming.query.outcome.take`): CPU seconds per call, alternating A B B A in this process, and the
  check that both give the same output rows and the same state bytes.

Run: ``.venv/bin/python bench/decided_cost.py [--partitions 100000] [--buckets 2] [--rounds 2]``.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine_info, write_results
from bucket_cost import _GroupState, snapshot_for
from core_step import build_state

from core import controller
from core import events as ev
from core.codec.events import event_to_json
from streaming.query import decided, failover, stateful
from streaming.query.outcome import matching
from streaming.query.routing import KIND_FAILOVER_REF, KIND_TICK, ROUTED_COLUMNS
from streaming.runtime.checkpoint_fs import MemoryCheckpointStore


def cpu(fn: Any, *a: Any, **kw: Any) -> tuple[Any, float]:
    c = time.process_time()
    got = fn(*a, **kw)
    return got, time.process_time() - c


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=100_000, help="cluster size")
    ap.add_argument("--buckets", type=int, default=2, help="buckets of the cluster (one is measured)")
    ap.add_argument("--rounds", type=int, default=2, help="A B B A rounds of the bucket's call")
    args = ap.parse_args()
    per_bucket = args.partitions // args.buckets
    state = build_state(10, per_bucket, 3, 100)
    ahead = snapshot_for(state)  # epoch 2 (version 1): the active's; the standby's win writes epoch 3
    store = MemoryCheckpointStore("memory:/bench-decided")
    config = controller.ControllerConfig()
    res: dict[str, Any] = {"benchmark": "decided_cost", "machine": machine_info(), "partitions": args.partitions}
    res.update(buckets=args.buckets, partitions_per_bucket=per_bucket)

    decider = decided.Decider(controller_id=1000, checkpoint_dir=store.root, num_buckets=1, config=config)
    gc.collect()
    n, res["decide_cpu_s"] = cpu(decider.update, ahead, {}, threading.Event())
    assert n == 1
    outcome = decider.outcomes()[0]
    blob, res["outcome_to_bytes_cpu_s"] = cpu(outcome.to_bytes)
    res["outcome_bytes"] = len(blob)
    res["state_blob_bytes"] = len(outcome.state[2])

    # the winner: the tree read after winning is the one read ahead, one epoch on
    written: dict[str, str] = {}
    ref = failover.write_snapshot(store, 1000, decided.predicted(ahead), 1, written=written)
    found, res["matching_cpu_s"] = cpu(matching, decider.outcomes(), ref, written, config)
    assert list(found) == [0]
    res["slice_text_bytes"] = sum(len(t) for t in written.values())

    frame_rows = [
        (0, 5, "livectl.broker-events/0", 7, 0, KIND_FAILOVER_REF, failover.ref_to_json(ref)),
        (0, 6, "~tick", 0, 0, KIND_TICK, event_to_json(ev.Tick(6))),
    ]
    import pandas as pd

    frame = pd.DataFrame(frame_rows, columns=ROUTED_COLUMNS)
    stored = stateful.dump_state(state)
    files = failover.StoreSnapshots(store)

    def call(with_outcome: bool) -> tuple[float, str, str]:
        stateful.forget_states()  # a worker that never ran the bucket, as in a takeover
        gs = _GroupState(stored)  # the previous controller's stored state, as a takeover finds it
        gc.collect()
        (out,), s = cpu(
            lambda: list(
                stateful.step_bucket(
                    (0,),
                    iter([frame]),
                    gs,
                    store.root,
                    files,
                    config=config,
                    outcomes=(lambda f, b: blob) if with_outcome else None,
                )
            )
        )
        rows = hashlib.sha256(json.dumps(out.astype(object).values.tolist(), default=repr).encode()).hexdigest()
        return s, rows, hashlib.sha256(gs.value[2]).hexdigest()

    runs: dict[str, list[float]] = {"A_step": [], "B_outcome": []}
    hashes: dict[str, set[tuple[str, str]]] = {"A_step": set(), "B_outcome": set()}
    for _ in range(args.rounds):
        for arm in ("A_step", "B_outcome", "B_outcome", "A_step"):
            s, rows, st = call(arm == "B_outcome")
            runs[arm].append(round(s, 3))
            hashes[arm].add((rows, st))
    res["bucket_call_cpu_s"] = runs
    res["same_rows_and_state"] = hashes["A_step"] == hashes["B_outcome"] and len(hashes["A_step"]) == 1
    med = {k: sorted(v)[len(v) // 2] for k, v in runs.items()}
    res["bucket_call_median_cpu_s"] = med
    res["ratio_B_over_A"] = round(med["B_outcome"] / med["A_step"], 3)
    for k in ("decide_cpu_s", "outcome_to_bytes_cpu_s", "matching_cpu_s"):
        res[k] = round(res[k], 3)
    print(json.dumps({k: v for k, v in res.items() if k != "machine"}, indent=2))
    write_results("decided_cost", res)


if __name__ == "__main__":
    main()
