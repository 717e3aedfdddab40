"""``livectl-simbrokers shutdown N --wait``: follow a simulated broker's controlled shutdown to its real outcome.

The broker asks the controller (``ControlledShutdown`` on ``livectl.broker-events``) and retries while
the answer lists partitions it still leads (Kafka's ``controlled.shutdown.max.retries``); then it
deregisters either way — a failed controlled shutdown is an unclean one. The tool reads the controller's
``ControlledShutdownResponse`` messages to that broker on ``livectl.requests`` (one answer may come as
several messages of one controller batch: their union), and once the registration is gone judges by the
last answer: no error and no remaining partition is success (exit 0); anything else, or no answer at all,
is exit 1 naming the partitions the broker could not move.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO

from kafka import KafkaConsumer

from core.errors import FormatError
from core.kafka.envelope import parse_request
from core.kafka.error_codes import KafkaError, error_name
from core.kafka.requests import ControlledShutdownResponse, RequestApi


@dataclass
class ShutdownAnswers:
    """The controller's answers to one broker's ControlledShutdown requests, merged per controller batch."""

    broker_id: int
    #: (controller epoch, batch id) -> (error code, remaining partitions)
    answers: dict[tuple[int, int], tuple[int, set[str]]] = field(default_factory=dict)
    order: list[tuple[int, int]] = field(default_factory=list)

    def add(self, key: bytes | None, value: bytes) -> None:
        try:
            env = parse_request(key, value)
        except FormatError:
            return
        if env.broker_id != self.broker_id or env.api is not RequestApi.CONTROLLED_SHUTDOWN_RESPONSE:
            return
        body = env.body
        assert isinstance(body, ControlledShutdownResponse)
        batch = (env.controller_epoch, env.batch_id)
        if batch not in self.answers:
            self.answers[batch] = (KafkaError.NONE, set())
            self.order.append(batch)
        error, remaining = self.answers[batch]
        remaining |= {str(tp) for tp in body.remaining}
        self.answers[batch] = (body.error_code if body.error_code != KafkaError.NONE else error, remaining)

    def last(self) -> tuple[int, list[str]] | None:
        """The last complete answer: (error code, sorted remaining partitions)."""
        if not self.order:
            return None
        error, remaining = self.answers[self.order[-1]]
        return error, sorted(remaining)


class Waiting:
    """``<label>: waiting 3.2s`` on one line of stderr while a terminal watches (nothing otherwise)."""

    def __init__(self, label: str, stream: TextIO | None = None) -> None:
        self.label = label
        self.stream = stream or sys.stderr
        self.start = time.monotonic()

    def draw(self) -> None:
        if self.stream.isatty():
            self.stream.write(f"\r{self.label}: waiting {time.monotonic() - self.start:.1f}s")
            self.stream.flush()

    def done(self) -> None:
        if self.stream.isatty():
            self.stream.write("\n")
            self.stream.flush()


def drain(consumer: KafkaConsumer, answers: ShutdownAnswers, quiet_ms: int = 1500) -> None:
    """Read what is left on the topic (until a poll of ``quiet_ms`` brings nothing)."""
    while True:
        batches = consumer.poll(timeout_ms=quiet_ms)
        if not batches:
            return
        for records in batches.values():
            for rec in records:
                answers.add(rec.key, rec.value)


def follow(
    zk_registered: Callable[[], bool],
    consumer: KafkaConsumer,
    broker_id: int,
    timeout_s: float,
) -> tuple[bool, str]:
    """Wait until the broker deregisters; ``(succeeded, message)``. Raises ``TimeoutError``."""
    answers = ShutdownAnswers(broker_id)
    progress = Waiting(f"broker {broker_id} shutdown")
    deadline = time.monotonic() + timeout_s
    try:
        while zk_registered():
            if time.monotonic() >= deadline:
                raise TimeoutError(f"broker {broker_id} still registered after {timeout_s:g}s")
            progress.draw()
            for records in consumer.poll(timeout_ms=200).values():
                for rec in records:
                    answers.add(rec.key, rec.value)
        drain(consumer, answers)
    finally:
        progress.done()
    last = answers.last()
    if last is None:
        return False, (
            f"Controlled shutdown of broker {broker_id} failed: no answer from the controller; the broker shut "
            "down uncleanly."
        )
    error, remaining = last
    if error == KafkaError.NONE and not remaining:
        return True, f"Broker {broker_id} completed its controlled shutdown and deregistered."
    why = f" (error {error_name(error)})" if error != KafkaError.NONE else ""
    lines = [f"Controlled shutdown of broker {broker_id} failed{why}; it deregistered uncleanly."]
    if remaining:
        lines.append(f"Partitions it could not move leadership of: {','.join(remaining)}")
    return False, "\n".join(lines)
