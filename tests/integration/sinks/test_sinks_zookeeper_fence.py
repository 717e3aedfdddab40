"""The fence without a write (:meth:`ZooKeeperSink.check_fence`) on a real ZooKeeper.

The dispatcher calls it before every topic write; here: it passes while the epoch holds, refuses once
another controller bumped ``/controller_epoch``, refuses when this session has expired, and reports an
unreachable ZooKeeper as unavailable rather than fenced.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient, KazooState
from waiting import wait_until

from livectl import local
from sinks.errors import ControllerFencedError, SinkUnavailableError
from sinks.ports import Fence
from sinks.zookeeper import ZooKeeperSink
from streaming.driver.startup import zookeeper_client
from streaming.settings import Settings

pytestmark = pytest.mark.integration

#: the restart test's session timeout: ZooKeeper's maximum here (``zoo.cfg.template``)
SESSION_MS = 40000


@pytest.fixture
def sink(zk_chrooted: KazooClient) -> Iterator[ZooKeeperSink]:
    zk_chrooted.create("/controller_epoch", b"1")
    yield ZooKeeperSink(zk_chrooted, Fence(1, 0), "q", timeout_s=5)


def test_check_passes_while_the_epoch_holds_and_writes_nothing(zk_chrooted: KazooClient, sink: ZooKeeperSink) -> None:
    before = zk_chrooted.get("/controller_epoch")[1]
    sink.check_fence()
    sink.check_fence()
    after = zk_chrooted.get("/controller_epoch")[1]
    assert (after.version, after.mzxid) == (before.version, before.mzxid)
    assert zk_chrooted.get_children("/") == ["controller_epoch"]


def test_check_refuses_after_another_controller_was_elected(zk_chrooted: KazooClient, sink: ZooKeeperSink) -> None:
    zk_chrooted.set("/controller_epoch", b"2")
    with pytest.raises(ControllerFencedError) as e:
        sink.check_fence()
    assert e.value.reason == "BadVersion" and e.value.expected_version == 0


def test_check_refuses_once_the_session_expired(zookeeper: local.Service, zk_chrooted: KazooClient) -> None:
    chroot = zk_chrooted.chroot
    zk_chrooted.create("/controller_epoch", b"1")
    own = KazooClient(hosts=f"{zookeeper.connect}{chroot}", timeout=10)
    own.start(timeout=15)
    lost: list[str] = []
    own.add_listener(lambda state: lost.append(state) if state == KazooState.LOST else None)
    try:
        sink = ZooKeeperSink(own, Fence(1, 0), "q", timeout_s=5)
        sink.check_fence()
        # ZooKeeper's own way to expire a session: a second client joins it with its id and password
        # and closes it, as a server does when a paused client's session times out
        session_id, password = own.client_id
        thief = KazooClient(hosts=f"{zookeeper.connect}{chroot}", client_id=(session_id, password), timeout=10)
        thief.start(timeout=15)
        thief.stop()
        thief.close()

        def refused() -> ControllerFencedError | None:
            try:
                sink.check_fence()
            except ControllerFencedError as e:
                return e
            except SinkUnavailableError:
                pass  # the connection is being re-established; the server then says the session is gone
            return None

        wait_until("a check from the expired session refused", refused, timeout=20, interval=0.1)
        assert lost == [KazooState.LOST]
    finally:
        own.stop()
        own.close()


def test_a_restarting_zookeeper_is_unavailable_then_the_same_session_goes_on(tmp_path: Path) -> None:
    """ZooKeeper restarted under the controller (same data folder, well within the session timeout): the
    check says "unavailable" while it is down, not "fenced", and passes again on the same session."""
    port = local.free_port()
    svc = local.start_zookeeper(tmp_path / "zk", port)
    client: KazooClient | None = None
    try:
        # the controller's own client (its reconnect policy: at least every second) with a session timeout
        # the restart stays well within on a loaded machine: with 15 s the restarted ZooKeeper expired the
        # session once in CI (2026-11-30, the tests' slowest run), which is the fenced case of another test
        client = zookeeper_client(Settings(zookeeper_connect=svc.connect, zookeeper_session_timeout_ms=SESSION_MS))
        # a ZooKeeper that has just started answers ruok before its first session is set up, which on a
        # loaded machine took over 15 s (CI): the first connection gets longer; the test is about the restart
        client.start(timeout=60)
        client.create("/controller_epoch", b"1")
        session = client.client_id[0]
        sink = ZooKeeperSink(client, Fence(1, 0), "q", timeout_s=2)
        sink.check_fence()
        local.stop_process(svc.pid, svc.marker)
        with pytest.raises(SinkUnavailableError):
            sink.check_fence()
        svc = local.start_zookeeper(tmp_path / "zk", port)
        # the session outlives the restart by its timeout: the check must pass again within it (past it the
        # session is gone, and the check says fenced, which fails the test as it should)

        def passes() -> bool:
            try:
                sink.check_fence()
            except SinkUnavailableError:
                return False
            return True

        wait_until("the check to pass again within the session timeout", passes, SESSION_MS / 1000, interval=0.2)
        assert client.client_id[0] == session
    finally:
        if client is not None:
            client.stop()
            client.close()
        local.stop_process(svc.pid, svc.marker)
