"""The benchmarks' SparkSession (``local[2]``, the shipped ``spark-defaults.conf``), their scratch and work
folders (removed when the process ends), and the options the end-to-end scripts share."""

from __future__ import annotations

import functools
import os
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from streaming.resources import SPARK_DEFAULTS, SPARK_JAR, conf_file, conf_path


def add_scale_options(ap: Any) -> None:
    """``--conf`` (Spark settings over the shipped ones) and ``--zk-heap``, for runs past 100k partitions."""
    ap.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting over the shipped spark-defaults.conf, e.g. spark.driver.memory=6g (repeatable)",
    )
    ap.add_argument("--zk-heap", default="512m", help="ZooKeeper's maximum heap (-Xmx); 1M partitions: 4g")


def add_source_option(ap: Any) -> None:
    """``--source``: the query's source (``query_source``: docs/spark-kafka-source.md), for side-by-side runs."""
    ap.add_argument(
        "--source",
        choices=("auto", "kafka", "python"),
        default="auto",
        help="the query's source: Spark's format(kafka) or livectl's Python source (auto: kafka when its jar is there)",
    )


def parse_confs(items: Sequence[str]) -> dict[str, str]:
    """``--conf key=value`` texts (as given to a bench script) as a mapping; a text without ``=`` is an error."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"--conf {item!r}: must look like key=value")
        out[key.strip()] = value.strip()
    return out


#: the benchmarks' Spark master, and the bucket count livectl gives a new checkpoint on it (one per core)
MASTER = "local[2]"


def shipped_buckets() -> int:
    """What ``num_buckets`` = 0 (the shipped default) makes of a new checkpoint on :data:`MASTER`."""
    from streaming.driver.startup import executor_cores

    return executor_cores({"spark.master": MASTER}, default_parallelism=2)[0]


@functools.cache
def spark_scratch() -> Path:
    """This process's folder for Spark's scratch (``SPARK_LOCAL_DIRS``: block manager, added files, shuffle
    spills; ``java.io.tmpdir``: RocksDB's and lz4's native libraries; the SQL warehouse), made on first use
    and removed when the process exits, as ``tests/conftest.py`` does for the tests: left in ``/tmp``, every
    benchmark run left its ``spark-*`` folders behind. The JVMs the benchmark starts later (its session, an
    active controller's process) inherit it through the environment."""
    import atexit
    import shutil

    scratch = Path(tempfile.mkdtemp(prefix="livectl-bench-spark-"))
    os.environ["SPARK_LOCAL_DIRS"] = str(scratch)
    os.environ["SPARK_SUBMIT_OPTS"] = " ".join(
        filter(None, (os.environ.get("SPARK_SUBMIT_OPTS"), f"-Djava.io.tmpdir={scratch}"))
    )
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    return scratch


def work_dir(prefix: str) -> Path:
    """A benchmark's own folder (checkpoints, logs of the processes it starts), removed when the process
    exits unless ``LIVECTL_KEEP_BENCH_DIRS`` is set (to read those logs after a failure)."""
    import atexit
    import shutil

    work = Path(tempfile.mkdtemp(prefix=prefix))
    if not os.environ.get("LIVECTL_KEEP_BENCH_DIRS"):
        atexit.register(shutil.rmtree, work, ignore_errors=True)
    return work


def bench_python() -> str:
    """The interpreter Spark's Python processes run, as ``livectl run`` chooses it
    (:func:`streaming.driver.entry.worker_python`): this one."""
    from streaming.driver.entry import worker_python

    return worker_python({}, {}) or sys.executable


def spark_session(num_buckets: int, conf: Mapping[str, str] | None = None, source: str = "auto") -> tuple[Any, float]:
    """A local[2] SparkSession configured like the shipped ``spark-defaults.conf``, then ``conf`` (a bench
    script's ``--conf key=value`` options; they win over the file); returns (session, start-up s). Its
    scratch goes to :func:`spark_scratch`. As ``livectl run``, Spark's Kafka connector is on ``spark.jars``
    when ``scripts/setup`` resolved it, unless ``source`` (``query_source``) is ``python``."""
    from pyspark.sql import SparkSession

    from streaming.source.query_source import connector_jars

    python = bench_python()
    os.environ["PYSPARK_PYTHON"] = python
    scratch = spark_scratch()
    started = time.monotonic()
    builder = SparkSession.builder.master(MASTER).appName("livectl-bench")
    for raw in conf_file(SPARK_DEFAULTS).read_text().splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition(" ")
            if key != "spark.app.name":
                builder = builder.config(key, value.strip())
    builder = (
        builder.config("spark.sql.shuffle.partitions", str(num_buckets))
        .config("spark.pyspark.python", python)
        # as livectl run: the Spark UI's figures job, and Spark's Kafka connector
        .config(
            "spark.jars", ",".join([str(conf_path(SPARK_JAR)), *(connector_jars("") if source != "python" else [])])
        )
        .config("spark.ui.enabled", "false")
        # profiling: LIVECTL_BENCH_EVENT_LOG=<dir> keeps Spark's event log (every task's metrics: run time,
        # deserialisation, JVM GC, result size) for ``python -m bench cpu_threads report``
        .config("spark.eventLog.enabled", "true" if os.environ.get("LIVECTL_BENCH_EVENT_LOG") else "false")
        .config("spark.eventLog.dir", os.environ.get("LIVECTL_BENCH_EVENT_LOG", tempfile.gettempdir()))
        .config("spark.eventLog.compress", "false")
        .config("spark.eventLog.rolling.enabled", "false")
        .config("spark.sql.warehouse.dir", str(scratch / "warehouse"))
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session, time.monotonic() - started
