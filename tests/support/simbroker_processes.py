"""Simulated broker processes beside the session's ZooKeeper and Kafka-protocol broker, for the tests that
start them (``test_simbrokers_*_process.py``): :class:`Env` (a chroot, topics, the processes and the test's
view of the requests and events topics), its fixture ``env``, and a broker's registration."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
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
from waiting import wait_until

from core.codec.events import event_from_json
from core.events import AlterPartitionRequest, Event
from core.kafka.envelope import encode_request
from core.kafka.requests import RequestApi
from simbrokers.control import ControlCommand

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Env:
    zk_connect: str
    bootstrap: str
    requests: str
    events: str
    control_topic: str
    zk: KazooClient
    producer: KafkaProducer
    consumer: KafkaConsumer
    procs: list[subprocess.Popen[bytes]]
    tmp: Path

    def start(self, brokers: str, *extra: str, addresses: bool = True, cwd: Path = REPO) -> subprocess.Popen[bytes]:
        """One ``python -m simbrokers`` process; ``addresses=False`` leaves out ``--zookeeper`` and
        ``--bootstrap-server`` and their environment variables (the defaults' lookup decides)."""
        connect = ["--zookeeper", self.zk_connect, "--bootstrap-server", self.bootstrap] if addresses else []
        environ = {k: v for k, v in os.environ.items() if k not in ("LIVECTL_ZOOKEEPER", "LIVECTL_BOOTSTRAP_SERVER")}
        cmd = [
            sys.executable,
            "-m",
            "simbrokers",
            "--brokers",
            brokers,
            *connect,
            "--requests-topic",
            self.requests,
            "--events-topic",
            self.events,
            "--control-topic",
            self.control_topic,
            "--session-timeout-ms",
            "4000",
            *extra,
        ]
        log = (self.tmp / f"simbrokers-{brokers}.log").open("wb")
        proc = subprocess.Popen(cmd, cwd=cwd, env=environ, stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(proc)
        return proc

    def send(self, broker: int, api: RequestApi, body: dict[str, Any], *, batch: int, epoch: int = 1) -> None:
        key, value = encode_request(broker, api, epoch, batch, body)
        self.producer.send(self.requests, key=key, value=value)
        self.producer.flush()

    def control(self, cmd: ControlCommand) -> None:
        self.producer.send(self.control_topic, key=str(cmd.broker_id).encode(), value=cmd.to_json().encode())
        self.producer.flush()

    def wait_events(self, pred: Callable[[Event], bool], count: int = 1, timeout: float = 20.0) -> list[Event]:
        """The first ``count`` events ``pred`` takes; an AlterPartition request (the brokers' record) counts as
        its proposals, one by one, as the controller handles them."""
        got: list[Event] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and len(got) < count:
            for recs in self.consumer.poll(timeout_ms=200).values():
                for r in recs:
                    ev = event_from_json(r.value)
                    each = ev.proposals() if isinstance(ev, AlterPartitionRequest) else (ev,)
                    got += [e for e in each if pred(e)]
        assert len(got) >= count, f"expected {count} events, got {got}"
        return got

    def wait_for(self, cond: Callable[[], object], timeout: float = 20.0, what: str = "condition") -> None:
        wait_until(what, cond, timeout, interval=0.1, detail=lambda: f"logs: {self.logs()}")

    def logs(self) -> str:
        return "\n".join(p.read_text()[-3000:] for p in self.tmp.glob("simbrokers-*.log"))


@pytest.fixture()
def env(zookeeper: Any, kafka_broker: Any, tmp_path: Path) -> Iterator[Env]:
    run = uuid.uuid4().hex[:8]
    root = KazooClient(hosts=zookeeper.connect, timeout=10)
    root.start(timeout=10)
    root.ensure_path(f"/sim-{run}")
    root.stop()
    root.close()
    zk_connect = f"{zookeeper.connect}/sim-{run}"
    zk = KazooClient(hosts=zk_connect, timeout=10)
    zk.start(timeout=10)
    names = (f"sim-{run}.requests", f"sim-{run}.events", f"sim-{run}.control")
    admin = KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap)
    admin.create_topics([NewTopic(names[0], 3, 1), NewTopic(names[1], 1, 1), NewTopic(names[2], 1, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap)
    consumer = KafkaConsumer(bootstrap_servers=kafka_broker.bootstrap, enable_auto_commit=False, group_id=None)
    tp = TopicPartition(names[1], 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    e = Env(zk_connect, kafka_broker.bootstrap, *names, zk, producer, consumer, [], tmp_path)
    try:
        yield e
    finally:
        for p in e.procs:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
                p.wait(10)
        producer.close()
        consumer.close()
        zk.stop()
        zk.close()


def registration(env: Env, broker: int) -> tuple[dict[str, Any], Any]:
    data, stat = env.zk.get(f"/brokers/ids/{broker}")
    return json.loads(data), stat
