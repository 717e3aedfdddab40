"""The controller's stop with ZooKeeper or Kafka gone: :meth:`streaming.driver.side_threads.Opened.close` (what
``livectl run`` does after its query stopped: the producer, the lease, the session) ends within its bound.

Before the bound, resigning the lease with ZooKeeper gone waited for ever (kazoo queues a request while it
reconnects), and closing the producer with Kafka gone waited for its unsent events' delivery timeout.
Each test stops a service of its own, never the session's.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer
from kazoo.client import KazooClient

from livectl import local
from streaming.driver.lease import RELEASE_TIMEOUT_S, ControllerLease
from streaming.driver.side_threads import PRODUCER_CLOSE_TIMEOUT_S, Opened

pytestmark = pytest.mark.integration

#: kazoo's own stop waits up to max(10 s, session timeout) for its connection thread
KAZOO_STOP_S = 10.0


def _elected(connect: str) -> tuple[KazooClient, ControllerLease]:
    zk = KazooClient(hosts=connect, timeout=6)
    zk.start(timeout=15)
    lease = ControllerLease(zk, 1)
    lease.acquire(timeout=20)
    return zk, lease


def test_close_with_zookeeper_gone_ends_and_says_so(
    private_zookeeper: local.Service, caplog: pytest.LogCaptureFixture
) -> None:
    zk, lease = _elected(private_zookeeper.connect)
    local.stop_process(private_zookeeper.pid, private_zookeeper.marker)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="streaming.driver.lease"):
        Opened(zk, lease).close()
    assert time.monotonic() - started < 2 * RELEASE_TIMEOUT_S + KAZOO_STOP_S
    # kazoo may not have noticed the loss yet: then the delete is tried and fails within its bound; either way
    # the line says /controller is left to the session's expiry
    said = [r.getMessage() for r in caplog.records if "goes when this controller's session expires" in r.getMessage()]
    assert said, caplog.text
    assert said[0].startswith(("resigning without ZooKeeper:", "could not delete /controller (")), said
    assert "()" not in said[0], said  # the reason is named (an exception with no message: its type)


def test_close_with_kafka_gone_ends_within_the_producer_bound(zookeeper: Any, tmp_path: Path) -> None:
    chroot = f"{zookeeper.connect}/stop-{tmp_path.name}"
    root = KazooClient(hosts=zookeeper.connect, timeout=6)
    root.start(timeout=15)
    root.ensure_path(f"/stop-{tmp_path.name}")
    root.stop()
    root.close()
    kafka = local.start_kafka(tmp_path / "kafka")
    try:
        zk, lease = _elected(chroot)
        producer = KafkaProducer(bootstrap_servers=kafka.bootstrap)
        producer.send("stop-bounded", b"first").get(30)
    finally:
        local.stop_kafka(kafka)
    for _ in range(5):
        producer.send("stop-bounded", b"never sent")
    started = time.monotonic()
    Opened(zk, lease, producer=producer).close()
    assert time.monotonic() - started < PRODUCER_CLOSE_TIMEOUT_S + KAZOO_STOP_S
    # ZooKeeper was there: the lease was given up at once
    check = KazooClient(hosts=chroot, timeout=6)
    check.start(timeout=15)
    try:
        assert check.exists("/controller") is None
    finally:
        check.stop()
        check.close()
