"""A replica's log as the replication protocol sees it: records tagged with the leader epoch that wrote them,
a leader-epoch cache, a log end offset (LEO) and a high watermark (HW).

Record payloads do not matter to replication; a record is identified by ``(epoch, seq)`` where ``seq`` is
the offset at which its leader appended it. Since one epoch has one leader, that pair is unique in the
cluster, so "is acknowledged record R still at offset O in the leader's log" is a plain comparison.

The epoch cache follows Kafka's ``LeaderEpochFileCache``: entries ``(epoch, start_offset)`` with increasing
epochs; ``end_offset_for_epoch`` answers OffsetsForLeaderEpoch; truncation drops entries at or past the
new end.
"""

from __future__ import annotations

from dataclasses import dataclass, field

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


@dataclass(frozen=True, order=True)
class Record:
    epoch: int
    seq: int


@dataclass(frozen=True)
class EpochEndOffset:
    epoch: int
    end_offset: int


@dataclass
class ReplicaLog:
    records: list[Record] = field(default_factory=list)
    #: (epoch, start offset), epochs strictly increasing
    epochs: list[tuple[int, int]] = field(default_factory=list)
    high_watermark: int = 0
    #: how many times records were dropped (:meth:`truncate_to`): a record once at an offset may differ since
    truncations: int = field(default=0, compare=False)

    @property
    def log_end_offset(self) -> int:
        return len(self.records)

    @property
    def latest_epoch(self) -> int:
        return self.epochs[-1][0] if self.epochs else UNDEFINED_EPOCH

    def epoch_start_offset(self, epoch: int) -> int | None:
        for e, start in self.epochs:
            if e == epoch:
                return start
        return None

    def assign_epoch(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset`` (ignored unless newer than the latest)."""
        if epoch > self.latest_epoch:
            self.epochs.append((epoch, start_offset))

    def append(self, record: Record) -> int:
        """Append one record; returns its offset."""
        offset = len(self.records)
        self.assign_epoch(record.epoch, offset)
        self.records.append(record)
        return offset

    def record_at(self, offset: int) -> Record | None:
        return self.records[offset] if 0 <= offset < len(self.records) else None

    def truncate_to(self, offset: int) -> int:
        """Drop records at ``offset`` and beyond (Kafka's ``truncateTo``); returns how many were dropped."""
        offset = max(0, offset)
        dropped = max(0, len(self.records) - offset)
        if dropped:
            del self.records[offset:]
            self.truncations += 1
        self.epochs = [(e, s) for e, s in self.epochs if s < offset]
        self.high_watermark = min(self.high_watermark, offset)
        return dropped

    def end_offset_for_epoch(self, requested: int) -> EpochEndOffset:
        """Kafka's ``LeaderEpochFileCache.endOffsetFor``: the largest epoch <= ``requested`` and the offset where
        it ends (the start of the next epoch, or the LEO for the latest epoch)."""
        if requested == UNDEFINED_EPOCH:
            return EpochEndOffset(UNDEFINED_EPOCH, UNDEFINED_OFFSET)
        if requested == self.latest_epoch:
            return EpochEndOffset(requested, self.log_end_offset)
        higher = next(((e, s) for e, s in self.epochs if e > requested), None)
        if higher is None:
            return EpochEndOffset(UNDEFINED_EPOCH, UNDEFINED_OFFSET)
        floor = None
        for e, s in self.epochs:
            if e <= requested:
                floor = (e, s)
        if floor is None:
            return EpochEndOffset(requested, higher[1])
        return EpochEndOffset(floor[0], higher[1])
