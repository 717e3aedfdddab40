"""The request sink's body merge as it was before it merged in one pass: a reference for the tests and a baseline
for the benchmarks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sinks.requests.merge import entry_id, merge_scalar


def pairwise_merge_bodies(bodies: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """:func:`sinks.requests.merge.merge_bodies`'s rules applied two bodies at a time, as the sink did before
    2026-12-07 (each body's lists re-indexed and their entries re-identified: quadratic in a broker's bodies):
    the reference the one-pass merge must equal, and the baseline of ``python -m bench alter_partition_batch``.
    The scalar and entry rules are the sink's own; only the list merge is the old one."""

    def lists(a: list[Any], b: list[Any]) -> list[Any]:
        out = list(a)
        by_topic = {e["topicName"]: i for i, e in enumerate(out) if isinstance(e, dict) and "topicName" in e}
        seen = {entry_id(e) for e in out if not (isinstance(e, dict) and "topicName" in e)}
        for e in b:
            if isinstance(e, dict) and "topicName" in e:
                if e["topicName"] in by_topic:
                    out[by_topic[e["topicName"]]] = pairwise_merge_bodies([out[by_topic[e["topicName"]]], e])
                else:
                    by_topic[e["topicName"]] = len(out)
                    out.append(e)
            elif entry_id(e) not in seen:
                seen.add(entry_id(e))
                out.append(e)
        return out

    merged: dict[str, Any] = {}
    for body in bodies:
        for key, value in body.items():
            if key not in merged:
                merged[key] = value
            elif isinstance(merged[key], list) and isinstance(value, list):
                merged[key] = lists(merged[key], value)
            elif isinstance(merged[key], dict) and isinstance(value, dict):
                merged[key] = pairwise_merge_bodies([merged[key], value])
            else:
                merged[key] = merge_scalar(key, merged[key], value)
    return merged
