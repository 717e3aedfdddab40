"""Shared fixtures: real services on free loopback ports, and one SparkSession per test session.

``zookeeper`` and ``kafka_broker`` start the real services through :mod:`livectl.local` the first time a
test asks for them, on ports chosen at run time, and stop them by PID when the session ends. Each is
started at most once per test session.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from livectl import local
from streaming.resources import SPARK_JAR, conf_path


@pytest.fixture(scope="session")
def services_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="livectl-test-"))
    yield path
    if not os.environ.get("LIVECTL_KEEP_TEST_DIRS"):
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def zookeeper(services_dir: Path) -> Iterator[local.Service]:
    """A real ZooKeeper (Debian's package); ``.connect`` is ``127.0.0.1:PORT``."""
    svc = local.start_zookeeper(services_dir / "zookeeper", local.free_port())
    try:
        yield svc
    finally:
        local.stop_process(svc.pid, svc.marker)


@pytest.fixture(scope="session")
def kafka_broker(services_dir: Path) -> Iterator[local.Service]:
    """The real tansu Kafka-protocol broker; ``.bootstrap`` is ``127.0.0.1:PORT``."""
    svc = local.start_broker(services_dir / "broker", local.free_port())
    try:
        yield svc
    finally:
        local.stop_process(svc.pid, svc.marker)


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One local SparkSession for the whole test session (start-up costs ~25 s here)."""
    from pyspark.sql import SparkSession

    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    # Python workers must run this venv's interpreter (the one that has pyspark, pandas, livectl)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2]")
        .appName("livectl-tests")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config(
            "spark.sql.streaming.stateStore.providerClass",
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
        )
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.driver.memory", "2g")
        # as livectl run: the Spark UI's per-batch figures job (streaming.spark_ui)
        .config("spark.jars", str(conf_path(SPARK_JAR)))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("WARN")
    try:
        yield session
    finally:
        session.stop()
