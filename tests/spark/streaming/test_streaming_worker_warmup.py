"""The warm-up job's Python workers are the ones the query's Python steps then get (shared SparkSession,
which runs livectl's worker daemon as shipped)."""

from __future__ import annotations

from typing import Any

import pytest

from streaming.warmup import WARMED_SCHEMA, warm_task, warm_workers

pytestmark = pytest.mark.spark


def test_a_mapinpandas_step_after_the_warmup_finds_its_workers_ready(spark: Any) -> None:
    warmed = warm_workers(spark)
    assert len(warmed.pids) == spark.sparkContext.defaultParallelism
    # a later Python step of the same session: its tasks run in the warmed workers, modules imported
    rows = spark.range(0, 2, numPartitions=2).mapInPandas(warm_task, WARMED_SCHEMA).collect()
    assert {int(r["pid"]) for r in rows} <= set(warmed.pids)
    assert all(bool(r["ready"]) for r in rows)


def test_a_worker_imports_the_installed_pyspark_and_has_none_of_its_archives_on_its_path(spark: Any) -> None:
    import pyspark

    def where_pyspark(batches: Any) -> Any:  # defined here: cloudpickle ships it by value
        import os
        import sys

        import pandas as pd
        import pyspark

        for _ in batches:
            pass
        archives = [p for p in sys.path if p and os.path.isfile(p)]
        yield pd.DataFrame({"pyspark": [pyspark.__file__], "archives": [";".join(archives)]})

    rows = spark.range(0, 2, numPartitions=2).mapInPandas(where_pyspark, "pyspark string, archives string").collect()
    # this venv's pip-installed pyspark, as the driver imports it: not its shipped pyspark.zip
    assert {r["pyspark"] for r in rows} == {pyspark.__file__}
    # its zips and spark-core's jar are gone, so a new worker's first task does not re-read their indexes
    assert {r["archives"] for r in rows} == {""}


def test_a_reused_worker_collects_after_each_task_with_the_survivors_frozen(spark: Any) -> None:
    kept = 100_000

    def collection(batches: Any) -> Any:  # defined here: cloudpickle ships it by value
        import gc
        import os
        import sys

        import pandas as pd

        for _ in batches:
            pass
        daemon_gc = sys.modules["pyspark.daemon"].gc
        # objects this worker still tracks outside the frozen ones: what tasks since the last freeze left
        unfrozen = len(gc.get_objects())
        # the next task finds these, as a bucket's next batch finds its cached state
        sys.modules["pyspark.daemon"].__dict__.setdefault("kept_by_the_test", []).append([[] for _ in range(kept)])
        yield pd.DataFrame({"pid": [os.getpid()], "kind": [type(daemon_gc).__name__], "unfrozen": [unfrozen]})

    schema = "pid long, kind string, unfrozen long"
    first = spark.range(0, 2, numPartitions=2).mapInPandas(collection, schema).collect()
    second = {r["pid"]: r for r in spark.range(0, 2, numPartitions=2).mapInPandas(collection, schema).collect()}
    assert {r["kind"] for r in first} == {"TaskEndCollector"}
    reused = [second[r["pid"]] for r in first if r["pid"] in second]
    assert reused, "Spark reused no worker between two jobs"
    # the objects the first task kept were frozen by the collection after it: the next walks none of them
    assert all(r["unfrozen"] < kept for r in reused), reused
