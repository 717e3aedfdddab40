"""A standby's rehearsal of the query's plan (:func:`streaming.query.pipeline.rehearse_frame`) on a real session: it
builds the frame the query would and plans it, compiling the code Spark generates for it, and writes nothing
to the checkpoint, which only the lease holder may."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from streaming.query.bucket_keys import CHECKPOINT_META
from streaming.query.pipeline import controller_frame, prepare_source, rehearse_frame
from streaming.runtime.plan_text import explain_text
from streaming.settings import Settings

pytestmark = pytest.mark.spark


def test_a_rehearsed_plan_leaves_the_checkpoint_alone(spark: Any, tmp_path: Path) -> None:
    checkpoint = tmp_path / "checkpoint"
    s = replace(Settings(), checkpoint_dir=checkpoint.as_uri(), num_buckets=2)
    prepared = prepare_source(spark, s)
    built_s, planned_s, subtrees = rehearse_frame(spark, s, prepared)
    # the plan's generated code, compiled (or found compiled: the session's earlier tests may have run the plan)
    assert built_s > 0 and planned_s > 0 and subtrees > 0
    assert not checkpoint.exists()
    # the query's own build records a new checkpoint's key scheme: the write the rehearsal leaves to it
    frame = controller_frame(spark, s, prepared=prepared)
    assert frame.isStreaming
    assert (checkpoint / CHECKPOINT_META).exists()
    # the query's own frame generates the same code: planned, it compiles nothing the rehearsal did not
    compiled = _classes_compiled(spark)
    explain_text(frame, "codegen")
    assert _classes_compiled(spark) == compiled


def _classes_compiled(spark: Any) -> int:
    """How many generated classes this JVM has compiled (Spark's codegen metrics: a class found in its cache of
    generated code is not compiled again)."""
    return int(spark._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME().getCount())
