"""The livectl healthchecks of ``docker-compose.yml``, run as the container runs them (the ``livectl``
command, a separate process) against a real ZooKeeper: they fail while the cluster is short and pass once it
is complete. Only the ZooKeeper address is changed (``zookeeper:2181`` -> the test's server and chroot)."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kazoo.client import KazooClient

from core.kafka.zkdata import encode_broker_registration
from livectl import local

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
LIVECTL = Path(sys.executable).parent / "livectl"


def healthcheck(service: str, zk_connect: str) -> list[str]:
    test = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"][service]["healthcheck"]["test"]
    assert test[:2] == ["CMD", "livectl"], test
    assert "zookeeper:2181" in test, test
    return [str(LIVECTL), *(zk_connect if x == "zookeeper:2181" else str(x) for x in test[2:])]


def run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False, cwd="/")


@pytest.fixture()
def chroot(zookeeper: local.Service) -> Iterator[tuple[str, KazooClient]]:
    ns = f"/compose-{uuid.uuid4().hex[:8]}"
    zk = KazooClient(hosts=zookeeper.connect, timeout=10)
    zk.start(timeout=15)
    zk.ensure_path(ns)
    zk.stop()
    zk.close()
    zk = KazooClient(hosts=f"{zookeeper.connect}{ns}", timeout=10)
    zk.start(timeout=15)
    try:
        yield f"{zookeeper.connect}{ns}", zk
    finally:
        zk.stop()
        zk.close()


def test_brokers_healthcheck_fails_below_five_and_passes_at_five(chroot: tuple[str, KazooClient]) -> None:
    connect, zk = chroot
    cmd = healthcheck("brokers", connect)
    assert run(cmd).returncode == 1  # nobody registered
    for b in (1, 2, 3, 4):
        zk.create(
            f"/brokers/ids/{b}", encode_broker_registration("127.0.0.1", 9090 + b, None, 1).encode(), makepath=True
        )
    short = run(cmd)
    assert short.returncode == 1, short
    assert "4 broker(s) registered under /brokers/ids, fewer than --min 5" in short.stderr
    zk.create("/brokers/ids/5", encode_broker_registration("127.0.0.1", 9095, None, 1).encode())
    done = run(cmd)
    assert done.returncode == 0, done
    assert [ln.split()[0] for ln in done.stdout.splitlines()[1:]] == ["1", "2", "3", "4", "5"]


def test_controller_healthchecks_fail_without_a_controller(chroot: tuple[str, KazooClient]) -> None:
    connect, zk = chroot
    for service in ("controller", "controller-standby"):
        assert run(healthcheck(service, connect)).returncode == 1, service
    zk.create("/controller", b'{"version":1,"brokerid":1000,"timestamp":"1700000000000"}')
    zk.create("/controller_epoch", b"1")
    for service in ("controller", "controller-standby"):
        ok = run(healthcheck(service, connect))
        assert ok.returncode == 0, (service, ok)
        assert "Active controller: 1000" in ok.stdout
