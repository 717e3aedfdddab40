"""``livectl demo --brokers kafka``: the demo's scenario on three real Apache Kafka brokers.

The brokers are Kafka 3.9.2 in ZooKeeper mode (:mod:`livectl.kafka_zk_brokers`, the jars ``scripts/setup``
resolves), registered in the demo's ZooKeeper; they obey livectl's controller through ``livectl channel``
(one process, started by the demo). The order matters (``docs/real-brokers.md``, "the race"): the controller
first, so that it holds ``/controller`` before any broker races for it, then the channel, then the brokers.

The steps are the simulated demo's (:mod:`livectl.demo.steps`) on :func:`livectl.scenario.demo_plan` of three
brokers: a hard kill is a SIGKILL of a broker's JVM, its restart a new JVM on the same log directory, the
controlled shutdown a SIGTERM (the broker's ControlledShutdown reaches livectl through the channel). Each step
is checked against ZooKeeper and against Kafka's own view (:meth:`KafkaDemo._read_status`): each live broker's
metadata (a MetadataRequest: leader, leader epoch, ISR and replicas of every partition) and the partition
directories in its log directory. A producer (``acks=all``) and a consumer (:mod:`livectl.demo.traffic`) run
from the first step to the last; each step also waits until records are acknowledged after its effect and
everything acknowledged before it was consumed; at the end every acknowledged record must have been consumed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from livectl import scenario as sc
from livectl.demo.processes import REPO_ROOT
from livectl.demo.report import DemoError
from livectl.demo.runner import Demo
from livectl.demo.steps import ORDERS, PAYMENTS
from livectl.demo.traffic import Counts, Traffic
from livectl.kafka_server import kafka_classpath, kafka_version
from livectl.kafka_zk_brokers import ZkBrokerSettings, start_zk_broker, stop_zk_broker
from livectl.spawn import LocalServiceError, Service, logged_since, pid_matches

#: the real brokers' ids
KAFKA_BROKERS = (1, 2, 3)
#: what a ZooKeeper-mode broker logs when its controlled shutdown succeeded, and at the end of its shutdown
SHUTDOWN_OK = "Controlled shutdown request returned successfully"
SHUTDOWN_DONE = "shut down completed (kafka.server.KafkaServer)"
#: what it logs when the controller did not let it go at once
SHUTDOWN_RETRY = ("Retrying controlled shutdown", "unclean shutdown")
#: each step waits at most this long for records to flow after its effect
FLOW_TIMEOUT_S = 60.0


@dataclass
class KafkaBroker:
    """One Kafka broker JVM (:func:`start_zk_broker`). Signalled only while its command line has its
    ``server.properties``; ``log_start`` is where this incarnation's lines begin in ``server.log``."""

    broker_id: int
    service: Service
    log_start: int

    @property
    def pid(self) -> int:
        return self.service.pid

    @property
    def marker(self) -> str:
        return self.service.marker

    @property
    def log_file(self) -> Path:
        return Path(self.service.log)

    def running(self) -> bool:
        return self.service.running()

    def signal(self, signum: int) -> None:
        if self.running():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)

    def wait(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while True:
            # this process started the JVM: collect its exit status, or it lingers as a zombie
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(self.pid, os.WNOHANG)
            if not self.running():
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)

    def exit_problem(self) -> str | None:
        """A clean controlled shutdown is what the broker logs (its exit status is the JVM's 143 after SIGTERM
        either way): the controller's answer on the first attempt, then the end of its shutdown."""
        try:
            with self.log_file.open("rb") as f:
                f.seek(self.log_start)
                text = f.read().decode(errors="replace")
        except OSError as e:
            return f"broker {self.broker_id}: cannot read {self.log_file}: {e}"
        retried = [line for line in SHUTDOWN_RETRY if line in text]
        if retried or SHUTDOWN_OK not in text or SHUTDOWN_DONE not in text:
            said = f"it logged {retried[0]!r}" if retried else f"no {SHUTDOWN_OK!r} and {SHUTDOWN_DONE!r}"
            return f"broker {self.broker_id} did not shut down cleanly: {said}; see {self.log_file}"
        return None

    def forget_status(self) -> None:
        """Nothing to forget: only running brokers are asked for their view."""


class KafkaDemo(Demo):
    """The scenario on three Kafka brokers (module docstring)."""

    broker_kind = "Kafka"
    RUN_SUBDIRS = ("checkpoint", "brokers", "kafka")

    def __init__(self, options: Any, out: Any, **kwargs: Any) -> None:
        if options.brokers != len(KAFKA_BROKERS):
            raise DemoError(f"brokers: the demo on Kafka runs {len(KAFKA_BROKERS)} brokers, got {options.brokers}")
        super().__init__(options, out, **kwargs)
        self.kafka_settings = ZkBrokerSettings(
            properties={"zookeeper.session.timeout.ms": str(options.broker_session_timeout_ms)}
        )
        self.channel: subprocess.Popen[bytes] | None = None
        self.channel_marker = ""
        self.traffic: Traffic | None = None
        self._connections: dict[tuple[int, int], Any] = {}
        self._mark: Counts | None = None

    # ------------------------------------------------------------------ set-up

    def _setup(self) -> None:
        try:
            kafka_classpath()  # one line saying how to get the jars, before anything starts
        except LocalServiceError as e:
            raise DemoError(str(e)) from None
        super()._setup()

    def _start_cluster(self) -> None:
        s = self.settings
        self._start_spark()
        epoch, took = self._start_controller_until_ready()
        self.tl.line(
            "demo",
            f"controller {s.controller_id} holds /controller (controller epoch {epoch}) before "
            f"any Kafka broker starts; first micro-batch done {took:.1f} s after start",
        )
        self._start_channel()
        started = time.monotonic()
        # the JVMs start side by side (each waits for its own "started" line)
        with ThreadPoolExecutor(len(KAFKA_BROKERS)) as pool:
            starting = [pool.submit(self.start_broker, b) for b in KAFKA_BROKERS]
        errors = [f.exception() for f in starting if f.exception() is not None]
        if errors:
            raise DemoError(f"a Kafka broker did not start: {errors[0]}")
        self._wait(
            "Kafka brokers registered and answering Metadata",
            lambda: self.broker_start_problems(KAFKA_BROKERS),
            timeout=max(60.0, self.o.step_timeout_s),
        )
        view, _ = self.snapshot()
        if view.controller != s.controller_id:
            raise DemoError(f"/controller is held by {view.controller}, not livectl's controller {s.controller_id}")
        pids = ", ".join(f"{b} (pid {p.pid}, {p.service.address})" for b, p in sorted(self._kafka().items()))
        self.tl.line(
            "demo",
            f"Apache Kafka {kafka_version()} brokers registered: {pids} ({time.monotonic() - started:.1f} s); "
            f"/controller is still livectl's",
        )

    def _start_channel(self) -> None:
        s = self.settings
        group = f"{s.query_name}.demo-channel-{int(time.time() * 1000)}"
        cmd = [sys.executable, "-m", "livectl", "channel", "--zookeeper", self.zk_connect]
        cmd += ["--bootstrap-server", self.bootstrap, "--group", group, "--retry-s", "0.5"]
        cmd += ["--requests-topic", s.requests_topic, "--events-topic", s.broker_events_topic]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
        log = self.run_dir / "channel.log"
        start = log.stat().st_size if log.exists() else 0
        with log.open("ab") as out:
            self.channel = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, env=env
            )
        self.channel_marker = f"--group {group}"
        self.record_processes()
        channel = self.channel

        def problems() -> list[str]:
            if channel.poll() is not None:
                tail = log.read_text(errors="replace")[-1500:]
                raise DemoError(f"livectl channel exited with code {channel.returncode}; {log}:\n{tail}")
            return [] if logged_since(log, start, "controller endpoint listening") else ["livectl channel starting"]

        self._wait("livectl channel listening", problems, timeout=60.0)
        self.tl.line("demo", f"livectl channel up (pid {channel.pid}, log {log})")

    def start_broker(self, broker_id: int) -> KafkaBroker:
        folder = self.run_dir / "kafka" / f"broker-{broker_id}"
        log = folder / "server.log"
        log_start = log.stat().st_size if log.exists() else 0
        try:
            svc = start_zk_broker(folder, broker_id, self.zk_connect, settings=self.kafka_settings)
        except LocalServiceError as e:
            raise DemoError(f"Kafka broker {broker_id} did not start: {e}") from None
        kb = KafkaBroker(broker_id, svc, log_start)
        self.brokers[broker_id] = kb
        self.record_processes()
        return kb

    def _kafka(self) -> dict[int, KafkaBroker]:
        return {b: kb for b, kb in self.brokers.items() if isinstance(kb, KafkaBroker)}

    def _owned(self) -> dict[int, tuple[str, str]]:
        owned = super()._owned()
        if self.channel is not None and pid_matches(self.channel.pid, self.channel_marker):
            owned[self.channel.pid] = ("livectl channel", self.channel_marker)
        return owned

    # ------------------------------------------------------------------ Kafka's own view

    def _status_reader(self) -> Any:
        return self._read_status

    def _read_status(self) -> dict[int, dict[str, Any]]:
        """Each running broker's view (:func:`livectl.scenario.kafka_broker_status`): its metadata and the
        partition directories in its log directory. A running broker that does not answer has an empty view
        (so no check passes on what it would have said)."""
        status: dict[int, dict[str, Any]] = {}
        for b, kb in sorted(self._kafka().items()):
            if not kb.running():
                continue
            try:
                metadata = self._metadata(kb)
            except Exception:  # starting, stopping or busy: asked again next round on a new connection
                self._drop_connection(kb)
                status[b] = {"partitions": {}, "kafka_metadata": {}}
                continue
            data = Path(kb.service.data_dir)
            names = [e.name for e in data.iterdir() if e.is_dir()] if data.is_dir() else []
            status[b] = sc.kafka_broker_status(b, metadata, sc.hosted_partitions(names))
        return status

    def _metadata(self, kb: KafkaBroker) -> dict[str, sc.MetadataPartition]:
        from kio.schema.metadata.v12.request import MetadataRequest
        from kio.schema.metadata.v12.response import MetadataResponse

        from channel.wire import BrokerConnection

        key = (kb.broker_id, kb.pid)
        conn = self._connections.get(key)
        if conn is None:
            host, port = kb.service.address.rsplit(":", 1)
            conn = self._connections[key] = BrokerConnection(host, int(port), timeout_s=5.0)
        answer: Any = conn.send(
            MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False),
            MetadataResponse,
        )
        out: dict[str, sc.MetadataPartition] = {}
        for t in answer.topics:
            if int(t.error_code.value) or t.is_internal:
                continue
            for p in t.partitions:
                out[sc.tp_name(str(t.name), int(p.partition_index))] = sc.MetadataPartition(
                    int(p.leader_id),
                    int(p.leader_epoch),
                    tuple(int(i) for i in p.isr_nodes),
                    tuple(int(r) for r in p.replica_nodes),
                    int(p.error_code.value),
                )
        return out

    def _drop_connection(self, kb: KafkaBroker) -> None:
        conn = self._connections.pop((kb.broker_id, kb.pid), None)
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    # ------------------------------------------------------------------ records through every step

    def _after_step(self, index: int, title: str) -> None:
        if self.traffic is None:
            bootstrap = ",".join(kb.service.address for _, kb in sorted(self._kafka().items()))
            self.traffic = Traffic(bootstrap, {ORDERS: 6, PAYMENTS: 3}, self.o.produce_rate)
            self.traffic.start()
            self._mark = self.traffic.counts()
            self.tl.line(
                "data",
                f"producer (acks=all, {self.o.produce_rate:g} records/s over {ORDERS} and {PAYMENTS}) and "
                f"consumer started on {bootstrap}",
            )
        traffic = self.traffic
        effect = traffic.counts()
        before = traffic.acknowledged()

        def flow() -> list[str]:
            problems = []
            if traffic.acknowledged_since(effect) < 1:
                problems.append("no record acknowledged since the step's effect")
            behind = before - traffic.consumed()
            if behind:
                problems.append(f"{len(behind)} records acknowledged before it not consumed yet")
            return problems

        self._wait(f"{title}: records flowing", flow, timeout=FLOW_TIMEOUT_S)
        now = traffic.counts()
        assert self._mark is not None
        self.tl.line("data", f"step {index}: {now.since(self._mark).text()} (in all: {now.text()})")
        self._mark = now

    def _after_scenario(self) -> None:
        traffic = self.traffic
        if traffic is None:
            return
        self.tl.line("data", "producer stopping: waiting for every record sent to be acknowledged or refused")
        traffic.stop_producing()
        deadline = time.monotonic() + FLOW_TIMEOUT_S
        while traffic.not_consumed() and time.monotonic() < deadline and not self.stop.is_set():
            time.sleep(0.2)
        counts, lost = traffic.counts(), traffic.not_consumed()
        traffic.close()
        self.report.facts["records"] = {
            "produced": counts.produced,
            "acknowledged": counts.acknowledged,
            "failed": counts.failed,
            "consumed": counts.consumed,
            "acknowledged_not_consumed": len(lost),
        }
        if lost:
            shown = ", ".join(v.decode() for v in lost[:5])
            raise DemoError(f"{len(lost)} acknowledged records were never consumed (e.g. {shown})")
        self.tl.line(
            "data", f"every one of the {counts.acknowledged} acknowledged records was consumed ({counts.text()})"
        )

    def _keep_running(self) -> None:
        live = ",".join(kb.service.address for _, kb in sorted(self._kafka().items()) if kb.running())
        self.tl.line("demo", f"Kafka brokers for clients: --bootstrap-server {live}")
        super()._keep_running()

    # ------------------------------------------------------------------ teardown

    def _stop_brokers(self) -> None:
        """The clients, the brokers (SIGKILL: the scenario showed a controlled shutdown, and their data goes
        with the run folder), then the channel (SIGTERM; SIGKILL after 15 s)."""
        if self.traffic is not None:
            self.traffic.close(give_up=self.hard_stop.is_set)
        for kb in list(self._kafka().values()):
            self._drop_connection(kb)
            if kb.running():
                stop_zk_broker(kb.service, timeout=0)
                self.report.stopped.append(f"Kafka broker {kb.broker_id} (pid {kb.pid}, SIGKILL)")
        channel = self.channel
        if channel is not None and channel.poll() is None:
            channel.send_signal(signal.SIGTERM)
            how = ""
            try:
                channel.wait(15)
            except subprocess.TimeoutExpired:
                channel.kill()
                channel.wait(5)
                how = ", SIGKILL after 15 s"
            self.report.stopped.append(f"livectl channel (pid {channel.pid}{how})")
