"""The controller's ZooKeeper session and sink against a real ensemble of three (Debian's ZooKeeper).

The controller's own client (:func:`streaming.driver.startup.zookeeper_client`, connect string listing the three
servers) holds the lease (:class:`streaming.driver.lease.ControllerLease`) and writes micro-batches through
:class:`sinks.zookeeper.ZooKeeperSink`: every batch moves every partition state one version on with a
compare-and-set ``SET``, so a write applied twice is refused (``BadVersion``) and a write lost leaves a
version behind. A batch the sink could not finish (:class:`SinkUnavailableError`) is replayed with the
same writes, as Spark replays a micro-batch. Faults: the ensemble's leader SIGKILLed while a batch is being
written; a follower (a minority) stopped. After each, every server's copy of the tree is what was meant.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient
from waiting import poll_until, wait_until
from zk_ensemble import Ensemble

from core.decisions import ZkOp, ZkWrite
from sinks.errors import SinkUnavailableError
from sinks.ports import Fence, ZkBatchResult
from sinks.zookeeper import ZooKeeperSink, progress_path
from streaming.driver.lease import ControllerLease
from streaming.driver.startup import zookeeper_client
from streaming.settings import Settings

pytestmark = pytest.mark.integration

PARTITIONS = 300
#: the controller's session timeout (Settings' default): an election must finish well within it
SESSION_MS = 18000


def _state(epoch: int) -> bytes:
    body = {"controller_epoch": 1, "leader": 1 + epoch % 3, "version": 1, "leader_epoch": epoch, "isr": [1, 2, 3]}
    return json.dumps(body, separators=(",", ":")).encode()


def _path(p: int) -> str:
    return f"/brokers/topics/t/partitions/{p}/state"


def _create_batch() -> list[ZkWrite]:
    return [ZkWrite(ZkOp.CREATE, _path(p), _state(0).decode(), make_parents=True) for p in range(PARTITIONS)]


def _move_batch(epoch: int) -> list[ZkWrite]:
    """Every partition from ``epoch - 1`` to ``epoch``, each at the znode version the previous batch left."""
    return [ZkWrite(ZkOp.SET, _path(p), _state(epoch).decode(), expected_version=epoch - 1) for p in range(PARTITIONS)]


class Controller:
    """The controller's side: its session, its lease and its sink, writing batch after batch."""

    def __init__(self, ensemble: Ensemble, chroot: str) -> None:
        self.client = zookeeper_client(
            Settings(zookeeper_connect=ensemble.connect + chroot, zookeeper_session_timeout_ms=SESSION_MS)
        )
        self.client.start(timeout=30)
        #: the session's states as kazoo saw them (SUSPENDED: its server went away; LOST: it expired)
        self.states: list[str] = []
        self.client.add_listener(self.states.append)
        self.lost: list[str] = []
        self.lease = ControllerLease(self.client, 1, on_lost=self.lost.append)
        self.fence: Fence = self.lease.acquire(timeout=30)
        self.sink = ZooKeeperSink(self.client, self.fence, "ensemble", ops_per_transaction=40, timeout_s=20)
        #: per batch id: its attempts' results and the replays an unavailable ZooKeeper caused
        self.results: dict[int, list[ZkBatchResult]] = {}
        self.replays: dict[int, list[str]] = {}
        #: (batch id, started, ended) by the monotonic clock
        self.spans: list[tuple[int, float, float]] = []

    def write(self, batch_id: int, writes: list[ZkWrite], deadline_s: float = 60.0) -> None:
        """Write the batch, replayed with the same writes while the sink says ZooKeeper is unavailable."""
        started = time.monotonic()

        def attempt() -> bool:
            try:
                self.results.setdefault(batch_id, []).append(self.sink.write_batch(batch_id, writes))
            except SinkUnavailableError as e:
                self.replays.setdefault(batch_id, []).append(str(e))
                return False
            return True

        wait_until(f"batch {batch_id} written", attempt, deadline_s, interval=0.2, detail=lambda: str(self.replays))
        self.spans.append((batch_id, started, time.monotonic()))

    def close(self) -> None:
        self.client.stop()
        self.client.close()


@pytest.fixture
def chroot(zookeeper_ensemble: Ensemble) -> Iterator[str]:
    root = f"/t-{uuid.uuid4().hex[:12]}"
    c = zookeeper_ensemble.client()
    c.ensure_path(root)
    c.stop()
    c.close()
    yield root
    zookeeper_ensemble.heal()


def _tree_on(server: Any, chroot: str) -> dict[str, tuple[bytes, int]]:
    """The partition states as ``server`` alone holds them (after a ``sync`` with the leader)."""
    c = KazooClient(hosts=server.address + chroot, timeout=10)
    c.start(timeout=30)
    try:
        c.sync("/")
        out = {}
        for p in c.get_children("/brokers/topics/t/partitions"):
            data, stat = c.get(_path(int(p)))
            out[_path(int(p))] = (data, stat.version)
        return out
    finally:
        c.stop()
        c.close()


def _assert_intended(ensemble: Ensemble, chroot: str, controller: Controller, last_epoch: int) -> None:
    intended = {_path(p): (_state(last_epoch), last_epoch) for p in range(PARTITIONS)}
    for name, svc in ensemble.servers.items():
        if svc.running():
            assert _tree_on(svc, chroot) == intended, f"{name}'s tree is not the one written"
    for batch_id, results in controller.results.items():
        assert all(r.ok for r in results), f"batch {batch_id} had refusals (a write lost or doubled): {results}"
        # the attempts together did each write once: the last one skipped what the earlier ones had done
        assert results[-1].skipped + results[-1].applied == PARTITIONS, (batch_id, results)
    progress = json.loads(controller.client.get(progress_path("ensemble"))[0])
    assert (progress["batch_id"], progress["next"], progress.get("failed")) == (last_epoch, PARTITIONS, None)
    assert not controller.lost and not controller.lease.lost, f"the lease was lost: {controller.lost}"


def test_the_leader_killed_mid_batch_loses_and_doubles_nothing(zookeeper_ensemble: Ensemble, chroot: str) -> None:
    ensemble = zookeeper_ensemble
    old_leader = ensemble.leader()
    controller = Controller(ensemble, chroot)
    try:
        session = controller.client.client_id[0]
        controller.write(0, _create_batch())
        for epoch in (1, 2):
            controller.write(epoch, _move_batch(epoch))
        killed_at: list[float] = []
        watcher = KazooClient(hosts=ensemble.connect + chroot, timeout=10)
        watcher.start(timeout=30)

        def moved_by_batch_3() -> bool:
            stat = watcher.exists(_path(0))
            return stat is not None and stat.version >= 3

        def kill_when_writing() -> None:
            # batch 3's first transaction (partition 0 comes first) is committed: the rest are to come
            poll_until(moved_by_batch_3, timeout=30, interval=0.005)
            killed_at.append(time.monotonic())
            ensemble.kill(old_leader)

        killer = threading.Thread(target=kill_when_writing, daemon=True)
        killer.start()
        last = 8
        for epoch in range(3, last + 1):
            controller.write(epoch, _move_batch(epoch))
        killer.join(30)
        watcher.stop()
        watcher.close()
        assert killed_at, "the leader was not killed"
        new_leader = ensemble.leader()
        assert new_leader.name != old_leader.name and not old_leader.running()
        # the kill fell inside the writes, not after them
        assert controller.spans[3][1] <= killed_at[0] <= controller.spans[-1][2], (killed_at, controller.spans)
        # the controller's connection went with the leader, and its session (its lease) came through the election
        assert "SUSPENDED" in controller.states and "LOST" not in controller.states, controller.states
        assert controller.client.client_id[0] == session, "the controller's session did not survive the election"
        _assert_intended(ensemble, chroot, controller, last)
        # the fence still holds: nothing else was elected meanwhile
        controller.sink.check_fence()
    finally:
        controller.close()


def test_a_stopped_follower_changes_nothing(zookeeper_ensemble: Ensemble, chroot: str) -> None:
    ensemble = zookeeper_ensemble
    leader = ensemble.leader()
    controller = Controller(ensemble, chroot)
    try:
        controller.write(0, _create_batch())
        controller.write(1, _move_batch(1))
        follower = ensemble.followers()[0]
        stopping = threading.Thread(target=ensemble.stop, args=(follower,), daemon=True)
        stopping.start()
        for epoch in range(2, 6):
            controller.write(epoch, _move_batch(epoch))
        stopping.join(30)
        assert not follower.running()
        # a majority is left: the same leader goes on, no election
        assert ensemble.leader().pid == leader.pid
        assert ensemble.modes()[leader.name] == "leader"
        assert "LOST" not in controller.states, controller.states
        _assert_intended(ensemble, chroot, controller, 5)
        controller.sink.check_fence()
    finally:
        controller.close()
