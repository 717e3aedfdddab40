"""Profile: the source's read of a backlog on a clean link, by the read's fetch size (issue 41).

The read's consumer asked for up to 1 MiB per partition (and 50 MiB per answer, kafka-python's defaults); over a
slow link such an answer outlasted the request timeout and the read got nothing, so its fetch size now falls back
to 16 KiB when records wait and none come, and grows back to 1 MiB, for the whole answer too, while answers
come quickly (:mod:`streaming.source.fetch_size`). This script shows what that costs where the link is not slow:
``--records`` AlterPartition broker events (the controller's JSON, about 220 bytes each) on a
``livectl.broker-events`` topic beside an empty ``livectl.admin`` one, on a real Apache Kafka broker (free loopback
port, stopped by PID), read from the start by a :class:`streaming.source.kafka_source.KafkaStreamReader` driven as
Spark drives it (``read`` again from the offset the last returned, ``max_records_per_batch`` 10,000 as shipped)
until every record came, in three ways, ``--rounds`` times in the order A B C C B A:

* ``before`` — the read's consumer made as before the change (1 MiB per partition, 50 MiB per answer);
* ``shipped`` — as it now is (starts at 1 MiB per partition and per answer);
* ``from 16 KiB`` — as it is just after a stall: the size at the least, growing back up.

Prints each way's median seconds, records per second and the ratio to ``before``.

Run: ``.venv/bin/python -m bench source_read [--records 200000] [--rounds 2]``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.harness import machine_info, print_table, wait_quiet, write_results
from core import events as ev
from core.codec.events import event_to_json
from livectl import local
from sinks.requests import ensure_topics
from streaming.source.consumer import FETCH_MAX_WAIT_MS
from streaming.source.fetch_size import READ_FETCH_MIN_BYTES, FetchSize
from streaming.source.kafka_source import KafkaStreamReader
from streaming.source.options import SourceOptions

EVENTS, ADMIN = "livectl.broker-events", "livectl.admin"
WAYS = ("before", "shipped", "from 16 KiB")


def _produce(bootstrap: str, n: int) -> int:
    """``n`` AlterPartition events on :data:`EVENTS`; their bytes."""
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=20, batch_size=256 * 1024)
    size = 0
    for i in range(n):
        value = event_to_json(ev.AlterPartition(i % 10, 5, f"topic-{i % 1000}", i // 1000, 3, 4, (1, 2, 3))).encode()
        size += len(value)
        p.send(EVENTS, value=value)
    p.flush()
    p.close()
    return size


def _reader(bootstrap: str, way: str) -> KafkaStreamReader:
    options = SourceOptions.parse({"bootstrap_servers": bootstrap, "topics": f"{EVENTS},{ADMIN}"})
    reader = KafkaStreamReader(options)
    if way == "before":
        from kafka import KafkaConsumer

        # the read's consumer as SourceConsumer.client made it before the change
        reader.kafka.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            enable_auto_commit=False,
            group_id=None,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=min(options.poll_timeout_ms, FETCH_MAX_WAIT_MS),
            max_poll_records=min(options.max_records_per_batch, 5000),
        )
    elif way == "from 16 KiB":
        reader.kafka.fetch = FetchSize(options.request_timeout_ms, start=READ_FETCH_MIN_BYTES)
    return reader


def _read_all(bootstrap: str, way: str, n: int) -> tuple[float, int, int]:
    """Seconds to read the ``n`` records from the start, the reads it took, the size changes."""
    reader = _reader(bootstrap, way)
    try:
        offset: dict[str, Any] = {EVENTS: {"0": 0}, ADMIN: {"0": 0}}
        got = reads = 0
        t0 = time.perf_counter()
        while got < n:
            rows, offset = reader.read(offset)
            got += len(list(rows))
            reads += 1
        took = time.perf_counter() - t0
        return took, reads, reader.kafka.fetch.grown + reader.kafka.fetch.stalls
    finally:
        reader.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=2, help="each round reads once each way, A B C then C B A")
    ap.add_argument("--no-wait-quiet", action="store_true")
    args = ap.parse_args()
    load = None if args.no_wait_quiet else wait_quiet()
    run_dir = Path(tempfile.mkdtemp(prefix="livectl-bench-source-read-"))
    broker = local.start_kafka(run_dir / "broker")
    seconds: dict[str, list[float]] = {w: [] for w in WAYS}
    changes: dict[str, list[int]] = {w: [] for w in WAYS}
    try:
        ensure_topics(broker.bootstrap, [EVENTS, ADMIN])
        size = _produce(broker.bootstrap, args.records)
        print(f"Kafka {broker.bootstrap} (pid {broker.pid}); {args.records} records, {size / 1e6:.1f} MB", flush=True)
        _read_all(broker.bootstrap, "shipped", args.records)  # warm: the log in the page cache
        for r in range(args.rounds):
            for way in WAYS if r % 2 == 0 else tuple(reversed(WAYS)):
                took, reads, changed = _read_all(broker.bootstrap, way, args.records)
                seconds[way].append(took)
                changes[way].append(changed)
                print(f"round {r} {way}: {took:.2f} s, {reads} reads, {changed} size changes", flush=True)
    finally:
        local.stop_kafka(broker)
    base = statistics.median(seconds["before"])
    rows = []
    for way in WAYS:
        m = statistics.median(seconds[way])
        rows.append([way, f"{m:.2f}", f"{args.records / m:,.0f}", f"{m / base:.3f}"])
    print_table(["read's fetch size", "median s", "records/s", "/ before"], rows)
    path = write_results(
        "source_read",
        {
            "args": vars(args),
            "load_at_start": load,
            "seconds": seconds,
            "size_changes": changes,
            "machine": machine_info(),
        },
    )
    print(f"results: {path}")


if __name__ == "__main__":
    main()
