"""Fixtures of the Spark tests: one isolated cluster view (ZooKeeper chroot + topic names) per test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from controller_harness import Cluster
from kazoo.client import KazooClient

from livectl import local
from sinks.requests import ensure_topics
from streaming.settings import Settings


@pytest.fixture()
def cluster(zookeeper: local.Service, kafka_broker: local.Service, tmp_path: Path) -> Iterator[Cluster]:
    name = f"t{uuid.uuid4().hex[:8]}"
    root = KazooClient(hosts=zookeeper.connect, timeout=10)
    root.start(timeout=10)
    root.ensure_path(f"/{name}")
    root.stop()
    root.close()
    connect = f"{zookeeper.connect}/{name}"
    settings = Settings.from_mapping(
        {
            "zookeeper_connect": connect,
            "zookeeper_session_timeout_ms": 6000,
            "bootstrap_servers": kafka_broker.bootstrap,
            "admin_topic": f"{name}.admin",
            "broker_events_topic": f"{name}.broker-events",
            "requests_topic": f"{name}.requests",
            "admin_results_topic": f"{name}.admin-results",
            "rejected_topic": f"{name}.rejected",
            "num_buckets": 4,
            "checkpoint_dir": str(tmp_path / "checkpoint"),
            "trigger_interval": "500 milliseconds",
            "query_name": name,
        }
    )
    ensure_topics(
        kafka_broker.bootstrap,
        [
            settings.admin_topic,
            settings.broker_events_topic,
            settings.requests_topic,
            settings.admin_results_topic,
            settings.rejected_topic,
        ],
    )
    zk = KazooClient(hosts=connect, timeout=10)
    zk.start(timeout=10)
    c = Cluster(connect, kafka_broker.bootstrap, settings, zk)
    try:
        yield c
    finally:
        c.close()
