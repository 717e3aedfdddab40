"""Controlled shutdown as Kafka's broker does it (``KafkaServer.controlledShutdown``), pure.

States::

    IDLE --start--> AWAITING --(batch answered: error 0 and no remaining partitions)--> SUCCEEDED
                      |  ^
     (batch answered  |  | (backoff elapsed, attempts left)
      with remaining, v  |
      error, or timeout) BACKOFF --(no attempts left)--> FAILED   (Kafka: "unclean shutdown")

Each attempt sends one ``ControlledShutdown`` request (event on ``livectl.broker-events``). livectl's
controller answers from each of its buckets, so one answer may arrive as several messages of the same
controller batch ``(controllerEpoch, batchId)``: the answer is their sum (union of remaining partitions,
any error). An answer is complete when a message of another batch arrives or ``settle_ms`` passed since
its last message. After SUCCEEDED or FAILED the broker deregisters.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from core.kafka.error_codes import KafkaError
from core.model import TopicPartition


class ShutdownPhase(Enum):
    IDLE = "idle"
    AWAITING = "awaiting"
    BACKOFF = "backoff"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


@dataclass
class _Answer:
    batch: tuple[int, int]
    error_code: int = KafkaError.NONE
    remaining: set[TopicPartition] = field(default_factory=set)
    last_ms: int = 0


@dataclass
class ControlledShutdownProcess:
    """``max_retries`` attempts in all (Kafka's ``controlled.shutdown.max.retries``), ``backoff_ms`` between
    them (``controlled.shutdown.retry.backoff.ms``), ``timeout_ms`` to wait for an answer
    (``request.timeout.ms``)."""

    max_retries: int = 3
    backoff_ms: int = 5000
    timeout_ms: int = 30000
    settle_ms: int = 500
    phase: ShutdownPhase = ShutdownPhase.IDLE
    attempts: int = 0
    #: what the last complete answer said (for logs and tests)
    last_error: int | None = None
    last_remaining: tuple[TopicPartition, ...] = ()
    _deadline_ms: int = 0
    _answer: _Answer | None = None

    @property
    def done(self) -> bool:
        return self.phase in (ShutdownPhase.SUCCEEDED, ShutdownPhase.FAILED)

    def start(self, now_ms: int) -> bool:
        """Begin; returns True when a request must be sent now. Idempotent (a second SIGTERM does nothing)."""
        if self.phase is not ShutdownPhase.IDLE:
            return False
        return self._attempt(now_ms)

    def _attempt(self, now_ms: int) -> bool:
        if self.attempts >= self.max_retries:
            self.phase = ShutdownPhase.FAILED
            return False
        self.attempts += 1
        self.phase = ShutdownPhase.AWAITING
        self._deadline_ms = now_ms + self.timeout_ms
        self._answer = None
        return True

    def on_response(
        self, batch: tuple[int, int], error_code: int, remaining: tuple[TopicPartition, ...], now_ms: int
    ) -> bool:
        """One message of an answer. Returns True when a (retry) request must be sent now."""
        if self.phase is not ShutdownPhase.AWAITING:
            return False
        if self._answer is not None and self._answer.batch != batch:
            # a message of a later batch closes the answer in progress; completing it ends this attempt
            self._complete(now_ms)
            return False
        if self._answer is None:
            self._answer = _Answer(batch)
        if error_code != KafkaError.NONE:
            self._answer.error_code = error_code
        self._answer.remaining.update(remaining)
        self._answer.last_ms = now_ms
        return False

    def poll(self, now_ms: int) -> bool:
        """Advance with time. Returns True when a (retry) request must be sent now."""
        if self.phase is ShutdownPhase.AWAITING:
            if self._answer is not None and now_ms - self._answer.last_ms >= self.settle_ms:
                self._complete(now_ms)
                return False
            if self._answer is None and now_ms >= self._deadline_ms:
                self.last_error = KafkaError.REQUEST_TIMED_OUT
                self._fail_attempt(now_ms)
            return False
        if self.phase is ShutdownPhase.BACKOFF and now_ms >= self._deadline_ms:
            return self._attempt(now_ms)
        return False

    def _complete(self, now_ms: int) -> None:
        answer = self._answer
        assert answer is not None
        self._answer = None
        self.last_error = answer.error_code
        self.last_remaining = tuple(sorted(answer.remaining))
        if answer.error_code == KafkaError.NONE and not answer.remaining:
            self.phase = ShutdownPhase.SUCCEEDED
            return
        self._fail_attempt(now_ms)

    def _fail_attempt(self, now_ms: int) -> None:
        if self.attempts >= self.max_retries:
            self.phase = ShutdownPhase.FAILED
        else:
            self.phase = ShutdownPhase.BACKOFF
            self._deadline_ms = now_ms + self.backoff_ms
