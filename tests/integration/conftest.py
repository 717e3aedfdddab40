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


@pytest.fixture(scope="session")
def secure_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Apache Kafka enforcing SASL_SSL (SCRAM-SHA-512), mutual TLS and ACLs (:mod:`kafka_secure`), with the
    users and certificates of ``controller``, ``broker-1``, ``alice`` (an admin; her key is encrypted) and
    ``mallory`` (an outsider), and livectl's ACL set for them applied (``livectl acls --apply``'s own call,
    as the bootstrap super user)."""
    from kafka_secure import ADMIN, BROKER, CONTROLLER, OUTSIDER, start_secure_kafka

    from admin.acls import Deployment, acl_set
    from admin.acls_cmd import apply
    from livectl.kafka_server import stop_kafka
    from sinks.requests import transactional_id

    names = (CONTROLLER, BROKER, ADMIN, OUTSIDER)
    users = {name: f"{name}-pw-{uuid.uuid4().hex[:8]}" for name in names}
    kafka = start_secure_kafka(tmp_path_factory.mktemp("secure-kafka"), users, names, encrypted_keys=(ADMIN,))
    try:
        deployment = Deployment(
            controllers=(f"User:{CONTROLLER}",),
            brokers=(f"User:{BROKER}",),
            admins=(f"User:{ADMIN}",),
            transactional_id=transactional_id("livectl"),
        )
        apply(acl_set(deployment), kafka.sasl_bootstrap, kafka.admin_kwargs())
        yield kafka
    finally:
        stop_kafka(kafka.service)
