"""The source's read planning kept warm (streaming.read_planning) on the shared SparkSession: it runs in
Spark's own planner processes, which Spark then keeps in its pool and hands to the next planning."""

from __future__ import annotations

import os
from typing import Any

import pytest

from livectl.demo.processes import cmdline, descendants
from streaming.python_launcher import installed_pyspark_home
from streaming.query import load_source, register_source
from streaming.read_planning import ReadPlanning
from streaming.source_options import SOURCE_NAME

pytestmark = pytest.mark.spark

#: a port nothing listens on: planning a read must not connect to Kafka
OPTIONS = {"bootstrap_servers": "127.0.0.1:9", "topics": "planned.a,planned.b", "starting_offsets": "earliest"}


def _planners() -> set[int]:
    """This test session's read-planning processes (pyspark's daemon for them and the workers it forked)."""
    return {p for p in descendants(os.getpid()) if "pyspark.sql.worker.plan_data_source_read" in cmdline(p)}


def test_a_planning_leaves_a_planner_process_in_the_pool_that_the_next_one_reuses(spark: Any) -> None:
    register_source(spark)
    planning = ReadPlanning(spark, SOURCE_NAME, OPTIONS, load_source(spark, OPTIONS))
    assert planning.plan()
    after_first = _planners()
    # the daemon and at least one worker forked from it, alive after the planning ended
    assert len(after_first) >= 2
    assert planning.plan()
    # the second planning forked nothing: Spark handed it the pooled worker
    assert _planners() == after_first
    assert len(planning.seconds) == 2
    planning.stop()
    assert not planning.plan()


def test_a_source_spark_does_not_know_is_not_planned_and_nothing_is_kept(spark: Any) -> None:
    register_source(spark)
    planning = ReadPlanning(spark, "livectl-no-such-source", OPTIONS, load_source(spark, OPTIONS), interval=0.01)
    assert not planning.plan()
    planning.start().thread.join(10)
    assert not planning.thread.is_alive() and planning.seconds == []


def _pythonpath(pid: int) -> list[str]:
    """The ``PYTHONPATH`` process ``pid`` was started with (``/proc/<pid>/environ``)."""
    with open(f"/proc/{pid}/environ", "rb") as f:
        env = dict(item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item)
    return [e for e in env.get(b"PYTHONPATH", b"").decode().split(os.pathsep) if e]


def test_spark_s_planner_processes_run_without_the_installed_pyspark_s_archives(spark: Any) -> None:
    """The session runs Spark's Python processes as ``livectl run`` does with a local master
    (``tests/conftest.py``: :mod:`streaming.python_launcher`): Spark's own planner processes, not livectl's
    code, are started without the installed pyspark's zips and jar on their path, and so import its
    compiled modules; every other entry Spark gave them stays."""
    home = installed_pyspark_home()
    assert home is not None  # this venv's pyspark is pip-installed, with Spark's archives inside it
    register_source(spark)
    planning = ReadPlanning(spark, SOURCE_NAME, OPTIONS, load_source(spark, OPTIONS))
    assert planning.plan()
    planners = _planners()
    assert planners
    for pid in planners:
        path = _pythonpath(pid)
        inside = [e for e in path if os.path.realpath(e).startswith(os.path.join(os.path.realpath(home), ""))]
        assert not [e for e in inside if e.endswith((".zip", ".jar"))], (pid, path)
    planning.stop()
