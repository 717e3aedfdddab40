"""Stopping never hangs: a simulated broker process SIGTERMed with ZooKeeper, or Kafka, gone exits within
``--shutdown-timeout-s`` + 5 s and says what it could not finish.

Each test stops a service of its own (a private ZooKeeper, or a private Kafka), never the session's.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kazoo.client import KazooClient
from waiting import wait_until

from livectl import local
from simbrokers.stopping import CLOSE_TIMEOUT_S

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
SHUTDOWN_TIMEOUT_S = 6.0


@pytest.fixture()
def private_kafka(tmp_path: Path) -> Iterator[local.Service]:
    svc = local.start_kafka(tmp_path / "kafka")
    try:
        yield svc
    finally:
        local.stop_kafka(svc)


def _start(zk_connect: str, bootstrap: str, tmp: Path) -> tuple[subprocess.Popen[bytes], Path]:
    run = uuid.uuid4().hex[:8]
    names = (f"stop-{run}.requests", f"stop-{run}.events", f"stop-{run}.control")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(n, 1, 1) for n in names])
    admin.close()
    log = tmp / "simbrokers.log"
    cmd = [
        sys.executable,
        "-m",
        "simbrokers",
        "--brokers",
        "1,2",
        "--zookeeper",
        zk_connect,
        "--bootstrap-server",
        bootstrap,
        "--requests-topic",
        names[0],
        "--events-topic",
        names[1],
        "--control-topic",
        names[2],
        "--session-timeout-ms",
        "4000",
        "--shutdown-timeout-s",
        str(SHUTDOWN_TIMEOUT_S),
    ]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
    zk = KazooClient(hosts=zk_connect, timeout=10)
    zk.start(timeout=10)
    try:
        wait_until(
            "both brokers registered",
            lambda: zk.exists("/brokers/ids/1") and zk.exists("/brokers/ids/2"),
            30,
            detail=lambda: log.read_text()[-2000:],
        )
    finally:
        zk.stop()
        zk.close()
    return proc, log


def _sigterm_and_time(proc: subprocess.Popen[bytes]) -> float:
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(SHUTDOWN_TIMEOUT_S + CLOSE_TIMEOUT_S + 10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
        raise
    return time.monotonic() - started


def test_sigterm_with_zookeeper_gone_stops_within_the_bound(
    private_zookeeper: local.Service, kafka_broker: Any, tmp_path: Path
) -> None:
    proc, log = _start(private_zookeeper.connect, kafka_broker.bootstrap, tmp_path)
    local.stop_process(private_zookeeper.pid, private_zookeeper.marker)
    took = _sigterm_and_time(proc)
    out = log.read_text()
    assert took <= SHUTDOWN_TIMEOUT_S + CLOSE_TIMEOUT_S + 1, out[-3000:]
    assert proc.returncode == 0, out[-3000:]
    for bid in (1, 2):
        # nobody answers: the controlled shutdown is cut at the bound, one line per broker
        line = f"simbrokers: broker {bid}: controlled shutdown not acknowledged by the controller within 6 s"
        assert line in out, out[-3000:]


def test_zookeeper_gone_before_start_is_one_line_and_exit_1(
    private_zookeeper: local.Service, kafka_broker: Any, tmp_path: Path
) -> None:
    connect = private_zookeeper.connect
    local.stop_process(private_zookeeper.pid, private_zookeeper.marker)
    run = uuid.uuid4().hex[:8]
    names = (f"gone-{run}.requests", f"gone-{run}.events", f"gone-{run}.control")
    admin = KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap)
    admin.create_topics([NewTopic(n, 1, 1) for n in names])
    admin.close()
    cmd = [sys.executable, "-m", "simbrokers", "--brokers", "1", "--zookeeper", connect]
    cmd += ["--bootstrap-server", kafka_broker.bootstrap, "--session-timeout-ms", "4000"]
    cmd += ["--requests-topic", names[0], "--events-topic", names[1], "--control-topic", names[2]]
    started = time.monotonic()
    done = subprocess.run(cmd, check=False, cwd=REPO, capture_output=True, text=True, timeout=60)
    # no traceback, no process left waiting on its own threads: one line and exit 1
    assert done.returncode == 1, done.stderr[-3000:]
    assert time.monotonic() - started < 40
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert "simbrokers: could not start: KazooTimeoutError" in done.stderr, done.stderr[-3000:]


def test_sigterm_with_kafka_gone_stops_within_the_bound(
    zookeeper: Any, private_kafka: local.Service, tmp_path: Path
) -> None:
    root = KazooClient(hosts=zookeeper.connect, timeout=10)
    root.start(timeout=10)
    chroot = f"/stop-{uuid.uuid4().hex[:8]}"
    root.ensure_path(chroot)
    proc, log = _start(f"{zookeeper.connect}{chroot}", private_kafka.bootstrap, tmp_path)
    local.stop_kafka(private_kafka)
    took = _sigterm_and_time(proc)
    out = log.read_text()
    try:
        assert took <= SHUTDOWN_TIMEOUT_S + CLOSE_TIMEOUT_S + 1, out[-3000:]
        assert proc.returncode == 0, out[-3000:]
        for bid in (1, 2):
            line = f"simbrokers: broker {bid}: controlled shutdown not acknowledged by the controller within 6 s"
            assert line in out, out[-3000:]
        # ZooKeeper was there: the registrations went with the closed sessions, at once
        assert root.get_children(f"{chroot}/brokers/ids") == []
        assert "event(s) could not be sent to Kafka (unreachable)" in out, out[-3000:]
    finally:
        root.stop()
        root.close()
