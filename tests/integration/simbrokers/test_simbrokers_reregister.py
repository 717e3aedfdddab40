"""A simulated broker's re-registration after its ZooKeeper session was lost, against a real ZooKeeper.

Found by the ensemble's partition faults (``python -m bench partitions --faults zk-quorum-cut:reassign``):
a broker whose first re-registration failed (its old registration still held) restarted its ZooKeeper
client while connected, and that restart's own ``LOST`` marked the session lost again, so every loop
restarted the client, closing the session that held the new registration: thousands of registrations a
minute, each a broker failure and startup for the controller, and a reassignment that never finished.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from livectl import local
from simbrokers.runner import ProcessSettings, SimBrokersProcess

pytestmark = pytest.mark.integration

BROKER = 7


@pytest.fixture()
def chroot(zookeeper: local.Service) -> Iterator[str]:
    name = f"/rereg-{uuid.uuid4().hex[:8]}"
    zk = KazooClient(hosts=zookeeper.connect, timeout=10)
    zk.start(timeout=15)
    zk.ensure_path(name)
    try:
        yield name
    finally:
        zk.stop()
        zk.close()


def test_a_reregistration_while_connected_is_one_registration_not_a_loop(zookeeper: local.Service, chroot: str) -> None:
    p = SimBrokersProcess(
        ProcessSettings((BROKER,), zookeeper=zookeeper.connect + chroot, bootstrap_server="", session_timeout_ms=4000)
    )
    p._start_broker(BROKER, 0)
    m = p.members[BROKER]
    observer = KazooClient(hosts=zookeeper.connect + chroot, timeout=10)
    observer.start(timeout=15)
    try:
        # the state of the loop's second round: connected (in a new session), the loss not yet handled
        m.session_lost.set()
        registrations = []
        for _ in range(3):  # what the run loop does each tick
            if m.session_lost.is_set():
                p._reregister(BROKER)
                registrations.append(m.broker.broker_epoch)
            # the marker between ticks: a round trip on the broker's own client. kazoo calls its state
            # listeners on its connection thread, ahead of any answer on a later connection, so a loss the
            # re-registration caused (its client restarted, closing a session) is marked before this returns
            m.zk.sync("/")
        assert len(registrations) == 1, f"{len(registrations)} registrations in 3 ticks: {registrations}"
        assert not m.session_lost.is_set()
        stat = observer.exists(f"/brokers/ids/{BROKER}")
        assert stat is not None and stat.czxid == m.broker.broker_epoch
        assert stat.ephemeralOwner == m.zk.client_id[0]
    finally:
        observer.stop()
        observer.close()
        m.zk.stop()
        m.zk.close()
        m.server.stop()
