"""A Spark worker cut off from the driver mid-batch (issue 41, item 5): ``python -m bench partitions``'
``worker-cut`` fault, run as a test.

Real processes on network namespaces (:mod:`bench.harness.netns`, so it runs as root): a ZooKeeper ensemble of
three, Kafka, five simulated brokers, and the controller under ``spark-submit`` on a Spark standalone cluster
(:mod:`bench.harness.sparkcluster`: a master and two workers, each worker on a host of its own, the driver on
another) running the packed environment, which the test builds with ``livectl package-env`` unless
``LIVECTL_TEST_ENV_ARCHIVE`` names one. The worker that runs a task of a micro-batch's stateful stage is cut off
from the driver, whichever it is; the row must show the executor declared lost, the task run again on the other
worker, the batch committed with its outputs once, the controller's lease kept, and every invariant of
``bench/partitions/`` holding (:mod:`bench.partitions.worker_cut`).

**Run by hand, not in CI** (``.ci/run`` lists it among the by-hand files): CI's 30 minutes are full, and this
test takes several minutes (the environment's build, the cluster's start). ``scripts/test
tests/e2e/test_partitions_worker_cut.py``; the measured figures are in docs/reliability.md.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench import partitions

pytestmark = pytest.mark.e2e


def test_worker_cut_off_from_the_driver_mid_batch(tmp_path: Path) -> None:
    prebuilt = os.environ.get("LIVECTL_TEST_ENV_ARCHIVE")
    archive = Path(prebuilt).resolve() if prebuilt else None
    # the fault's line is printed as it ends (pytest shows it when the test fails)
    (row,) = partitions.run(["worker-cut"], tmp_path, env_archive=archive)
    assert row.fault == "worker-cut"
    assert row.problems == [], f"{row.outcome}: {row.problems}"
    assert "executor lost" in row.outcome and "re-ran on spark-worker-" in row.outcome, row.outcome
    assert 0 < row.seconds < 300, row
