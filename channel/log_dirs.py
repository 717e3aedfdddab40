"""DescribeLogDirs (API key 35) asked of a real Kafka broker, and its answer as a
:class:`core.kafka.log_dirs.LogDirsReport`: what the channel publishes on the log-dirs topic for the partitions
being reassigned, as the simulated brokers do (``docs/operations.md``, "Reassignment progress")."""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from typing import Any

from kio.static.primitive import i32

from core.kafka.log_dirs import (
    DESCRIBE_LOG_DIRS_API_KEY,
    LogDirResult,
    LogDirsReport,
    PartitionLogDir,
    TopicLogDir,
)
from core.model import TopicPartition

__all__ = ["DESCRIBE_LOG_DIRS", "OUR_VERSIONS", "describe_log_dirs", "to_report"]

DESCRIBE_LOG_DIRS = DESCRIBE_LOG_DIRS_API_KEY
#: v1 (Kafka 2.0) to v4 (Kafka 3.3: totalBytes, usableBytes); v0 differs only in its throttling
OUR_VERSIONS = range(1, 5)


def describe_log_dirs(version: int, partitions: Iterable[TopicPartition]) -> tuple[Any, type[Any]]:
    """The request (kio entity) naming ``partitions``, and its response type, at ``version``."""
    if version not in OUR_VERSIONS:
        raise ValueError(f"version: DescribeLogDirs v{version} is not built (v1-v4 are)")
    request = importlib.import_module(f"kio.schema.describe_log_dirs.v{version}.request")
    response = importlib.import_module(f"kio.schema.describe_log_dirs.v{version}.response")
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    topics = tuple(
        request.DescribableLogDirTopic(topic=t, partitions=tuple(i32(p) for p in ps)) for t, ps in by_topic.items()
    )
    return request.DescribeLogDirsRequest(topics=topics), response.DescribeLogDirsResponse


def to_report(broker_id: int, time_ms: int, response: Any) -> LogDirsReport:
    """A DescribeLogDirs response (any version built here) in livectl's report shape."""
    results = tuple(
        LogDirResult(
            str(r.log_dir),
            tuple(
                TopicLogDir(
                    str(t.name),
                    tuple(
                        PartitionLogDir(
                            int(p.partition_index), int(p.partition_size), int(p.offset_lag), bool(p.is_future_key)
                        )
                        for p in t.partitions
                    ),
                )
                for t in r.topics
            ),
            int(r.error_code.value),
            int(getattr(r, "total_bytes", -1)),
            int(getattr(r, "usable_bytes", -1)),
        )
        for r in response.results
    )
    top = getattr(response, "error_code", None)
    return LogDirsReport(broker_id, time_ms, results, int(top.value) if top is not None else 0)
