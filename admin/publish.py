"""Publishing admin commands to ``livectl.admin`` and following their results on ``livectl.admin-results``.

A command is :func:`core.codec.events.event_to_json` of a :class:`core.events.AdminCommand` with a fresh
``request_id``, keyed by that id. Results are :class:`core.decisions.AdminResult` JSON (the sink adds
``batch_id`` and ``controller_epoch``), keyed by the request id; the first answer is awaited, or
``in_progress`` ones are followed until ``ok`` or ``error`` (:meth:`ResultFollower.wait`). The consumer's
positions are taken at the end of the results topic *before* the command is sent, so the answer cannot be
missed.

Results of a controller that was already replaced are ignored: the follower keeps the highest
``controller_epoch`` it has seen on the topic (in any result, for any request) and drops a result stamped
with a lower one (:class:`EpochFilter`), as Kafka's brokers drop requests of an older controller epoch.
A fenced controller sends nothing after it learns it was fenced, but a result it sent just before may
still arrive after the new controller's.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import KafkaError

from core.codec.events import event_to_json
from core.decisions import AdminResult, AdminStatus
from core.events import Event
from sinks import kafka_read
from sinks.errors import SinkUnavailableError
from sinks.requests.messages import read_admin_result

ADMIN_TOPIC = "livectl.admin"
ADMIN_RESULTS_TOPIC = "livectl.admin-results"


class KafkaUnavailableError(RuntimeError):
    """The Kafka cluster (or a livectl topic on it) could not be reached."""


class WaitTimeoutError(RuntimeError):
    """No final result arrived in time; ``last`` is the last result seen, if any."""

    def __init__(self, message: str, last: AdminResult | None) -> None:
        self.last = last
        super().__init__(message)


def new_request_id() -> str:
    return uuid.uuid4().hex


@dataclass
class EpochFilter:
    """Admits a result only if its controller epoch is not older than the highest seen so far."""

    highest: int = -1
    #: results dropped because an older controller sent them
    dropped: int = 0

    def admit(self, epoch: int | None) -> bool:
        if epoch is None:
            return True  # not stamped (written by hand): nothing to compare
        if epoch < self.highest:
            self.dropped += 1
            return False
        self.highest = epoch
        return True


def consumer_at_end(bootstrap: str, topic: str, client_config: Mapping[str, Any] | None = None) -> KafkaConsumer:
    """:func:`sinks.kafka_read.consumer_at_end`, with :class:`KafkaUnavailableError` when it cannot be had."""
    try:
        return kafka_read.consumer_at_end(bootstrap, topic, client_config)
    except SinkUnavailableError as e:
        raise KafkaUnavailableError(str(e)) from None


@dataclass
class ResultFollower:
    """Positions taken at the end of the results topic; :meth:`wait` reads from there."""

    consumer: KafkaConsumer
    topic: str
    epochs: EpochFilter = field(default_factory=EpochFilter)

    @classmethod
    def open(cls, bootstrap: str, topic: str, client_config: Mapping[str, Any] | None = None) -> ResultFollower:
        """``client_config``: extra kafka-python keyword arguments (security, from ``--command-config``)."""
        return cls(consumer_at_end(bootstrap, topic, client_config), topic)

    def wait(
        self, request_id: str, timeout_s: float, progress: Progress | None = None, *, until_final: bool = True
    ) -> AdminResult:
        """The answer to ``request_id``: the final one (``ok`` or ``error``), or with ``until_final`` false the
        first one (an ``in_progress`` answer: a deletion or reassignment the controller started).
        :class:`WaitTimeoutError` when none came within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        last: AdminResult | None = None
        try:
            while time.monotonic() < deadline:
                if progress is not None:
                    progress.draw(last)
                for records in self.consumer.poll(timeout_ms=200).values():
                    for rec in records:
                        if not self.epochs.admit(_epoch_of(rec.value)):
                            continue
                        result = read_admin_result(rec.value)
                        if result is None or result.request_id != request_id:
                            continue
                        last = result
                        if not until_final or result.status is not AdminStatus.IN_PROGRESS:
                            return result
        finally:
            if progress is not None:
                progress.done(last)
        status = last.status.value if last else "no result yet"
        raise WaitTimeoutError(f"no final result for request {request_id} after {timeout_s:g}s ({status})", last)

    def poll(self, request_id: str, timeout_ms: int = 200) -> AdminResult | None:
        """The latest result for ``request_id`` among the records one poll brings (``in_progress`` ones
        included), or ``None``."""
        latest: AdminResult | None = None
        for records in self.consumer.poll(timeout_ms=timeout_ms).values():
            for rec in records:
                if not self.epochs.admit(_epoch_of(rec.value)):
                    continue
                result = read_admin_result(rec.value)
                if result is not None and result.request_id == request_id:
                    latest = result
        return latest

    def close(self) -> None:
        self.consumer.close()


def _epoch_of(value: bytes) -> int | None:
    """The ``controller_epoch`` the sink stamped on a result, if any."""
    try:
        raw = json.loads(value)
    except ValueError:
        return None
    epoch = raw.get("controller_epoch") if isinstance(raw, dict) else None
    return epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else None


def publish(bootstrap: str, topic: str, key: str, value: str, client_config: Mapping[str, Any] | None = None) -> None:
    """Send one message and wait for the broker's acknowledgement."""
    try:
        producer = KafkaProducer(**dict(client_config or {}), bootstrap_servers=bootstrap, acks="all", retries=3)
    except KafkaError:
        raise KafkaUnavailableError(f"cannot reach Kafka at {bootstrap}") from None
    try:
        if not producer.partitions_for(topic):
            raise KafkaUnavailableError(f"topic {topic} does not exist on {bootstrap}; is the controller running?")
        producer.send(topic, key=key.encode(), value=value.encode()).get(timeout=30)
    except KafkaError as e:
        raise KafkaUnavailableError(f"could not publish to {topic} on {bootstrap}: {e}") from None
    finally:
        producer.close()


def publish_command(
    bootstrap: str, topic: str, command: Event, request_id: str, client_config: Mapping[str, Any] | None = None
) -> None:
    publish(bootstrap, topic, request_id, event_to_json(command), client_config)


class Progress:
    """A one-line progress display on stderr: elapsed time, status, and a bar when the result's details
    carry progress counts (``done``/``total``, ``completed``/``total`` or ``remaining``/``total``)."""

    SPIN = "|/-\\"

    def __init__(self, label: str, stream: TextIO | None = None, width: int = 24) -> None:
        self.label = label
        self.stream = stream or sys.stderr
        self.width = width
        self.start = time.monotonic()
        self.tick = 0
        self.tty = self.stream.isatty()
        self._last_line = ""
        self._last_result: AdminResult | None = None

    def _counts(self, result: AdminResult | None) -> tuple[int, int] | None:
        if result is None:
            return None
        d = result.details
        total = d.get("total")
        if not isinstance(total, int) or total <= 0:
            return None
        for k in ("done", "completed"):
            if isinstance(d.get(k), int):
                return int(d[k]), total
        if isinstance(d.get("remaining"), int):
            return total - int(d["remaining"]), total
        return None

    def line(self, result: AdminResult | None) -> str:
        elapsed = time.monotonic() - self.start
        status = result.status.value if result else "waiting"
        counts = self._counts(result)
        if counts is not None:
            done, total = counts
            filled = round(self.width * min(done, total) / total)
            bar = f"[{'#' * filled}{'.' * (self.width - filled)}] {done}/{total}"
        else:
            bar = f"[{self.SPIN[self.tick % len(self.SPIN)]}]"
        return f"{self.label} {bar} {status} {elapsed:5.1f}s"

    def draw(self, result: AdminResult | None) -> None:
        self.tick += 1
        text = self.line(result)
        if self.tty:
            self.stream.write("\r" + text.ljust(len(self._last_line)))
            self.stream.flush()
        elif result is not None and result is not self._last_result:
            # not a terminal: one line per result received, no carriage returns
            self.stream.write(text + "\n")
        self._last_line = text
        self._last_result = result

    def done(self, result: AdminResult | None) -> None:
        if self.tty:
            self.stream.write("\r" + self.line(result).ljust(len(self._last_line)) + "\n")
        elif result is not self._last_result:
            self.stream.write(self.line(result) + "\n")
        self.stream.flush()
