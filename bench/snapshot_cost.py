"""Profile: what a new controller's ZooKeeper read costs, part by part, before its first micro-batch.

On a real local ZooKeeper (free port, stopped by PID) with a cluster in Kafka's layout (default 100k
partitions, 10 brokers, replication factor 3), this times what :class:`streaming.driver.app.ControllerApp` does
between winning the lease and publishing the failover reference:

* ``read_snapshot`` — :func:`streaming.zk.snapshot_reader.read_snapshot` as the product runs it, and inside it:
  the state znodes read with ``multiRead`` (100 ``getData`` per request, pipelined; the product's way),
  beside the baseline of one pipelined ``get_async`` per znode (same window, same data checked), and
  the decoding (:func:`core.kafka.zksnapshot.snapshot_from_znodes`);
* ``write_snapshot`` — :func:`streaming.query.failover.write_snapshot`: split by bucket, JSON, in memory;
* cProfile's top functions of ``read_snapshot`` with ``--profile``.

Run: ``.venv/bin/python -m bench snapshot_cost [--partitions 100000] [--buckets 8] [--profile]``.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import tempfile
import time
from typing import Any

from bench.harness import (
    close,
    machine_info,
    plan_layout,
    prepare_tree,
    register_brokers,
    write_results,
    zk_client,
)
from core.kafka import zkdata
from core.kafka.zksnapshot import snapshot_from_znodes
from livectl import local
from streaming.query import failover
from streaming.runtime.checkpoint_fs import MemoryCheckpointStore
from streaming.zk import snapshot_reader as zk_snapshot
from streaming.zk.snapshot_reader import read_brokers, read_snapshot


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=100_000)
    ap.add_argument("--buckets", type=int, default=8)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    run_dir = tempfile.mkdtemp(prefix="livectl-bench-snap-")
    from pathlib import Path

    zk = local.start_zookeeper(Path(run_dir) / "zookeeper", local.free_port())
    out: dict[str, Any] = {"benchmark": "snapshot_cost", "partitions": args.partitions, "buckets": args.buckets}
    try:
        out["machine"] = machine_info(zk.port)
        client = zk_client(zk.connect)
        layout = plan_layout(args.partitions, 10, 3)
        prepare_tree(client, layout)
        brokers = register_brokers(zk.connect, list(range(10)))
        # warm-up, then the product's read
        read_snapshot(client)
        t0 = time.perf_counter()
        snap = read_snapshot(client)
        out["read_snapshot_s"] = round(time.perf_counter() - t0, 3)
        # its parts: the state znodes, the product's multiRead against the baseline of one get per znode
        topic_paths = [zkdata.topic_path(t) for t in client.get_children(zkdata.BROKER_TOPICS)]
        topic_data = zk_snapshot.get_all(client, topic_paths, 5000)
        state_paths = [
            zkdata.partition_state_path(p.rsplit("/", 1)[1], int(n))
            for p, (d, _) in topic_data.items()
            for n in json.loads(d)["partitions"]
        ]
        t0 = time.perf_counter()
        multi = zk_snapshot.multi_get_all(client, state_paths, 5000)
        out["state_znodes_multiread_s"] = round(time.perf_counter() - t0, 3)
        t0 = time.perf_counter()
        single = zk_snapshot.get_all(client, state_paths, 5000)
        out["state_znodes_get_async_s"] = round(time.perf_counter() - t0, 3)
        out["state_znodes"] = len(state_paths)
        out["multiread_per_s"] = round(len(state_paths) / out["state_znodes_multiread_s"])
        out["get_async_per_s"] = round(len(state_paths) / out["state_znodes_get_async_s"])
        out["multiread_speedup"] = round(out["state_znodes_get_async_s"] / out["state_znodes_multiread_s"], 1)
        out["multiread_same_data"] = len(multi) == len(single) == len(state_paths) and all(
            multi[p][0] == single[p][0] and multi[p][1].version == single[p][1].version for p in state_paths
        )
        got = {p: (d.decode(), st.version) for p, (d, st) in {**topic_data, **multi}.items()}
        infos = read_brokers(client)
        t0 = time.perf_counter()
        snapshot_from_znodes(got, infos, 1, 0)
        out["decode_s"] = round(time.perf_counter() - t0, 3)
        # split + JSON into an in-memory checkpoint: the real one (streaming.runtime.checkpoint_fs) costs what
        # the checkpoint's file system costs
        t0 = time.perf_counter()
        failover.write_snapshot(MemoryCheckpointStore(), 1000, snap, args.buckets)
        out["write_snapshot_s"] = round(time.perf_counter() - t0, 3)
        if args.profile:
            prof = cProfile.Profile()
            prof.enable()
            read_snapshot(client)
            prof.disable()
            buf = io.StringIO()
            pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(12)
            print(buf.getvalue())
        for c in brokers.values():
            close(c)
        close(client)
    finally:
        local.stop_process(zk.pid, zk.marker)
    print(json.dumps({k: v for k, v in out.items() if k != "machine"}, indent=2))
    write_results("snapshot_cost", out)


if __name__ == "__main__":
    main()
