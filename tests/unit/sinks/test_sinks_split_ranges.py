"""The request sink's split by ranges of partition states gives the parts, and their bytes, that the
split over a flat list of every state gave (the reference below is that earlier algorithm)."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import pytest

from sinks.requests.split import dumps, split_dumped

pytestmark = pytest.mark.unit


def _mapping(part: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """A part's request as a mapping (``split_dumped`` builds one unless told ``mappings=False``)."""
    assert part is not None
    return part


def _reference(body: dict[str, Any], max_bytes: int) -> list[tuple[dict[str, Any], bytes]]:
    dumped = dumps(body)
    states = body.get("topicStates")
    if not isinstance(states, list) or len(dumped) <= max_bytes:
        return [(body, dumped)]
    flat: list[tuple[dict[str, Any], Any]] = []
    for ts in states:
        header = {k: v for k, v in ts.items() if k != "partitionStates"}
        flat.extend((header, ps) for ps in ts.get("partitionStates", []))
    pieces = -(-len(dumped) // max_bytes)
    step = max(1, -(-len(flat) // pieces))
    return [p for start in range(0, len(flat), step) for p in _fit(body, flat[start : start + step], max_bytes)]


def _part(body: dict[str, Any], flat: list[tuple[dict[str, Any], Any]]) -> dict[str, Any]:
    topic_states: list[dict[str, Any]] = []
    for header, ps in flat:
        if not topic_states or topic_states[-1].get("topicName") != header.get("topicName"):
            topic_states.append({**header, "partitionStates": []})
        topic_states[-1]["partitionStates"].append(ps)
    return {**{k: v for k, v in body.items() if k != "topicStates"}, "topicStates": topic_states}


def _fit(
    body: dict[str, Any], flat: list[tuple[dict[str, Any], Any]], max_bytes: int
) -> list[tuple[dict[str, Any], bytes]]:
    part = _part(body, flat)
    dumped = dumps(part)
    if len(flat) <= 1 or len(dumped) <= max_bytes:
        return [(part, dumped)]
    half = len(flat) // 2
    return _fit(body, flat[:half], max_bytes) + _fit(body, flat[half:], max_bytes)


def _body(rng: random.Random) -> dict[str, Any]:
    topics = []
    for t in range(rng.randint(1, 30)):
        n = rng.choice([0, 1, 2, 7, 50, 400])
        states = [
            {
                "partitionIndex": p,
                "leader": rng.randint(0, 9),
                "isr": list(range(rng.randint(1, 5))),
                "x": "y" * rng.randint(0, 300),
            }
            for p in range(n)
        ]
        # a topic may come back later in the body, and now and then twice in a row
        name = f"t{rng.randint(0, 40)}" if rng.random() < 0.2 else f"topic-{t}"
        topics.append({"topicName": name, "topicId": f"id{t}", "partitionStates": states})
    return {"controllerId": 1, "controllerEpoch": 3, "type": 0, "topicStates": topics, "liveLeaders": [{"brokerId": 1}]}


@pytest.mark.parametrize("seed", range(40))
def test_the_split_by_ranges_gives_the_same_parts_and_bytes(seed: int) -> None:
    rng = random.Random(seed)
    body = _body(rng)
    for max_bytes in (200, 2_000, 20_000, 10**9):
        got = split_dumped(body, max_bytes)
        want = _reference(body, max_bytes)
        assert [b for _, b in got] == [b for _, b in want]
        assert [p for p, _ in got] == [p for p, _ in want]


def test_one_oversized_state_is_a_part_of_its_own() -> None:
    big = {"partitionIndex": 1, "blob": "z" * 5_000}
    body = {"topicStates": [{"topicName": "a", "partitionStates": [{"partitionIndex": 0}, big, {"partitionIndex": 2}]}]}
    got = split_dumped(body, 1_000)
    assert [b for _, b in got] == [b for _, b in _reference(body, 1_000)]
    assert [_mapping(p)["topicStates"][0]["partitionStates"] for p, _ in got] == [
        [{"partitionIndex": 0}],
        [big],
        [{"partitionIndex": 2}],
    ]


def test_a_body_without_partition_states_is_as_before() -> None:
    for states in ([{"topicName": "a", "partitionStates": []}], []):
        body = {"topicStates": states, "pad": "p" * 500}
        assert split_dumped(body, 1000) == _reference(body, 1000)


def test_an_oversized_body_without_partition_states_is_sent_whole_not_dropped() -> None:
    # the earlier split returned no part at all for it, so the request was silently lost; there is nothing
    # to cut at, so it goes as one message (a producer or broker over its limit refuses it loudly)
    for states in ([{"topicName": "a", "partitionStates": []}], []):
        body = {"topicStates": states, "pad": "p" * 500}
        assert _reference(body, 100) == []
        parts = split_dumped(body, 100)
        assert [b for _, b in parts] == [dumps(body)]
        assert parts[0][0] is body


def test_text_orjson_cannot_write_falls_back_to_the_escaping_encoder() -> None:
    # a lone surrogate (orjson refuses it): the standard encoder's escapes, whole message, as before
    body = {"topicStates": [{"topicName": "a\ud800", "partitionStates": [{"partitionIndex": i} for i in range(50)]}]}
    for max_bytes in (100, 10**6):
        assert split_dumped(body, max_bytes) == _reference(body, max_bytes)


def test_equal_requests_to_several_brokers_keep_their_bytes() -> None:
    from core import decisions as dc
    from core.kafka.requests import RequestApi, WireBody
    from sinks.ports import Fence
    from sinks.requests import request_messages

    body = _body(random.Random(7))
    reqs = [dc.BrokerRequest(b, RequestApi.LEADER_AND_ISR, WireBody(body)) for b in (1, 2)]
    msgs = request_messages("t", Fence(2, 1), 3, reqs, max_bytes=2_000)
    assert len(msgs) > 4
    parts = [b for _, b in _reference(body, 2_000)]
    assert [m.value for m in msgs if m.key == b"1"] == [
        m.value for m in request_messages("t", Fence(2, 1), 3, reqs[:1], max_bytes=2_000)
    ]
    assert all(p in m.value for p, m in zip(parts, [m for m in msgs if m.key == b"2"], strict=True))


@pytest.mark.parametrize("seed", range(10))
def test_parts_of_entries_as_text_without_their_requests_are_the_same_bytes(seed: int) -> None:
    # what the request sink does with a bucket's rows: only the parts' bytes, never the parts as requests
    import orjson

    from core.kafka.requests import SplicedBody

    rng = random.Random(seed)
    body = _body(rng)
    texts = tuple(orjson.dumps(ts, option=orjson.OPT_SORT_KEYS).decode() for ts in body["topicStates"])
    spliced = SplicedBody(
        {**body, "topicStates": []},
        tuple(ts["topicName"] for ts in body["topicStates"]),
        tuple(len(ts["partitionStates"]) for ts in body["topicStates"]),
        texts,
    )
    for max_bytes in (200, 2_000, 20_000, 10**9):
        want = _reference(body, max_bytes)
        got = split_dumped(spliced, max_bytes, mappings=False)
        assert [b for _, b in got] == [b for _, b in want]
        with_requests = split_dumped(spliced, max_bytes)
        assert [b for _, b in with_requests] == [b for _, b in want]
        assert [dict(p) for p, _ in with_requests if p is not None] == [p for p, _ in want]
        if len(want) > 1:
            assert all(p is None for p, _ in got)
