"""The benchmarks' Spark scratch (:func:`bench.harness.spark_scratch`: one folder per process, handed to
every JVM through the environment) and their work folders (``work_dir``) are removed when the process ends:
no ``/tmp/spark-*`` or checkpoints left behind."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import os, sys
    from bench.harness import spark_scratch, work_dir

    scratch = spark_scratch()
    assert spark_scratch() == scratch, "one folder per process"
    assert scratch.is_dir() and scratch.name.startswith("livectl-bench-spark-")
    assert os.environ["SPARK_LOCAL_DIRS"] == str(scratch)
    assert f"-Djava.io.tmpdir={scratch}" in os.environ["SPARK_SUBMIT_OPTS"].split()
    assert "-Dkept=1" in os.environ["SPARK_SUBMIT_OPTS"].split()
    (scratch / "blockmgr-1").mkdir()
    (scratch / "blockmgr-1" / "shuffle_0.data").write_bytes(b"x")
    work = work_dir("livectl-bench-test-")
    (work / "checkpoint").mkdir()
    print(scratch, flush=True)
    print(work, flush=True)
    """
)


def test_the_scratch_folder_goes_when_the_benchmark_ends() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**_env(), "SPARK_SUBMIT_OPTS": "-Dkept=1"},
    )
    assert done.returncode == 0, done.stderr
    scratch, work = (Path(line) for line in done.stdout.split())
    assert scratch.name.startswith("livectl-bench-spark-")
    assert not scratch.exists()
    # the benchmark's own folder (checkpoints, its processes' logs) goes too
    assert work.name.startswith("livectl-bench-test-")
    assert not work.exists()


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k not in ("SPARK_LOCAL_DIRS", "SPARK_SUBMIT_OPTS")}
