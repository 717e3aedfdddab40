"""Benchmark: a failover batch's decision rows through Spark, packed (the shipped form) beside plain.

A bucket's output rows leave its Python worker through Spark: Arrow to the JVM, rows in the task's result,
the driver's ``toPandas`` (Arrow again, then pandas). A 100k-partition failover's rows are 75 MB of request
JSON (two buckets of 37.5 MB). :func:`streaming.query.stateful.output_frame` sends each payload of
:data:`~streaming.query.stateful.PACK_MIN_CHARS` or more zstd-compressed in the binary ``packed`` column instead
(:func:`streaming.query.stateful.payloads` unpacks it on the driver). This script makes the rows of a real
failover (``--partitions`` over ``--buckets`` buckets, :func:`core.controller.step` of a
``ControllerFailover``, the buckets' own row encoding), and in one local[2] session runs, alternating
(plain, packed, plain, ...), the Spark job that returns them from one task per bucket — as the failover
batch's stateful stage does — and collects them with ``toPandas``; then the driver's unpacking. Per round:

* ``job_s`` — ``toPandas()`` of the buckets' output: the task (reading the rows, the frame, packing when
  packed), the JVM's conversions and the result, the driver's Arrow-to-pandas;
* ``unpack_s`` — :func:`streaming.query.stateful.payloads` on the driver (zero work for plain rows);
* ``result_mb`` — the Arrow bytes of the frames, as the Python workers return them.

Both forms' payloads are checked equal every round (a SHA-256 of them all). Prints both and the ratio
packed / plain of the medians; writes ``bench/results/packed_rows-<stamp>.json``.

Run: ``.venv/bin/python -m bench packed_rows [--partitions 100000] [--buckets 2] [--rounds 5]``.
"""

from __future__ import annotations

import argparse
import hashlib
import pickle
import statistics
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from bench.harness import machine_info, print_table, spark_session, wait_quiet, work_dir, write_results
from bench.harness.workloads import event_decisions
from streaming.query import stateful


def bucket_files(folder: Path, partitions: int, buckets: int) -> list[Path]:
    """Each bucket's decision rows of a failover (its topics named apart), pickled to a file of ``folder``."""
    rows = stateful.decision_rows(0, event_decisions(partitions // buckets, "failover"))
    files = []
    for b in range(buckets):
        mine = [[b, r[1], r[2], r[3].replace("topic-", f"b{b}-topic-"), *r[4:]] for r in rows]
        path = folder / f"bucket-{b}.pickle"
        path.write_bytes(pickle.dumps(mine, protocol=pickle.HIGHEST_PROTOCOL))
        files.append(path)
    return files


def bucket_output(files: list[str], packed: bool) -> Any:
    """The ``applyInPandas`` function: the bucket's rows (from its file) as the bucket's output frame,
    packed or not (plain: nothing reaches the packing threshold)."""

    def run(key: tuple[Any, ...], _frame: pd.DataFrame) -> pd.DataFrame:
        from streaming.query import stateful as st

        rows = pickle.loads(Path(files[int(key[0])]).read_bytes())
        st.PACK_MIN_CHARS = 64 * 1024 if packed else 1 << 62
        return st.output_frame(rows)

    return run


def one_round(spark: Any, files: list[str], packed: bool) -> dict[str, Any]:
    df = spark.range(len(files)).groupBy("id").applyInPandas(bucket_output(files, packed), stateful.OUTPUT_SCHEMA)
    t0 = time.perf_counter()
    frame = df.toPandas()
    job_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    texts = stateful.payloads(frame.sort_values(["bucket", "seq"], kind="stable"))
    unpack_s = time.perf_counter() - t0
    digest = hashlib.sha256("\x00".join(texts).encode()).hexdigest()
    table = pa.Table.from_pandas(frame, preserve_index=False)
    return {
        "packed": packed,
        "job_s": round(job_s, 3),
        "unpack_s": round(unpack_s, 3),
        "result_mb": round(table.nbytes / 1e6, 2),
        "payload_sha256": digest,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=100_000)
    ap.add_argument("--buckets", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5, help="rounds of each form, alternating")
    ap.add_argument("--no-wait-quiet", action="store_true")
    args = ap.parse_args()
    folder = work_dir("livectl-bench-packed")
    files = [str(f) for f in bucket_files(folder, args.partitions, args.buckets)]
    load = None if args.no_wait_quiet else wait_quiet()
    spark, startup_s = spark_session(args.buckets)
    try:
        for packed in (False, True):  # the workers started and warm for both forms before the timed rounds
            one_round(spark, files, packed)
        runs = [one_round(spark, files, packed) for _ in range(args.rounds) for packed in (False, True)]
        machine = machine_info(spark=spark)
    finally:
        spark.stop()
    digests = {r["payload_sha256"] for r in runs}
    if len(digests) != 1:
        raise SystemExit(f"the two forms gave different payloads: {sorted(digests)}")
    med = {
        form: {
            k: statistics.median(r[k] for r in runs if r["packed"] is packed)
            for k in ("job_s", "unpack_s", "result_mb")
        }
        for form, packed in (("plain", False), ("packed", True))
    }
    ratio = round(
        (med["packed"]["job_s"] + med["packed"]["unpack_s"]) / (med["plain"]["job_s"] + med["plain"]["unpack_s"]), 3
    )
    print_table(
        ["round", "form", "job s", "unpack s", "result MB"],
        [
            (i // 2 + 1, "packed" if r["packed"] else "plain", r["job_s"], r["unpack_s"], r["result_mb"])
            for i, r in enumerate(runs)
        ],
    )
    print(f"medians: {med}; (job + unpack) packed / plain = {ratio}; payloads equal: {digests.pop()[:16]}…")
    write_results(
        "packed_rows",
        {
            "benchmark": "packed_rows",
            "partitions": args.partitions,
            "buckets": args.buckets,
            "machine": machine,
            "load_average_waited": load,
            "spark_startup_s": round(startup_s, 1),
            "runs": runs,
            "medians": med,
            "ratio_packed_to_plain": ratio,
        },
    )


if __name__ == "__main__":
    main()
