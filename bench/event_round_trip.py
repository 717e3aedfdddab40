"""Profile: an input event's round trip through the query, without Spark.

A record on ``livectl.admin`` / ``livectl.broker-events`` is

1. parsed and decoded by validation (:meth:`streaming.query.validation.InputValidator.check`: great-expectations
   over the batch, then :func:`core.codec.events.decode_event` per record);
2. routed and re-encoded as the routed row's payload (:func:`streaming.query.routing.prepare_frame`); a
   cluster-scoped event goes to every bucket;
3. decoded again in its bucket (:func:`streaming.query.failover_refs.events_of`, on the other side of the shuffle);
   with the metrics endpoint on, parsed once more there for its type
   (:func:`streaming.monitoring.observability.input_counts`).

Step 2 today encodes each distinct event once (:func:`streaming.query.routing.encode_routed`); before, it encoded
once per routed row, so a cluster-scoped event was encoded once per bucket. This script times both, in the
same process, interleaved ``--repeat`` times, beside the other steps of the trip, for three micro-batches:

* ``broker storm`` — 200 broker startups and failures (cluster-scoped: every bucket);
* ``ISR churn`` — 1,000 AlterPartition requests over 100 topics (one bucket each);
* ``reassignment`` — one reassignment of 3,000 partitions over 300 topics (split by topic).

Run: ``.venv/bin/python -m bench event_round_trip [--buckets 8] [--repeat 7]``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import pandas as pd

from bench.harness import machine_info, print_table, write_results
from core import events as ev
from core.codec.events import event_from_json, event_to_json
from core.model import PartitionTarget
from streaming.monitoring import observability
from streaming.query import failover_refs, routing

ADMIN = "livectl.admin"
EVENTS = "livectl.broker-events"


def records(events: list[ev.Event], topic: str) -> pd.DataFrame:
    values = [event_to_json(e) for e in events]
    return pd.DataFrame(
        {
            "topic": [topic] * len(values),
            "partition": [0] * len(values),
            "offset": list(range(len(values))),
            "timestamp": [1_000 + i for i in range(len(values))],
            "value": values,
        }
    )


def batches() -> dict[str, pd.DataFrame]:
    storm: list[ev.Event] = [
        ev.BrokerFailure(i % 50, 100 + i) if i % 2 else ev.BrokerStartup(i % 50, 100 + i) for i in range(200)
    ]
    churn: list[ev.Event] = [ev.AlterPartition(1, 5, f"t{i % 100}", i // 100, 3, 4, (1, 2, 3)) for i in range(1000)]
    targets = tuple(PartitionTarget(f"t{i % 300}", i // 300, (1, 2, 3)) for i in range(3000))
    return {
        "broker storm": records(storm, EVENTS),
        "ISR churn": records(churn, EVENTS),
        "reassignment": records([ev.ReassignPartitions("r1", targets)], ADMIN),
    }


def per_row(routed: list[tuple[int, ev.Event]]) -> list[tuple[int, str]]:
    """The encoding before :func:`streaming.query.routing.encode_routed`: once per routed row."""
    return [(b, event_to_json(e)) for b, e in routed]


def measure(frame: pd.DataFrame, n: int, validator: Any, repeat: int) -> tuple[int, dict[str, float]]:
    """The routed rows' count and the median time of each step of the trip for one micro-batch (ms)."""
    values = list(frame["value"])
    sources = ["admin" if t == ADMIN else "broker-events" for t in frame["topic"]]
    checked = validator.check(values, sources)
    routed = [routing.route(e, n) for e in checked if isinstance(e, ev.Event)]
    out = routing.prepare_frame(frame, n, ADMIN, validator)
    by_bucket = [out[out["bucket"] == b] for b in range(n)]
    steps: dict[str, Callable[[], object]] = {
        "validate": lambda: validator.check(values, sources),
        "encode per row": lambda: [per_row(r) for r in routed],
        "encode once": lambda: [routing.encode_routed(r) for r in routed],
        "prepare_frame": lambda: routing.prepare_frame(frame, n, ADMIN, validator),
        "decode in buckets": lambda: [[event_from_json(x) for x in f["payload"]] for f in by_bucket],
        "events_of": lambda: [failover_refs.events_of(b, f) for b, f in enumerate(by_bucket)],
        # with the metrics endpoint on, each bucket's summary row counts its input by type: a third parse
        "input_counts": lambda: [observability.input_counts(f, b) for b, f in enumerate(by_bucket)],
    }
    samples: dict[str, list[float]] = {k: [] for k in steps}
    for _ in range(repeat):
        for key, f in steps.items():
            started = time.perf_counter()
            f()
            samples[key].append((time.perf_counter() - started) * 1000)
    return len(out), {k: statistics.median(v) for k, v in samples.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--buckets", type=int, default=8)
    p.add_argument("--repeat", type=int, default=7)
    args = p.parse_args()
    n = args.buckets
    validator = routing.shared_validator()
    rows: list[list[Any]] = []
    results: dict[str, Any] = {}
    for name, frame in batches().items():
        count, med = measure(frame, n, validator, args.repeat)
        ratio = med["encode once"] / med["encode per row"]
        saved = med["encode per row"] - med["encode once"]
        # prepare_frame before = today's + what the per-row encoding cost more
        saved_share = saved / (med["prepare_frame"] + saved)
        rows.append(
            [
                name,
                count,
                med["validate"],
                med["encode per row"],
                med["encode once"],
                ratio,
                f"{saved_share:.1%}",
                med["decode in buckets"],
                med["events_of"],
                med["input_counts"],
            ]
        )
        results[name] = {"rows": count, "median_ms": med, "encode_ratio": ratio, "prepare_share_saved": saved_share}
    print(f"{n} buckets, medians of {args.repeat} interleaved runs (ms)")
    print_table(
        [
            "batch",
            "rows",
            "validate",
            "encode/row",
            "encode once",
            "ratio",
            "prepare saved",
            "decode (buckets)",
            "events_of (buckets)",
            "input_counts (buckets)",
        ],
        rows,
    )
    path = write_results(
        "event_round_trip", {"machine": machine_info(), "buckets": n, "repeat": args.repeat, "batches": results}
    )
    print(f"results: {path}")


if __name__ == "__main__":
    main()
