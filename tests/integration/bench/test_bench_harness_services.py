"""The benchmarks' watch on a znode's deletion (:class:`bench.harness.ZnodeDeletion`), on the tests' ZooKeeper:
the time it tells is when the znode went (``failover``'s and ``class_archive``'s takeover clock starts there,
``broker_failure``'s failure clock too)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from bench.harness import ZnodeDeletion, close, zk_client
from livectl import local

pytestmark = pytest.mark.integration


@pytest.fixture
def client(zookeeper: local.Service) -> Iterator[KazooClient]:
    c = zk_client(zookeeper.connect)
    try:
        yield c
    finally:
        close(c)


def test_the_deletion_of_an_ephemeral_znode_is_seen_when_its_session_ends(
    zookeeper: local.Service, client: KazooClient
) -> None:
    path = f"/bench-watch-{uuid.uuid4().hex[:8]}"
    owner = zk_client(zookeeper.connect)
    try:
        owner.create(path, b"", ephemeral=True)
        gone = ZnodeDeletion(client, path)
        ended = time.time()
    finally:
        close(owner)  # its session ends: ZooKeeper deletes the znode
    seen = gone.wait(10)
    assert ended <= seen <= time.time()
    assert client.exists(path) is None
    assert gone.wait(0) == seen  # told again, the same moment


def test_a_znode_that_is_not_there_or_stays_is_said_so(client: KazooClient) -> None:
    path = f"/bench-watch-{uuid.uuid4().hex[:8]}"
    with pytest.raises(RuntimeError, match=f"no {path} to watch"):
        ZnodeDeletion(client, path)
    client.create(path, b"")
    try:
        with pytest.raises(RuntimeError, match="was not deleted within"):
            ZnodeDeletion(client, path).wait(0.2)
    finally:
        client.delete(path)
