"""Kafka's ``zookeeper.set.acl`` with SASL, on a real ZooKeeper started with a JAAS configuration.

The server is Debian's ZooKeeper with a JAAS ``Server`` section (``DigestLoginModule``, users ``livectl``
and ``mallory``) and ZooKeeper's ``SASLAuthenticationProvider``: the set-up Kafka documents for ZooKeeper
SASL without Kerberos (DIGEST-MD5). The controller's lease and sink authenticate with
``zookeeper_auth=sasl:livectl:…``; every znode they create gets Kafka's ``ZkData.defaultAcls`` for the
principal ``sasl:livectl`` (all rights) plus world read; a client without SASL, another SASL user and a
``digest`` client of the same name can read but not change a partition state or ``/controller_epoch``;
the standby with the same credential takes over and writes; a wrong password is refused.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import Permissions

from core.decisions import ZkOp, ZkWrite
from livectl import local
from sinks.security import ZkSecurity
from sinks.zookeeper import ZooKeeperSink
from streaming.driver.lease import ControllerLease
from streaming.driver.preflight import UnreachableError, check_zookeeper
from streaming.settings import Settings

pytestmark = pytest.mark.integration

PASSWORD = "s3cret-sasl"
STATE = "/brokers/topics/orders/partitions/0/state"


@pytest.fixture(scope="module")
def sasl_zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[local.Service]:
    run_dir: Path = tmp_path_factory.mktemp("zk-sasl")
    svc = local.start_zookeeper(run_dir, local.free_port(), sasl_users={"livectl": PASSWORD, "mallory": "guess"})
    try:
        yield svc
    finally:
        local.stop_process(svc.pid, svc.marker)


def _client(connect: str, security: ZkSecurity) -> KazooClient:
    c = KazooClient(hosts=connect, timeout=10, **security.client_kwargs())
    c.start(timeout=15)
    return c


def _state(leader: int, epoch: int) -> str:
    return json.dumps({"controller_epoch": 1, "leader": leader, "version": 1, "leader_epoch": epoch, "isr": [leader]})


def _tree(zk: KazooClient, path: str = "/") -> list[str]:
    out = []
    for child in zk.get_children(path):
        full = f"{path.rstrip('/')}/{child}"
        if full == "/zookeeper":
            continue
        out.append(full)
        out.extend(_tree(zk, full))
    return out


def test_sasl_controller_znodes_get_kafkas_acls_for_its_principal(sasl_zookeeper: local.Service) -> None:
    settings = Settings(
        zookeeper_connect=sasl_zookeeper.connect, zookeeper_auth=f"sasl:livectl:{PASSWORD}", zookeeper_set_acl=True
    )
    security = settings.zookeeper_security()
    assert security.principals() == [("sasl", "livectl")]
    assert PASSWORD not in repr(security) and PASSWORD not in repr(settings)
    check_zookeeper(settings)  # the preflight authenticates the way the controller does

    zk = _client(sasl_zookeeper.connect, security)
    try:
        lease = ControllerLease(zk, 1000, acl_for=security.acl_for)
        fence = lease.acquire(timeout=10)
        sink = ZooKeeperSink(zk, fence, "q", acl_for=security.acl_for)
        result = sink.write_batch(
            0,
            [
                ZkWrite(ZkOp.CREATE, "/brokers/topics/orders", '{"version":2,"partitions":{"0":[1]}}', -1, True),
                ZkWrite(ZkOp.CREATE, STATE, _state(1, 0), -1, True),
                ZkWrite(ZkOp.CREATE, "/config/topics/orders", '{"version":1,"config":{}}', -1, True),
                ZkWrite(ZkOp.CREATE, "/config/users/alice", '{"version":1,"config":{}}', -1, True),
            ],
        )
        assert result.ok

        created = _tree(zk)
        assert {"/controller", "/controller_epoch", STATE, "/livectl/sink/q", "/config/users/alice"} <= set(created)
        for path in created:
            acls, _ = zk.get_acls(path)
            got = {(a.id.scheme, a.id.id, a.perms) for a in acls}
            if path.startswith("/config/users"):
                # Kafka's sensitive paths: not world-readable
                assert got == {("sasl", "livectl", Permissions.ALL)}, path
            else:
                assert got == {("sasl", "livectl", Permissions.ALL), ("world", "anyone", Permissions.READ)}, path

        strangers = [
            _client(sasl_zookeeper.connect, ZkSecurity()),
            _client(sasl_zookeeper.connect, ZkSecurity.parse("sasl:mallory:guess")),
            # the same user name through the digest scheme is another identity
            _client(sasl_zookeeper.connect, ZkSecurity.parse(f"digest:livectl:{PASSWORD}")),
        ]
        try:
            for c in strangers:
                assert json.loads(c.get(STATE)[0])["leader"] == 1  # world-readable, like Kafka's
                with pytest.raises(NoAuthError):
                    c.set(STATE, _state(2, 1).encode())
                with pytest.raises(NoAuthError):
                    c.set("/controller_epoch", b"99")
                with pytest.raises(NoAuthError):
                    c.delete(STATE)
                with pytest.raises(NoAuthError):
                    c.create("/brokers/topics/orders/partitions/7", b"")
                with pytest.raises(NoAuthError):
                    c.get("/config/users/alice")
            assert json.loads(zk.get(STATE)[0])["leader"] == 1
            assert zk.get("/controller_epoch")[0] == str(fence.controller_epoch).encode()
        finally:
            for c in strangers:
                c.stop()
                c.close()
        lease.release()
    finally:
        zk.stop()
        zk.close()

    # the standby authenticates as the same principal: after the takeover it writes where the first one did
    standby_zk = _client(sasl_zookeeper.connect, security)
    try:
        standby = ControllerLease(standby_zk, 1001, acl_for=security.acl_for)
        new_fence = standby.acquire(timeout=10)
        assert new_fence.controller_epoch == fence.controller_epoch + 1
        new_sink = ZooKeeperSink(standby_zk, new_fence, "q", acl_for=security.acl_for)
        assert new_sink.write_batch(1, [ZkWrite(ZkOp.SET, STATE, _state(1, 1), 0, False)]).ok
        standby.release()
    finally:
        standby_zk.stop()
        standby_zk.close()


def test_a_wrong_sasl_password_is_refused_before_the_controller_starts(sasl_zookeeper: local.Service) -> None:
    settings = Settings(zookeeper_connect=sasl_zookeeper.connect, zookeeper_auth="sasl:livectl:wrong")
    with pytest.raises(UnreachableError) as e:
        check_zookeeper(settings, timeout_s=5)
    assert "zookeeper_auth" in str(e.value) and "wrong" not in str(e.value)
