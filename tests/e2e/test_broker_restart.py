"""Apache Kafka restarted under livectl, with its data (a durable log directory): nothing is lost.

Real processes: ZooKeeper of the session, a Kafka broker of this test's own (restarted on the same ports
and log directory), five simulated brokers and ``livectl run`` processes (the crash
matrix's harness, :mod:`bench.harness`). In order, on one cluster:

1. Kafka restarted under a running controller and a standby: the active one goes on (same process) and
   answers the next command; the standby keeps waiting; nothing is answered or applied twice;
2. Kafka down while the active controller stops: the standby wins the lease without Kafka, waits for it
   (up to ``sink_retry_timeout_ms``) and answers once it is back;
3. the controller restarted (a new ``livectl run`` on the same checkpoint) while Kafka is down: it stops at
   once with one line and exit code 4 (``streaming.driver.preflight``); started again once Kafka is back, it
   answers, and nothing from before is applied again.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer

from bench import harness as cm
from livectl import local

pytestmark = pytest.mark.e2e


class Bus:
    """This module's Kafka broker, stopped and started again on the same ports with its data."""

    def __init__(self, folder: Path) -> None:
        self.svc = local.start_kafka(folder)

    @property
    def bootstrap(self) -> str:
        return self.svc.bootstrap

    def stop(self) -> None:
        assert local.stop_kafka(self.svc), f"Kafka's process {self.svc.pid} was not found to stop"
        host, port = self.svc.bootstrap.rsplit(":", 1)
        with socket.socket() as s, contextlib.suppress(ConnectionRefusedError):
            s.connect((host, int(port)))
            raise AssertionError(f"Kafka still answers at {self.svc.bootstrap} after its stop")

    def start(self) -> None:
        self.svc = local.restart_kafka(self.svc)


@pytest.fixture
def bus(tmp_path: Path) -> Iterator[Bus]:
    b = Bus(tmp_path / "kafka")
    try:
        yield b
    finally:
        local.stop_kafka(b.svc)  # it may be stopped already


def _answered_once(cm: Any, m: Any, rid: str, timeout: float = 300) -> None:
    final = cm.wait_until(
        f"the command {rid} answered",
        lambda: [r for r in m.results(rid) if r["status"] != "in_progress"],
        timeout,
    )
    assert [r["status"] for r in final] == ["ok"], final


def test_kafka_restarted_under_controllers_and_while_none_runs(
    zookeeper: local.Service, bus: Bus, tmp_path: Path
) -> None:
    m = cm.Matrix(zookeeper.connect, bus.bootstrap, tmp_path / "cluster", session_timeout_ms=6000)
    rids: list[str] = []

    def create(rid: str, assignment: dict[int, tuple[int, ...]]) -> None:
        cm.create_topic(m, rid, f"{m.name}-{rid}", assignment)
        rids.append(rid)

    def restart_bus() -> None:
        bus.start()
        # the harness's own producer, not livectl's: a new one rather than wait out its reconnect back-off
        assert m.producer is not None  # m.open() made it
        m.producer.close()
        m.producer = KafkaProducer(bootstrap_servers=bus.bootstrap, acks="all", linger_ms=0)

    try:
        m.open()
        assert m.zk is not None
        # Kafka restarts in up to a minute on a loaded machine: a wait past the default 60 s
        patient = {"sink_retry_timeout_ms": 180_000}
        a = m.start_controller(patient)
        m.wait_loaded(a)
        b = m.start_controller(patient)
        m.wait_waiting(b)
        create("kb-before", {0: (1, 2, 3), 1: (2, 3, 4)})
        _answered_once(cm, m, "kb-before")
        before_version = m.znode(f"/brokers/topics/{m.name}-kb-before")[1]

        # 1. under the active controller and the standby
        bus.stop()
        time.sleep(5)
        restart_bus()
        create("kb-mid", {0: (3, 4, 5)})
        _answered_once(cm, m, "kb-mid")
        assert a.alive() and b.alive(), f"{a.why_stopped()}\n{b.why_stopped()}"
        assert "failover snapshot:" not in b.text(), "the standby kept waiting"

        # 2. Kafka down while the active one stops: the standby takes over without Kafka and waits for it
        bus.stop()
        a.stop()
        # B wins the lease with Kafka away, then waits for Kafka (its load below shows it did not exit meanwhile)
        elected = f"controller {b.controller_id} elected"
        cm.wait_until("controller B elected with Kafka down", lambda: elected in b.text() or not b.alive(), 120)
        assert b.alive(), b.text()[-3000:]
        restart_bus()
        m.wait_loaded(b)
        create("kb-late", {0: (1, 5, 4)})
        _answered_once(cm, m, "kb-late")

        # 3. a new controller on the same checkpoint, started while Kafka is down: one line, exit 4
        bus.stop()
        b.stop()
        early = m.start_controller(patient)
        try:
            code = early.proc.wait(120)
        except subprocess.TimeoutExpired:
            early.kill()  # what it was doing instead of stopping: its own output says (once seen in CI, not alone)
            pytest.fail(f"a controller started while Kafka was down ran past 120 s:\n{early.text()[-4000:]}")
        assert code == 4, early.text()[-3000:]
        [line] = [x for x in early.text().splitlines() if x.startswith("livectl run:")]
        assert line == f"livectl run: Kafka at {bus.bootstrap} is unreachable: no broker answered within 10 s", line
        restart_bus()
        c = m.start_controller(patient)
        m.wait_loaded(c)
        create("kb-last", {0: (2, 1, 3)})
        _answered_once(cm, m, "kb-last")

        # nothing lost, nothing twice: every command answered exactly once, nothing applied again
        for rid in rids:
            _answered_once(cm, m, rid, timeout=30)
            assert m.znode(f"/brokers/topics/{m.name}-{rid}")[0] is not None, rid
        assert m.znode(f"/brokers/topics/{m.name}-kb-before")[1] == before_version
        assert not any("data loss" in x.text() for x in (a, b, c))
        c.stop()
    finally:
        m.close()
