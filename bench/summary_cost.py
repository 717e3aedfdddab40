"""Profile: what the metrics endpoint adds to one bucket's ``applyInPandasWithState`` call, without Spark.

With ``metrics_port`` set, every bucket's step also builds its ``summary`` row
(:func:`streaming.monitoring.observability.summary_payload`: one pass over the bucket's partitions, only when the step
decided something). This script builds one bucket's state as the query holds it (10 brokers, replication
factor 3, Kafka's default placement; 10k partitions over 8 buckets = 1,250 per bucket by default) and times
:func:`streaming.query.stateful.step_bucket` — the whole call: state load (cached), step, dump, rows — with
summaries off and on, interleaved ``--repeat`` times, for two micro-batches:

* ``tick`` — nothing to do (the common case for most buckets of most micro-batches);
* ``broker failure`` — broker 1 fails: a third of the bucket's partitions change.

Both variants run in the same process at the same moments, so machine load affects them alike; on a loaded
machine the difference is within the noise, so the summary's own cost is also timed alone (``summary_payload``
on the same step's states) and shown as a share of the call without it.

Run: ``.venv/bin/python bench/summary_cost.py [--partitions 1250] [--repeat 15]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import pandas as pd
from _common import machine_info, print_table, write_results
from core_step import build_state

from core import events as ev
from core.codec.events import event_to_json
from streaming.monitoring import observability
from streaming.query import failover_refs, routing, stateful


class GroupState:
    def __init__(self, value: tuple[Any, ...]) -> None:
        self.exists = True
        self.get = value

    def update(self, value: tuple[Any, ...]) -> None:
        self.get = value


def frames(now_ms: int) -> dict[str, pd.DataFrame]:
    tick = routing.tick_rows(now_ms, 1)
    failure = pd.DataFrame(
        [(0, now_ms, "events/0", 7, 0, routing.KIND_EVENT, event_to_json(ev.BrokerFailure(1, 1001)))],
        columns=tick.columns,
    )
    return {"tick": tick, "broker failure": pd.concat([failure, tick], ignore_index=True)}


def one_call(blob: tuple[Any, ...], frame: pd.DataFrame, summaries: bool) -> float:
    gs = GroupState(blob)
    t0 = time.perf_counter()
    for _ in stateful.step_bucket((0,), iter([frame.copy()]), gs, summaries=summaries):
        pass
    return time.perf_counter() - t0


def summary_alone(blob: tuple[Any, ...], frame: pd.DataFrame) -> float:
    """The summary row's own cost: the step's states before and after, then ``summary_payload`` timed alone
    (with ``changed`` as the step would set it)."""
    from core import controller

    before = stateful.load_state(*blob)
    events, _ = failover_refs.events_of(0, frame, before.context.epoch, loaded=True)
    after, decisions = controller.step(before, events)
    t0 = time.perf_counter()
    observability.summary_payload(before.context, after.context, frame, 0, changed=bool(decisions))
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=1250, help="partitions in the bucket")
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    blob = stateful.dump_state(build_state(10, args.partitions, 3, 100))
    results: dict[str, Any] = {"benchmark": "summary_cost", "partitions_in_bucket": args.partitions, "batches": {}}
    rows = []
    for name, frame in frames(1_700_000_000_000).items():
        one_call(blob, frame, True)  # warm the worker's state cache, as a reused Python worker has it
        off: list[float] = []
        on: list[float] = []
        for _ in range(args.repeat):
            off.append(one_call(blob, frame, False))
            on.append(one_call(blob, frame, True))
        m_off, m_on = statistics.median(off) * 1000, statistics.median(on) * 1000
        alone = statistics.median(summary_alone(blob, frame) for _ in range(args.repeat)) * 1000
        results["batches"][name] = {
            "off_ms": off,
            "on_ms": on,
            "median_off_ms": m_off,
            "median_on_ms": m_on,
            "summary_alone_ms": alone,
        }
        rows.append(
            [name, f"{m_off:.1f}", f"{m_on:.1f}", f"{m_on / m_off:.3f}", f"{alone:.2f}", f"{alone / m_off:.1%}"]
        )
    results["machine"] = machine_info()
    path = write_results("summary_cost", results)
    print(f"one bucket of {args.partitions:,} partitions, median of {args.repeat} calls each, interleaved")
    print_table(["micro-batch", "summaries off ms", "on ms", "ratio", "summary alone ms", "share of the call"], rows)
    print(f"results: {path}")


if __name__ == "__main__":
    main()
