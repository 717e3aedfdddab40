"""The demo's observer: ZooKeeper, the controller's output topics and the brokers' status files."""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core.kafka import zkdata
from livectl import scenario as sc
from livectl.demo.report import DemoError
from livectl.demo.timeline import Timeline

log = logging.getLogger("livectl.demo")


class Observer(threading.Thread):
    """Reads what the controller decided and what the brokers believe, and keeps the latest of each.

    * ZooKeeper (Kafka's layout) every ``zk_interval_s`` → :class:`scenario.ClusterView`, changes printed;
    * ``livectl.requests`` and ``livectl.admin-results`` from their end at :meth:`open` time (assign +
      seek: no consumer group to join) → printed, requests kept for the checks;
    * the brokers' ``--status-file`` documents in ``status_dir``, or what ``status_reader`` returns (real
      brokers: :func:`livectl.scenario.kafka_broker_status` of each).
    """

    def __init__(
        self,
        *,
        zk_connect: str,
        bootstrap: str,
        requests_topic: str,
        results_topic: str,
        status_dir: Path,
        timeline: Timeline,
        verbose: bool,
        zk_interval_s: float = 0.4,
        status_reader: Callable[[], dict[int, dict[str, Any]]] | None = None,
    ) -> None:
        super().__init__(name="livectl-demo-observer", daemon=True)
        self.zk_connect = zk_connect
        self.bootstrap = bootstrap
        self.requests_topic = requests_topic
        self.results_topic = results_topic
        self.status_dir = status_dir
        self.tl = timeline
        self.verbose = verbose
        self.zk_interval_s = zk_interval_s
        self.status_reader = status_reader
        self.labels: dict[str, str] = {}
        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self._view = sc.ClusterView()
        self._status: dict[int, dict[str, Any]] = {}
        self._results: dict[str, dict[str, Any]] = {}
        self._requests: list[tuple[float, dict[str, Any]]] = []
        self._zk: Any = None
        self._consumer: Any = None
        self.failure: str | None = None

    # ------------------------------------------------------------------ lifecycle

    def open(self) -> None:
        """Connect and take the topics' end positions now (before anything is sent)."""
        from kafka import KafkaConsumer, TopicPartition
        from kazoo.client import KazooClient

        self._zk = KazooClient(hosts=self.zk_connect, timeout=10)
        self._zk.start(timeout=15)
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False, group_id=None)
        tps: list[Any] = []
        for topic in (self.requests_topic, self.results_topic):
            parts = consumer.partitions_for_topic(topic)
            if not parts:
                consumer.close()
                raise DemoError(f"topic {topic} does not exist on {self.bootstrap}")
            tps.extend(TopicPartition(topic, p) for p in sorted(parts))
        consumer.assign(tps)
        consumer.seek_to_end(*tps)
        for tp in tps:
            consumer.position(tp)
        self._consumer = consumer
        self._view = self._read_view()

    def stop(self) -> None:
        self._stop_event.set()
        if self.is_alive():
            self.join(10)
        if self._consumer is not None:
            with contextlib.suppress(Exception):
                self._consumer.close()
        if self._zk is not None:
            with contextlib.suppress(Exception):
                self._zk.stop()
                self._zk.close()

    def refresh(self) -> None:
        """Read ZooKeeper and the brokers' status files now (the last look before teardown)."""
        self._refresh_status()
        self._refresh_zk()

    def run(self) -> None:
        last_zk = 0.0
        while not self._stop_event.is_set():
            try:
                self._poll_kafka()
                if time.monotonic() - last_zk >= self.zk_interval_s:
                    last_zk = time.monotonic()
                    self._refresh_zk()
                    self._refresh_status()
            except Exception as e:  # keep observing; a step's check will notice if it matters
                self.failure = f"{type(e).__name__}: {e}"
                log.warning("observer: %s", self.failure)
                self._stop_event.wait(0.5)

    # ------------------------------------------------------------------ readers

    def _poll_kafka(self) -> None:
        batches = self._consumer.poll(timeout_ms=200)
        new_requests: list[dict[str, Any]] = []
        now = time.monotonic()
        for tp, records in sorted(batches.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
            for rec in records:
                try:
                    value = json.loads(rec.value)
                except (ValueError, TypeError):
                    continue
                if not isinstance(value, dict):
                    continue
                if tp.topic == self.results_topic:
                    rid = str(value.get("request_id"))
                    with self._lock:
                        self._results[rid] = value
                    label = self.labels.get(rid)
                    self.tl.line("admin", sc.describe_admin_result(value, label))
                else:
                    new_requests.append(value)
        if new_requests:
            with self._lock:
                self._requests.extend((now, m) for m in new_requests)
            if self.verbose:
                for text in sc.describe_requests(new_requests):
                    self.tl.line("req", text)

    def _refresh_zk(self) -> None:
        view = self._read_view()
        with self._lock:
            old, self._view = self._view, view
        if self.verbose:
            for text in sc.diff_views(old, view):
                self.tl.line("zk", text)

    def _read_view(self) -> sc.ClusterView:
        from admin.zkread import ZkReader

        reader = ZkReader(self._zk)
        brokers = {b: reg.epoch for b, reg in reader.brokers().items()}
        topics: dict[str, dict[int, sc.PartitionView]] = {}
        for t in reader.topics():
            try:
                tz = reader.topic(t)
            except (ValueError, KeyError, TypeError):  # written as we read it: next round
                continue
            if tz is None:
                continue
            adding, removing = dict(tz.adding_replicas), dict(tz.removing_replicas)
            parts: dict[int, sc.PartitionView] = {}
            for p, replicas in tz.partitions:
                try:
                    st = reader.partition_state(t, p)
                except (ValueError, KeyError, TypeError):
                    st = None
                parts[p] = sc.PartitionView(
                    tuple(replicas),
                    tuple(adding.get(p, ())),
                    tuple(removing.get(p, ())),
                    None if st is None else st.leader,
                    -1 if st is None else st.leader_epoch,
                    () if st is None else tuple(st.isr),
                )
            topics[t] = parts
        ctl = reader.controller()
        return sc.ClusterView(
            brokers,
            topics,
            tuple(sorted(reader.marked_for_deletion())),
            self._zk.exists(zkdata.REASSIGN_PARTITIONS) is not None,
            ctl.broker_id,
            ctl.epoch,
        )

    def _refresh_status(self) -> None:
        if self.status_reader is not None:
            read = self.status_reader()
            with self._lock:
                self._status = read
            return
        status: dict[int, dict[str, Any]] = {}
        for path in sorted(self.status_dir.glob("broker-*.json")):
            try:
                doc = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            for bid, st in (doc.get("brokers") or {}).items():
                status[int(bid)] = st
        with self._lock:
            self._status = status

    # ------------------------------------------------------------------ what the checks read

    def snapshot(self) -> tuple[sc.ClusterView, dict[int, dict[str, Any]]]:
        with self._lock:
            return self._view, dict(self._status)

    def result(self, request_id: str) -> dict[str, Any] | None:
        with self._lock:
            return self._results.get(request_id)

    def requests_since(self, since: float) -> list[dict[str, Any]]:
        with self._lock:
            return [m for t, m in self._requests if t >= since]
