"""Simulated brokers, pure: controlled shutdown as Kafka's ``KafkaServer.controlledShutdown`` retries it."""

from __future__ import annotations

from typing import Any

import pytest
from simbrokers_support import envelope

from core.events import ControlledShutdown
from core.kafka.error_codes import KafkaError
from core.kafka.requests import RequestApi
from core.model import TopicPartition
from simbrokers.broker import BrokerConfig, SimBroker
from simbrokers.shutdown import ShutdownPhase

pytestmark = pytest.mark.unit


def _phase(b: SimBroker) -> ShutdownPhase:
    """The broker's shutdown phase now (mypy keeps an attribute narrowed by an earlier assert)."""
    return b.shutdown_phase


def csr_body(remaining: list[tuple[str, int]], error: int = 0) -> dict[str, Any]:
    return {"errorCode": error, "remainingPartitions": [{"topicName": t, "partitionIndex": p} for t, p in remaining]}


def test_controlled_shutdown_succeeds_when_every_bucket_says_nothing_remains() -> None:
    b = SimBroker(1, BrokerConfig(controlled_shutdown_settle_ms=100), broker_epoch=7)
    assert b.start_controlled_shutdown(0) == [ControlledShutdown(1, 7)]
    assert b.start_controlled_shutdown(1) == []
    b.handle(envelope(1, RequestApi.CONTROLLED_SHUTDOWN_RESPONSE, csr_body([]), batch=3), 10)
    b.handle(envelope(1, RequestApi.CONTROLLED_SHUTDOWN_RESPONSE, csr_body([("t", 1)]), batch=3), 20)
    b.tick(200)
    assert b.shutdown_phase is ShutdownPhase.BACKOFF  # one bucket still had a partition: the sum is not empty
    assert b.shutdown.last_remaining == (TopicPartition("t", 1),)
    [retry] = b.tick(200 + 5000)
    assert retry == ControlledShutdown(1, 7)
    b.handle(envelope(1, RequestApi.CONTROLLED_SHUTDOWN_RESPONSE, csr_body([]), batch=4), 5300)
    b.handle(envelope(1, RequestApi.CONTROLLED_SHUTDOWN_RESPONSE, csr_body([], 0) | {"x": 1}, batch=4), 5310)
    b.tick(5500)
    assert _phase(b) is ShutdownPhase.SUCCEEDED


def test_controlled_shutdown_retries_three_times_then_gives_up() -> None:
    b = SimBroker(1, BrokerConfig(controlled_shutdown_timeout_ms=1000, controlled_shutdown_retry_backoff_ms=500))
    sent = b.start_controlled_shutdown(0)
    now = 0
    while not b.shutdown.done and now < 60_000:
        now += 100
        sent += [e for e in b.tick(now) if isinstance(e, ControlledShutdown)]
        if len(sent) == 2 and b.shutdown_phase is ShutdownPhase.AWAITING:
            b.handle(envelope(1, RequestApi.CONTROLLED_SHUTDOWN_RESPONSE, csr_body([], error=41), batch=len(sent)), now)
    assert len(sent) == 3
    assert b.shutdown_phase is ShutdownPhase.FAILED
    assert b.shutdown.last_error == KafkaError.REQUEST_TIMED_OUT


def test_controlled_shutdown_answer_while_not_waiting_is_ignored() -> None:
    b = SimBroker(1)
    b.handle(envelope(1, RequestApi.CONTROLLED_SHUTDOWN_RESPONSE, csr_body([])), 0)
    assert b.shutdown_phase is ShutdownPhase.IDLE
