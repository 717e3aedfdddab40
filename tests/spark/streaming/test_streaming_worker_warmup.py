"""The warm-up job's Python workers are the ones the query's Python steps then get (shared SparkSession,
which runs livectl's worker daemon as shipped)."""

from __future__ import annotations

from typing import Any

import pytest

from streaming.warm.warmup import WARMED_SCHEMA, warm_task, warm_workers

pytestmark = pytest.mark.spark


def test_a_mapinpandas_step_after_the_warmup_finds_its_workers_ready(spark: Any) -> None:
    warmed = warm_workers(spark)
    assert len(warmed.pids) == spark.sparkContext.defaultParallelism
    # a later Python step of the same session: its tasks run in the warmed workers, modules imported
    rows = spark.range(0, 2, numPartitions=2).mapInPandas(warm_task, WARMED_SCHEMA).collect()
    assert {int(r["pid"]) for r in rows} <= set(warmed.pids)
    assert all(bool(r["ready"]) for r in rows)
