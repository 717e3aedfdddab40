"""A standby's rehearsal of the query's plan (:func:`streaming.query.rehearse_frame`) on a real session: it
builds the frame the query would, and writes nothing to the checkpoint, which only the lease holder may."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from streaming.bucket_keys import CHECKPOINT_META
from streaming.query import controller_frame, prepare_source, rehearse_frame
from streaming.settings import Settings

pytestmark = pytest.mark.spark


def test_a_rehearsed_plan_leaves_the_checkpoint_alone(spark: Any, tmp_path: Path) -> None:
    checkpoint = tmp_path / "checkpoint"
    s = replace(Settings(), checkpoint_dir=checkpoint.as_uri(), num_buckets=2)
    prepared = prepare_source(spark, s)
    assert rehearse_frame(spark, s, prepared) > 0
    assert not checkpoint.exists()
    # the query's own build records a new checkpoint's key scheme: the write the rehearsal leaves to it
    frame = controller_frame(spark, s, prepared=prepared)
    assert frame.isStreaming
    assert (checkpoint / CHECKPOINT_META).exists()
