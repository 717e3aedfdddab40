"""Profile: the ZooKeeper sink against the raw fenced multi-op rate, on a real local ZooKeeper, no Spark.

A broker failure at 100k partitions (10 brokers, RF 3) rewrites 30,000 partition-state znodes. This
script creates ``--writes`` state znodes in Kafka's layout on a ZooKeeper of its own (free port, stopped
by PID) and writes them again and again, alternating (A B B A ...):

* ``raw`` — the limit ``broker_failure.py`` measures: fenced multi-ops of 100 (one ``check`` + 99
  ``set_data`` at any version), 8 in flight, straight with kazoo;
* ``sink`` — :meth:`sinks.zookeeper.ZooKeeperSink.write_batch` with the same data as compare-and-set
  ``SET`` writes (the versions the znodes have), a new batch id each round, the shipped settings
  (100 operations per transaction, 8 in flight): the product's path, every guarantee on.

``--profile`` adds cProfile's top functions of one sink round (the main thread only: kazoo's
connection thread encodes and decodes the requests beside it). Wall seconds; medians per arm.

Run: ``.venv/bin/python -m bench zk_sink_cost [--writes 30000] [--rounds 6] [--profile] [--output NAME]
[--tree /path/to/another/checkout]``.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import shutil
import statistics
import sys
import tempfile
import time
from collections import deque
from pathlib import Path
from typing import Any

if "--tree" in sys.argv:  # another source tree (a baseline): import its product code (the harness stays this
    # checkout's: the tree's bench/ folder is no package before it)
    _tree = sys.argv[sys.argv.index("--tree") + 1]
    sys.path[:0] = [_tree]

from kazoo.client import KazooClient

import sinks
from bench.harness import close, machine_info, write_results, zk_client
from core.decisions import ZkOp, ZkWrite
from core.kafka import zkdata
from core.kafka.zkdata import CONTROLLER_EPOCH_PATH
from core.model import LeaderAndIsr
from livectl import local
from sinks.ports import Fence
from sinks.zookeeper import ZooKeeperSink


def raw_multi(
    client: KazooClient, paths: list[str], data: list[bytes], per_txn: int = 100, in_flight: int = 8
) -> float:
    """``broker_failure.py``'s raw rate: check(/controller_epoch) + (per_txn - 1) set_data, pipelined."""
    _, stat = client.get(CONTROLLER_EPOCH_PATH)
    version = stat.version
    started = time.perf_counter()
    pending: deque[Any] = deque()
    step = per_txn - 1
    for i in range(0, len(paths), step):
        t = client.transaction()
        t.check(CONTROLLER_EPOCH_PATH, version)
        for p, d in zip(paths[i : i + step], data[i : i + step], strict=True):
            t.set_data(p, d, version=-1)
        pending.append(t.commit_async())
        if len(pending) >= in_flight:
            _ok(pending.popleft().get(timeout=60))
    while pending:
        _ok(pending.popleft().get(timeout=60))
    return time.perf_counter() - started


def _ok(results: list[Any]) -> None:
    bad = [r for r in results if isinstance(r, Exception)]
    if bad:
        raise RuntimeError(f"raw multi-op failed: {bad[0]!r}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--writes", type=int, default=30_000, help="partition-state znodes written per round")
    ap.add_argument("--rounds", type=int, default=6, help="rounds per arm, alternating (A B B A ...)")
    ap.add_argument("--profile", action="store_true", help="cProfile's top functions of one sink round")
    ap.add_argument("--output", default="zk_sink_cost", help="the results' name")
    ap.add_argument("--tree", help="import the sink from this source tree (printed as sinks_file)")
    args = ap.parse_args()
    run_dir = Path(tempfile.mkdtemp(prefix="livectl-bench-zksink-"))
    zk = local.start_zookeeper(run_dir / "zookeeper", local.free_port())
    out: dict[str, Any] = {"benchmark": "zk_sink_cost", "writes": args.writes, "sinks_file": sinks.__file__}
    try:
        out["machine"] = machine_info(zk.port)
        client = zk_client(zk.connect)
        client.create(CONTROLLER_EPOCH_PATH, b"1")
        paths: list[str] = []
        states: list[LeaderAndIsr] = []
        for i in range(args.writes):
            topic, part = f"topic-{i // 100:05d}", i % 100
            paths.append(zkdata.partition_state_path(topic, part))
            states.append(LeaderAndIsr(2 + i % 8, (2 + i % 8, 3 + i % 7), 1, 0))
        for i in range(0, len(paths), 1000):  # parents first, then the znodes, pipelined
            for t in {p.rsplit("/", 1)[0] for p in paths[i : i + 1000]}:
                client.ensure_path(t)
            hs = [client.create_async(p, b"{}") for p in paths[i : i + 1000]]
            for h in hs:
                h.get(timeout=60)
        _, stat = client.get(CONTROLLER_EPOCH_PATH)
        fence = Fence(1, stat.version)
        sink = ZooKeeperSink(client, fence, "bench-zk-sink")
        version = 0  # every znode's version: each round (raw or sink) bumps it by one
        runs: dict[str, list[float]] = {"raw": [], "sink": []}
        batch = 0
        raw_data = [zkdata.encode_partition_state(s, 1).encode() for s in states]
        for r in range(args.rounds * 2):
            arm = ("raw", "sink")[(r + r // 2) % 2]  # raw sink sink raw raw sink ...
            if arm == "raw":
                runs["raw"].append(raw_multi(client, paths, raw_data))
            else:
                writes = [
                    ZkWrite(ZkOp.SET, p, zkdata.encode_partition_state(s, 1), version)
                    for p, s in zip(paths, states, strict=True)
                ]
                t0 = time.perf_counter()
                res = sink.write_batch(batch, writes)
                runs["sink"].append(time.perf_counter() - t0)
                if res.failed:
                    raise SystemExit(f"the sink refused {len(res.failed)} writes: {res.failed[0]}")
                batch += 1
            version += 1
            print(f"round {r}: {arm} {runs[arm][-1]:.3f} s", file=sys.stderr, flush=True)
        for arm, got in runs.items():
            out[f"{arm}_s_runs"] = [round(x, 3) for x in got]
            out[f"{arm}_s_median"] = round(statistics.median(got), 3)
        out["sink_to_raw_rate"] = round(out["raw_s_median"] / out["sink_s_median"], 3)
        if args.profile:
            writes = [
                ZkWrite(ZkOp.SET, p, zkdata.encode_partition_state(s, 1), version)
                for p, s in zip(paths, states, strict=True)
            ]
            prof = cProfile.Profile()
            prof.enable()
            sink.write_batch(batch, writes)
            prof.disable()
            buf = io.StringIO()
            pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(25)
            out["profile_tottime_top25"] = buf.getvalue()
        close(client)
    finally:
        local.stop_process(zk.pid, zk.marker)
        shutil.rmtree(run_dir, ignore_errors=True)
    profile_text = out.pop("profile_tottime_top25", "")
    print(json.dumps({k: v for k, v in out.items() if k != "machine"}, indent=2))
    print(profile_text)
    write_results(args.output, out)


if __name__ == "__main__":
    main()
