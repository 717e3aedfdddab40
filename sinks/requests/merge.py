"""Merging the request bodies of one broker and API (or one addressee set and API) of a micro-batch into one.

Bodies come from several buckets; each is already a JSON object, the driver's
:class:`core.kafka.requests.WireBody`, or a typed value encoded by :mod:`core.kafka.request_encoding`.
:func:`merge_bodies` merges them: ``topicStates`` concatenated, entries of the same ``topicName`` joined;
``liveBrokers`` / ``liveLeaders`` de-duplicated by broker id; other lists concatenated without duplicates;
differing scalars: the larger, and a non-zero ``errorCode`` wins. :func:`merge_spliced` does the same for
bodies whose entries are held as text, without parsing them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from core.kafka.requests import SplicedBody

#: keys that identify one entry of a list, for de-duplication when merging bodies
_ENTRY_IDS = ("brokerId", "id")


def _merge_scalar(key: str, a: Any, b: Any) -> Any:
    if a == b or b is None:
        return a
    if a is None:
        return b
    if key == "errorCode":
        return a if a != 0 else b
    if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool):
        return max(a, b)
    return a


def _entry_id(entry: Any) -> Any:
    if isinstance(entry, dict):
        for k in _ENTRY_IDS:
            if k in entry:
                return (k, entry[k])
    return ("=", json.dumps(entry, sort_keys=True))


def _merge_lists(a: list[Any], b: list[Any]) -> list[Any]:
    out = list(a)
    by_topic = {e["topicName"]: i for i, e in enumerate(out) if isinstance(e, dict) and "topicName" in e}
    # topic entries merge by name; only the others (live brokers, ...) need an identity, and computing one
    # for a topic entry would serialise all its partition states
    seen = {_entry_id(e) for e in out if not (isinstance(e, dict) and "topicName" in e)}
    for e in b:
        if isinstance(e, dict) and "topicName" in e:
            if e["topicName"] in by_topic:
                i = by_topic[e["topicName"]]
                out[i] = merge_bodies([out[i], e])
            else:
                by_topic[e["topicName"]] = len(out)
                out.append(e)
            continue
        ident = _entry_id(e)
        if ident not in seen:
            seen.add(ident)
            out.append(e)
    return out


def merge_bodies(bodies: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Merge request bodies of one broker and API (rules in the module docstring); order is kept."""
    merged: dict[str, Any] = {}
    for body in bodies:
        for key, value in body.items():
            if key not in merged:
                merged[key] = value
            elif isinstance(merged[key], list) and isinstance(value, list):
                merged[key] = _merge_lists(merged[key], value)
            elif isinstance(merged[key], dict) and isinstance(value, dict):
                merged[key] = merge_bodies([merged[key], value])
            else:
                merged[key] = _merge_scalar(key, merged[key], value)
    return merged


def merge_spliced(bodies: Sequence[Mapping[str, Any]]) -> SplicedBody | None:
    """:func:`merge_bodies` of bodies whose ``topicStates`` entries are text
    (:class:`~core.kafka.requests.SplicedBody`; a body with no entries counts as one), without parsing
    them: their other fields merge, their entries are concatenated in order — what :func:`merge_bodies`
    gives when no topic name comes twice (buckets own disjoint topics). ``None`` when that does not hold
    (then the bodies merge as objects)."""
    if not any(isinstance(b, SplicedBody) for b in bodies):
        return None
    heads: list[Mapping[str, Any]] = []
    names: list[str] = []
    counts: list[int] = []
    texts: list[str] = []
    for b in bodies:
        if isinstance(b, SplicedBody):
            heads.append(b.head)
            names.extend(b.names)
            counts.extend(b.counts)
            texts.extend(b.texts)
        elif b.get("topicStates", []) == []:
            heads.append(b)
        else:
            return None
    if len(set(names)) != len(names):
        return None
    if len(bodies) == 1 and isinstance(bodies[0], SplicedBody):
        return bodies[0]
    head = merge_bodies(heads)
    head["topicStates"] = []
    return SplicedBody(head, tuple(names), tuple(counts), tuple(texts))
