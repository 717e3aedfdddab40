"""Kafka's ``zookeeper.set.acl`` on a real ZooKeeper: digest authentication, and the ACLs livectl gives.

The controller's election and its sink run with ``digest:livectl:…`` and ACLs on; another client,
without the credential or with another one, can read but cannot change a partition state or
``/controller_epoch``; the standby, with the same credential, can take over and write.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import Permissions, make_digest_acl_credential

from core.decisions import ZkOp, ZkWrite
from sinks.security import ZkSecurity
from sinks.zookeeper import ZooKeeperSink
from streaming.driver.lease import ControllerLease
from streaming.settings import Settings

pytestmark = pytest.mark.integration

SECRET = "livectl:s3cret"


def _client(connect: str, security: ZkSecurity) -> KazooClient:
    c = KazooClient(hosts=connect, timeout=10, **security.client_kwargs())
    c.start(timeout=15)
    return c


@pytest.fixture
def secured(zk_connect: str) -> Iterator[tuple[KazooClient, ZkSecurity]]:
    security = Settings(zookeeper_auth=f"digest:{SECRET}", zookeeper_set_acl=True).zookeeper_security()
    c = _client(zk_connect, security)
    yield c, security
    c.stop()
    c.close()


def _state(leader: int, epoch: int) -> str:
    return json.dumps({"controller_epoch": 1, "leader": leader, "version": 1, "leader_epoch": epoch, "isr": [leader]})


def _tree(zk: KazooClient, path: str = "/") -> list[str]:
    out = []
    for child in zk.get_children(path):
        full = f"{path.rstrip('/')}/{child}"
        out.append(full)
        out.extend(_tree(zk, full))
    return out


def test_every_znode_livectl_creates_gets_kafkas_acls(zk_connect: str, secured: tuple[KazooClient, ZkSecurity]) -> None:
    zk, security = secured
    lease = ControllerLease(zk, 1000, acl_for=security.acl_for)
    fence = lease.acquire(timeout=10)
    sink = ZooKeeperSink(zk, fence, "q", acl_for=security.acl_for)
    state = "/brokers/topics/orders/partitions/0/state"
    result = sink.write_batch(
        0,
        [
            ZkWrite(ZkOp.CREATE, "/brokers/topics/orders", '{"version":2,"partitions":{"0":[1]}}', -1, True),
            ZkWrite(ZkOp.CREATE, state, _state(1, 0), -1, True),
            ZkWrite(ZkOp.CREATE, "/config/topics/orders", '{"version":1,"config":{}}', -1, True),
        ],
    )
    assert result.ok

    digest_id = make_digest_acl_credential(*SECRET.split(":"))
    created = _tree(zk)
    assert {"/controller", "/controller_epoch", state, "/livectl/sink/q", "/config/topics/orders"} <= set(created)
    for path in created:
        acls, _ = zk.get_acls(path)
        got = {(a.id.scheme, a.id.id, a.perms) for a in acls}
        # the creator's digest identity may do everything; the world may only read
        assert got == {("digest", digest_id, Permissions.ALL), ("world", "anyone", Permissions.READ)}, path

    stranger = _client(zk_connect, ZkSecurity())
    other = _client(zk_connect, ZkSecurity.parse("digest:mallory:guess"))
    try:
        for c in (stranger, other):
            assert json.loads(c.get(state)[0])["leader"] == 1  # world-readable, like Kafka's
            with pytest.raises(NoAuthError):
                c.set(state, _state(2, 1).encode())
            with pytest.raises(NoAuthError):
                c.set("/controller_epoch", b"99")
            with pytest.raises(NoAuthError):
                c.delete(state)
            with pytest.raises(NoAuthError):
                c.create("/brokers/topics/orders/partitions/7", b"")
        assert json.loads(zk.get(state)[0])["leader"] == 1
        assert zk.get("/controller_epoch")[0] == str(fence.controller_epoch).encode()
    finally:
        for c in (stranger, other):
            c.stop()
            c.close()

    # the standby holds the same credential: after the takeover it writes where the first one did
    lease.release()
    standby_zk = _client(zk_connect, security)
    try:
        standby = ControllerLease(standby_zk, 1001, acl_for=security.acl_for)
        new_fence = standby.acquire(timeout=10)
        assert new_fence.controller_epoch == fence.controller_epoch + 1
        new_sink = ZooKeeperSink(standby_zk, new_fence, "q", acl_for=security.acl_for)
        assert new_sink.write_batch(1, [ZkWrite(ZkOp.SET, state, _state(1, 1), 0, False)]).ok
        standby.release()
    finally:
        standby_zk.stop()
        standby_zk.close()
