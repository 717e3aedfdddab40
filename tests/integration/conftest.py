"""Fixtures shared by the integration tests (the services themselves come from ``tests/conftest.py``)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient


@pytest.fixture
def zk_connect(zookeeper: Any) -> str:
    """A connect string of the test's ZooKeeper chrooted to a fresh folder: each test sees an empty tree of
    its own (Kafka's absolute paths included)."""
    root = f"/t-{uuid.uuid4().hex[:12]}"
    base = KazooClient(hosts=zookeeper.connect)
    base.start(timeout=15)
    base.ensure_path(root)
    base.stop()
    base.close()
    return f"{zookeeper.connect}{root}"


@pytest.fixture
def zk_chrooted(zk_connect: str) -> Iterator[KazooClient]:
    """A started kazoo client of :func:`zk_connect` (stopped after the test)."""
    c = KazooClient(hosts=zk_connect)
    c.start(timeout=15)
    yield c
    c.stop()
    c.close()
