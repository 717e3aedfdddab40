"""Degraded links (issue 41): ``python -m bench partitions``' ``zk-degraded`` and ``kafka-degraded`` faults, run
as a test.

Real processes on network namespaces (:mod:`bench.harness.netns`, so it runs as root): a ZooKeeper ensemble of
three, Kafka, five simulated brokers and two ``livectl run`` controllers (the active one and a standby). The
active controller's link to the ensemble, then to Kafka, goes through ``tc``'s token bucket filter (a low rate,
a queue of two packets, tail drops; both ways; no ``netem`` on these machines) while a 150-partition creation,
an invalid command and a leading broker's SIGKILL arrive, then is healed. Each row must leave every invariant
of ``bench/partitions/`` holding, whichever way the controller went (carried on slower, or fenced with one
line and the standby took over), and the ``tbf`` must have dropped packets (the link was lossy, not only slow).

**Run by hand, not in CI** (``.ci/run`` lists it among the by-hand files): CI's 30 minutes are full and each
fault takes minutes. ``scripts/test tests/e2e/test_partitions_degraded.py``; the measured figures are in
docs/reliability.md.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench import partitions

pytestmark = pytest.mark.e2e

FAULTS = ["zk-degraded", "kafka-degraded"]


def test_degraded_links_leave_every_invariant_holding(tmp_path: Path) -> None:
    # each fault's line is printed as it ends (pytest shows them when the test fails)
    rows = partitions.run(FAULTS, tmp_path)
    assert [r.fault for r in rows] == FAULTS
    for r in rows:
        assert r.problems == [], f"{r.fault} ({r.outcome}): {r.problems}"
        drops = [int(n) for n in re.findall(r"(\d+) dropped", r.outcome)]
        assert drops and sum(drops) > 0, f"{r.fault}: the link dropped nothing ({r.outcome})"
