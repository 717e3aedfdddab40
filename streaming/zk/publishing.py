"""Publishing the events a ZooKeeper bridge derived (broker liveness, admin paths) to a Kafka topic."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from core.codec.events import event_to_json
from core.events import Event


def publish_events(
    producer: Any, topic: str, events: Sequence[Event], key_of: Callable[[Event], str], timeout_s: float
) -> None:
    """Send ``events`` to ``topic`` keyed by ``key_of``, then wait until every one is acknowledged (within
    ``timeout_s`` each). Raises what the producer raises (``KafkaError``, ``OSError``)."""
    futures = [producer.send(topic, key=key_of(e).encode(), value=event_to_json(e).encode()) for e in events]
    producer.flush(timeout=timeout_s)
    for f in futures:
        if hasattr(f, "get"):  # a test's producer may answer without futures
            f.get(timeout=timeout_s)
