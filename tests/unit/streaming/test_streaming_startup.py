"""The controller's start-up: where the source starts on a used checkpoint (the failover barrier)."""

from __future__ import annotations

from pathlib import Path

import pytest
from shell_pipeline import BUCKETS, snapshot_of

from streaming.query import failover
from streaming.runtime.checkpoint_fs import MemoryCheckpointStore
from streaming.settings import Settings

pytestmark = pytest.mark.unit


def test_a_used_checkpoint_starts_behind_the_failover_barrier(tmp_path: Path) -> None:
    from streaming.driver.startup import source_start
    from streaming.query.pipeline import SourceStart

    store = MemoryCheckpointStore(f"memory:{tmp_path}/cp")
    settings = Settings.from_mapping({"checkpoint_dir": store.root})
    # a new checkpoint: no barrier (its buckets hold nothing); earliest is the setting's
    assert source_start(settings, store, 3) == SourceStart()
    # a checkpoint with a planned micro-batch (committed or not): hold back until epoch 3's reference
    store.write_text(f"{store.root}/offsets/0", "v1")
    got = source_start(settings, store, 3)
    assert got == SourceStart(barrier_epoch=3, barrier_path=f"{store.root}/failover")
    ref = failover.write_snapshot(store, 1000, snapshot_of((1,), epoch=3), BUCKETS)
    assert got.barrier_path is not None and ref["path"].startswith(got.barrier_path + "/")
