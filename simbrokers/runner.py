"""The I/O shell: N simulated brokers in one process, talking to the controller only through ZooKeeper and
the topics.

Per broker: its own kazoo session holding ``/brokers/ids/<id>``, and a fetch listener on the endpoint it
registers. Per process: one consumer assigned to every partition of ``livectl.requests`` and of the
control topic (messages filtered by key = broker id; a shared UpdateMetadata, keyed -1, is applied by each
of the process's brokers among its addressees), one producer for ``livectl.broker-events``.

Start-up order matters: the consumer's positions are taken at the end of the topics *before* the
brokers register, so no request sent after registration is missed and none for an earlier incarnation
is applied.

Loop (every ``tick_ms``): apply requests and control commands, tick every broker (produce, ISR checks,
AlterPartition, controlled shutdown), run due fetches (in-process through :class:`LocalFabric`, across
processes over TCP), publish the events, flush. A broker's proposals of one tick go out as AlterPartition requests
of many partitions a record (:mod:`simbrokers.alter_requests`), as Kafka's brokers send every pending partition in
one request. An AlterPartition record the producer could not write has its proposals sent again (the producer's
error callback): once written, a proposal waits for its answer.

Signals: SIGTERM / SIGINT start a controlled shutdown of every broker of the process; each deregisters
(closes its session) when its shutdown succeeded or ran out of retries; the process exits when none is
left, and at the latest ``shutdown_timeout_s`` + :data:`simbrokers.stopping.CLOSE_TIMEOUT_S` seconds after
the signal whatever is unreachable, saying what it could not finish (:mod:`simbrokers.stopping`). A second
SIGINT exits at once. SIGKILL needs no handling: sessions expire.
"""

from __future__ import annotations

import collections
import contextlib
import json
import logging
import signal
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import FrameType
from typing import Any

from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import KafkaError, KafkaTimeoutError, TopicAlreadyExistsError
from kazoo.client import KazooClient, KazooState

from core.codec.events import event_to_json
from core.errors import FormatError
from core.events import Event
from core.kafka import zkdata
from core.kafka.envelope import BROKER_EVENTS_TOPIC, REQUESTS_TOPIC, parse_request
from core.kafka.error_codes import error_name
from core.kafka.log_dirs import LOG_DIRS_TOPIC, chunked
from core.kafka.requests import SHARED_BROKER_ID
from core.model import sort_tps
from simbrokers.alter_requests import PROPOSALS_PER_RECORD, as_requests, correlation_ids
from simbrokers.broker import BrokerConfig, Faults, FetchRequest, FetchResponse, SimBroker
from simbrokers.control import CONTROL_TOPIC, ControlCommand, parse_control
from simbrokers.dynconfig import DynamicConfigWatcher
from simbrokers.fabric import LocalFabric, LossTracker
from simbrokers.fetchnet import FetchClient, FetchServer
from simbrokers.registration import register
from simbrokers.shutdown import ShutdownPhase
from simbrokers.stopping import CLOSE_TIMEOUT_S, SEND_MAX_BLOCK_MS, Watchdog, bounded, say
from simbrokers.throttle import throttle_config
from sinks.security import KafkaSecurity, ZkSecurity

#: Kafka's ``BrokerIdsZNode.path``

log = logging.getLogger("simbrokers")

#: partitions per log-dirs message: about 80 bytes each, well under Kafka's 1 MB message size
_LOG_DIRS_CHUNK = 5000


class SimBrokersError(RuntimeError):
    """The process cannot run (a topic is missing, ZooKeeper unreachable, id taken)."""


@dataclass(frozen=True)
class ProcessSettings:
    broker_ids: tuple[int, ...]
    zookeeper: str
    bootstrap_server: str
    host: str = "127.0.0.1"
    #: first fetch-listener port (broker i gets base + index); 0 = any free port
    base_port: int = 0
    rack: str | None = None
    config: BrokerConfig = field(default_factory=BrokerConfig)
    session_timeout_ms: int = 6000
    tick_ms: int = 50
    requests_topic: str = REQUESTS_TOPIC
    events_topic: str = BROKER_EVENTS_TOPIC
    control_topic: str = CONTROL_TOPIC
    #: where each broker publishes its DescribeLogDirs answer for the partitions being reassigned
    log_dirs_topic: str = LOG_DIRS_TOPIC
    #: how often (0: never)
    log_dirs_interval_ms: int = 1000
    #: wait this long for the controller's topics to exist
    topic_wait_s: float = 60.0
    #: write a JSON status of every broker here every ``status_interval_ms``
    status_file: Path | None = None
    #: at 100k partitions a status file is megabytes of JSON: the long run writes it less often
    status_interval_ms: int = 1000
    #: Kafka client security properties by Kafka's names (``--command-config``), for every Kafka client
    kafka_security: KafkaSecurity = field(default_factory=KafkaSecurity)
    #: ZooKeeper authentication and ACLs of the registrations (``--zookeeper-auth``, ``--zookeeper-set-acl``)
    zookeeper_security: ZkSecurity = field(default_factory=ZkSecurity)
    #: after SIGTERM, how long the brokers' controlled shutdowns may take before the process stops anyway
    shutdown_timeout_s: float = 30.0
    #: ISR proposals per AlterPartition record; 0: an ``alter_partition`` record each (the form before requests)
    proposals_per_record: int = PROPOSALS_PER_RECORD


@dataclass
class _Member:
    broker: SimBroker
    zk: KazooClient
    server: FetchServer
    session_lost: threading.Event = field(default_factory=threading.Event)


def now_ms() -> int:
    return int(time.monotonic() * 1000)


class SimBrokersProcess:
    def __init__(self, settings: ProcessSettings) -> None:
        self.settings = settings
        self.fetch_client = FetchClient()
        self.fabric = LocalFabric(remote=self._remote_fetch)
        self.members: dict[int, _Member] = {}
        self.stopping = threading.Event()
        self.hard_stop = threading.Event()
        self._consumer: KafkaConsumer | None = None
        self._producer: KafkaProducer | None = None
        #: the status file's loss audit, kept between its writes
        self._loss = LossTracker()
        self._last_status_ms = 0
        self._last_log_dirs_ms = 0
        self._log_dirs_off = False
        self._config_zk: KazooClient | None = None
        self._config_watcher: DynamicConfigWatcher | None = None
        #: set on the first stop signal: the orderly stop's last resort
        self._watchdog: Watchdog | None = None
        #: events the producer could not take (Kafka away): counted, said once per stop
        self._unsent = 0
        #: (broker id, correlation id) of AlterPartition records the producer failed to write, appended by its
        #: I/O thread and taken by the loop, which schedules each proposal again (Kafka's channel resends a
        #: request whose send failed)
        self._failed_proposals: collections.deque[tuple[int, int]] = collections.deque()

    # ------------------------------------------------------------------ start

    def start(self) -> None:
        s = self.settings
        self._ensure_control_topic()
        kafka = s.kafka_security.client_kwargs()
        self._consumer = KafkaConsumer(
            **kafka,
            bootstrap_servers=s.bootstrap_server,
            enable_auto_commit=False,
            group_id=None,
            consumer_timeout_ms=1000,
            # the controller writes each batch as one transaction: never act on an aborted one
            isolation_level="read_committed",
        )
        assigned = [tp for topic in (s.requests_topic, s.control_topic) for tp in self._partitions(topic)]
        self._consumer.assign(assigned)
        self._consumer.seek_to_end(*assigned)
        for tp in assigned:
            self._consumer.position(tp)  # resolve the end offsets now, before registering
        self._producer = KafkaProducer(
            **kafka, bootstrap_servers=s.bootstrap_server, linger_ms=5, acks="all", max_block_ms=SEND_MAX_BLOCK_MS
        )
        # quotas first: a registered broker is a started process (tests and operators wait on registration)
        self._start_config_watcher()
        for i, bid in enumerate(s.broker_ids):
            self._start_broker(bid, s.base_port + i if s.base_port else 0)

    def _start_config_watcher(self) -> None:
        """Replication quotas from Kafka's dynamic configs, reloaded on ``/config/changes`` notifications."""
        s = self.settings
        zk = KazooClient(
            hosts=s.zookeeper, timeout=s.session_timeout_ms / 1000.0, **s.zookeeper_security.client_kwargs()
        )
        zk.start(timeout=15)
        self._config_zk = zk
        self._config_watcher = DynamicConfigWatcher(zk, self._apply_configs)
        self._config_watcher.start()

    def _apply_configs(self, brokers: Mapping[str, Mapping[str, str]], topics: Mapping[str, Mapping[str, str]]) -> None:
        for bid, m in list(self.members.items()):
            throttle = throttle_config(bid, brokers, topics)
            with self.fabric.locks[bid]:
                if throttle != m.broker.throttle:
                    log.info("broker %s: replication quotas %s", bid, throttle)
                    m.broker.set_throttle(throttle)

    def _ensure_control_topic(self) -> None:
        """The control topic, and the log-dirs topic when reports are on (kept an hour: readers look back
        :data:`core.move_progress.RATE_WINDOW_MS`)."""
        s = self.settings
        admin = KafkaAdminClient(**s.kafka_security.client_kwargs(), bootstrap_servers=s.bootstrap_server)
        wanted = [NewTopic(s.control_topic, 1, 1)]
        if s.log_dirs_interval_ms > 0:
            wanted.append(NewTopic(s.log_dirs_topic, 1, 1, topic_configs={"retention.ms": str(3_600_000)}))
        try:
            existing = set(admin.list_topics())
            for topic in wanted:
                if topic.name in existing:
                    continue
                try:
                    admin.create_topics([topic])
                except TopicAlreadyExistsError:
                    pass
                except KafkaError as e:
                    if topic.name != s.log_dirs_topic:
                        raise
                    # a principal not allowed to create it: no reports (a send to a missing topic would block)
                    log.warning("cannot create %s (%s): no log-dirs reports", s.log_dirs_topic, e)
                    self._log_dirs_off = True
        finally:
            admin.close()

    def _partitions(self, topic: str) -> list[KafkaTopicPartition]:
        assert self._consumer is not None
        deadline = time.monotonic() + self.settings.topic_wait_s
        warned = False
        while True:
            parts = self._consumer.partitions_for_topic(topic)
            if parts:
                return [KafkaTopicPartition(topic, p) for p in sorted(parts)]
            if time.monotonic() >= deadline:
                raise SimBrokersError(
                    f"topic {topic} does not exist on {self.settings.bootstrap_server}; start the controller "
                    "(or create the livectl topics) first"
                )
            if not warned:
                log.warning("waiting for topic %s to exist", topic)
                warned = True
            time.sleep(0.5)

    def _start_broker(self, broker_id: int, port: int) -> None:
        s = self.settings
        broker = SimBroker(broker_id, s.config)
        if self._config_watcher is not None:  # the quotas read before this broker existed
            broker.set_throttle(throttle_config(broker_id, *self._config_watcher.current()))
        server = FetchServer(s.host, port, self._serve)
        server.start()
        zk = KazooClient(
            hosts=s.zookeeper,
            timeout=s.session_timeout_ms / 1000.0,
            # /brokers/ids and the registrations under it: Kafka's ACLs when asked (not a sensitive path)
            default_acl=s.zookeeper_security.acl_for(zkdata.BROKER_IDS),
            **s.zookeeper_security.client_kwargs(),
        )
        zk.start(timeout=15)
        member = _Member(broker, zk, server)

        def on_state(state: str) -> None:
            if state == KazooState.LOST:
                member.session_lost.set()

        zk.add_listener(on_state)
        broker.broker_epoch = register(
            zk, broker_id, s.host, server.port, s.rack, wait_s=2 * s.session_timeout_ms / 1000.0
        )
        self.members[broker_id] = member
        self.fabric.add(broker)
        log.info("broker %s registered at %s:%s, epoch %s", broker_id, s.host, server.port, broker.broker_epoch)

    # ------------------------------------------------------------------ fetch routing

    def _serve(self, leader_id: int, req: FetchRequest) -> FetchResponse | None:
        return self.fabric.serve(leader_id, req, now_ms())

    def _remote_fetch(self, leader_id: int, req: FetchRequest) -> FetchResponse | None:
        follower = self.fabric.brokers.get(req.replica_id)
        addr = follower.leader_address(leader_id) if follower is not None else None
        if addr is None:
            return None
        return self.fetch_client.fetch(addr.host, addr.port, leader_id, req)

    # ------------------------------------------------------------------ loop

    def install_signal_handlers(self) -> None:
        def on_term(signum: int, frame: FrameType | None) -> None:
            del frame
            if signum == signal.SIGINT and self.stopping.is_set():
                self.hard_stop.set()
            self.stopping.set()

        signal.signal(signal.SIGTERM, on_term)
        signal.signal(signal.SIGINT, on_term)

    def run(self) -> int:
        """Run until every broker has shut down; returns the exit code."""
        assert self._consumer is not None and self._producer is not None
        stop_by: float | None = None
        try:
            while self.members and not self.hard_stop.is_set():
                if self.stopping.is_set() and stop_by is None:
                    stop_by = time.monotonic() + self.settings.shutdown_timeout_s
                    self._watchdog = Watchdog(self.settings.shutdown_timeout_s + CLOSE_TIMEOUT_S + 1).start()
                    self._watchdog.step = "asking the controller for controlled shutdown"
                    for bid in list(self.members):
                        self._controlled_shutdown(bid)
                self._poll_once()
                self._resend_failed_proposals()
                t = now_ms()
                for bid, m in list(self.members.items()):
                    if m.session_lost.is_set():
                        if stop_by is not None:
                            # stopping: the registration is gone already, which is where the stop ends
                            say(f"broker {bid}: ZooKeeper session lost during its controlled shutdown: stopping")
                            self._deregister(bid)
                            continue
                        self._reregister(bid)
                    with self.fabric.locks[bid]:
                        events = m.broker.tick(t)
                    self._publish(bid, events)
                    if m.broker.shutdown.done:
                        self._report_shutdown(bid, m.broker)
                        self._deregister(bid)
                self.fabric.step(now_ms())
                self._report_log_dirs()
                if stop_by is None:
                    self._producer.flush()
                else:
                    self._producer.flush(timeout=max(0.0, min(1.0, stop_by - time.monotonic())))
                    if time.monotonic() >= stop_by:
                        self._stop_anyway()
                        break
                self._write_status()
        finally:
            self._close()
        return 0

    def _report_shutdown(self, bid: int, broker: SimBroker) -> None:
        """The outcome of a finished controlled shutdown: a log line when it succeeded, one line saying what
        it could not do when it ran out of retries."""
        sd = broker.shutdown
        if sd.phase is ShutdownPhase.SUCCEEDED:
            log.info("broker %s controlled shutdown succeeded", bid)
            return
        why = f"last error {error_name(sd.last_error)}" if sd.last_error is not None else "no answer"
        still = f"; partitions still led: {','.join(map(str, sd.last_remaining))}" if sd.last_remaining else ""
        say(f"broker {bid}: controlled shutdown failed after {sd.attempts} attempts ({why}{still}): stopping anyway")

    def _stop_anyway(self) -> None:
        """The shutdown timeout passed: one line per broker whose controlled shutdown is unfinished."""
        for bid, m in sorted(self.members.items()):
            sd = m.broker.shutdown
            what = "no answer"
            if sd.last_error is not None:
                what = f"{sd.attempts} attempt(s), last {error_name(sd.last_error)}"
                if sd.last_remaining:
                    what += f", partitions still led: {','.join(map(str, sd.last_remaining))}"
            say(
                f"broker {bid}: controlled shutdown not acknowledged by the controller within "
                f"{self.settings.shutdown_timeout_s:g} s ({what}): stopping anyway"
            )

    def close(self) -> None:
        """Undo a :meth:`start` that failed part-way: deregister and close whatever it had started."""
        self._close()

    def _close(self) -> None:
        """Deregister what is left and close every client, within :data:`CLOSE_TIMEOUT_S` in all."""
        producer, consumer = self._producer, self._consumer
        close_by = time.monotonic() + CLOSE_TIMEOUT_S
        if self._watchdog is None:  # an error, not a signal: the same bound on closing
            self._watchdog = Watchdog(CLOSE_TIMEOUT_S + 1).start()

        def left() -> float:
            return max(0.1, close_by - time.monotonic())

        for bid in list(self.members):
            self._deregister(bid, timeout_s=left())
        self.fetch_client.close()
        config_zk = self._config_zk
        if config_zk is not None:
            self._watchdog.step = "closing the dynamic-config ZooKeeper session"
            bounded("closing the dynamic-config ZooKeeper session", lambda: _close_zk(config_zk), left())
        if producer is not None:
            self._watchdog.step = "sending the last events to Kafka"
            if not bounded("sending the last events to Kafka", lambda: _flush_all(producer), left()):
                producer.close(timeout=0)
        if self._unsent:
            say(f"{self._unsent} event(s) could not be sent to Kafka (unreachable)")
        if consumer is not None:
            self._watchdog.step = "closing the Kafka consumer"
            bounded("closing the Kafka consumer", lambda: consumer.close(timeout_ms=int(left() * 1000)), left())
        self._watchdog.cancel()

    def _poll_once(self) -> None:
        assert self._consumer is not None
        batches = self._consumer.poll(timeout_ms=self.settings.tick_ms, max_records=2000)
        for tp, records in batches.items():
            for rec in records:
                if tp.topic == self.settings.control_topic:
                    self._on_control(rec.key, rec.value)
                else:
                    self._on_request(rec.key, rec.value)

    def _on_request(self, key: bytes | None, value: bytes) -> None:
        try:
            # a message for another process's broker is not even parsed; a shared one (key -1) names its
            # addressees inside
            if key is None or (int(key) not in self.members and int(key) != SHARED_BROKER_ID):
                return
        except ValueError:
            pass
        try:
            env = parse_request(key, value)
        except FormatError as e:
            log.error("skipping malformed request (%s): %s", e, value[:200])
            return
        for bid in env.recipients():
            m = self.members.get(bid)
            if m is None:
                continue
            with self.fabric.locks[bid]:
                events = m.broker.handle(env, now_ms())
            self._publish(bid, events)

    def _on_control(self, key: bytes | None, value: bytes) -> None:
        try:
            cmd = parse_control(key, value)
        except FormatError as e:
            log.error("skipping malformed control command (%s)", e)
            return
        if cmd.broker_id in self.members:
            self.apply_control(cmd)

    def apply_control(self, cmd: ControlCommand) -> None:
        bid = cmd.broker_id
        m = self.members[bid]
        log.info("broker %s: control command %s", bid, cmd.to_json())
        b = m.broker
        with self.fabric.locks[bid]:
            events: list[Event] = []
            if cmd.command == "slow-follower":
                slow = replace(b.faults, slow_fetch_interval_ms=cmd.fetch_interval_ms)
                events = b.inject(replace(slow, slow_fetch_max_records=cmd.max_records))
            elif cmd.command == "stuck-follower":
                events = b.inject(replace(b.faults, stuck=True))
            elif cmd.command == "disk-failure":
                events = b.inject(replace(b.faults, disk_failed=True))
            elif cmd.command == "clear":
                events = b.inject(Faults())
            elif cmd.command == "produce-rate" and cmd.rate is not None:
                b.config = replace(b.config, produce_rate=cmd.rate)
        self._publish(bid, events)
        if cmd.command == "shutdown":
            self._controlled_shutdown(bid)
        elif cmd.command == "kill":
            log.warning("broker %s killed: closing its session without controlled shutdown", bid)
            self._deregister(bid)

    def _controlled_shutdown(self, bid: int) -> None:
        m = self.members.get(bid)
        if m is None:
            return
        with self.fabric.locks[bid]:
            events = m.broker.start_controlled_shutdown(now_ms())
        if events:
            log.info("broker %s: controlled shutdown requested", bid)
        self._publish(bid, events)

    def _publish(self, broker_id: int, events: list[Event]) -> None:
        assert self._producer is not None
        for ev in as_requests(events, self.settings.proposals_per_record):
            try:
                future = self._producer.send(
                    self.settings.events_topic, key=str(broker_id).encode(), value=event_to_json(ev).encode()
                )
            except KafkaTimeoutError as e:
                # Kafka away: the event is lost, as a real broker's request to an unreachable controller is
                self._unsent += 1
                log.error("broker %s: could not send %s to Kafka: %s", broker_id, type(ev).__name__, e)
                self._failed_proposals.extend((broker_id, c) for c in correlation_ids(ev))
                continue
            if corrs := correlation_ids(ev):
                # never timed out once written; sent again only if the write fails
                future.add_errback(self._on_proposal_not_written, broker_id, corrs)

    def _on_proposal_not_written(self, broker_id: int, correlation_ids: tuple[int, ...], error: Exception) -> None:
        """The producer's errback (its I/O thread): queue the proposals for :meth:`_resend_failed_proposals`."""
        n = len(correlation_ids)
        log.warning("broker %s: AlterPartition of %d partitions not written (%s): sending again", broker_id, n, error)
        self._failed_proposals.extend((broker_id, c) for c in correlation_ids)

    def _resend_failed_proposals(self) -> None:
        while self._failed_proposals:
            bid, correlation_id = self._failed_proposals.popleft()
            m = self.members.get(bid)
            if m is None:
                continue
            with self.fabric.locks[bid]:
                m.broker.alter_partition_not_sent(correlation_id, now_ms())

    def _deregister(self, bid: int, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
        m = self.members.pop(bid, None)
        if m is None:
            return
        self.fabric.remove(bid)
        what = f"closing broker {bid}'s ZooKeeper session (its registration goes when the session expires)"
        if self._watchdog is not None and not m.zk.connected:
            say(f"broker {bid}: ZooKeeper unreachable: its registration goes when its session expires")
        if self._watchdog is not None:
            self._watchdog.step = what
        try:
            closed = bounded(what, lambda: _close_zk(m.zk), timeout_s)
        finally:
            m.server.stop()
        log.info("broker %s deregistered%s", bid, "" if closed else " (its session left to expire)")

    def _reregister(self, bid: int) -> None:
        """The session expired (Kafka re-registers with a new broker epoch)."""
        m = self.members[bid]
        try:
            if not m.zk.connected:  # kazoo starts a new session by itself after an expiry; else a new client
                m.zk.restart()
            # cleared after the restart: closing a connected client reports LOST too, and that loss is this
            # one (cleared before it, every round restarted the client and its new registration went with it)
            m.session_lost.clear()
            epoch = register(m.zk, bid, self.settings.host, m.server.port, self.settings.rack)
        except Exception as e:
            log.error("broker %s could not re-register: %s", bid, e)
            m.session_lost.set()
            return
        with self.fabric.locks[bid]:
            m.broker.broker_epoch = epoch
        log.warning("broker %s re-registered after session loss, epoch %s", bid, epoch)

    def _report_log_dirs(self) -> None:
        """Every ``log_dirs_interval_ms``: each broker's DescribeLogDirs answer, when it names a partition (or
        a failed directory), in messages of at most :data:`_LOG_DIRS_CHUNK` partitions."""
        interval = self.settings.log_dirs_interval_ms
        t = now_ms()
        if interval <= 0 or self._log_dirs_off or t - self._last_log_dirs_ms < interval:
            return
        self._last_log_dirs_ms = t
        wall = int(time.time() * 1000)
        assert self._producer is not None
        for bid in list(self.members):
            broker = self.fabric.brokers.get(bid)
            if broker is None:
                continue
            with self.fabric.locks[bid]:
                report = broker.describe_log_dirs(wall)
            if not any(r.topics or r.error_code for r in report.results):
                continue
            for part in chunked(report, _LOG_DIRS_CHUNK):
                try:
                    self._producer.send(
                        self.settings.log_dirs_topic, key=str(bid).encode(), value=part.to_json().encode()
                    )
                except KafkaTimeoutError as e:
                    log.warning("broker %s: could not send its log-dirs report: %s", bid, e)

    def _write_status(self) -> None:
        path = self.settings.status_file
        t = now_ms()
        if path is None or t - self._last_status_ms < self.settings.status_interval_ms:
            return
        self._last_status_ms = t
        status: dict[str, Any] = {"brokers": {}, "time_ms": int(time.time() * 1000)}
        brokers = sorted(self.fabric.brokers.values(), key=lambda b: b.broker_id)
        with contextlib.ExitStack() as stack:
            for b in brokers:  # fetch-server threads mutate leaders' state: hold every lock, in id order
                stack.enter_context(self.fabric.locks[b.broker_id])
            for b in brokers:
                status["brokers"][str(b.broker_id)] = b.status()
            tps = sort_tps({tp for b in brokers for tp in b.partitions})
            # the audit needs the current leader's log: it can only speak of partitions led in this process
            status["loss"] = {
                str(tp): {"acknowledged": r.acknowledged, "lost": len(r.lost), "leader": r.leader}
                for tp in tps
                for r in [self._loss.report(brokers, tp)]
                if r.leader is not None
            }
            self._loss.forget(tps)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(status))
        tmp.replace(path)


def _close_zk(zk: KazooClient) -> None:
    zk.stop()
    zk.close()


def _flush_all(producer: KafkaProducer) -> None:
    producer.flush()
    producer.close()
