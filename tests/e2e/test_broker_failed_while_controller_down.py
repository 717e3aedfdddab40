"""A broker hard-killed while no controller runs, then the controller restarted on its checkpoint.

Real processes: ZooKeeper and the broker of the session, five simulated broker processes, ``livectl run``
processes on one checkpoint (the harness of ``bench/crash_matrix.py``). Broker 2 leads both partitions of
a topic; the controller is SIGKILLed (its whole process group), then broker 2 is SIGKILLed and its
session ends while no controller runs (the surviving leaders shrink their ISRs meanwhile: their
AlterPartition requests wait on the events topic). The controller restarted on the same checkpoint must
leave ZooKeeper and every broker's own view in agreement — leader, leader epoch, ISR — and once broker 2
is back, it must rejoin every ISR, with the brokers and ZooKeeper still agreeing (the issue's finding:
brokers at leader epoch 1 while ZooKeeper held 0, and the restarted broker never back in the ISRs).
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from livectl import local

pytestmark = pytest.mark.e2e

BENCH = Path(__file__).resolve().parents[2] / "bench"
ASSIGNMENT = {0: (2, 3, 4), 1: (2, 4, 5)}
VICTIM = 2


def _crash_matrix() -> Any:
    sys.path.insert(0, str(BENCH))
    try:
        import crash_matrix
    finally:
        sys.path.remove(str(BENCH))
    return crash_matrix


def _disagreements(m: Any, topic: str, live: set[int]) -> list[str]:
    """Where ZooKeeper and the brokers' own views differ for ``topic`` (empty: they agree), and any live
    replica missing from an ISR."""
    out: list[str] = []
    views = m.views()
    for p, replicas in ASSIGNMENT.items():
        state, _ = m.znode(f"/brokers/topics/{topic}/partitions/{p}/state")
        if state is None:
            out.append(f"{topic}-{p}: no state")
            continue
        want_isr = {r for r in replicas if r in live}
        if set(state["isr"]) != want_isr:
            out.append(f"{topic}-{p}: ZooKeeper ISR {state['isr']}, want {sorted(want_isr)}")
        if state["leader"] not in want_isr:
            out.append(f"{topic}-{p}: ZooKeeper leader {state['leader']} not live")
        for b in sorted(want_isr):
            v = views.get(b, {}).get("partitions", {}).get(f"{topic}-{p}")
            if v is None:
                out.append(f"broker {b} does not host {topic}-{p}")
                continue
            if (v["leader"], v["leader_epoch"]) != (state["leader"], state["leader_epoch"]):
                out.append(
                    f"broker {b} sees {topic}-{p} led by {v['leader']} at leader epoch {v['leader_epoch']}, "
                    f"ZooKeeper {state['leader']} at {state['leader_epoch']}"
                )
            if b == state["leader"] and set(v["isr"]) != set(state["isr"]):
                out.append(f"leader {b} of {topic}-{p} has ISR {v['isr']}, ZooKeeper {state['isr']}")
    return out


def _agree(cm: Any, m: Any, what: str, topic: str, live: set[int], *, timeout: float) -> None:
    last: list[str] = []

    def check() -> bool:
        last[:] = _disagreements(m, topic, live)
        return not last

    try:
        cm.wait_until(what, check, timeout, interval=1.0)
    except cm.MatrixError:
        raise AssertionError(f"{what}: still {last}") from None


def test_broker_killed_while_the_controller_is_down(
    zookeeper: local.Service, kafka_broker: local.Service, tmp_path: Path
) -> None:
    cm = _crash_matrix()
    m = cm.Matrix(zookeeper.connect, kafka_broker.bootstrap, tmp_path / "cluster", session_timeout_ms=6000)
    try:
        m.open()
        assert m.zk is not None
        a = m.start_controller()
        m.wait_loaded(a)
        topic = f"{m.name}-down"
        cm._create(m, "wd-c", topic, ASSIGNMENT)
        cm.wait_converged(m, "the topic online", cm.Expect({topic: ASSIGNMENT}, request_id="wd-c"), 180)
        before = {p: m.znode(f"/brokers/topics/{topic}/partitions/{p}/state")[0] for p in ASSIGNMENT}
        assert all(s is not None and s["leader"] == VICTIM for s in before.values()), before

        # the controller first (its session ends with it), then the leader, while no controller runs
        a.kill()
        cm.wait_until("the controller's session ended", lambda: m.znode("/controller")[0] is None, 60)
        m.brokers[VICTIM].signal(signal.SIGKILL)
        m.brokers[VICTIM].proc.wait(10)
        cm.wait_until(f"broker {VICTIM} unregistered", lambda: VICTIM not in m._registered(), 60)
        # nothing was written meanwhile: no controller
        for p in ASSIGNMENT:
            assert m.znode(f"/brokers/topics/{topic}/partitions/{p}/state")[0] == before[p]

        b = m.start_controller()
        m.wait_loaded(b)
        live = set(cm.BROKERS) - {VICTIM}
        _agree(cm, m, "the restarted controller, ZooKeeper and the brokers agree", topic, live, timeout=180)
        for p in ASSIGNMENT:
            state, _ = m.znode(f"/brokers/topics/{topic}/partitions/{p}/state")
            assert state is not None and state["leader_epoch"] > before[p]["leader_epoch"], (p, state, before[p])

        m.start_broker(VICTIM)
        _agree(cm, m, f"broker {VICTIM} back in every ISR, in agreement", topic, set(cm.BROKERS), timeout=180)
        assert b.alive()
    finally:
        m.close()
