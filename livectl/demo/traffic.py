"""The demo's clients on real Kafka brokers: a producer (``acks=all``) and a consumer running through every
step, and the proof at the end that every acknowledged record was consumed."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("livectl.demo.traffic")

#: the producer's delivery.timeout.ms, in seconds
DELIVERY_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Counts:
    """Records so far: sent to the producer, acknowledged by the brokers (``acks=all``), refused by them
    (the producer gave up: never acknowledged), and distinct records read back by the consumer."""

    produced: int
    acknowledged: int
    failed: int
    consumed: int

    def since(self, before: Counts) -> Counts:
        return Counts(
            self.produced - before.produced,
            self.acknowledged - before.acknowledged,
            self.failed - before.failed,
            self.consumed - before.consumed,
        )

    def text(self) -> str:
        failed = f", {self.failed} failed" if self.failed else ""
        return f"{self.produced} produced, {self.acknowledged} acknowledged{failed}, {self.consumed} consumed"


class Traffic:
    """A kafka-python producer with ``acks=all`` (idempotent, kafka-python's default: its producer id comes
    from the brokers' AllocateProducerIds, which the channel answers) writing ``rate`` records a second,
    round-robin over every partition of ``topics`` (name -> partition count), each record's value unique
    (``<topic>:<n>``); and a consumer that assigns itself those partitions and reads them from the beginning.
    Each runs in a thread of its own; the clients' logs go to the ``kafka`` logger."""

    def __init__(self, bootstrap: str, topics: Mapping[str, int], rate: float) -> None:
        if rate <= 0:
            raise ValueError(f"rate: records per second must be above 0, got {rate}")
        self.bootstrap = bootstrap
        self.topics = dict(topics)
        self.rate = rate
        self._lock = threading.Lock()
        self._produced = 0
        self._acked: set[bytes] = set()
        self._failed: dict[bytes, str] = {}
        self._consumed: set[bytes] = set()
        #: set = stop (waited on between records, so the producer keeps its rate)
        self._stop_producing = threading.Event()
        self._stop_consuming = threading.Event()
        self._producer: Any = None
        self._threads: list[threading.Thread] = []
        self._unclosed: list[Any] = []
        self.errors: list[str] = []

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        from kafka import KafkaProducer

        self._producer = KafkaProducer(
            bootstrap_servers=self.bootstrap,
            acks="all",
            linger_ms=0,
            request_timeout_ms=10_000,
            max_block_ms=10_000,
            # a record no leader takes within this long fails (counted, never acknowledged): closing the
            # producer waits at most about as long
            delivery_timeout_ms=int(DELIVERY_TIMEOUT_S * 1000),
            client_id="livectl-demo-producer",
        )
        for name, target in (("producer", self._produce), ("consumer", self._consume)):
            t = threading.Thread(target=target, name=f"livectl-demo-{name}", daemon=True)
            t.start()
            self._threads.append(t)

    def stop_producing(self, timeout: float = DELIVERY_TIMEOUT_S + 10) -> None:
        """No more records; wait (up to ``timeout``, above the producer's delivery timeout) until every record
        sent is acknowledged or failed."""
        self._stop_producing.set()
        if self._threads:
            self._threads[0].join(10)
        if self._producer is not None:
            with contextlib.suppress(Exception):
                self._producer.flush(timeout=timeout)

    def close(self, give_up: Callable[[], bool] = lambda: False) -> None:
        """Stop both clients (idempotent). The producer closes once every record sent is acknowledged or has
        failed (at most about its delivery timeout; a producer whose close timed out would try again, with a
        traceback, when it is collected); ``give_up`` true: no more waiting."""
        self._stop_producing.set()
        self._stop_consuming.set()
        for t in self._threads:
            t.join(15)
        producer, self._producer = self._producer, None
        if producer is None:
            return
        deadline = time.monotonic() + DELIVERY_TIMEOUT_S + 10
        while True:
            try:
                producer.close(timeout=2)
                return
            except Exception as e:  # records still waiting for a leader
                if give_up() or time.monotonic() >= deadline:
                    log.warning("demo producer: not closed: %s", e)
                    self._unclosed.append(producer)  # not collected (and closed again) in the middle of teardown
                    return

    # ------------------------------------------------------------------ what the demo reads

    def counts(self) -> Counts:
        with self._lock:
            return Counts(self._produced, len(self._acked), len(self._failed), len(self._consumed))

    def not_consumed(self) -> list[bytes]:
        """Acknowledged records the consumer has not read (yet)."""
        with self._lock:
            return sorted(self._acked - self._consumed)

    def acknowledged(self) -> frozenset[bytes]:
        with self._lock:
            return frozenset(self._acked)

    def consumed(self) -> frozenset[bytes]:
        with self._lock:
            return frozenset(self._consumed)

    def acknowledged_since(self, before: Counts) -> int:
        with self._lock:
            return len(self._acked) - before.acknowledged

    def failures(self) -> dict[bytes, str]:
        with self._lock:
            return dict(self._failed)

    # ------------------------------------------------------------------ the threads

    def _produce(self) -> None:
        targets = [(t, p) for t, n in sorted(self.topics.items()) for p in range(n)]
        interval = 1.0 / self.rate
        n = 0
        next_at = time.monotonic()
        while not self._stop_producing.is_set():
            topic, partition = targets[n % len(targets)]
            value = f"{topic}:{n}".encode()
            try:
                future = self._producer.send(topic, value=value, partition=partition)
            except Exception as e:  # no metadata within max_block_ms (every replica down): try the next
                log.warning("demo producer: %s not sent: %s", value.decode(), e)
            else:
                with self._lock:
                    self._produced += 1
                future.add_callback(self._on_ack, value)
                future.add_errback(self._on_error, value)
            n += 1
            next_at += interval
            # a send that blocked (no leader) does not make up for lost time with a burst
            next_at = max(next_at, time.monotonic() - interval)
            self._stop_producing.wait(max(0.0, next_at - time.monotonic()))

    def _on_ack(self, value: bytes, metadata: Any) -> None:
        del metadata
        with self._lock:
            self._acked.add(value)

    def _on_error(self, value: bytes, error: BaseException) -> None:
        with self._lock:
            self._failed[value] = f"{type(error).__name__}: {error}"

    def _consume(self) -> None:
        from kafka import KafkaConsumer, TopicPartition

        try:
            consumer = KafkaConsumer(
                bootstrap_servers=self.bootstrap,
                group_id=None,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                client_id="livectl-demo-consumer",
                request_timeout_ms=15_000,
            )
        except Exception as e:
            self.errors.append(f"consumer: {type(e).__name__}: {e}")
            return
        try:
            tps = [TopicPartition(t, p) for t, n in sorted(self.topics.items()) for p in range(n)]
            consumer.assign(tps)
            consumer.seek_to_beginning(*tps)
            while not self._stop_consuming.is_set():
                try:
                    batches = consumer.poll(timeout_ms=300)
                except Exception as e:  # a broker going away mid-fetch: kafka-python retries on the next poll
                    log.warning("demo consumer: %s", e)
                    self._stop_consuming.wait(0.5)
                    continue
                values = [r.value for records in batches.values() for r in records]
                if values:
                    with self._lock:
                        self._consumed.update(values)
        finally:
            with contextlib.suppress(Exception):
                consumer.close()
