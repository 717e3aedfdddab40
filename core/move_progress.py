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

Bytes are not the end of a move: Kafka completes a reassignment only when every target replica is in the ISR.
Each partition's progress names the target replicas not in the ISR yet (``waiting_for``) and those of them whose
broker is not alive (``not_alive``). Its percentage is rounded down and never 100 while one is waiting, its
time left is unknown while one is not alive (a dead broker's move waits for the broker, not for bytes), and its
text says what it waits for once the bytes no longer explain it (``waiting for broker 3, which is not alive``).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any

from core.kafka.log_dirs import LogDirsReport
from core.model import NO_LEADER, TopicPartition

__all__ = [
    "RATE_WINDOW_MS",
    "MovingPartition",
    "PartitionProgress",
    "Progress",
    "Totals",
    "move_progress",
    "waiting",
    "waiting_text",
]

#: the reports a rate is averaged over, and the oldest report used at all
RATE_WINDOW_MS = 30_000


@dataclass(frozen=True)
class MovingPartition:
    """A partition being reassigned: its leader (``NO_LEADER``: none), the replicas it is adding, its target
    replicas (the replicas once the move completes) and its ISR now."""

    topic: str
    partition: int
    leader: int
    adding: tuple[int, ...]
    target: tuple[int, ...]
    isr: tuple[int, ...]


def waiting(
    target: Iterable[int], isr: Collection[int], live: Collection[int]
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The target replicas not in the ISR (Kafka completes a reassignment when there are none), and those of
    them whose broker is not alive."""
    out = tuple(r for r in target if r not in isr)
    return out, tuple(r for r in out if r not in live)


def waiting_text(waiting_for: Iterable[int], not_alive: Collection[int]) -> str:
    """``waiting for broker 3, which is not alive, and for broker 4 to join the ISR`` ('' when none waits)."""
    waiting_for = tuple(waiting_for)
    dead = [r for r in waiting_for if r in not_alive]
    other = [r for r in waiting_for if r not in not_alive]
    parts = []
    if dead:
        ids = ", ".join(map(str, dead))
        parts.append(f"broker {ids}, which is not alive" if len(dead) == 1 else f"brokers {ids}, which are not alive")
    if other:
        ids = ", ".join(map(str, other))
        parts.append(f"broker {ids} to join the ISR" if len(other) == 1 else f"brokers {ids} to join the ISR")
    return "waiting for " + ", and for ".join(parts) if parts else ""


@dataclass(frozen=True)
class Progress:
    """Bytes to move and moved, bytes per second and seconds left; ``None``: not known."""

    bytes_to_move: int | None
    bytes_moved: int
    bytes_per_second: float | None
    seconds_left: float | None
    #: target replicas not in the ISR yet: the move is not done while there is one (for a total: of any partition)
    waiting_for: tuple[int, ...] = ()
    #: of those, the ones whose broker is not alive: the move waits for them, whatever the bytes say
    not_alive: tuple[int, ...] = ()

    @property
    def percent(self) -> int | None:
        """Bytes moved of bytes to move, rounded down, and at most 99 while a target replica is not in the ISR:
        100 only when the move can complete; ``None`` while the bytes to move are unknown."""
        if self.bytes_to_move is None:
            return None
        share = math.floor(100 * self.bytes_moved / self.bytes_to_move) if self.bytes_to_move else 100
        return min(share, 99) if self.waiting_for else share

    def to_dict(self) -> dict[str, Any]:
        return {
            "bytes_to_move": self.bytes_to_move,
            "bytes_moved": self.bytes_moved,
            "bytes_per_second": None if self.bytes_per_second is None else round(self.bytes_per_second, 1),
            "seconds_left": None if self.seconds_left is None else round(self.seconds_left, 1),
            "percent": self.percent,
            "waiting_for": list(self.waiting_for),
            "not_alive": list(self.not_alive),
        }

    def _waits_beyond_bytes(self) -> bool:
        """What it waits for is worth saying: a broker that is not alive, or target replicas out of the ISR
        with every byte moved (the figures alone would read as done)."""
        copied = self.bytes_to_move is not None and self.bytes_moved >= self.bytes_to_move
        return bool(self.not_alive) or (bool(self.waiting_for) and copied)

    def _figures(self) -> str:
        rate = "rate unknown" if self.bytes_per_second is None else f"{_bytes(self.bytes_per_second)}/s"
        left = "time left unknown" if self.seconds_left is None else f"about {_duration(self.seconds_left)} left"
        if self.bytes_to_move is None:
            return f"moved {_bytes(self.bytes_moved)} of unknown, {rate}, {left}"
        return f"moved {_bytes(self.bytes_moved)} of {_bytes(self.bytes_to_move)} ({self.percent}%), {rate}, {left}"

    def text(self) -> str:
        """``moved 1.5 MiB of 4.0 MiB (37%), 512.0 KiB/s, about 5 s left`` (``unknown`` where not known), then
        ``; waiting for broker 3, which is not alive`` when the bytes do not say why it is not done."""
        out = self._figures()
        if self._waits_beyond_bytes():
            out += "; " + waiting_text(self.waiting_for, self.not_alive)
        return out


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
    #: partitions with a target replica not in the ISR, and those with one whose broker is not alive
    partitions_waiting: int = 0
    partitions_not_alive: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            **super().to_dict(),
            "partitions_unknown": self.unknown,
            "partitions_waiting": self.partitions_waiting,
            "partitions_waiting_for_not_alive": self.partitions_not_alive,
        }

    def text(self) -> str:
        out = self._figures()
        if self.unknown:
            out += f" ({self.unknown} partition(s) not reported yet)"
        if self.not_alive:
            dead = waiting_text(self.not_alive, self.not_alive)
            out += f"; {self.partitions_not_alive} partition(s) {dead}"
        return out


def move_progress(
    moving: Iterable[MovingPartition],
    reports: Iterable[LogDirsReport],
    now_ms: int,
    window_ms: int = RATE_WINDOW_MS,
    *,
    live: Collection[int],
) -> tuple[tuple[PartitionProgress, ...], Totals]:
    """Each moving partition's progress (in the order given) and the totals, from the reports of the
    ``window_ms`` up to ``now_ms`` (older and later ones are left out); ``live`` the brokers alive now (registered
    in ZooKeeper)."""
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
        waiting_for, not_alive = waiting(m.target, m.isr, live)
        left = None if not_alive else _left(to_move, moved, per_s)
        out.append(PartitionProgress(to_move, moved, per_s, left, waiting_for, not_alive, m.topic, m.partition))
    known = [p for p in out if p.bytes_to_move is not None]
    to_move_total = sum(p.bytes_to_move or 0 for p in known) if known or not out else None
    moved_total = sum(p.bytes_moved for p in known)
    known_rates = [p.bytes_per_second for p in known if p.bytes_per_second is not None]
    rate_total = sum(known_rates) if known_rates else None
    dead = [p for p in out if p.not_alive]
    totals = Totals(
        to_move_total,
        moved_total,
        rate_total,
        None if dead else _left(to_move_total, moved_total, rate_total),
        tuple(sorted({r for p in out for r in p.waiting_for})),
        tuple(sorted({r for p in dead for r in p.not_alive})),
        len(out) - len(known),
        sum(1 for p in out if p.waiting_for),
        len(dead),
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
