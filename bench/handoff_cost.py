"""Profile: the failover hand-off before the failover batch — read the ZooKeeper tree, write each bucket's
snapshot file through the checkpoint's file system (``pyarrow.fs``, a local ``file:`` checkpoint), ship the files
to the executors — the way ``main`` did it beside the way this tree does it, interleaved in one process.

Needs ZooKeeper (started here on a free port, stopped by PID) and a local SparkSession
(``SparkContext.addFile``); no broker, no query. Per round, in ABBA order:

* ``before`` — ``read_snapshot`` (decoding every znode), each file's text by the generic event encoder
  (``event_to_json``), written, then read back through the checkpoint to be shipped (the code of ``main``
  at ``7d0ae35``, reproduced with the functions that remain);
* ``cold`` — this tree's cold read: ``SnapshotReader.read`` with nothing remembered, the direct encoder
  (``encode_failover_json``), the files shipped from memory;
* ``warm`` — a standby's read after winning: the same reader read the tree ahead (a data watch on every
  partition-state znode) and encoded its partition states for the files (``SnapshotReader.encode_ahead``, as
  the standby's ``ReadAhead`` does), then ``--changes`` partition-state znodes were rewritten (the active
  controller's last writes), then the read that counts (the topic and admin znodes read afresh, of the
  state znodes only those whose watch fired; only what changed decoded), encoded (only the states not
  encoded ahead) and shipped as ``cold``;
* ``warm_uncached`` — ``warm`` with every partition state encoded by the hand-off (the code before the
  standby encoded them ahead).

Each snapshot is checked equal to a fresh ``read_snapshot`` and each file to the generic encoder's text.

Run: ``.venv/bin/python -m bench handoff_cost [--partitions 100000] [--rounds 2] [--changes 1000]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.harness import (
    close,
    machine_info,
    plan_layout,
    prepare_tree,
    register_brokers,
    rewrite_states,
    spark_session,
    write_results,
)
from core import events as ev
from core.codec.events import event_to_json
from livectl import local
from streaming.query import failover
from streaming.runtime.checkpoint_fs import FileSystemCheckpointStore, child
from streaming.zk.snapshot_reader import SnapshotReader, read_snapshot


def before(zk: Any, spark: Any, store: Any, epoch: int, buckets: int) -> tuple[dict[str, float], Any]:
    t0 = time.perf_counter()
    snap = dataclasses.replace(read_snapshot(zk), controller_epoch=epoch)
    t1 = time.perf_counter()
    folder = child(failover.failover_root(store.root), f"epoch-{epoch}")
    for b, part in enumerate(failover.split_snapshot(snap, buckets)):
        target = failover.bucket_file(folder, b)
        if not store.exists(target):  # main's write-once check
            store.write_text(target, event_to_json(ev.ControllerFailover(1000, part)))
    t2 = time.perf_counter()
    failover.ship_snapshots(spark, store, folder)  # reads each file back through the checkpoint
    t3 = time.perf_counter()
    return {"read_s": t1 - t0, "write_s": t2 - t1, "ship_s": t3 - t2, "total_s": t3 - t0}, snap


def after(
    reader: SnapshotReader, spark: Any, store: Any, epoch: int, buckets: int, *, texts: bool = True
) -> tuple[dict[str, float], Any]:
    t0 = time.perf_counter()
    snap = dataclasses.replace(reader.read(), controller_epoch=epoch)
    t1 = time.perf_counter()
    written: dict[str, str] = {}
    state_texts = reader.state_texts if texts else None
    ref = failover.write_snapshot(store, 1000, snap, buckets, written=written, state_texts=state_texts)
    t2 = time.perf_counter()
    failover.ship_snapshots(spark, store, str(ref["path"]), texts=written)
    t3 = time.perf_counter()
    # the files are the generic encoder's text (checked outside the timing)
    for b, part in enumerate(failover.split_snapshot(snap, buckets)):
        assert written[failover.bucket_file(str(ref["path"]), b)] == event_to_json(ev.ControllerFailover(1000, part))
    return {"read_s": t1 - t0, "write_s": t2 - t1, "ship_s": t3 - t2, "total_s": t3 - t0}, snap


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=100_000)
    ap.add_argument("--buckets", type=int, default=8)
    ap.add_argument(
        "--rounds", type=int, default=2, help="ABBA rounds (each: before, cold, warm, warm_uncached, and back)"
    )
    ap.add_argument("--changes", type=int, default=1000, help="state znodes rewritten between read-ahead and takeover")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="livectl-bench-handoff-"))
    zk_svc = local.start_zookeeper(work / "zookeeper", local.free_port())
    out: dict[str, Any] = {"benchmark": "handoff_cost", "partitions": args.partitions, "buckets": args.buckets}
    spark, _ = spark_session(args.buckets)
    try:
        import core

        out["tree"] = core.__file__
        out["machine"] = machine_info(zk_svc.port, spark)
        zk = local_client(zk_svc.connect)
        layout = plan_layout(args.partitions, 10, 3)
        prepare_tree(zk, layout)
        brokers = register_brokers(zk_svc.connect, list(range(10)))
        store = FileSystemCheckpointStore(str(work / "checkpoint"))
        runs: dict[str, list[dict[str, float]]] = {"before": [], "cold": [], "warm": [], "warm_uncached": []}
        epoch = 10
        order = ["before", "cold", "warm", "warm_uncached", "warm_uncached", "warm", "cold", "before"]
        for r in range(args.rounds):
            for mode in order:
                epoch += 1
                if mode == "before":
                    got, snap = before(zk, spark, store, epoch, args.buckets)
                elif mode == "cold":
                    got, snap = after(SnapshotReader(zk), spark, store, epoch, args.buckets)
                else:
                    reader = SnapshotReader(zk)
                    # the standby's read ahead (a watch on every state znode) and, as ReadAhead does after it,
                    # its partition states encoded for the files; warm_uncached: the hand-off encodes them all
                    reader.encode_ahead(reader.read(ahead=True))
                    rewrite_states(zk, layout, args.changes, 100 + epoch)
                    got, snap = after(reader, spark, store, epoch, args.buckets, texts=mode == "warm")
                    got["state_znodes_read"] = float(reader.last_state_reads)
                assert snap == dataclasses.replace(read_snapshot(zk), controller_epoch=epoch), mode
                got["load1"] = round(os.getloadavg()[0], 2)
                runs[mode].append(got)
                print(f"round {r} {mode:6s} " + " ".join(f"{k}={v:.2f}" for k, v in got.items()), flush=True)
        out["runs"] = runs
        med = {m: {k: round(statistics.median(x[k] for x in rs), 3) for k in rs[0]} for m, rs in runs.items()}
        out["median"] = med
        for m in ("cold", "warm", "warm_uncached"):
            out[f"{m}_over_before"] = round(med[m]["total_s"] / med["before"]["total_s"], 2)
        out["warm_write_over_uncached"] = round(med["warm"]["write_s"] / med["warm_uncached"]["write_s"], 2)
        keys: tuple[str, ...] = ("median", "cold_over_before", "warm_over_before", "warm_uncached_over_before")
        keys += ("warm_write_over_uncached",)
        print(json.dumps({k: out[k] for k in keys}, indent=1))
        for c in brokers.values():
            close(c)
        close(zk)
    finally:
        spark.stop()
        local.stop_process(zk_svc.pid, zk_svc.marker)
    print(f"results: {write_results('handoff_cost', out)}")


def local_client(connect: str) -> Any:
    from bench.harness import zk_client

    return zk_client(connect)


if __name__ == "__main__":
    main()
