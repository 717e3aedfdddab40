"""The input suite's cost per micro-batch: ``InputValidator.failed_rows`` (a ``BOOLEAN_ONLY`` pass over the
batch, a ``COMPLETE`` one only when something failed) beside one ``COMPLETE`` pass (the code before),
interleaved in one process, for micro-batches of 1, 10 and 1,000 records that all pass and for the same
with one bad record. Both give the same failing rows (checked here on every round). The suite's cost is
mostly great-expectations' own per-expectation set-up, so it hardly depends on the row count: it is a
fixed cost of every micro-batch with input, an admin command's included. No Spark, no services.

Run: ``.venv/bin/python -m bench validation_cost [--repeat 9]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import pandas as pd

from bench.harness import machine_info, print_table, wait_quiet, write_results
from streaming.query.validation import Expectation, InputValidator, flatten


def _names(failed: dict[int, list[Expectation]]) -> dict[int, list[str]]:
    """Row index -> names of the expectations it failed."""
    return {i: [e.name for e in exps] for i, exps in failed.items()}


def _complete_once(validator: InputValidator, frame: pd.DataFrame) -> dict[int, list[str]]:
    """The code before: one ``COMPLETE`` run."""
    return _names(validator.failed_rows_one_pass(frame))


def _two_pass(validator: InputValidator, frame: pd.DataFrame) -> dict[int, list[str]]:
    return _names(validator.failed_rows(frame))


def batches() -> dict[str, tuple[list[str], list[str]]]:
    def command(i: int) -> str:
        return json.dumps(
            {
                "version": 1,
                "type": "create_topic",
                "request_id": f"r{i}",
                "topic": f"t{i}",
                "partitions": 3,
                "replication_factor": 1,
            }
        )

    bad = json.dumps(
        {
            "version": 1,
            "type": "create_topic",
            "request_id": "bad",
            "topic": "..",
            "partitions": 0,
            "replication_factor": 1,
        }
    )
    out: dict[str, tuple[list[str], list[str]]] = {}
    for n in (1, 10, 1000):
        good = [command(i) for i in range(n)]
        out[f"{n} passing"] = (good, ["admin"] * n)
        with_bad = [*good[: n - 1], bad] if n > 1 else [bad]
        out[f"{n} with 1 bad"] = (with_bad, ["admin"] * n)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=9, help="rounds per batch and way, alternating")
    ap.add_argument("--no-wait-quiet", action="store_true")
    args = ap.parse_args()
    load = None if args.no_wait_quiet else wait_quiet()
    validator = InputValidator()
    rows: list[list[Any]] = []
    results: dict[str, Any] = {}
    for name, (values, sources) in batches().items():
        frame = flatten(values, sources)
        ways = {"one COMPLETE (before)": _complete_once, "two passes (now)": _two_pass}
        for way in ways.values():  # warm: great-expectations builds its metric providers on first use
            way(validator, frame)
        times: dict[str, list[float]] = {w: [] for w in ways}
        for r in range(args.repeat):
            order = list(ways.items()) if r % 2 == 0 else list(reversed(ways.items()))
            seen = []
            for w, fn in order:
                t = time.perf_counter()
                seen.append(fn(validator, frame))
                times[w].append(time.perf_counter() - t)
            if seen[0] != seen[1]:
                raise SystemExit(f"{name}: the two ways disagree: {seen[0]} != {seen[1]}")
        before = statistics.median(times["one COMPLETE (before)"])
        now = statistics.median(times["two passes (now)"])
        rows.append([name, f"{before * 1000:.0f}", f"{now * 1000:.0f}", f"{now / before:.2f}"])
        results[name] = {
            "before_s": times["one COMPLETE (before)"],
            "now_s": times["two passes (now)"],
            "median_before_s": before,
            "median_now_s": now,
            "ratio": now / before,
        }
    print_table(["micro-batch", "one COMPLETE ms", "two passes ms", "ratio"], rows)
    path = write_results(
        "validation_cost", {"load_at_start": load, "repeat": args.repeat, "batches": results, "machine": machine_info()}
    )
    print(f"results: {path}")


if __name__ == "__main__":
    main()
