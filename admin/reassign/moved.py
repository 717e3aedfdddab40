"""The data a reassignment has moved, for ``--verify`` and ``--list``: the brokers' DescribeLogDirs reports of
the last :data:`core.move_progress.RATE_WINDOW_MS` read from ``--log-dirs-topic`` and turned into bytes to
move, moved, rate and time left by :func:`core.move_progress.move_progress` (the status page's own)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Collection, Sequence

from admin.common import bootstrap_server, kafka_config
from core.kafka.log_dirs import LogDirsReport
from core.model import TopicPartition
from core.move_progress import RATE_WINDOW_MS, MovingPartition, PartitionProgress, Totals, move_progress
from sinks.errors import SinkUnavailableError
from sinks.log_dirs_read import recent_log_dirs


def progress(
    args: argparse.Namespace, moving: Sequence[MovingPartition], live: Collection[int]
) -> tuple[dict[TopicPartition, PartitionProgress], Totals]:
    """Each moving partition's progress and the totals (``live``: the registered brokers); Kafka unreachable:
    said on stderr, nothing known."""
    now = int(time.time() * 1000)
    reports: list[LogDirsReport] = []
    if moving:
        try:
            reports = recent_log_dirs(
                bootstrap_server(args), args.log_dirs_topic, now - RATE_WINDOW_MS, kafka_config(args)
            )
        except SinkUnavailableError as e:
            print(f"Warning: no log sizes ({e}): bytes moved and time left unknown.", file=sys.stderr)
    parts, totals = move_progress(moving, reports, now, live=live)
    return {p.tp: p for p in parts}, totals


def print_progress(lines: Sequence[tuple[TopicPartition, PartitionProgress]], totals: Totals) -> None:
    """One line per partition under its status line's heading, then the total."""
    print()
    print("Data moved (the brokers' log sizes, DescribeLogDirs):")
    for tp, p in lines:
        print(f"{tp}: {p.text()}")
    print(f"Total: {totals.text()}")
