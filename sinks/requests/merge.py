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


def merge_scalar(key: str, a: Any, b: Any) -> Any:
    """Two values of ``key`` in bodies being merged: equal or one missing, that one; a non-zero ``errorCode``
    wins; of two numbers the larger; otherwise the first."""
    if a == b or b is None:
        return a
    if a is None:
        return b
    if key == "errorCode":
        return a if a != 0 else b
    if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool):
        return max(a, b)
    return a


def entry_id(entry: Any) -> Any:
    """What identifies a list entry when merging: its ``brokerId`` or ``id``, else its whole JSON."""
    if isinstance(entry, dict):
        for k in _ENTRY_IDS:
            if k in entry:
                return (k, entry[k])
    return ("=", json.dumps(entry, sort_keys=True))


class _Lists:
    """One list field of the bodies being merged, built up body by body: the first body's entries as they are,
    each later body's topic entries merged into the entry of the same ``topicName`` (the last of that name,
    else appended) and its other entries appended unless an equal one (:func:`entry_id`) is there. The indexes
    are kept between bodies, so merging n bodies costs what their entries do (merging them two by two rebuilt
    the indexes, and re-identified every entry, for each body: quadratic in a broker's answers of a batch)."""

    __slots__ = ("by_topic", "out", "seen")

    def __init__(self, first: list[Any]) -> None:
        self.out: list[Any] = list(first)
        self.by_topic: dict[Any, int] = {}
        self.seen: set[Any] = set()
        for i, e in enumerate(first):
            if isinstance(e, dict) and "topicName" in e:
                self.by_topic[e["topicName"]] = i
            else:
                # topic entries merge by name; only the others (live brokers, ...) need an identity, and
                # computing one for a topic entry would serialise all its partition states
                self.seen.add(entry_id(e))

    def add(self, more: list[Any]) -> None:
        out = self.out
        for e in more:
            if isinstance(e, dict) and "topicName" in e:
                i = self.by_topic.get(e["topicName"])
                if i is None:
                    self.by_topic[e["topicName"]] = len(out)
                    out.append(e)
                else:
                    merged = out[i]
                    if not isinstance(merged, _Body):
                        merged = out[i] = _Body(merged)
                    merged.add(e)
                continue
            ident = entry_id(e)
            if ident not in self.seen:
                self.seen.add(ident)
                out.append(e)

    def value(self) -> list[Any]:
        return [e.value() if isinstance(e, _Body) else e for e in self.out]


class _Body:
    """The bodies merged so far (the rules of the module docstring), built up body by body; :meth:`value` is
    the merged object, new containers wherever something merged (the bodies themselves are never changed)."""

    __slots__ = ("fields",)

    def __init__(self, first: Mapping[str, Any] | None = None) -> None:
        self.fields: dict[str, Any] = {}
        if first is not None:
            self.add(first)

    def add(self, body: Mapping[str, Any]) -> None:
        fields = self.fields
        for key, value in body.items():
            if key not in fields:
                fields[key] = value
                continue
            cur = fields[key]
            if isinstance(cur, _Lists):
                if isinstance(value, list):
                    cur.add(value)
            elif isinstance(cur, _Body):
                if isinstance(value, dict):
                    cur.add(value)
            elif isinstance(cur, list) and isinstance(value, list):
                acc = fields[key] = _Lists(cur)
                acc.add(value)
            elif isinstance(cur, dict) and isinstance(value, dict):
                fields[key] = _Body(cur)
                fields[key].add(value)
            else:
                # a list or an object met by anything else stays (``merge_scalar`` keeps it)
                fields[key] = merge_scalar(key, cur, value)

    def value(self) -> dict[str, Any]:
        return {k: v.value() if isinstance(v, _Lists | _Body) else v for k, v in self.fields.items()}


def merge_bodies(bodies: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Merge request bodies of one broker and API (rules in the module docstring); order is kept. Linear in
    the bodies' entries (:class:`_Lists`)."""
    merged = _Body()
    for body in bodies:
        merged.add(body)
    return merged.value()


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
