"""How far a reassignment's data has moved, from the brokers' DescribeLogDirs reports (:mod:`core.kafka.log_dirs`):
per partition and in total, the bytes to move, moved, the rate and the time left. ``reassign --verify`` and
``--list`` and the status page all call :func:`move_progress` and show :meth:`Progress.text`.

Definitions, per partition being reassigned:

* **bytes to move**: for each adding replica, the size of the leader's log (its latest reported
  ``partitionSize``); unknown while the leader has not reported the partition;
* **bytes moved**: what the adding replicas hold now (each counted up to the leader's size); an adding
  replica no report mentions holds 0;
* **rate**: per adding replica, its growth over the reports of the last ``window_ms`` (:data:`RATE_WINDOW_MS`):
  (last size - first size) / (last time - first time), never negative — an average over the window, as
  Kafka's ``Rate`` metrics average over their sample window, so one late or bunched report moves it little;
  the partition's rate is the sum over its adding replicas; unknown until a replica has two reports in the
  window;
* **time left**: (to move - moved) / rate; 0 when nothing is left, unknown while the rate is unknown or 0.
  Producers keep appending to the leader while it moves, so the estimate is optimistic by their rate.

The total sums the partitions whose figures are known (:attr:`Totals.unknown` counts the others); its time
left is the total left over the total rate.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from core.kafka.log_dirs import LogDirsReport
from core.model import NO_LEADER, TopicPartition

__all__ = ["RATE_WINDOW_MS", "MovingPartition", "PartitionProgress", "Progress", "Totals", "move_progress"]

#: the reports a rate is averaged over, and the oldest report used at all
RATE_WINDOW_MS = 30_000


@dataclass(frozen=True)
class MovingPartition:
    """A partition being reassigned: its leader (``NO_LEADER``: none) and the replicas it is adding."""

    topic: str
    partition: int
    leader: int
    adding: tuple[int, ...]


@dataclass(frozen=True)
class Progress:
    """Bytes to move and moved, bytes per second and seconds left; ``None``: not known."""

    bytes_to_move: int | None
    bytes_moved: int
    bytes_per_second: float | None
    seconds_left: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "bytes_to_move": self.bytes_to_move,
            "bytes_moved": self.bytes_moved,
            "bytes_per_second": None if self.bytes_per_second is None else round(self.bytes_per_second, 1),
            "seconds_left": None if self.seconds_left is None else round(self.seconds_left, 1),
        }

    def text(self) -> str:
        """``moved 1.5 MiB of 4.0 MiB (37%), 512.0 KiB/s, about 5 s left`` (``unknown`` where not known)."""
        rate = "rate unknown" if self.bytes_per_second is None else f"{_bytes(self.bytes_per_second)}/s"
        left = "time left unknown" if self.seconds_left is None else f"about {_duration(self.seconds_left)} left"
        if self.bytes_to_move is None:
            return f"moved {_bytes(self.bytes_moved)} of unknown, {rate}, {left}"
        share = self.bytes_moved / self.bytes_to_move if self.bytes_to_move else 1.0
        return f"moved {_bytes(self.bytes_moved)} of {_bytes(self.bytes_to_move)} ({share:.0%}), {rate}, {left}"


@dataclass(frozen=True)
class PartitionProgress(Progress):
    topic: str = ""
    partition: int = 0

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True)
class Totals(Progress):
    #: partitions whose bytes to move are not known (left out of the sums)
    unknown: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "partitions_unknown": self.unknown}

    def text(self) -> str:
        more = f" ({self.unknown} partition(s) not reported yet)" if self.unknown else ""
        return super().text() + more


def move_progress(
    moving: Iterable[MovingPartition],
    reports: Iterable[LogDirsReport],
    now_ms: int,
    window_ms: int = RATE_WINDOW_MS,
) -> tuple[tuple[PartitionProgress, ...], Totals]:
    """Each moving partition's progress (in the order given) and the totals, from the reports of the
    ``window_ms`` up to ``now_ms`` (older and later ones are left out)."""
    if window_ms <= 0:
        raise ValueError(f"window_ms: must be positive, got {window_ms}")
    moving = list(moving)
    wanted = {TopicPartition(m.topic, m.partition) for m in moving}
    # (broker, partition) -> time -> size
    series: dict[tuple[int, TopicPartition], dict[int, int]] = {}
    for rep in reports:
        if not now_ms - window_ms <= rep.time_ms <= now_ms:
            continue
        for tp, size in rep.replica_sizes():
            if tp in wanted:
                series.setdefault((rep.broker_id, tp), {})[rep.time_ms] = size

    def latest(broker: int, tp: TopicPartition) -> int | None:
        points = series.get((broker, tp))
        return points[max(points)] if points else None

    def rate(broker: int, tp: TopicPartition) -> float | None:
        points = series.get((broker, tp))
        if not points or len(points) < 2:
            return None
        first, last = min(points), max(points)
        return max(0, points[last] - points[first]) * 1000.0 / (last - first)

    out: list[PartitionProgress] = []
    for m in moving:
        tp = TopicPartition(m.topic, m.partition)
        leader_size = latest(m.leader, tp) if m.leader != NO_LEADER else None
        sizes = [latest(b, tp) or 0 for b in m.adding]
        moved = sum(sizes if leader_size is None else (min(s, leader_size) for s in sizes))
        rates = [r for b in m.adding if (r := rate(b, tp)) is not None]
        per_s = sum(rates) if rates else None
        to_move = None if leader_size is None else leader_size * len(m.adding)
        out.append(PartitionProgress(to_move, moved, per_s, _left(to_move, moved, per_s), m.topic, m.partition))
    known = [p for p in out if p.bytes_to_move is not None]
    to_move_total = sum(p.bytes_to_move or 0 for p in known) if known or not out else None
    moved_total = sum(p.bytes_moved for p in known)
    known_rates = [p.bytes_per_second for p in known if p.bytes_per_second is not None]
    rate_total = sum(known_rates) if known_rates else None
    totals = Totals(
        to_move_total, moved_total, rate_total, _left(to_move_total, moved_total, rate_total), len(out) - len(known)
    )
    return tuple(out), totals


def _left(to_move: int | None, moved: int, per_s: float | None) -> float | None:
    if to_move is None:
        return None
    left = max(0, to_move - moved)
    if left == 0:
        return 0.0
    return left / per_s if per_s else None


def _bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def _duration(s: float) -> str:
    s = round(s)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"
