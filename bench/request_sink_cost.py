"""Profile: the driver's side of one micro-batch at scale — decoding the decision rows and building the
request messages — without Spark, ZooKeeper or Kafka.

``foreachBatch`` (:class:`streaming.query.dispatch.Dispatcher`) decodes every decision row once
(:func:`streaming.query.batch_rows.decode_row`: a request body stays its parsed JSON object), then the request
sink builds one message per (broker, API) (:func:`sinks.requests.request_messages`: ``merge_bodies`` of
the buckets' bodies, then JSON) before it sends them. This script makes the decisions of a broker failure
(and of a controller failover) for ``--buckets`` buckets of ``--partitions / --buckets`` partitions each
(every bucket with its own topics, as routing gives them), then times and profiles (cProfile) those two
steps as the product runs them.

Two variants of the same decisions, interleaved (ABBA, ``--rounds``), medians reported with their ratio:
``shared`` — the product: the UpdateMetadata of a step is one request naming its addressees, one row per
bucket and one message (per topic partition) per batch — and ``per_broker`` — the baseline: that request
fanned out into one per broker (:meth:`core.decisions.BrokerRequest.fan_out`), as the core built it
before. For each: the rows' JSON bytes, one bucket's row encoding, the driver's decode, the sink's message
building, the messages' count and bytes, and their bytes after gzip level 9 (kafka-python's gzip).

Beside it, the cost of rebuilding typed request values from those rows (``decode_decision(...,
typed=True)``), the alternative the driver does not take.

Run: ``.venv/bin/python -m bench request_sink_cost [--partitions 100000] [--buckets 8] [--rounds 2] [--profile]``.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import pstats
import statistics
import time
import zlib
from typing import Any

from bench.harness import machine_info, write_results
from bench.harness.workloads import bucket_decisions, decode_rows
from core import controller
from core import decisions as dc
from sinks import requests as rq
from sinks.ports import Fence


def gzip_mb(msgs: list[Any]) -> float:
    """The messages' bytes after gzip at level 9 (kafka-python's gzip), each compressed alone (a message
    near 1 MB fills a produce batch by itself)."""
    return round(sum(len(zlib.compress(m.value, 9)) for m in msgs) / 1e6, 2)


def profiled(fn: Any, top: int = 12) -> tuple[Any, float, str]:
    gc.collect()
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    result = fn()
    prof.disable()
    elapsed = time.perf_counter() - t0
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(top)
    return result, elapsed, buf.getvalue()


def timed(fn: Any) -> tuple[Any, float]:
    gc.collect()
    t0 = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=100_000)
    ap.add_argument("--buckets", type=int, default=8)
    ap.add_argument("--event", choices=["failure", "failover", "both"], default="both")
    ap.add_argument("--profile", action="store_true", help="print cProfile's top functions")
    ap.add_argument("--rounds", type=int, default=2, help="interleaved rounds per variant (ABBA)")
    args = ap.parse_args()
    fence = Fence(2, 1)
    results: dict[str, Any] = {
        "benchmark": "request_sink_cost",
        "machine": machine_info(),
        "partitions": args.partitions,
        "buckets": args.buckets,
        "core_file": controller.__file__,
    }
    events = ["failure", "failover"] if args.event == "both" else [args.event]
    for event in events:
        variants: dict[str, dict[str, Any]] = {}
        for name, per_broker in (("shared", False), ("per_broker", True)):
            payloads, encode_s = bucket_decisions(args.partitions // args.buckets, args.buckets, event,
                                                  per_broker=per_broker)  # fmt: skip
            r: dict[str, Any] = {"rows": len(payloads), "row_json_mb": round(sum(map(len, payloads)) / 1e6, 1)}
            r["bucket_encode_rows_s"] = [encode_s]
            r["dispatch_decode_s"] = []
            r["request_messages_s"] = []
            variants[name] = r
            r["_payloads"] = payloads
        # interleaved rounds (ABBA): the machine is shared, its load moves during the run
        order = ["shared", "per_broker", "per_broker", "shared"] * max(1, args.rounds // 2)
        for name in order:
            r = variants[name]
            decoded, t = timed(lambda p=r["_payloads"]: decode_rows(p))
            r["dispatch_decode_s"].append(t)
            reqs = [d for d in decoded if isinstance(d, dc.BrokerRequest)]
            r["requests_in"] = len(reqs)
            msgs, t = timed(lambda q=reqs: rq.request_messages("t", fence, 1, q))
            r["request_messages_s"].append(t)
            r["_msgs"] = msgs
        for name, r in variants.items():
            payloads, msgs = r.pop("_payloads"), r.pop("_msgs")
            if name == "shared":
                _, t = timed(lambda p=payloads: decode_rows(p, typed=True))
                r["decode_typed_s"] = round(t, 3)
            r["messages"] = len(msgs)
            r["largest_message_mb"] = round(max(len(m.value) for m in msgs) / 1e6, 2)
            r["total_message_mb"] = round(sum(len(m.value) for m in msgs) / 1e6, 1)
            r["total_message_gzip9_mb"] = gzip_mb(msgs)
            for k in ("bucket_encode_rows_s", "dispatch_decode_s", "request_messages_s"):
                r[k] = round(statistics.median(r[k]), 3)
            r["driver_total_s"] = round(r["dispatch_decode_s"] + r["request_messages_s"], 3)
            if name == "shared":
                r["_msgs"] = msgs
            del payloads
        shared, base = variants["shared"], variants["per_broker"]
        msgs = shared.pop("_msgs")
        r = {
            "shared": shared,
            "per_broker": base,
            "ratio_shared_over_per_broker": {
                k: round(shared[k] / base[k], 2)
                for k in (
                    "row_json_mb",
                    "bucket_encode_rows_s",
                    "dispatch_decode_s",
                    "request_messages_s",
                    "driver_total_s",
                    "messages",
                    "total_message_mb",
                    "total_message_gzip9_mb",
                )
                if base.get(k)
            },
            "rounds": order,
        }
        if args.profile:
            reqs = [d for d in decode_rows(bucket_decisions(args.partitions // args.buckets, args.buckets, event)[0])
                    if isinstance(d, dc.BrokerRequest)]  # fmt: skip
            _, _, prof = profiled(lambda q=reqs: rq.request_messages("t", fence, 1, q))
            print(f"--- {event}: request_messages profile\n{prof}")
        results[event] = r
        print(event, json.dumps(r))
    write_results("request_sink_cost", results)


if __name__ == "__main__":
    main()
