"""``livectl run`` with ZooKeeper or Kafka unreachable: one line naming the address and what failed, exit
code 4, no traceback, and no Spark started (the check comes before Spark's start-up)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from livectl import local
from streaming.driver.preflight import UnreachableError, check_kafka, check_zookeeper, wait_for_kafka
from streaming.settings import Settings

pytestmark = pytest.mark.integration


def _run(tmp_path: Path, zookeeper: str, bootstrap: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "livectl",
            "run",
            "--zookeeper",
            zookeeper,
            "--bootstrap-server",
            bootstrap,
            "--checkpoint-dir",
            str(tmp_path / "ck"),
        ],
        cwd=tmp_path,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_zookeeper_unreachable_is_one_line_and_exit_4(tmp_path: Path, kafka_broker: local.Service) -> None:
    dead = f"127.0.0.1:{local.free_port()}"
    started = time.monotonic()
    done = _run(tmp_path, dead, kafka_broker.bootstrap)
    assert done.returncode == 4, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines == [f"livectl run: ZooKeeper at {dead} is unreachable: no session within 10 s"], done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert time.monotonic() - started < 60  # no Spark start-up before it
    assert not (tmp_path / "ck").exists()


def test_kafka_unreachable_is_one_line_and_exit_4(tmp_path: Path, zookeeper: local.Service) -> None:
    dead = f"127.0.0.1:{local.free_port()}"
    done = _run(tmp_path, zookeeper.connect, dead)
    assert done.returncode == 4, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines == [f"livectl run: Kafka at {dead} is unreachable: no broker answered within 10 s"], done.stderr
    assert "Traceback" not in done.stdout + done.stderr


def test_reachable_services_pass(zookeeper: local.Service, kafka_broker: local.Service) -> None:
    settings = Settings.from_mapping(
        {"zookeeper_connect": zookeeper.connect, "bootstrap_servers": kafka_broker.bootstrap}
    )
    check_zookeeper(settings, timeout_s=10)
    check_kafka(settings, timeout_s=10)
    with pytest.raises(UnreachableError) as e:
        check_zookeeper(Settings.from_mapping({"zookeeper_connect": "127.0.0.1:notaport"}), timeout_s=2)
    assert e.value.service == "ZooKeeper" and e.value.address == "127.0.0.1:notaport"


def test_waiting_for_kafka_ends_when_it_answers_or_after_the_timeout_with_one_reason(tmp_path: Path) -> None:
    """What a controller that won the lease while Kafka was away does: wait, then go on or stop."""
    port = local.free_port()
    settings = Settings.from_mapping({"bootstrap_servers": f"127.0.0.1:{port}"})
    started = time.monotonic()
    with pytest.raises(UnreachableError) as e:
        wait_for_kafka(settings, timeout_s=3)
    assert "(waited 3 s)" in str(e.value) and "\n" not in str(e.value)
    assert 3 <= time.monotonic() - started < 30
    # a broker that comes up on that address while it waits ends the wait
    done: list[float] = []

    def wait() -> None:
        wait_for_kafka(settings, timeout_s=120)
        done.append(1.0)

    waiter = threading.Thread(target=wait)
    waiter.start()
    broker = local.start_kafka(tmp_path / "kafka", port)
    try:
        waiter.join(60)
        assert done == [1.0]
    finally:
        local.stop_kafka(broker)
