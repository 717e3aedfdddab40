"""A broker shut down cleanly while the controller was replaced comes back (issue 41's first defect).

Real processes, the crash matrix's harness, :mod:`bench.harness`: the session's ZooKeeper and broker, five simulated
broker processes and ``livectl run`` processes on one checkpoint. Broker 2, which leads both partitions of the
point's topic, is given SIGTERM (a controlled shutdown), and the active controller is SIGKILLed at the two
points the issue names: when the micro-batch holding the ControlledShutdown is planned in the checkpoint and
not committed (``shutdown:batch-planned``, a new controller started on the checkpoint), and right after the
first of broker 2's partitions gets a new leader (``shutdown:first-leader-moved``, a waiting standby takes
over). The shutdown completes under the new controller; then broker 2 is restarted and registers again, and
must be back in every ISR with every replica's own view at ZooKeeper's leader and leader epoch (the point's
``after``). Before the fix it stayed stopped on every partition whenever its failure and its new registration
met in one micro-batch of the new controller: the failure's StopReplica reached the restarted broker after
its startup's LeaderAndIsr. Whether they meet is a matter of timing (the new controller's first batches are
slow; its liveness bridge starts after its failover): each point reproduced it in some runs against the
unfixed code and not in others. ``tests/unit/contracts/test_requests_to_simbrokers.py`` and the core's unit
test reproduce that step every time.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import harness as cm
from livectl import local

pytestmark = pytest.mark.e2e

PLAN = (("shutdown:batch-planned", "restart"), ("shutdown:first-leader-moved", "standby"))


def test_a_broker_shut_down_during_a_takeover_rejoins(
    zookeeper: local.Service, kafka_broker: local.Service, tmp_path: Path
) -> None:
    # a broker that never rejoins fails the point's after(), which raises MatrixError naming the wait
    rows = cm.run_matrix(zookeeper.connect, kafka_broker.bootstrap, tmp_path / "matrix", PLAN)
    assert [(r.point, r.mode) for r in rows] == list(PLAN)
    for r in rows:
        assert r.seen != "not reached", f"{r.point} ({r.mode}): the kill point was never seen"
        assert "killed" in r.seen, r.seen
        assert r.converged, f"{r.point} ({r.mode}) did not converge: {r.problems}"
