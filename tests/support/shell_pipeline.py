"""The controller query's steps driven by hand, without Spark: prepare → per-bucket step (a fake GroupState)
→ dispatch to the in-memory sinks. Spark runs exactly these functions; the streaming shell's tests use this
pipeline so that its contracts are checked in milliseconds."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Self

import numpy as np
import pandas as pd

from core.model import Broker
from core.snapshot import ZkSnapshot
from sinks.memory import MemoryRequestSink, MemoryZkSink, MemoryZooKeeper
from sinks.ports import Fence
from streaming.query import failover, routing, stateful
from streaming.query.dispatch import Dispatcher
from streaming.query.failover import StoreSnapshots
from streaming.query.validation import InputValidator
from streaming.runtime.checkpoint_fs import MemoryCheckpointStore

BUCKETS = 4
ADMIN = "livectl.admin"
EVENTS = "livectl.broker-events"

_STORES: dict[Path, MemoryCheckpointStore] = {}


class FakeGroupState:
    """What ``applyInPandasWithState`` hands the function: ``exists``, ``get``, ``update``."""

    def __init__(self) -> None:
        self.value: tuple[Any, ...] | None = None

    @property
    def exists(self) -> bool:
        return self.value is not None

    @property
    def get(self) -> tuple[Any, ...]:
        assert self.value is not None
        return self.value

    def update(self, value: tuple[Any, ...]) -> None:
        self.value = value


def store_at(tmp: Path) -> MemoryCheckpointStore:
    """The in-memory checkpoint named after ``tmp``: pipelines given the same folder share one checkpoint."""
    return _STORES.setdefault(tmp, MemoryCheckpointStore(f"memory:{tmp}"))


class Pipeline:
    """One controller's query, batch by batch, on fakes."""

    def __init__(
        self, tmp: Path, zk: MemoryZooKeeper, fence: Fence, validator: InputValidator, config: Any = None
    ) -> None:
        self.tmp = tmp
        #: the controller configs the buckets run with from a failover on (``make_step``'s)
        self.config = config
        self.zk = zk
        self.fence = fence
        self.validator = validator
        self.states = {b: FakeGroupState() for b in range(-1, BUCKETS)}
        self.requests = MemoryRequestSink(fence)
        self.dispatcher = Dispatcher(MemoryZkSink(zk, fence, "q"), self.requests)
        self.offsets = {ADMIN: 0, EVENTS: 0}
        self.batch = 0
        self.clock = 0
        #: whether the buckets write their summaries (``step_bucket(summaries=True)``: the metrics endpoint on)
        self.summaries = False

    @classmethod
    def failed_over(
        cls, tmp: Path, validator: InputValidator, brokers: tuple[int, ...] = (1, 2, 3), config: Any = None
    ) -> Self:
        """A controller's query on a fresh :class:`MemoryZooKeeper` (``/controller_epoch`` 1, :attr:`zk`) at fence
        ``(1, 0)``, after its first batch: the failover to a cluster of ``brokers`` (:func:`snapshot_of`)."""
        zk = MemoryZooKeeper()
        epoch_znode(zk)
        p = cls(tmp, zk, Fence(1, 0), validator, config)
        p.run_batch([(EVENTS, p.failover_ref(snapshot_of(brokers)))])
        return p

    def records(self, items: list[tuple[str, str]]) -> pd.DataFrame:
        rows = []
        for topic, value in items:
            # records of both topics are ordered by their timestamps, as produced
            self.clock += 1
            rows.append((topic, 0, self.offsets[topic], pd.Timestamp(1_700_000_000_000 + self.clock, unit="ms"), value))
            self.offsets[topic] += 1
        return pd.DataFrame(rows, columns=["topic", "partition", "offset", "timestamp", "value"])

    def failover_ref(self, snapshot: ZkSnapshot) -> str:
        ref = failover.write_snapshot(store_at(self.tmp), 1000, snapshot, BUCKETS)
        return failover.ref_to_json(ref)

    def run_batch(self, items: list[tuple[str, str]]) -> pd.DataFrame:
        routed = pd.concat(
            [routing.prepare_frame(self.records(items), BUCKETS, ADMIN, self.validator), routing.tick_rows(1, BUCKETS)]
        )
        outputs: list[pd.DataFrame] = []
        for bucket, frame in by_bucket(routed):
            outputs.extend(
                stateful.step_bucket(
                    (bucket,),
                    iter([frame]),
                    self.states[int(bucket)],
                    snapshots=StoreSnapshots(store_at(self.tmp)),
                    config=self.config,
                    summaries=self.summaries,
                )
            )
        out = pd.concat(outputs, ignore_index=True)
        self.dispatcher.dispatch(out, self.batch)
        self.batch += 1
        return out


def by_bucket(routed: pd.DataFrame) -> Iterator[tuple[int, pd.DataFrame]]:
    """``routed``'s rows by their ``bucket`` column, as Spark's ``groupBy("bucket")`` hands them to the step:
    each bucket (an int) with its rows."""
    for key, frame in routed.groupby("bucket"):
        if not isinstance(key, (int, np.integer)):
            raise TypeError(f"bucket {key!r} is not an integer")
        yield int(key), frame


def snapshot_of(brokers: tuple[int, ...], epoch: int = 1, epoch_version: int = 0) -> ZkSnapshot:
    return ZkSnapshot(epoch, epoch_version, tuple(Broker(b, 100 + b) for b in brokers), (), ())


def epoch_znode(zk: MemoryZooKeeper) -> None:
    zk.create("/controller_epoch", b"1")
