"""Benchmark: the request sink's codecs (setting ``request_compression``) on a large micro-batch's messages.

The messages are those of a 100k-partition broker failure and controller failover, built as the product
builds them (as ``bench/request_sink_cost.py`` does: ``--buckets`` buckets' decision rows, decoded by the
dispatcher's :func:`streaming.query.batch_rows.decode_row`, then :func:`sinks.requests.request_messages`). For each
codec (``none``, ``gzip``, ``snappy``, ``lz4``, ``zstd``) the product's :class:`sinks.requests.RequestSink`
(transactional, as the controller runs it) sends them to a fresh topic of a real Apache Kafka broker (started
through :mod:`livectl.local` on a free loopback port, stopped by PID), and the script records

* ``send_s``: the sink's ``write_requests`` — building the messages (the same for every codec), compression
  on the producer, the produce requests (``acks=all``, one in flight), the transaction's commit;
* ``batch_bytes``: the bytes of the record batches on the topic, summed from what a ``read_committed``
  consumer fetches back (each stored batch's size as the broker returns it), and the messages read back
  checked equal to those sent;
* ``compress_s``: the codec's own time over the message values, alone (kafka-python's codec functions,
  one value at a time, as the producer compresses a batch holding one large message).

Rounds alternate the codecs' order (forward, then reversed); the table shows each codec's median and its
ratio against gzip, the codec shipped before, measured in the same run.

Run::

    .venv/bin/python -m bench compression_cost                      # 100k partitions, 2 rounds (~4 min)
    .venv/bin/python -m bench compression_cost --partitions 10000   # quick

Writes ``bench/results/compression_cost-<UTC stamp>.json`` (and ``…-latest.json``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kafka import codec as kcodec

import core
from bench.harness import machine_info, print_table, read_back, write_results
from bench.harness.workloads import bucket_decisions, decode_rows
from core import decisions as dc
from livectl import local
from sinks import requests as rq
from sinks.compression import COMPRESSIONS
from sinks.errors import SinkUnavailableError
from sinks.ports import Fence

FENCE = Fence(2, 1)

#: each codec's compression of one message value, as kafka-python's producer calls it
ENCODERS: dict[str, Callable[[bytes], bytes]] = {
    "none": lambda v: v,
    "gzip": kcodec.gzip_encode,
    "snappy": kcodec.snappy_encode,
    "lz4": kcodec.lz4_encode,
    "zstd": kcodec.zstd_encode,
}


def send_once(bootstrap: str, codec: str, reqs: list[dc.BrokerRequest], topic: str) -> dict[str, Any]:
    """The product's sink writes ``reqs`` to ``topic`` with ``codec`` (its public ``write_requests``, building
    the messages included: the same work for every codec); then they are read back."""
    rq.ensure_topics(bootstrap, [topic], partitions=10)
    with rq.RequestSink(
        bootstrap,
        FENCE,
        requests_topic=topic,
        transactional_id=f"bench-{topic}",
        compression=codec,
        # uncompressed, the failover's 199 MB took more than the default 30 s on the earlier broker (tansu, ~5 MB/s)
        # (kafka-python refuses a request timeout over its 120 s delivery timeout)
        timeout_s=110,
    ) as sink:
        sink.start().join()  # the producer's start and transaction init are not the codec's
        t0 = time.perf_counter()
        try:
            result = sink.write_requests(1, reqs)
        except SinkUnavailableError as e:
            print(f"{codec}: {e}", flush=True)
            return {"send_s": float("nan"), "batch_bytes": float("nan"), "written": 0, "read_back_same": False}
        send_s = time.perf_counter() - t0
    ours = rq.request_messages(topic, FENCE, 1, reqs, partitions=tuple(range(10)))
    records, nbytes = read_back(bootstrap, topic, len(ours))
    got = sorted((r.key, r.value) for r in records)
    same = got == sorted((m.key, m.value) for m in ours)
    return {"send_s": send_s, "batch_bytes": nbytes, "written": result.written, "read_back_same": same}


def compress_alone(codec: str, msgs: list[rq.OutboundMessage]) -> float:
    encode = ENCODERS[codec]
    t0 = time.perf_counter()
    for m in msgs:
        encode(m.value)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=100_000)
    ap.add_argument("--buckets", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--event", choices=["failure", "failover", "both"], default="both")
    ap.add_argument("--codecs", default=",".join(COMPRESSIONS), help="comma-separated (default: all)")
    args = ap.parse_args()
    codecs = [c.strip() for c in args.codecs.split(",") if c.strip()]
    if "gzip" not in codecs:
        codecs.insert(0, "gzip")  # the baseline of every ratio
    events = ["failure", "failover"] if args.event == "both" else [args.event]
    load0 = round(os.getloadavg()[0], 2)
    results: dict[str, Any] = {
        "benchmark": "compression_cost",
        "machine": machine_info(),
        "core_file": core.__file__,
        "partitions": args.partitions,
        "buckets": args.buckets,
        "rounds": args.rounds,
        "load_at_start": load0,
    }
    messages: dict[str, list[rq.OutboundMessage]] = {}
    requests: dict[str, list[dc.BrokerRequest]] = {}
    for event in events:
        payloads, _ = bucket_decisions(args.partitions // args.buckets, args.buckets, event)
        requests[event] = [d for d in decode_rows(payloads) if isinstance(d, dc.BrokerRequest)]
        messages[event] = rq.request_messages("t", FENCE, 1, requests[event])
        raw = sum(len(m.value) for m in messages[event])
        print(f"{event}: {len(messages[event])} messages, {raw / 1e6:.1f} MB", flush=True)
        results[event] = {"messages": len(messages[event]), "raw_bytes": raw, "runs": {c: [] for c in codecs}}
    run_dir = Path(tempfile.mkdtemp(prefix="livectl-bench-compression-"))
    broker = local.start_kafka(run_dir / "broker")
    print(f"Kafka {broker.bootstrap} (pid {broker.pid})", flush=True)
    try:
        for rnd in range(args.rounds):
            order = codecs if rnd % 2 == 0 else list(reversed(codecs))
            for event in events:
                for codec in order:
                    topic = f"cc-{event}-{codec}-{rnd}-{uuid.uuid4().hex[:6]}"
                    r = send_once(broker.bootstrap, codec, requests[event], topic)
                    r["compress_s"] = compress_alone(codec, messages[event])
                    r["load"] = round(os.getloadavg()[0], 2)
                    results[event]["runs"][codec].append(r)
                    print(
                        f"round {rnd + 1} {event:8} {codec:6} send {r['send_s']:6.2f} s  "
                        f"compress {r['compress_s']:6.2f} s  {r['batch_bytes'] / 1e6:8.2f} MB  "
                        f"same={r['read_back_same']}  load {r['load']}",
                        flush=True,
                    )
    finally:
        local.stop_kafka(broker)
    rows = []
    for event in events:
        runs = results[event]["runs"]
        med = {
            c: {k: statistics.median(r[k] for r in runs[c]) for k in ("send_s", "compress_s", "batch_bytes")}
            for c in codecs
        }
        results[event]["median"] = med
        g = med["gzip"]
        for c in codecs:
            m = med[c]
            rows.append(
                [
                    event,
                    c,
                    round(m["send_s"], 2),
                    round(m["send_s"] / g["send_s"], 2),
                    round(m["compress_s"], 2),
                    round(m["batch_bytes"] / 1e6, 2),
                    round(m["batch_bytes"] / g["batch_bytes"], 2),
                    round(results[event]["raw_bytes"] / m["batch_bytes"], 1),
                    all(r["read_back_same"] for r in runs[c]),
                ]
            )
    results["load_at_end"] = round(os.getloadavg()[0], 2)
    print()
    print_table(
        ["event", "codec", "send s", "/ gzip", "compress alone s", "MB on topic", "/ gzip", "raw / stored", "same"],
        rows,
    )
    print(f"load average: {results['load_at_start']} at start, {results['load_at_end']} at end")
    path = write_results("compression_cost", results)
    print(f"\nresults: {path}")


if __name__ == "__main__":
    main()
