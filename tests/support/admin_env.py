"""The admin tool's test environment: a fresh ZooKeeper chroot and fresh topics on the real services per test
(``env``), a small cluster in Kafka's layout (``write_tree``), and a stand-in controller answering one
command (``answer``). Used by the admin tool's integration tests and the simulated brokers' tool's."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kazoo.client import KazooClient

from core.codec.decisions import encode_decision
from core.codec.events import event_from_json
from core.decisions import AdminResult, AdminStatus
from core.events import AdminCommand, Event
from core.kafka.zkdata import encode_broker_registration


@dataclass
class Env:
    zk_connect: str
    bootstrap: str
    admin: str
    results: str
    control: str
    zk: KazooClient
    tmp: Path

    def args(self, *argv: str, write: bool = True) -> list[str]:
        out = [*argv, "--zookeeper", self.zk_connect, "--bootstrap-server", self.bootstrap]
        if write:
            out += ["--admin-topic", self.admin, "--admin-results-topic", self.results]
        return out

    def consumer(self, topic: str) -> KafkaConsumer:
        c = KafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False, group_id=None)
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        return c

    def read(self, topic: str, count: int, timeout: float = 10.0) -> list[tuple[bytes, bytes]]:
        c = self.consumer(topic)
        out: list[tuple[bytes, bytes]] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and len(out) < count:
            for recs in c.poll(timeout_ms=200).values():
                out += [(r.key, r.value) for r in recs]
        c.close()
        return out

    def commands(self, count: int = 1) -> list[tuple[str, Event]]:
        return [(k.decode(), event_from_json(v)) for k, v in self.read(self.admin, count)]


@pytest.fixture()
def env(zookeeper: Any, kafka_broker: Any, tmp_path: Path) -> Iterator[Env]:
    run = uuid.uuid4().hex[:8]
    root = KazooClient(hosts=zookeeper.connect, timeout=10)
    root.start(timeout=10)
    root.ensure_path(f"/adm-{run}")
    root.stop()
    root.close()
    zk = KazooClient(hosts=f"{zookeeper.connect}/adm-{run}", timeout=10)
    zk.start(timeout=10)
    names = (f"adm-{run}.admin", f"adm-{run}.results", f"adm-{run}.control")
    admin = KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap)
    admin.create_topics([NewTopic(n, 1, 1) for n in names])
    admin.close()
    try:
        yield Env(f"{zookeeper.connect}/adm-{run}", kafka_broker.bootstrap, *names, zk, tmp_path)
    finally:
        zk.stop()
        zk.close()


def write_tree(zk: KazooClient) -> None:
    """A small cluster in Kafka's layout: brokers 1-3, topic orders (3 partitions, one reassigning), topic
    old marked for deletion, a controller."""
    for b in (1, 2, 3):
        zk.create(
            f"/brokers/ids/{b}", encode_broker_registration("127.0.0.1", 9090 + b, None, 1).encode(), makepath=True
        )
    zk.create(
        "/brokers/topics/orders",
        json.dumps(
            {
                "version": 3,
                "topic_id": "q1w2e3r4t5y6u7i8o9p0aa",
                "partitions": {"0": [1, 2], "1": [2, 3, 1], "2": [3, 4]},
                "adding_replicas": {"1": [1]},
                "removing_replicas": {},
            }
        ).encode(),
        makepath=True,
    )
    states = {0: (1, [1, 2]), 1: (2, [2]), 2: (-1, [3])}
    for p, (leader, isr) in states.items():
        zk.create(
            f"/brokers/topics/orders/partitions/{p}/state",
            json.dumps({"version": 1, "leader": leader, "leader_epoch": 4, "controller_epoch": 2, "isr": isr}).encode(),
            makepath=True,
        )
    zk.create(
        "/brokers/topics/old",
        json.dumps({"version": 2, "partitions": {"0": [1]}, "adding_replicas": {}, "removing_replicas": {}}).encode(),
    )
    zk.create("/admin/delete_topics/old", b"", makepath=True)
    zk.create("/config/topics/orders", b'{"version":1,"config":{"cleanup.policy":"compact"}}', makepath=True)
    zk.create("/controller", b'{"version":1,"brokerid":7,"timestamp":"1700000000000"}')
    zk.create("/controller_epoch", b"5")


#: an admin result the fake controller answers with: its status, error and details (an object, or text)
Status = tuple[AdminStatus, str | None, dict[str, Any] | str]


def answer(
    env: Env,
    statuses: list[Status],
    epochs: list[int] | None = None,
    between: Callable[[int], object] | None = None,
    *,
    message: str | None = None,
    skip: int = 0,
) -> Player:
    """Play the controller: read the command after the first ``skip`` ones on the admin topic and publish
    these results for its request id (stamped with ``epochs``, one per result; controller epoch 3 by
    default; with ``message`` as each result's message, else ``step <i>``). The results go out in order on one
    partition and may reach the tool in one poll; ``between(i)``, called once result ``i`` is on the topic
    and before the next is sent, is where a test waits for the tool to have shown it."""

    def run() -> None:
        c = env.consumer(env.admin)
        deadline = time.monotonic() + 20
        recs: list[Any] = []
        while time.monotonic() < deadline:
            recs += [r for rs in c.poll(timeout_ms=200).values() for r in rs]
            if len(recs) > skip:
                ev = event_from_json(recs[skip].value)
                assert isinstance(ev, AdminCommand), ev
                rid = ev.request_id
                p = KafkaProducer(bootstrap_servers=env.bootstrap)
                for i, (status, error, details) in enumerate(statuses):
                    plain = details if isinstance(details, dict) else {}
                    result = AdminResult(rid, ev.TYPE, status, error, message or f"step {i}", plain)
                    epoch = 3 if epochs is None else epochs[i]
                    value = encode_decision(result) | {"batch_id": 10 + i, "controller_epoch": epoch}
                    if isinstance(details, str):
                        value["details"] = details  # as a controller before details became objects wrote it
                    p.send(env.results, key=rid.encode(), value=json.dumps(value).encode())
                    p.flush()
                    if between is not None and i < len(statuses) - 1:
                        between(i)
                p.close()
                break
        c.close()

    t = Player(run)
    t.start()
    return t


class Player(threading.Thread):
    """A thread playing a service in a test; :meth:`join` raises what it raised (a failed wait, say)."""

    def __init__(self, play: Callable[[], None]) -> None:
        super().__init__(daemon=True)
        self.play = play
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.play()
        except BaseException as e:  # re-raised by join, on the test's thread
            self.error = e

    def join(self, timeout: float | None = None) -> None:
        super().join(timeout)
        if self.error is not None:
            raise self.error
