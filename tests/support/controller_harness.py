"""A harness for the controller query against real ZooKeeper, the real broker and the shared SparkSession.

Each test gets its own ZooKeeper chroot and its own topic names, so tests never see each other's data.
Brokers are registered with their own kazoo sessions (Kafka's ``/brokers/ids/<id>`` v5 JSON); killing
one closes its session, exactly as a crashed broker's session ends.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kazoo.client import KazooClient

from core import events as ev
from core.codec.events import event_to_json
from core.kafka.zkdata import encode_broker_registration
from streaming.driver.app import ControllerApp
from streaming.driver.entry import run_again_after_worker_start_failures
from streaming.settings import Settings

log = logging.getLogger(__name__)


@dataclass
class Cluster:
    zk_connect: str
    bootstrap: str
    settings: Settings
    zk: KazooClient
    brokers: dict[int, KazooClient] = field(default_factory=dict)
    epochs: dict[int, int] = field(default_factory=dict)
    producer: KafkaProducer | None = None

    # ------------------------------------------------------------------ brokers

    def register_broker(self, broker_id: int, rack: str | None = None) -> int:
        """Registers an ephemeral ``/brokers/ids/<id>``; returns its czxid (the broker epoch)."""
        client = KazooClient(hosts=self.zk_connect, timeout=10)
        client.start(timeout=10)
        client.ensure_path("/brokers/ids")
        data = encode_broker_registration("127.0.0.1", 9000 + broker_id, rack, int(time.time() * 1000))
        client.create(f"/brokers/ids/{broker_id}", data.encode(), ephemeral=True)
        self.brokers[broker_id] = client
        _, stat = client.get(f"/brokers/ids/{broker_id}")
        self.epochs[broker_id] = int(stat.czxid)
        return self.epochs[broker_id]

    def kill_broker(self, broker_id: int) -> None:
        client = self.brokers.pop(broker_id)
        client.stop()
        client.close()

    def close(self) -> None:
        """Every registered broker gone, the producer closed, the ZooKeeper session ended."""
        for b in list(self.brokers):
            self.kill_broker(b)
        if self.producer is not None:
            self.producer.close()
        self.zk.stop()
        self.zk.close()

    # ------------------------------------------------------------------ topics

    def _producer(self) -> KafkaProducer:
        if self.producer is None:
            self.producer = KafkaProducer(bootstrap_servers=self.bootstrap, acks="all", linger_ms=0)
        return self.producer

    def send_admin(self, event: ev.Event | str) -> None:
        text = event if isinstance(event, str) else event_to_json(event)
        self._producer().send(self.settings.admin_topic, key=b"cli", value=text.encode()).get(timeout=10)

    def send_broker_event(self, event: ev.Event) -> None:
        key = str(getattr(event, "broker_id", "")).encode()
        self._producer().send(self.settings.broker_events_topic, key=key, value=event_to_json(event).encode()).get(
            timeout=10
        )

    def read_topic(self, topic: str) -> list[dict[str, Any]]:
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False)
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        out: list[dict[str, Any]] = []
        deadline = time.monotonic() + 10
        while consumer.position(tp) < end and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                out.extend(json.loads(r.value) for r in records)
        consumer.close()
        return out

    def requests(self, api: str | None = None) -> list[dict[str, Any]]:
        msgs = self.read_topic(self.settings.requests_topic)
        return [m for m in msgs if api is None or m["api"] == api]

    def admin_results(self) -> list[dict[str, Any]]:
        return self.read_topic(self.settings.admin_results_topic)

    def rejected(self) -> list[dict[str, Any]]:
        return self.read_topic(self.settings.rejected_topic)

    # ------------------------------------------------------------------ ZooKeeper

    def znode(self, path: str) -> dict[str, Any] | None:
        if not self.zk.exists(path):
            return None
        data, _ = self.zk.get(path)
        result: dict[str, Any] = json.loads(data)
        return result

    def state(self, topic: str, partition: int) -> dict[str, Any] | None:
        return self.znode(f"/brokers/topics/{topic}/partitions/{partition}/state")


@dataclass
class RunningController:
    app: ControllerApp
    thread: threading.Thread
    error: list[BaseException]
    stopping: threading.Event = field(default_factory=threading.Event)

    def stop(self, timeout: float = 60) -> None:
        self.stopping.set()
        self.app.stop()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the controller did not stop"


#: as ``livectl run`` does (python_worker_start_retries): a run whose query failed because Spark could not
#: start a Python worker in time (a loaded machine) is run again, as a new controller
WORKER_START_RETRIES = 2


def start_controller(spark: Any, settings: Settings, **kwargs: Any) -> RunningController:
    ready = threading.Event()
    errors: list[BaseException] = []
    running = RunningController(ControllerApp(settings, spark=spark, **kwargs), threading.Thread(), errors)
    runs = 0

    def make_app() -> ControllerApp:
        nonlocal runs
        runs += 1
        if runs > 1:
            running.app = ControllerApp(settings, spark=spark, **kwargs)
        return running.app

    def target() -> None:
        try:
            run_again_after_worker_start_failures(
                make_app, WORKER_START_RETRIES, running.stopping, log.warning, pause_s=0.0, ready=ready
            )
        except BaseException as e:  # surfaced to the test through .error
            errors.append(e)
        finally:
            ready.set()

    running.thread = threading.Thread(target=target, name="livectl-controller", daemon=True)
    running.thread.start()
    ready.wait(120)
    if errors:
        raise errors[0]
    return running
