"""ZooKeeper restarted under a running controller: it recovers, and no command is lost or applied twice.

Real processes: a ZooKeeper of this test's own (so that it can be restarted on the same port and data
folder), the session's broker, five simulated brokers and one ``livectl run`` (the harness of
``bench/crash_matrix.py``). A command is sent while ZooKeeper is down: the micro-batch's ZooKeeper writes
fail, are retried (``sink_retry_timeout_ms``) and land once ZooKeeper is back; the controller keeps its
session, its lease and its epoch; every command is answered exactly once.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest
from waiting import wait_until

from livectl import local

pytestmark = pytest.mark.e2e

BENCH = Path(__file__).resolve().parents[2] / "bench"
#: streaming.dispatch's line for a sink write tried again while its service is unavailable
RETRY = re.compile(r"batch \d+, .+ \(attempt \d+\): .+; trying again")


def _crash_matrix() -> Any:
    sys.path.insert(0, str(BENCH))
    try:
        import crash_matrix
    finally:
        sys.path.remove(str(BENCH))
    return crash_matrix


def test_zookeeper_restarted_under_the_controller(kafka_broker: local.Service, tmp_path: Path) -> None:
    cm = _crash_matrix()
    port = local.free_port()
    zk_dir = tmp_path / "zookeeper"
    svc = local.start_zookeeper(zk_dir, port)
    # a session long enough to outlive a restart of ZooKeeper's JVM on a loaded machine
    m = cm.Matrix(svc.connect, kafka_broker.bootstrap, tmp_path / "cluster", session_timeout_ms=20000)
    try:
        m.open()
        assert m.zk is not None
        a = m.start_controller()
        m.wait_loaded(a)
        before = {0: (1, 2, 3), 1: (2, 3, 4)}
        during = {0: (3, 4, 5), 1: (4, 5, 1)}
        cm._create(m, "zk-before", f"{m.name}-before", before)
        cm.wait_until("the first topic answered", lambda: m.results("zk-before"), 180)
        epoch = m.zk.get("/controller_epoch")[0]

        local.stop_process(svc.pid, svc.marker)
        logged = len(a.text())
        cm._create(m, "zk-during", f"{m.name}-during", during)
        # the controller reads the command and meets an unreachable ZooKeeper: its retry says so in its log
        wait_until(
            "the controller retrying a micro-batch against the stopped ZooKeeper",
            lambda: RETRY.search(a.text()[logged:]),
            120,
            interval=0.5,
            detail=lambda: a.text()[-3000:],
        )
        svc = local.start_zookeeper(zk_dir, port)

        cm.wait_until("the command sent while ZooKeeper was down answered", lambda: m.results("zk-during"), 240)
        expect = cm.Expect({f"{m.name}-before": before, f"{m.name}-during": during})
        cm.wait_until("both topics online in ZooKeeper and in the brokers' views", lambda: not m.problems(expect), 120)
        assert a.alive(), a.text()[-3000:]
        assert m.zk.get("/controller_epoch")[0] == epoch, "no failover was needed"
        for rid in ("zk-before", "zk-during"):
            final = [r["status"] for r in m.results(rid) if r["status"] != "in_progress"]
            assert final == ["ok"], (rid, final)
    finally:
        m.close()
        local.stop_process(svc.pid, svc.marker)
