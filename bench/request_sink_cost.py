"""Profile: the driver's side of one micro-batch at scale — decoding the decision rows and building the
request messages — without Spark, ZooKeeper or Kafka.

``foreachBatch`` (:class:`streaming.dispatch.Dispatcher`) decodes every decision row once
(:func:`streaming.dispatch.decode_row`: a request body stays its parsed JSON object), then the request
sink builds one message per (broker, API) (:func:`sinks.requests.request_messages`: ``merge_bodies`` of
the buckets' bodies, then JSON) before it sends them. This script makes the decisions of a broker failure
(and of a controller failover) for ``--buckets`` buckets of ``--partitions / --buckets`` partitions each
(every bucket with its own topics, as routing gives them), then times and profiles (cProfile) those two
steps as the product runs them.

Beside it, the cost of rebuilding typed request values from those rows (``decode_decision(...,
typed=True)``), the alternative the driver does not take. Baseline, in the same run: the same messages
built with the standard library's ``json`` in place of orjson (what the sink used before), checked to be
the same messages; the ratio is printed.

Run: ``.venv/bin/python bench/request_sink_cost.py [--partitions 100000] [--buckets 8] [--profile]``.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import pstats
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest.mock import patch

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine_info, write_results
from bucket_cost import snapshot_for
from core_step import build_state

from core import controller
from core import decisions as dc
from core import events as ev
from core.codec.decisions import decode_decision
from sinks import requests as rq
from sinks.ports import Fence
from streaming.collector import gc_paused
from streaming.dispatch import decode_row
from streaming.stateful import decision_rows


def bucket_decisions(per_bucket: int, buckets: int, event: str) -> list[str]:
    """Decision-row payloads of ``buckets`` buckets (topic names made distinct per bucket)."""
    state = build_state(10, per_bucket, 3, 100)
    if event == "failure":
        _, decisions = controller.step(state, [ev.BrokerFailure(1, 1001)])
    else:
        _, decisions = controller.step(controller.ControllerState(), [ev.ControllerFailover(1000, snapshot_for(state))])
    payloads = [r[3] for r in decision_rows(0, decisions)]
    out: list[str] = []
    for b in range(buckets):
        out.extend(p.replace("topic-", f"b{b}-topic-") for p in payloads)
    return out


def decode_rows(payloads: list[str], typed: bool = False) -> list[dc.Decision]:
    """The rows decoded as the dispatcher decodes them (collector paused); ``typed``: request bodies
    rebuilt into typed values as well."""
    with gc_paused():
        if typed:
            return [decode_decision(orjson.loads(x), typed=True) for x in payloads]
        return [decode_row(x) for x in payloads]


def _stdlib_dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()


def stdlib_request_messages(reqs: list[dc.BrokerRequest], fence: Fence) -> list[Any]:
    """The product's ``request_messages`` with the standard library's JSON in place of orjson."""
    with patch.object(rq, "_dumps", _stdlib_dumps), patch.object(rq, "orjson", SimpleNamespace(loads=json.loads)):
        return rq.request_messages("t", fence, 1, reqs)


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
    args = ap.parse_args()
    fence = Fence(2, 1)
    results: dict[str, Any] = {
        "benchmark": "request_sink_cost",
        "machine": machine_info(),
        "partitions": args.partitions,
        "buckets": args.buckets,
    }
    events = ["failure", "failover"] if args.event == "both" else [args.event]
    for event in events:
        payloads = bucket_decisions(args.partitions // args.buckets, args.buckets, event)
        r: dict[str, Any] = {"rows": len(payloads), "row_json_mb": round(sum(map(len, payloads)) / 1e6, 1)}
        decoded, r["dispatch_decode_s"] = timed(lambda p=payloads: decode_rows(p))
        _, r["decode_typed_s"] = timed(lambda p=payloads: decode_rows(p, typed=True))
        reqs = [d for d in decoded if isinstance(d, dc.BrokerRequest)]
        r["requests_in"] = len(reqs)
        msgs, r["request_messages_s"] = timed(lambda q=reqs: rq.request_messages("t", fence, 1, q))
        r["messages"] = len(msgs)
        r["largest_message_mb"] = round(max(len(m.value) for m in msgs) / 1e6, 2)
        r["total_message_mb"] = round(sum(len(m.value) for m in msgs) / 1e6, 1)
        base, r["baseline_stdlib_json_s"] = timed(lambda q=reqs: stdlib_request_messages(q, fence))
        r["baseline_same_messages"] = [json.loads(m.value) for m in base] == [json.loads(m.value) for m in msgs]
        r["baseline_over_product"] = round(r["baseline_stdlib_json_s"] / r["request_messages_s"], 2)
        if args.profile:
            _, _, prof = profiled(lambda q=reqs: rq.request_messages("t", fence, 1, q))
            print(f"--- {event}: request_messages profile\n{prof}")
        for k, v in list(r.items()):
            if isinstance(v, float):
                r[k] = round(v, 3)
        results[event] = r
        print(event, json.dumps(r))
    write_results("request_sink_cost", results)


if __name__ == "__main__":
    main()
