"""The controller app: where the source starts on a used checkpoint (the failover barrier), and the one line
it reports for a query that failed."""

from __future__ import annotations

from pathlib import Path

import pytest
from shell_pipeline import BUCKETS, snapshot_of

from streaming import failover
from streaming.checkpoint_fs import MemoryCheckpointStore
from streaming.settings import Settings

pytestmark = pytest.mark.unit


def test_a_used_checkpoint_starts_behind_the_failover_barrier(tmp_path: Path) -> None:
    from streaming.query import SourceStart
    from streaming.startup import source_start

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


def test_a_source_error_inside_sparks_traceback_is_reported_by_its_own_line() -> None:
    from streaming.shutdown import query_failure_reason

    text = (
        "[STREAM_FAILED] Query [id = 1] terminated with exception: ... Traceback (most recent call last):\n"
        '  File "kafka_source.py", line 250, in read\n'
        "streaming.kafka_source.KafkaSourceError: livectl-kafka fail_on_data_loss: data loss on livectl.admin-0: "
        "the checkpoint reads from offset 57 but the log now ends at offset 3\n\tat org.apache.spark..."
    )
    assert query_failure_reason(text) == (
        "livectl-kafka fail_on_data_loss: data loss on livectl.admin-0: "
        "the checkpoint reads from offset 57 but the log now ends at offset 3"
    )
    assert query_failure_reason("something else") == "something else"
