"""The brokers' recent DescribeLogDirs reports (:mod:`core.log_dirs`), read from their topic: what
``reassign --verify`` / ``--list`` and the status page compute a reassignment's progress from."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from kafka import KafkaConsumer, TopicPartition
from kafka.errors import KafkaError

from core.errors import FormatError
from core.log_dirs import LogDirsReport, parse_log_dirs_report
from sinks.errors import SinkUnavailableError

log = logging.getLogger(__name__)


def recent_log_dirs(
    bootstrap: str,
    topic: str,
    since_ms: int,
    client_config: Mapping[str, Any] | None = None,
    timeout_s: float = 10.0,
) -> list[LogDirsReport]:
    """The reports written to ``topic`` at or after ``since_ms`` (Kafka's record timestamps) up to its end
    now, oldest first; none when the topic does not exist (no broker reports). A malformed message is
    skipped. Raises :class:`SinkUnavailableError` when Kafka cannot be reached."""
    try:
        consumer = KafkaConsumer(
            **dict(client_config or {}), bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None
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
