"""The liveness bridge: broker registrations in ZooKeeper -> broker events on Kafka.

The driver watches ``/brokers/ids`` (kazoo ``ChildrenWatch``) and each registration znode (a data watch,
Kafka's ``BrokerModificationsHandler``: ZooKeeper's watches fire once, so every read of a registration arms
the next one) and, on every change and every ``resync_interval_s`` seconds, reads all registrations
(pipelined ``get_async``) and compares them with what it last published (broker id -> broker epoch, the
registration znode's ``czxid``, and the registration itself):

* a registration whose id is new, or whose czxid differs (the broker re-registered between two reads)
  -> :class:`core.events.BrokerStartup` with the new epoch, rack and endpoints from Kafka's v5 JSON;
* a registration rewritten in place (same czxid, a new znode version) whose rack or endpoints differ from
  the ones last published (a dynamic listener update) -> :class:`core.events.BrokerModification` with
  them; a rewrite that changes neither (a new timestamp, features) publishes nothing;
* a published id whose registration is gone -> :class:`core.events.BrokerFailure` with the last epoch.

Events are published with ``event_to_json`` to the broker-events topic, key = the broker id as text,
failures before the rest, each round flushed before the bridge records it as published (a round whose
publish fails is retried on the next change or resync). The watch callbacks only wake the bridge's own
thread, so kazoo's callback thread (shared with the lease's watch) never blocks on Kafka.

``known`` (broker id -> epoch) and ``known_brokers`` (whole registrations) seed what counts as already
published, e.g. the brokers of the failover snapshot (``known_brokers``: a registration changed in place
since the snapshot was read is then published as a modification); without them, every registration
present at start is announced (the core ignores a startup whose epoch is not newer than the one it knows).
A broker known by its epoch alone has nothing to compare with: its registration as first read here is
taken as published.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from kafka.errors import KafkaError
from kazoo.client import KazooClient
from kazoo.exceptions import (
    ConnectionClosedError,
    ConnectionLoss,
    KazooException,
    NoNodeError,
    SessionExpiredError,
)

from core.events import BrokerFailure, BrokerModification, BrokerStartup, Event
from core.kafka.zkdata import BROKER_IDS
from core.model import Broker
from streaming.errors import StreamingError
from streaming.runtime.watch_thread import WatchThread
from streaming.zk.publishing import publish_events
from streaming.zk.snapshot_reader import SnapshotError, parse_broker_registration

log = logging.getLogger(__name__)


class Producer(Protocol):
    """What the bridge needs of a ``kafka.KafkaProducer``."""

    def send(self, topic: str, value: bytes | None = None, key: bytes | None = None) -> Any: ...

    def flush(self, timeout: float | None = None) -> None: ...


class LivenessError(StreamingError):
    """The bridge could not publish a round of events; ``reason`` says why."""


class LivenessBridge:
    """Publishes broker startups, modifications and failures seen under ``/brokers/ids`` (see the module
    docstring)."""

    def __init__(
        self,
        client: KazooClient,
        producer: Producer,
        topic: str,
        *,
        known: Mapping[int, int] | None = None,
        known_brokers: Iterable[Broker] = (),
        resync_interval_s: float = 10.0,
        flush_timeout_s: float = 30.0,
        on_error: Callable[[Exception], None] | None = None,
    ) -> None:
        self._zk = client
        self._producer = producer
        self.topic = topic
        self._known: dict[int, int] = dict(known or {})
        #: broker id -> its registration as last published (or seeded), at the epoch in ``_known``
        self._brokers: dict[int, Broker] = {}
        for b in known_brokers:
            self._known[b.id] = b.epoch
            self._brokers[b.id] = b
        #: broker id -> the data version of its registration znode when last compared
        self._versions: dict[int, int] = {}
        self._watching = False
        self._flush_timeout = flush_timeout_s
        self._on_error = on_error
        self._lock = threading.Lock()
        self._thread = WatchThread("livectl-liveness", self._round, resync_interval_s)
        #: every event published, in order (for the driver's metrics and for tests)
        self.published: list[Event] = []

    @property
    def known(self) -> dict[int, int]:
        """Broker id -> broker epoch, as last published."""
        with self._lock:
            return dict(self._known)

    def start(self) -> None:
        """Publish the current differences, then follow changes on a thread of the bridge's own."""
        self._zk.ensure_path(BROKER_IDS)
        self._watching = True  # from now on every read of a registration arms a data watch on it
        self.sync()
        self._zk.ChildrenWatch(BROKER_IDS, self._on_children)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._thread.stop(timeout)

    def sync(self) -> list[Event]:
        """Read all registrations now and publish the differences; returns the events published."""
        with self._lock:
            current = self._read()
            events: list[Event] = [
                BrokerFailure(b, epoch) for b, epoch in sorted(self._known.items()) if b not in current
            ]
            #: what this round read: broker id -> (znode version, registration), recorded once published
            seen: dict[int, tuple[int, Broker]] = {}
            for b, (epoch, version, data) in sorted(current.items()):
                same_epoch = self._known.get(b) == epoch
                if same_epoch and self._versions.get(b) == version:
                    continue  # not rewritten since last compared
                try:
                    info = parse_broker_registration(b, data, epoch)
                except SnapshotError as e:
                    log.error("ignoring broker registration: %s", e)
                    continue
                seen[b] = (version, info)
                if not same_epoch:
                    events.append(BrokerStartup(b, epoch, info.rack, info.endpoints))
                elif (held := self._brokers.get(b)) is not None and held != info:
                    # rewritten in place by the same session: Kafka's BrokerModifications
                    events.append(BrokerModification(b, epoch, info.rack, info.endpoints))
            if events:
                self._publish(events)
            for ev in events:
                if isinstance(ev, BrokerFailure):
                    self._known.pop(ev.broker_id, None)
                    self._brokers.pop(ev.broker_id, None)
                    self._versions.pop(ev.broker_id, None)
            for b, (version, info) in seen.items():
                self._known[b] = info.epoch
                self._brokers[b] = info
                self._versions[b] = version
            self.published.extend(events)
            return events

    # ------------------------------------------------------------------ internals

    def _on_children(self, children: list[str]) -> bool | None:
        if self._thread.stopping:
            return False  # kazoo stops the watch
        self._thread.wake()
        return None

    def _on_data(self, event: Any) -> None:
        """A registration's data watch fired (changed or deleted): one shot, armed again by the next read."""
        if not self._thread.stopping:
            self._thread.wake()

    def _round(self) -> None:
        try:
            self.sync()
        except (KazooException, LivenessError) as e:
            # a lost connection or session is the lease's to report (a session that ended is the end of
            # this controller: it says so itself, in one line); anything else is this bridge's
            quiet = isinstance(e, (ConnectionLoss, SessionExpiredError, ConnectionClosedError))
            (log.debug if quiet else log.warning)("liveness bridge round failed, will retry: %r", e)
            if self._on_error is not None:
                self._on_error(e)

    def _read(self) -> dict[int, tuple[int, int, bytes]]:
        """broker id -> (czxid, data version, registration JSON) for every registration present; once
        started, each read arms a data watch on the registration (one per znode: kazoo keeps a callback once)."""
        try:
            children = self._zk.get_children(BROKER_IDS)
        except NoNodeError:
            return {}
        watch = self._on_data if self._watching else None
        handles = [(int(c), self._zk.get_async(f"{BROKER_IDS}/{c}", watch=watch)) for c in children if c.isdigit()]
        out: dict[int, tuple[int, int, bytes]] = {}
        for b, h in handles:
            try:
                data, stat = h.get()
            except NoNodeError:
                continue  # gone between listing and reading: a failure if it was known
            out[b] = (stat.czxid, stat.version, data)
        return out

    def _publish(self, events: list[Event]) -> None:
        try:
            publish_events(self._producer, self.topic, events, lambda ev: str(_broker_of(ev)), self._flush_timeout)
        except (KafkaError, OSError) as e:
            raise LivenessError(f"could not publish {len(events)} broker events to {self.topic}: {e!r}") from e


def _broker_of(ev: Event) -> int:
    assert isinstance(ev, BrokerStartup | BrokerModification | BrokerFailure)
    return ev.broker_id
