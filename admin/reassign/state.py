"""What ZooKeeper says of reassignments: the partitions moving (adding / removing replicas in
``/brokers/topics/<t>``, KIP-455) and the current assignment of topics."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from admin.common import (
    OperationFailedError,
)
from admin.zkread import ZkReader
from core.model import TopicPartition


@dataclass(frozen=True)
class Moving:
    """One partition being reassigned, as ``/brokers/topics/<t>`` holds it."""

    tp: TopicPartition
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]

    @property
    def origin(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.adding)

    @property
    def target(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing)


def in_progress(zk: ZkReader, topics: Sequence[str] | None = None) -> dict[TopicPartition, Moving]:
    """Every partition with adding or removing replicas (of ``topics``, or of all topics)."""
    out: dict[TopicPartition, Moving] = {}
    for t in topics if topics is not None else zk.topics():
        znode = zk.topic(t)
        if znode is None:
            continue
        adding, removing = dict(znode.adding_replicas), dict(znode.removing_replicas)
        for p, reps in znode.partitions:
            if p in adding or p in removing:
                tp = TopicPartition(t, p)
                out[tp] = Moving(tp, tuple(reps), tuple(adding.get(p, ())), tuple(removing.get(p, ())))
    return out


def current_assignment(zk: ZkReader, topics: Sequence[str]) -> dict[TopicPartition, tuple[int, ...]]:
    out: dict[TopicPartition, tuple[int, ...]] = {}
    for t in topics:
        znode = zk.topic(t)
        if znode is None:
            raise OperationFailedError(f"Topic '{t}' does not exist")
        for p, reps in znode.partitions:
            out[TopicPartition(t, p)] = reps
    return out
