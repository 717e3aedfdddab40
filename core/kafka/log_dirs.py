"""Replica log sizes in the shape of Kafka's DescribeLogDirs response (API key 35), as brokers report them.

A real Kafka broker answers a ``DescribeLogDirsRequest`` (``kafka-log-dirs.sh --describe``, the admin
client's ``describeLogDirs``) with, per log directory, per topic, per partition: ``partitionSize`` (bytes
of the replica's log), ``offsetLag`` (the current log's high watermark minus its log end offset, or for a
future log the current log's end minus the future log's end) and ``isFutureKey`` (a replica moving between
the broker's own log directories). livectl's simulated brokers publish that answer unasked, one JSON
message per report on :data:`LOG_DIRS_TOPIC` (key: the broker id), with Kafka's field names plus the
reporting broker and the time of the report::

    {"version": 1, "brokerId": 2, "timeMs": 1765000000000, "errorCode": 0,
     "results": [{"errorCode": 0, "logDir": "/simbrokers/2", "totalBytes": -1, "usableBytes": -1,
                  "topics": [{"name": "orders", "partitions": [
                      {"partitionIndex": 0, "partitionSize": 1048576, "offsetLag": 0, "isFutureKey": false}]}]}]}

A broker may split one report into several messages with the same ``timeMs``: nothing here depends on a
report being whole. :func:`parse_log_dirs_report` is strict (a bad field is a :class:`core.errors.FormatError`
naming it); :mod:`core.move_progress` turns reports into bytes to move, moved, rate and time left.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from core.errors import FormatError
from core.model import TopicPartition

__all__ = [
    "DESCRIBE_LOG_DIRS_API_KEY",
    "LOG_DIRS_TOPIC",
    "LogDirResult",
    "LogDirsReport",
    "PartitionLogDir",
    "TopicLogDir",
    "chunked",
    "parse_log_dirs_report",
]

#: Kafka's ApiKeys.DESCRIBE_LOG_DIRS
DESCRIBE_LOG_DIRS_API_KEY = 35
#: where the simulated brokers publish their reports
LOG_DIRS_TOPIC = "livectl.log-dirs"
_VERSION = 1


@dataclass(frozen=True)
class PartitionLogDir:
    """``DescribeLogDirsPartition``."""

    partition_index: int
    partition_size: int
    offset_lag: int = 0
    is_future_key: bool = False


@dataclass(frozen=True)
class TopicLogDir:
    """``DescribeLogDirsTopic``."""

    name: str
    partitions: tuple[PartitionLogDir, ...]


@dataclass(frozen=True)
class LogDirResult:
    """``DescribeLogDirsResult``: one log directory (``totalBytes`` / ``usableBytes`` -1: not known)."""

    log_dir: str
    topics: tuple[TopicLogDir, ...]
    error_code: int = 0
    total_bytes: int = -1
    usable_bytes: int = -1


@dataclass(frozen=True)
class LogDirsReport:
    """One broker's DescribeLogDirs answer at ``time_ms`` (milliseconds since the epoch, the broker's clock)."""

    broker_id: int
    time_ms: int
    results: tuple[LogDirResult, ...]
    error_code: int = 0

    def replica_sizes(self) -> Iterator[tuple[TopicPartition, int]]:
        """``(partition, partitionSize)`` of each current (not future) replica in a log directory without
        an error."""
        for r in self.results:
            if r.error_code:
                continue
            for t in r.topics:
                for p in t.partitions:
                    if not p.is_future_key:
                        yield TopicPartition(t.name, p.partition_index), p.partition_size

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": _VERSION,
            "brokerId": self.broker_id,
            "timeMs": self.time_ms,
            "errorCode": self.error_code,
            "results": [
                {
                    "errorCode": r.error_code,
                    "logDir": r.log_dir,
                    "totalBytes": r.total_bytes,
                    "usableBytes": r.usable_bytes,
                    "topics": [
                        {
                            "name": t.name,
                            "partitions": [
                                {
                                    "partitionIndex": p.partition_index,
                                    "partitionSize": p.partition_size,
                                    "offsetLag": p.offset_lag,
                                    "isFutureKey": p.is_future_key,
                                }
                                for p in t.partitions
                            ],
                        }
                        for t in r.topics
                    ],
                }
                for r in self.results
            ],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))


def _int(d: dict[str, Any], key: str, where: str, default: int | None = None) -> int:
    v = d.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int):
        raise FormatError(f"{where}{key}", f"expected an integer, got {v!r}")
    return v


def _list(d: dict[str, Any], key: str, where: str) -> list[Any]:
    v = d.get(key)
    if not isinstance(v, list):
        raise FormatError(f"{where}{key}", f"expected a list, got {v!r}")
    return v


def _obj(v: Any, where: str) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise FormatError(where, f"expected an object, got {v!r}")
    return v


def parse_log_dirs_report(text: str | bytes) -> LogDirsReport:
    """A report as :meth:`LogDirsReport.to_json` writes it; a malformed one raises :class:`FormatError`."""
    try:
        doc = json.loads(text)
    except (ValueError, UnicodeDecodeError) as e:
        raise FormatError("report", f"not JSON: {e}") from None
    d = _obj(doc, "report")
    if d.get("version") != _VERSION:
        raise FormatError("version", f"expected {_VERSION}, got {d.get('version')!r}")
    broker_id, time_ms = _int(d, "brokerId", ""), _int(d, "timeMs", "")
    results: list[LogDirResult] = []
    for i, rv in enumerate(_list(d, "results", "")):
        r = _obj(rv, f"results[{i}]")
        where = f"results[{i}]."
        log_dir = r.get("logDir")
        if not isinstance(log_dir, str):
            raise FormatError(f"{where}logDir", f"expected a string, got {log_dir!r}")
        topics: list[TopicLogDir] = []
        for j, tv in enumerate(_list(r, "topics", where)):
            t = _obj(tv, f"{where}topics[{j}]")
            twhere = f"{where}topics[{j}]."
            name = t.get("name")
            if not isinstance(name, str) or not name:
                raise FormatError(f"{twhere}name", f"expected a topic name, got {name!r}")
            parts: list[PartitionLogDir] = []
            for k, pv in enumerate(_list(t, "partitions", twhere)):
                p = _obj(pv, f"{twhere}partitions[{k}]")
                pwhere = f"{twhere}partitions[{k}]."
                index, size = _int(p, "partitionIndex", pwhere), _int(p, "partitionSize", pwhere)
                if index < 0 or size < 0:
                    raise FormatError(f"{pwhere}partitionSize", f"negative index or size: {index}, {size}")
                future = p.get("isFutureKey", False)
                if not isinstance(future, bool):
                    raise FormatError(f"{pwhere}isFutureKey", f"expected a boolean, got {future!r}")
                parts.append(PartitionLogDir(index, size, _int(p, "offsetLag", pwhere, 0), future))
            topics.append(TopicLogDir(name, tuple(parts)))
        results.append(
            LogDirResult(
                log_dir,
                tuple(topics),
                _int(r, "errorCode", where, 0),
                _int(r, "totalBytes", where, -1),
                _int(r, "usableBytes", where, -1),
            )
        )
    return LogDirsReport(broker_id, time_ms, tuple(results), _int(d, "errorCode", "", 0))


def chunked(report: LogDirsReport, max_partitions: int) -> Iterable[LogDirsReport]:
    """``report`` as messages of at most ``max_partitions`` partitions each (same broker and time), so that a
    broker with many partitions stays under Kafka's message size; a report without partitions is one message."""
    if max_partitions < 1:
        raise ValueError(f"max_partitions: must be at least 1, got {max_partitions}")
    out: list[LogDirsReport] = []
    for r in report.results:
        topics: list[TopicLogDir] = []
        count = 0
        for t in r.topics:
            parts = list(t.partitions)
            while parts:
                room = max_partitions - count
                take, parts = parts[:room], parts[room:]
                topics.append(TopicLogDir(t.name, tuple(take)))
                count += len(take)
                if count >= max_partitions:
                    out.append(_one(report, r, topics))
                    topics, count = [], 0
        if topics or not r.topics:
            out.append(_one(report, r, topics))
    return out or [report]


def _one(report: LogDirsReport, r: LogDirResult, topics: list[TopicLogDir]) -> LogDirsReport:
    return LogDirsReport(
        report.broker_id,
        report.time_ms,
        (LogDirResult(r.log_dir, tuple(topics), r.error_code, r.total_bytes, r.usable_bytes),),
        report.error_code,
    )
