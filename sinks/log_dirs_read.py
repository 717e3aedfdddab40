"""The brokers' recent DescribeLogDirs reports (:mod:`core.kafka.log_dirs`), read from their topic: what
``reassign --verify`` / ``--list`` and the status page compute a reassignment's progress from."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Mapping
from typing import Any

from kafka import KafkaConsumer, TopicPartition
from kafka.errors import KafkaError

from core.errors import FormatError
from core.kafka.log_dirs import LogDirsReport, parse_log_dirs_report
from sinks.errors import SinkUnavailableError

log = logging.getLogger(__name__)


def recent_log_dirs(
    bootstrap: str,
    topic: str,
    since_ms: int,
    client_config: Mapping[str, Any] | None = None,
    timeout_s: float = 5.0,
) -> list[LogDirsReport]:
    """The reports written to ``topic`` at or after ``since_ms`` (Kafka's record timestamps) up to its end
    now, oldest first; none when the topic does not exist (no broker reports). A malformed message is
    skipped. Raises :class:`SinkUnavailableError` when Kafka cannot be reached within ``timeout_s`` (which
    also bounds the reading)."""
    try:
        consumer = KafkaConsumer(
            **dict(client_config or {}),
            bootstrap_servers=bootstrap,
            enable_auto_commit=False,
            group_id=None,
            bootstrap_timeout_ms=int(timeout_s * 1000),
        )
    except KafkaError:
        raise SinkUnavailableError(f"cannot reach Kafka at {bootstrap}") from None
    try:
        parts = consumer.partitions_for_topic(topic)
        if not parts:
            return []
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        consumer.assign(tps)
        starts = consumer.offsets_for_times(dict.fromkeys(tps, since_ms))
        ends = consumer.end_offsets(tps)
        todo: dict[TopicPartition, int] = {}
        for tp in tps:
            start = starts.get(tp)
            if start is not None and start.offset < ends[tp]:
                consumer.seek(tp, start.offset)
                todo[tp] = ends[tp]
        consumer.pause(*[tp for tp in tps if tp not in todo])
        reports: list[LogDirsReport] = []
        deadline = time.monotonic() + timeout_s
        while todo and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=200).items():
                for rec in records:
                    if rec.offset >= todo.get(tp, 0):
                        continue
                    try:
                        reports.append(parse_log_dirs_report(rec.value))
                    except FormatError as e:
                        log.debug("skipping a malformed log-dirs report at %s@%s: %s", tp, rec.offset, e)
            for tp in [tp for tp, end in todo.items() if consumer.position(tp) >= end]:
                del todo[tp]
        return sorted(reports, key=lambda r: r.time_ms)
    except KafkaError as e:
        raise SinkUnavailableError(f"cannot read {topic} on {bootstrap}: {e}") from None
    finally:
        consumer.close()


class LogDirsTail:
    """The reports of the last ``window_ms``, kept up to date by :meth:`read` with one consumer for the tail's
    life (the status page's reader: it reads every second, and an idle topic costs one fetch)."""

    def __init__(
        self, bootstrap: str, topic: str, window_ms: int, client_config: Mapping[str, Any] | None = None
    ) -> None:
        self.bootstrap, self.topic, self.window_ms = bootstrap, topic, window_ms
        self.client_config = dict(client_config or {})
        self._consumer: KafkaConsumer | None = None
        self._reports: list[LogDirsReport] = []

    def read(self, now_ms: int) -> tuple[LogDirsReport, ...]:
        """What is new on the topic, added to what was read before; reports older than the window dropped,
        oldest first. No topic yet: none. Raises :class:`SinkUnavailableError` when Kafka cannot be reached
        (the next call starts again)."""
        try:
            consumer = self._assigned(now_ms)
            if consumer is not None:
                for records in consumer.poll(timeout_ms=100, max_records=10_000).values():
                    for rec in records:
                        try:
                            self._reports.append(parse_log_dirs_report(rec.value))
                        except FormatError as e:
                            log.debug("skipping a malformed log-dirs report at offset %s: %s", rec.offset, e)
        except KafkaError as e:
            self.close()
            raise SinkUnavailableError(f"cannot read {self.topic} on {self.bootstrap}: {e}") from None
        since = now_ms - self.window_ms
        self._reports = sorted((r for r in self._reports if r.time_ms >= since), key=lambda r: r.time_ms)
        return tuple(self._reports)

    def _assigned(self, now_ms: int) -> KafkaConsumer | None:
        """The consumer, assigned to the topic's partitions from ``window_ms`` ago; ``None`` while the topic
        does not exist (the consumer is kept: the next call asks its metadata again)."""
        consumer = self._consumer
        if consumer is None:
            try:
                consumer = self._consumer = KafkaConsumer(
                    **self.client_config,
                    bootstrap_servers=self.bootstrap,
                    enable_auto_commit=False,
                    group_id=None,
                    bootstrap_timeout_ms=10_000,
                )
            except KafkaError:
                raise SinkUnavailableError(f"cannot reach Kafka at {self.bootstrap}") from None
        if consumer.assignment():
            return consumer
        parts = consumer.partitions_for_topic(self.topic)
        if not parts:
            return None
        tps = [TopicPartition(self.topic, p) for p in sorted(parts)]
        consumer.assign(tps)
        starts = consumer.offsets_for_times(dict.fromkeys(tps, now_ms - self.window_ms))
        for tp in tps:
            start = starts.get(tp)
            if start is None:
                consumer.seek_to_end(tp)
            else:
                consumer.seek(tp, start.offset)
        return consumer

    def close(self) -> None:
        if self._consumer is not None:
            consumer, self._consumer = self._consumer, None
            with contextlib.suppress(KafkaError):  # closing what Kafka already dropped
                consumer.close()
