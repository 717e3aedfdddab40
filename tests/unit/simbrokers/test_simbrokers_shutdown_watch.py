"""The answers ``broker shutdown --wait`` reads: merged per batch, other brokers' and non-requests ignored."""

from __future__ import annotations

import pytest

from core.kafka.envelope import encode_request
from core.kafka.requests import RequestApi
from simbrokers.shutdown_watch import ShutdownAnswers

pytestmark = pytest.mark.unit


def answer(broker: int, batch: int, error: int, remaining: list[tuple[str, int]]) -> tuple[bytes, bytes]:
    body = {"errorCode": error, "remainingPartitions": [{"topicName": t, "partitionIndex": p} for t, p in remaining]}
    return encode_request(broker, RequestApi.CONTROLLED_SHUTDOWN_RESPONSE, 1, batch, body)


def test_shutdown_answers_merge_per_batch_and_ignore_others() -> None:
    a = ShutdownAnswers(2)
    assert a.last() is None
    a.add(*answer(2, 5, 0, [("t", 0)]))
    a.add(*answer(2, 5, 0, [("u", 1)]))
    a.add(*answer(3, 6, 0, []))  # another broker's
    a.add(b"2", b"not json")  # not a request: skipped
    assert a.last() == (0, ["t-0", "u-1"])
    a.add(*answer(2, 6, 41, []))
    assert a.last() == (41, [])
