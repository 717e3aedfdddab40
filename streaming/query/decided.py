"""A standby's failover batch decided ahead: each bucket's outcome of the takeover's first micro-batch, computed
while the standby waits, so that the bucket only hands it over.

A takeover's first micro-batch gives every bucket its slice of the ZooKeeper snapshot read after winning (the
failover reference) and a tick; the bucket's step then builds the context from the slice, runs Kafka's
``onControllerFailover`` and encodes the decisions and the new state: 3–4 s of CPU per 50k-partition bucket on
a 2-core machine, the largest part of a takeover (docs/decisions/2026-11-29-standby-decides-failover-ahead.md).
That outcome is a function of the slice's
text, the controller configs, and the bucket's admin bookkeeping (empty in the usual case: the step replaces
the context whole), nothing else — the tick handler reads no clock. A standby reads the tree ahead every 10
seconds (:class:`streaming.warm.failover_warm.ReadAhead`); after each read :class:`Decider` encodes the slices the
hand-off will write if nothing changes (the next controller epoch, its znode's next version) and, for each
slice whose text changed, computes the bucket's outcome with the bucket's own code
(:func:`streaming.query.stateful.decide_rows`) in the standby's driver.

The snapshot that counts is still the one read after winning, and Kafka's semantics do not move: the hand-off
(:func:`streaming.query.outcome.matching`, :func:`ship_decided`) ships an outcome beside a slice only when the slice it
wrote has the very text the outcome was computed from (a digest), under the configs the query runs with; a bucket
(:func:`streaming.query.outcome.take`) uses it only when its batch is exactly that reference and ticks and its stored
bookkeeping is empty. Anything else — a write between the last read ahead and the win, another epoch, a dynamic config
changed, the metrics endpoint on (its summary compares with the stored context), commands that waited behind the
failover barrier (their buckets) — runs the step as before. The outcome holds the same rows and state
bytes the step would give (unit tests).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import pandas as pd

from core import controller
from core.codec.events import event_to_json
from core.codec.snapshot import StateTexts, encode_failover_json
from core.events import Tick
from core.snapshot import ZkSnapshot
from streaming.query import failover, stateful
from streaming.query.outcome import Outcome, decided_name, text_digest
from streaming.query.routing import KIND_FAILOVER_REF, KIND_REJECTED, KIND_TICK, ROUTED_COLUMNS
from streaming.query.validation import FAILOVER_REF_TYPE
from streaming.runtime.checkpoint_fs import CheckpointStore, child
from streaming.runtime.spark_flags import spark_flag
from streaming.settings import Settings

log = logging.getLogger("livectl.app")

#: the Spark property that switches deciding ahead off (``false``); default ``true``
DECIDE_AHEAD_CONF = "spark.livectl.failover.decideAhead"


def decide_ahead_enabled(spark: Any) -> bool:
    """``spark.livectl.failover.decideAhead`` of the session: ``true`` (default) or ``false``, any case;
    anything else is refused."""
    return spark_flag(spark, DECIDE_AHEAD_CONF)


def standby_decider(
    settings: Settings,
    store: CheckpointStore,
    config_of: Callable[[], controller.ControllerConfig] | None = None,
) -> Decider | None:
    """A standby's :class:`Decider`, or ``None`` where its outcomes could not be used: the metrics endpoint
    on (each bucket's summary compares with its stored context), or a checkpoint that has not fixed its
    bucket count yet (its meta file, :data:`streaming.query.bucket_keys.CHECKPOINT_META`)."""
    from streaming.query.bucket_keys import checkpoint_meta

    if settings.metrics_port > 0:
        return None
    meta = checkpoint_meta(store)
    if meta is None:
        return None
    return Decider(
        controller_id=settings.controller_id,
        checkpoint_dir=store.root,
        num_buckets=int(meta["num_buckets"]),
        config=settings.controller_config(),
        config_of=config_of,
    )


def predicted(snapshot: ZkSnapshot) -> ZkSnapshot:
    """The snapshot a standby's read after winning gives if nothing else changes: its win wrote the next
    controller epoch, one version on (:mod:`streaming.driver.lease`)."""
    return replace(
        snapshot,
        controller_epoch=snapshot.controller_epoch + 1,
        controller_epoch_zk_version=snapshot.controller_epoch_zk_version + 1,
    )


def decide_bucket(
    bucket: int,
    text: str,
    folder: str,
    *,
    controller_id: int,
    controller_epoch: int,
    checkpoint_dir: str,
    config: controller.ControllerConfig,
) -> Outcome | None:
    """The outcome of ``bucket``'s failover batch (its reference to ``folder`` and a tick) when its slice is
    ``text``, computed by the bucket's own step on an empty stored state; ``None`` when the step left the
    failover out (it raised: the batch will run the step and report it)."""
    ref = {
        "version": 1,
        "type": FAILOVER_REF_TYPE,
        "controller_id": controller_id,
        "controller_epoch": controller_epoch,
        "path": folder,
    }
    rows = [
        (bucket, 0, "~failover", 0, 0, KIND_FAILOVER_REF, failover.ref_to_json(ref)),
        (bucket, 0, "~tick", 0, 0, KIND_TICK, event_to_json(Tick(0))),
    ]
    frame = pd.DataFrame(rows, columns=ROUTED_COLUMNS)
    state = _Slot()
    try:
        out = stateful.decide_rows(bucket, frame, state, checkpoint_dir, _OneSlice(folder, bucket, text), config=config)
    finally:
        # the step keeps the new state for the worker's next batch; in this driver nothing steps next
        stateful.forget_states(bucket)
    if state.value is None or bool((out["kind"] == KIND_REJECTED).any()):
        return None
    return Outcome(
        folder,
        bucket,
        controller_id,
        controller_epoch,
        text_digest(text),
        config,
        {str(c): list(out[c]) for c in out.columns},
        state.value,
    )


class _Slot:
    """A bucket state that does not exist yet, keeping what the step stores (``GroupState``'s part it uses)."""

    exists = False
    value: tuple[int, int, bytes] | None = None

    def update(self, value: tuple[int, int, bytes]) -> None:
        self.value = value


class _OneSlice:
    """One slice's text as the step's snapshot files."""

    def __init__(self, folder: str, bucket: int, text: str) -> None:
        self.key, self.text = (folder, bucket), text

    def exists(self, folder: str, bucket: int) -> bool:
        return (folder, bucket) == self.key

    def read(self, folder: str, bucket: int) -> str | None:
        return self.text if (folder, bucket) == self.key else None


class Decider:
    """A standby's outcomes, one per bucket, kept for the snapshot of its last read ahead
    (:meth:`update`, on the read-ahead thread); the hand-off takes them with :meth:`outcomes`. ``config``: the
    controller configs to decide with, or ``config_of`` to read them before each update (as the winner will:
    the static ones with ZooKeeper's dynamic ones, :mod:`streaming.zk.admin_watch`)."""

    def __init__(
        self,
        *,
        controller_id: int,
        checkpoint_dir: str,
        num_buckets: int,
        config: controller.ControllerConfig,
        config_of: Callable[[], controller.ControllerConfig] | None = None,
    ) -> None:
        self.controller_id = controller_id
        self.checkpoint_dir = checkpoint_dir
        self.num_buckets = num_buckets
        self.config = config
        self.config_of = config_of
        self._outcomes: dict[int, Outcome] = {}
        #: bucket -> what its last decision was for (folder, slice digest, configs), kept or not
        self._decided_for: dict[int, tuple[str, str, controller.ControllerConfig]] = {}
        self._lock = threading.Lock()

    def update(self, snapshot: ZkSnapshot, state_texts: StateTexts, stop: threading.Event) -> int:
        """Decide every bucket whose slice of the next epoch's snapshot (or the configs) changed since its
        last decision; returns how many were decided. Stops between buckets once ``stop`` is set (the
        standby won: its own step runs next)."""
        from streaming.runtime.collector import gc_paused

        if self.config_of is not None:
            self.config = self.config_of()
        nxt = predicted(snapshot)
        epoch = nxt.controller_epoch
        folder = child(failover.failover_root(self.checkpoint_dir), f"epoch-{epoch}")
        decided = 0
        for b, part in enumerate(failover.split_snapshot(nxt, self.num_buckets)):
            if stop.is_set():
                break
            text = encode_failover_json(self.controller_id, part, state_texts)
            key = (folder, text_digest(text), self.config)
            if self._decided_for.get(b) == key:
                continue
            with gc_paused():
                outcome = decide_bucket(
                    b,
                    text,
                    folder,
                    controller_id=self.controller_id,
                    controller_epoch=epoch,
                    checkpoint_dir=self.checkpoint_dir,
                    config=self.config,
                )
            with self._lock:
                if outcome is None:  # the step left the failover out: the winner's step reports it
                    self._outcomes.pop(b, None)
                else:
                    self._outcomes[b] = outcome
            self._decided_for[b] = key
            decided += 1
        return decided

    def outcomes(self) -> dict[int, Outcome]:
        with self._lock:
            return dict(self._outcomes)


def ship_decided(spark: Any, outcomes: Mapping[int, Outcome], folder: str) -> None:
    """Driver, in the hand-off before the reference is published: add the
    :func:`~streaming.query.outcome.matching` outcomes to the SparkContext (:func:`streaming.query.failover.ship_file`),
    as :func:`~streaming.query.outcome.shipped_outcome` finds them on the executors."""
    staging = failover.staging_folder(spark)
    for b, outcome in sorted(outcomes.items()):
        failover.ship_file(spark, os.path.join(staging, decided_name(folder, b)), outcome.to_bytes)
