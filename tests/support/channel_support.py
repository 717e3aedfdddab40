"""The channel integration tests' prelude: a controller channel run in the test's process, and one real Apache
Kafka broker (ZooKeeper mode, id 1) under its own ZooKeeper chroot whose controller is livectl's.

:func:`broker_under_livectl` starts the broker with ``/controller`` held for :data:`CONTROLLER` (the broker's
own controller never takes over); :func:`bus_settings` makes a channel's topics on the bus;
:func:`running_channel` runs a channel in a thread; :class:`ControllerBus` sends the requests livectl's
controller would publish; :class:`EndpointSetup` holds them together for a test, with the steps the endpoint
tests share (broker 1 made a leader, its producer ids allocated, its ISR shrink and its controlled shutdown
answered)."""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition
from kazoo.client import KazooClient
from waiting import wait_until

from channel.runner import ChannelSettings, ControllerChannel
from core.codec.events import event_from_json
from core.events import AlterPartition, AlterPartitionRequest, ControlledShutdown, Event
from core.kafka import zkdata
from core.kafka.envelope import encode_envelope
from core.kafka.request_encoding import encode_body
from core.kafka.requests import (
    AlterPartitionResponse,
    AlterPartitionResult,
    BrokerAddress,
    ControlledShutdownResponse,
    LeaderAndIsrRequest,
    LisrPartitionState,
    MetadataBroker,
    MetadataPartitionState,
    RequestApi,
    UpdateMetadataRequest,
)
from livectl import local
from livectl.kafka_zk_brokers import ZkBrokerSettings, start_zk_broker, stop_zk_broker
from sinks.requests import ensure_topics

#: the controller's id and epoch in the tests' requests: above what the broker's own controller holds (1)
CONTROLLER, EPOCH = 1000, 50


def fresh_chroot(zookeeper_connect: str, prefix: str) -> str:
    """A new, empty ZooKeeper folder ``/<prefix>-<random>``: the connect string chrooted to it."""
    chroot = f"/{prefix}-{uuid.uuid4().hex[:8]}"
    root = KazooClient(zookeeper_connect)
    root.start(timeout=15)
    try:
        root.ensure_path(chroot)
    finally:
        root.stop()
        root.close()
    return zookeeper_connect + chroot


@dataclass(frozen=True)
class ControlledBroker:
    """Broker 1 and a client of its ZooKeeper chroot (``connect``); ``epoch``: its registration's czxid (its
    broker epoch)."""

    connect: str
    zk: KazooClient
    svc: local.Service
    epoch: int


@contextmanager
def broker_under_livectl(
    zookeeper_connect: str,
    work: Path,
    prefix: str,
    settings: ZkBrokerSettings | None = None,
    prepare: Callable[[str], None] | None = None,
) -> Iterator[ControlledBroker]:
    """Broker 1 started under a fresh chroot (:func:`fresh_chroot`) whose ``/controller`` is held for
    :data:`CONTROLLER`, as livectl's controller holds it: the broker's own controller never takes over, so the
    broker knows no controller but the one an UpdateMetadata names. ``prepare(connect)`` runs on the chroot
    before the broker starts (e.g. SCRAM users made in ZooKeeper). The broker and the client stop at the end."""
    connect = fresh_chroot(zookeeper_connect, prefix)
    if prepare is not None:
        prepare(connect)
    zk = KazooClient(connect)
    zk.start(timeout=15)
    svc: local.Service | None = None
    try:
        zk.create(zkdata.CONTROLLER_PATH, zkdata.encode_controller(CONTROLLER, int(time.time() * 1000)), ephemeral=True)
        svc = start_zk_broker(work, 1, connect, settings=settings or ZkBrokerSettings())
        _, stat = zk.get("/brokers/ids/1")
        yield ControlledBroker(connect, zk, svc, int(stat.czxid))
    finally:
        zk.stop()
        zk.close()
        if svc is not None:
            stop_zk_broker(svc, timeout=0)


def bus_settings(zookeeper_connect: str, bootstrap: str, prefix: str, **options: Any) -> ChannelSettings:
    """A channel's settings on topics of its own (``<prefix>-<random>.requests`` and ``.broker-events``, made
    here; ``admin_topic`` and ``admin_results_topic`` too when ``options`` name them), retrying every 0.5 s;
    ``options``: the other :class:`~channel.runner.ChannelSettings` fields."""
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    requests, events = f"{name}.requests", f"{name}.broker-events"
    extra = [options[k] for k in ("admin_topic", "admin_results_topic") if k in options]
    ensure_topics(bootstrap, [requests, events, *extra])
    options.setdefault("retry_s", 0.5)
    return ChannelSettings(zookeeper_connect, bootstrap, requests, events, group=f"{name}.channel", **options)


@contextmanager
def running_channel(settings: ChannelSettings) -> Iterator[ControllerChannel]:
    """A :class:`~channel.runner.ControllerChannel` of ``settings``, started and run in a thread of its own;
    stopped and closed at the end."""
    with running_channel_of(ControllerChannel(settings)) as channel:
        yield channel


@contextmanager
def running_channel_of(channel: ControllerChannel) -> Iterator[ControllerChannel]:
    """``channel`` started and run in a thread of its own; stopped and closed at the end."""
    channel.start()
    thread = threading.Thread(target=channel.run, daemon=True)
    thread.start()
    try:
        yield channel
    finally:
        channel.stopping.set()
        thread.join(30)
        channel.close()


@dataclass(frozen=True)
class AdminLink:
    """A running channel whose admin link is ready; ``commands`` reads its admin topic from the start (what the
    controller reads) and ``results`` writes its admin-results topic transactionally (the controller's answers)."""

    channel: ControllerChannel
    commands: KafkaConsumer
    results: KafkaProducer


@contextmanager
def channel_with_admin_link(settings: ChannelSettings, bootstrap: str, transactional_id: str) -> Iterator[AdminLink]:
    """:func:`running_channel` with ``settings``, once it has read the admin-results topic, and the controller's
    side of its admin link (:class:`AdminLink`)."""
    commands = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    tp = KafkaTopicPartition(settings.admin_topic, 0)
    commands.assign([tp])
    commands.seek_to_beginning(tp)
    results = KafkaProducer(bootstrap_servers=bootstrap, acks="all", transactional_id=transactional_id)
    results.init_transactions()
    try:
        with running_channel(settings) as channel:
            assert channel.admin is not None
            assert channel.admin.ready.wait(30), "the channel never read the admin-results topic"
            yield AdminLink(channel, commands, results)
    finally:
        commands.close()
        results.close()


class ControllerBus:
    """livectl's controller's side of the requests topic, played by the test: each :meth:`send` is a batch of
    its own to broker 1, at :data:`EPOCH`."""

    def __init__(self, bootstrap: str, requests_topic: str) -> None:
        self.requests_topic = requests_topic
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
        self.batch = 0

    def send(self, api: RequestApi, body: Any) -> None:
        self.batch += 1
        key, value = encode_envelope(1, api, EPOCH, self.batch, encode_body(body))
        self.producer.send(self.requests_topic, key=key, value=value).get(timeout=10)

    def close(self) -> None:
        self.producer.close()


def broker_event(bootstrap: str, topic: str, what: Callable[[Event], bool], timeout: float = 60) -> tuple[bytes, Event]:
    """The first event on ``topic`` (partition 0, the broker-events topic of a test's channel) that ``what``
    accepts, with its record's key; an ``AssertionError`` when none came within ``timeout`` seconds."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=1000)
    tp = KafkaTopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            for r in consumer:
                ev = event_from_json(r.value)
                if what(ev):
                    return r.key, ev
    finally:
        consumer.close()
    raise AssertionError("no such event on the broker-events topic")


@dataclass
class ChannelRig:
    """What :func:`channel_beside_a_broker` runs: the broker, the channel's settings, the channel and the bus."""

    broker: ControlledBroker
    settings: ChannelSettings
    channel: ControllerChannel
    bus: ControllerBus


@contextmanager
def channel_beside_a_broker(
    zookeeper_connect: str,
    bootstrap: str,
    work: Path,
    prefix: str,
    broker_settings: ZkBrokerSettings | None = None,
    *,
    prepare: Callable[[str], None] | None = None,
    **options: Any,
) -> Iterator[ChannelRig]:
    """The four together: :func:`broker_under_livectl` (chroot ``channel-<prefix>``, ``prepare``),
    :func:`bus_settings` with ``options``, :func:`running_channel` and a :class:`ControllerBus` on its requests
    topic."""
    with broker_under_livectl(zookeeper_connect, work, f"channel-{prefix}", broker_settings, prepare) as b:
        settings = bus_settings(b.connect, bootstrap, prefix, **options)
        with running_channel(settings) as channel, closing(ControllerBus(bootstrap, settings.requests_topic)) as bus:
            yield ChannelRig(b, settings, channel, bus)


@dataclass
class EndpointSetup:
    """A channel beside broker 1 as the channel tests drive it (:meth:`beside`): the broker (its service, broker
    epoch and ZooKeeper client), the channel, the bus on which the test plays livectl's controller, the clients'
    bootstrap and the broker-events topic."""

    svc: local.Service
    epoch: int
    zk: KazooClient
    channel: ControllerChannel
    bus: ControllerBus
    bootstrap: str
    events: str
    #: when set, the key every event :meth:`event` returns must have (``b"1"``: broker 1's own requests)
    event_key: bytes | None = field(default=None, kw_only=True)

    @classmethod
    def beside(cls, rig: ChannelRig, bootstrap: str, **extra: Any) -> Self:
        """The setup of ``rig`` (:func:`channel_beside_a_broker`'s, on ``bootstrap``); ``extra``: a subclass's
        fields, and ``event_key``."""
        b = rig.broker
        return cls(b.svc, b.epoch, b.zk, rig.channel, rig.bus, bootstrap, rig.settings.events_topic, **extra)

    def send(self, api: RequestApi, body: Any) -> None:
        self.bus.send(api, body)

    def event(self, what: Callable[[Event], bool], timeout: float = 60) -> Event:
        """The first event on the broker-events topic that ``what`` accepts (:func:`broker_event`)."""
        key, ev = broker_event(self.bootstrap, self.events, what, timeout)
        if self.event_key is not None:
            assert key == self.event_key, key
        return ev

    def isr_proposal(self, timeout: float = 60) -> AlterPartition:
        """The one partition of the first AlterPartition request on the broker-events topic (the channel writes a
        broker's request as one ``alter_partition_request`` record)."""
        asked = self.event(lambda e: isinstance(e, AlterPartitionRequest), timeout)
        assert isinstance(asked, AlterPartitionRequest) and len(asked.partitions) == 1, asked
        return asked.proposals()[0]

    def port(self, listener: str) -> int:
        """The channel's endpoint port on ``listener``."""
        return self.channel.endpoints[listener].port

    def broker(self, listener: str) -> tuple[str, int]:
        """The broker's own address on ``listener``."""
        host, port = self.svc.listeners[listener].rsplit(":", 1)
        return host, int(port)

    def handshakes(self) -> int:
        """TLS handshakes the channel's endpoints completed (0 without TLS)."""
        return sum(e.handshakes for e in self.channel.endpoints.values())

    def answered(self, n: int) -> None:
        """Wait until the channel counted its ``n``-th answer to the broker (counted once sent: the broker may act
        on it first)."""
        wait_until(
            f"the channel's answer {n} counted",
            lambda: self.channel.node is not None and self.channel.node.answered == n,
        )

    def lead_solo_and_pair(self, listed: MetadataBroker) -> tuple[tuple[str, str], tuple[str, str]]:
        """Broker 1 made leader of ``<requests topic>-solo`` alone and of ``<requests topic>-pair`` with broker 2
        (never started) in its ISR, as livectl's controller (:data:`CONTROLLER`) does it: a LeaderAndIsr naming
        broker 1 at its ``CONTROL_PLANE`` address, then an UpdateMetadata listing ``listed``. Returns once the
        channel delivered both; the two topics as ``(name, topic id)``."""
        solo, pair = (f"{self.bus.requests_topic}-solo", topic_id()), (f"{self.bus.requests_topic}-pair", topic_id())
        states = tuple(
            LisrPartitionState(t, 0, EPOCH, 1, 1, isr, 0, isr, (), (), True, 0, tid)
            for (t, tid), isr in ((solo, (1,)), (pair, (1, 2)))
        )
        host, port = self.broker("CONTROL_PLANE")
        delivered = self.channel.delivered
        self.send(
            RequestApi.LEADER_AND_ISR,
            LeaderAndIsrRequest(CONTROLLER, EPOCH, self.epoch, 0, states, (BrokerAddress(1, host, port),)),
        )
        metadata = tuple(
            MetadataPartitionState(st.topic, 0, EPOCH, 1, 1, st.isr, 0, st.replicas, (), st.topic_id) for st in states
        )
        self.send(RequestApi.UPDATE_METADATA, UpdateMetadataRequest(CONTROLLER, EPOCH, self.epoch, metadata, (listed,)))
        wait_until("both requests delivered", lambda: self.channel.delivered == delivered + 2)
        return solo, pair

    def producer_ids_allocated(self, topic: str, answered: int) -> None:
        """An idempotent producer (kafka-python's default) writes a record to ``topic`` on broker 1: its
        InitProducerId completes only when the broker got a block of producer ids from the channel
        (AllocateProducerIds), which it records in ``/latest_producer_id_block``; returns once the channel counted
        that answer, its ``answered``-th (the channel's answer, not a Kafka controller's)."""
        producer = KafkaProducer(bootstrap_servers=self.svc.address, acks="all", max_block_ms=30_000)
        try:
            producer.send(topic, b"once").get(timeout=30)
        finally:
            producer.close()
        data, _ = self.zk.get("/latest_producer_id_block")
        assert json.loads(data) == {"version": 1, "broker": 1, "block_start": "0", "block_end": "999"}
        self.answered(answered)

    def answer_isr_shrink(self, asked: AlterPartition, pair: tuple[str, str], answered: int) -> None:
        """Answer broker 1's AlterPartition ``asked`` (the ISR of ``pair``, as :meth:`lead_solo_and_pair` made it,
        shrunk to broker 1 alone) with that ISR at partition epoch 1; returns once the broker took the new ISR (its
        log says so) and the channel counted its ``answered``-th answer."""
        result = AlterPartitionResult(pair[0], 0, 0, 1, 1, (1,), 1, 0, asked.correlation_id, pair[1])
        self.send(RequestApi.ALTER_PARTITION_RESPONSE, AlterPartitionResponse(0, (result,)))
        taken = f"[Partition {pair[0]}-0 broker=1] ISR updated to 1 "
        wait_until("the broker taking the new ISR", lambda: taken in Path(self.svc.log).read_text())
        self.answered(answered)

    def controlled_shutdown(self, answered: int) -> None:
        """SIGTERM to broker 1: its ControlledShutdown (at its broker epoch) awaited on the bus and answered with
        nothing left to move. The broker must stop at its first attempt (no retry, no unclean shutdown) and within
        30 s (no retry back-off: ``controlled.shutdown.retry.backoff.ms``, 5 s), and the channel count its
        ``answered``-th answer."""
        stopped: list[bool] = []
        stopper = threading.Thread(target=lambda: stopped.append(stop_zk_broker(self.svc, timeout=60)))
        started = time.monotonic()
        stopper.start()
        ev = self.event(lambda e: isinstance(e, ControlledShutdown))
        assert ev == ControlledShutdown(1, self.epoch)
        self.send(RequestApi.CONTROLLED_SHUTDOWN_RESPONSE, ControlledShutdownResponse(0, ()))
        stopper.join(60)
        assert stopped == [True]
        text = Path(self.svc.log).read_text()
        assert "Controlled shutdown request returned successfully" in text
        assert "Retrying controlled shutdown" not in text
        assert "Proceeding to do an unclean shutdown" not in text
        self.answered(answered)
        assert time.monotonic() - started < 30


def topic_id() -> str:
    """A new topic id, in the base64 form of Kafka's znodes and requests."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
