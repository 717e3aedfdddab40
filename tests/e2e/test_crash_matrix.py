"""The crash matrix's CI selection: real ``livectl run`` processes SIGKILLed from ZooKeeper watches.

:mod:`bench.harness` holds the harness and ``python -m bench crash_matrix`` runs the full matrix (every point,
restart and standby modes);
here the points with the most distinct recovery paths run on the session's ZooKeeper and broker, with
five simulated broker processes: a broker failure cut at its first state write (standby: ISR
writes that meet a new controller), and a broker SIGKILLed while no controller runs (restart on the
checkpoint: the issue's brokers at leader epoch 1 while ZooKeeper held 0; after the point the broker
comes back and must rejoin every ISR with every view in agreement). Each must converge to the tree a
clean run leaves, with each broker's own view in agreement with ZooKeeper and the admin command answered
once. The creation (the replay of a micro-batch cut between its ZooKeeper transactions), reassignment and deletion
resumptions run in ``python -m bench crash_matrix`` (CI's 30 minutes).
"""

from __future__ import annotations

from typing import Any

import pytest

from bench import harness as cm
from livectl import local

pytestmark = pytest.mark.e2e


#: issue 41's first defect, on the same cluster after the points above (see the second test)
SHUTDOWN_POINTS = (("shutdown:batch-planned", "restart"), ("shutdown:first-leader-moved", "standby"))


@pytest.fixture(scope="module")
def rows(zookeeper: local.Service, kafka_broker: local.Service, tmp_path_factory: pytest.TempPathFactory) -> list[Any]:
    """Every point of both tests, in order on one cluster (a cluster and its first controller cost ~30 s)."""
    # each point's line is printed as it ends (pytest shows them when a test fails)
    plan = [*cm.CI_POINTS, *SHUTDOWN_POINTS]
    done = cm.run_matrix(zookeeper.connect, kafka_broker.bootstrap, tmp_path_factory.mktemp("matrix"), plan)
    assert [(r.point, r.mode) for r in done] == plan
    return done


def test_crash_points_converge(rows: list[Any]) -> None:
    for r in rows[: len(cm.CI_POINTS)]:
        assert r.seen != "not reached", f"{r.point} ({r.mode}): the watch never saw the point"
        assert r.converged, f"{r.point} ({r.mode}) did not converge: {r.problems}"


def test_a_broker_shut_down_during_a_takeover_rejoins(rows: list[Any]) -> None:
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
    # a broker that never rejoins fails the point's after(), which raises MatrixError naming the wait
    shutdown = rows[len(cm.CI_POINTS) :]
    assert [(r.point, r.mode) for r in shutdown] == list(SHUTDOWN_POINTS)
    for r in shutdown:
        assert r.seen != "not reached", f"{r.point} ({r.mode}): the kill point was never seen"
        assert "killed" in r.seen, r.seen
        assert r.converged, f"{r.point} ({r.mode}) did not converge: {r.problems}"
