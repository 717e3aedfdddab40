"""The crash matrix's CI selection: real ``livectl run`` processes SIGKILLed from ZooKeeper watches.

:mod:`bench.harness` holds the harness and ``python -m bench crash_matrix`` runs the full matrix (every point,
restart and standby modes);
here the points with the most distinct recovery paths run on the session's ZooKeeper and broker, with
five simulated broker processes: a creation cut between its ZooKeeper transactions (restart: the replay
of a half-written micro-batch), a reassignment cut after target+origin was written (standby: resumed
from the topic znode by a controller that was already waiting), a deletion cut after its marker
(restart: resumed from the marker), a broker failure cut at its first state write (standby: ISR
writes that meet a new controller), and a broker SIGKILLed while no controller runs (restart on the
checkpoint: the issue's brokers at leader epoch 1 while ZooKeeper held 0; after the point the broker
comes back and must rejoin every ISR with every view in agreement). Each must converge to the tree a
clean run leaves, with each broker's own view in agreement with ZooKeeper and the admin command answered
once.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import harness as cm
from livectl import local

pytestmark = pytest.mark.e2e


def test_crash_points_converge(zookeeper: local.Service, kafka_broker: local.Service, tmp_path: Path) -> None:
    # each point's line is printed as it ends (pytest shows them when the test fails)
    rows = cm.run_matrix(zookeeper.connect, kafka_broker.bootstrap, tmp_path / "matrix", cm.CI_POINTS)
    assert [(r.point, r.mode) for r in rows] == list(cm.CI_POINTS)
    for r in rows:
        assert r.seen != "not reached", f"{r.point} ({r.mode}): the watch never saw the point"
        assert r.converged, f"{r.point} ({r.mode}) did not converge: {r.problems}"
