"""Benchmark: a takeover's hand-off writes — each bucket's failover snapshot file written through the
checkpoint's file system (Hadoop, a local ``file:`` checkpoint) by ``failover.write_snapshot``.

Two ways, alternating in one local SparkSession, on the same 100k-partition snapshot (``--partitions``),
split into ``--buckets`` files (the shipped default: 2):

* ``py4j`` — the bytes handed to the JVM through py4j (``FSDataOutputStream.write(bytearray)``: py4j sends
  a byte array as base64 text over its socket), as ``HadoopCheckpointStore.write_text`` did until the
  seventeenth session (reproduced here as the baseline);
* ``staged`` — this tree's ``write_text``: the text written to a file of the driver's temporary folder,
  which Hadoop copies to the checkpoint (``FileSystem.copyFromLocalFile``).

Each file is read back through the checkpoint and checked equal to its text. Prints each round, the
medians and the ratio staged / py4j.

Run: ``.venv/bin/python bench/checkpoint_writes.py [--partitions 100000] [--buckets 2] [--rounds 5]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from typing import Any

from _common import machine_info, spark_session, wait_quiet, work_dir, write_results
from bucket_cost import snapshot_for
from core_step import build_state

from streaming.query import failover
from streaming.runtime.checkpoint_fs import HadoopCheckpointStore, child, parent


class Py4jWrites(HadoopCheckpointStore):
    """The checkpoint store with the write of before: the bytes through py4j."""

    def write_text(self, uri: str, text: str) -> None:
        folder, name = parent(uri), uri.rstrip("/").rsplit("/", 1)[1]
        tmp = child(folder, f".{name}.tmp")
        self._fs.mkdirs(self._path(folder))
        out = self._fs.create(self._path(tmp), True)
        try:
            out.write(bytearray(text.encode("utf-8")))
        finally:
            out.close()
        if not self._fs.rename(self._path(tmp), self._path(uri)):
            raise RuntimeError(f"cannot rename {tmp}")


def one(store: HadoopCheckpointStore, snapshot: Any, buckets: int) -> tuple[float, int]:
    written: dict[str, str] = {}
    t0 = time.perf_counter()
    failover.write_snapshot(store, 1000, snapshot, buckets, written=written)
    took = time.perf_counter() - t0
    for uri, text in written.items():
        assert store.read_text(uri) == text, uri
    return took, sum(len(t) for t in written.values())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=100_000)
    ap.add_argument("--buckets", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    work = work_dir("livectl-bench-writes-")
    spark, _ = spark_session(args.buckets)
    out: dict[str, Any] = {"benchmark": "checkpoint_writes", "partitions": args.partitions, "buckets": args.buckets}
    try:
        out["machine"] = machine_info(None, spark)
        snapshot = snapshot_for(build_state(10, args.partitions, 3, 100))
        stores = {
            "py4j": Py4jWrites(spark, (work / "py4j").as_uri()),
            "staged": HadoopCheckpointStore(spark, (work / "staged").as_uri()),
        }
        out["load_wait_s"] = wait_quiet()
        runs: dict[str, list[float]] = {k: [] for k in stores}
        epoch = snapshot.controller_epoch
        for r in range(args.rounds):
            for mode in ("py4j", "staged") if r % 2 == 0 else ("staged", "py4j"):
                epoch += 1  # write-once per epoch: a new folder each time
                took, chars = one(stores[mode], replace(snapshot, controller_epoch=epoch), args.buckets)
                runs[mode].append(took)
                print(f"round {r} {mode:6s} write_snapshot {took:.3f} s ({chars / 1e6:.1f} M characters)", flush=True)
        out["chars"] = chars
        out["runs"] = runs
        med = {k: round(statistics.median(v), 3) for k, v in runs.items()}
        out["median_s"] = med
        out["staged_over_py4j"] = round(med["staged"] / med["py4j"], 2)
        print(f"median: py4j {med['py4j']:.3f} s, staged {med['staged']:.3f} s, ratio {out['staged_over_py4j']}")
    finally:
        spark.stop()
    print(f"results: {write_results('checkpoint_writes', out)}")


if __name__ == "__main__":
    sys.exit(main())
