"""Network partitions (issue 41): a link cut while both ends keep running, on test hosts of their own.

Real processes on network namespaces (:mod:`bench.harness.netns`): a ZooKeeper ensemble of three (a host per
server), Kafka, five simulated brokers and ``livectl run`` controllers on one checkpoint. ``bench/partitions/``
holds the faults and their checks and runs every one; here CI's selection, in order on one cluster: the
active controller cut off from ZooKeeper at each of issue 41's three points — idle, a micro-batch planned before
its ZooKeeper writes, and after its first partition state is written (its standby takes over and finishes what was
in flight, it stops as fenced) —, a leading broker cut off from ZooKeeper (new leaders, it rejoins), the active
controller cut off from Kafka while input waits (it keeps its lease; the input is applied once when the link
returns) and as a micro-batch is planned (its writes fail for ``sink_retry_timeout_ms``, it exits, the standby
replays the batch), and the ensemble's leader SIGKILLed as a reassignment's RS is written (the controller keeps
its lease, its session moves, the reassignment finishes). Each must leave every invariant of ``bench/partitions/``
holding. The other faults run in ``python -m bench partitions`` (CI's 30 minutes).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import partitions

pytestmark = pytest.mark.e2e


def test_partitions_leave_every_invariant_holding(tmp_path: Path) -> None:
    # each fault's line is printed as it ends (pytest shows them when the test fails)
    rows = partitions.run(list(partitions.CI_FAULTS), tmp_path)
    assert [r.fault for r in rows] == list(partitions.CI_FAULTS)
    for r in rows:
        assert r.problems == [], f"{r.fault} ({r.outcome}): {r.problems}"
