"""Profile: a new controller's first write to ``livectl.requests`` after a failover, by the tail read's first window.

A takeover's or cold start's first micro-batch ends with the request sink's first write: the sink reads the
tail of the topic (what of the batch is there already: :func:`sinks.requests.read_tail_identities`), starts
its transactional producer (which fences the previous controller's) and sends. The tail then holds the previous
controller's last batch: ~1 MB messages, which the tail read's consumer fetches and decompresses. This script
sends a 100k-partition failover's requests (2 buckets, as shipped: 86 messages, 75 MB of values, zstd) through
the product's :class:`sinks.requests.RequestSink` to a real Apache Kafka broker (free loopback port, stopped by PID):
first as an earlier controller, then ``--rounds`` times as a new controller (a new sink, a new epoch, the next
batch id), its first write timed and then a second one (no tail read, producer started), the tail read's
first window alternating between ``--windows`` (ABBA). Prints the medians and the ratio to the first window.
``--start-ahead`` compares instead, with the shipped window, a sink whose producer the first write starts
(before) with one started ahead by :meth:`sinks.requests.RequestSink.start` (as a controller does when it
wins the lease, seconds before its first micro-batch ends; here the write waits until the producer is up).

Run: ``.venv/bin/python -m bench first_write [--windows 128,8] [--rounds 4] [--start-ahead]``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.harness import machine_info, print_table, wait_quiet, write_results
from bench.harness.workloads import bucket_decisions, decode_rows
from core import decisions as dc
from livectl import local
from sinks import requests as rq
from sinks.ports import Fence


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=100_000)
    ap.add_argument("--buckets", type=int, default=2)
    ap.add_argument("--windows", default=f"128,{rq.TAIL_WINDOW}", help="first windows to compare (the first: baseline)")
    ap.add_argument("--rounds", type=int, default=4, help="new controllers per window, alternating")
    ap.add_argument("--start-ahead", action="store_true", help="the producer started at the first write / ahead")
    ap.add_argument("--no-wait-quiet", action="store_true")
    args = ap.parse_args()
    # (label, first window, producer started ahead)
    variants = (
        [("at first write", rq.TAIL_WINDOW, False), ("started ahead", rq.TAIL_WINDOW, True)]
        if args.start_ahead
        else [(str(w), int(w), False) for w in args.windows.split(",")]
    )
    load = None if args.no_wait_quiet else wait_quiet()
    payloads, _ = bucket_decisions(args.partitions // args.buckets, args.buckets, "failover")
    requests = [d for d in decode_rows(payloads) if isinstance(d, dc.BrokerRequest)]
    run_dir = Path(tempfile.mkdtemp(prefix="livectl-bench-first-write-"))
    broker = local.start_kafka(run_dir / "broker")
    print(f"Kafka {broker.bootstrap} (pid {broker.pid}); {len(requests)} requests", flush=True)
    first: dict[str, list[float]] = {v[0]: [] for v in variants}
    second: dict[str, list[float]] = {v[0]: [] for v in variants}
    messages = 0
    try:
        topic = "livectl.requests"
        rq.ensure_topics(broker.bootstrap, [topic])
        batch, epoch = 10, 1
        with rq.RequestSink(broker.bootstrap, Fence(1, 1), requests_topic=topic, transactional_id="bench") as s0:
            messages = s0.write_requests(batch, requests).written  # the earlier controller's last batch
        for r in range(args.rounds):
            for label, w, ahead in variants if r % 2 == 0 else list(reversed(variants)):
                batch, epoch = batch + 2, epoch + 1  # a new controller: the next batch, a new epoch
                fence = Fence(epoch, 1)
                with rq.RequestSink(
                    broker.bootstrap, fence, requests_topic=topic, transactional_id="bench", tail_window=w
                ) as sink:
                    if ahead:
                        sink.start().join(30)
                    t0 = time.perf_counter()
                    sink.write_requests(batch, requests)
                    t1 = time.perf_counter()
                    sink.write_requests(batch + 1, requests)
                    t2 = time.perf_counter()
                first[label].append(t1 - t0)
                second[label].append(t2 - t1)
                print(f"round {r} {label}: first write {t1 - t0:.2f} s, second {t2 - t1:.2f} s", flush=True)
    finally:
        local.stop_kafka(broker)
    base = statistics.median(first[variants[0][0]])
    rows: list[list[Any]] = []
    for label, _, _ in variants:
        f, s = statistics.median(first[label]), statistics.median(second[label])
        rows.append([label, f"{f:.2f}", f"{s:.2f}", f"{f / base:.2f}"])
    head = "producer" if args.start_ahead else "first window"
    print_table([head, "first write s", "second write s", f"first / {variants[0][0]}"], rows)
    path = write_results(
        "first_write" + ("-start_ahead" if args.start_ahead else ""),
        {
            "args": vars(args),
            "load_at_start": load,
            "messages": messages,
            "first_write_s": first,
            "second_write_s": second,
            "machine": machine_info(),
        },
    )
    print(f"results: {path}")


if __name__ == "__main__":
    main()
