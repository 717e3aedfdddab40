"""The admin-path watcher: ZooKeeper-era tools' znodes -> controller events on Kafka.

Kafka's controller watches these paths while it is active, and so does the driver of the active
livectl controller (the standby starts no watcher). Each change becomes one event of
:mod:`core.events`, published to the broker-events topic with the controller epoch it was read under:

==================================== ============================== =========================================
path (Kafka's ``ZkData``)             reacts to (Kafka's handler)    event
==================================== ============================== =========================================
``/admin/reassign_partitions``       creation                       :class:`~core.zk_path_events.ZkReassignment`
``/admin/preferred_replica_election`` creation                      :class:`~core.zk_path_events.ZkPreferredElection`
``/admin/delete_topics/<t>``         new children                   :class:`~core.zk_path_events.ZkTopicDeletion`
``/brokers/topics`` and ``/<t>``     new topics, changed topic data :class:`~core.zk_path_events.ZkTopicChange`
``/log_dir_event_notification``      new children                   :class:`~core.zk_path_events.ZkLogDirEvents`
``/config/brokers/<default>|<id>``   data                           :class:`~core.zk_path_events.ClusterConfigChanged`
``/isr_change_notification``         children                       :class:`~core.zk_path_events.ZkIsrChange`
``/livectl/cordoned_brokers``        data (livectl's own)           :class:`~core.zk_path_events.BrokersCordoned`
``/livectl/drains/<N>``              children (livectl's own)       none: read for the status page and metrics
==================================== ============================== =========================================

The clean-up of each path is the controller's (the bucket that handles the event writes it through the
fenced ZooKeeper sink), as in Kafka: the reassignment and preferred-election znodes are deleted once
handled, children of ``/admin/delete_topics`` when the topic is gone (or unknown, or deletion is off),
log-dir notifications once handled. ISR-change notifications are the watcher's own to delete (Kafka's
``processIsrChangeNotification`` deletes them whatever their handling did): it reads the partition-state znodes
they list, publishes one :class:`~core.zk_path_events.ZkIsrChange` per topic and deletes each notification once the
producer's flush has acknowledged the events — a watcher stopped in between publishes them again from the
state znodes as they then are, which the buckets take at most once (the event is ordered by the znode
versions, not by an epoch). A topic znode change that adds no partition publishes nothing, and
neither do the controller's own topic creations and partition additions: the dispatcher tells the watcher
of them before and after its ZooKeeper sink writes them (:meth:`AdminPathWatcher.expect`,
:meth:`~AdminPathWatcher.settle`), and only a write that failed is read again as anyone's (each would otherwise
come back as an event that costs a micro-batch to ignore: the buckets already hold its partitions).

Exactly once. The watcher is *primed* with the failover snapshot before the snapshot's reference is
published (:meth:`AdminPathWatcher.prime`): what the snapshot holds counts as handled (the reassignment
and preferred-election znodes by their czxid, so a watch that fires again, or a data change, does not
publish them twice; Kafka too reacts to their creation only), and every later round publishes only what
differs from what was published. Each event carries the epoch: a bucket applies it only under that
epoch, so an event a previous controller published but did not get to apply is dropped after a
takeover — the new controller's snapshot has read the same znodes. Watch callbacks only wake the
watcher's own thread (kazoo's callback thread is shared with the lease and the liveness bridge); a round
whose publish fails is retried on the next wake or resync, nothing being recorded as published before
the producer's flush succeeded.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable, Collection, Mapping
from typing import Any

from kafka.errors import KafkaError
from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionClosedError, ConnectionLoss, KazooException, NoNodeError, SessionExpiredError

from core.cluster_config import effective_configs
from core.codec.events import event_from_json, event_to_json
from core.cordon import CORDONED_BROKERS, DRAINS, decode_cordoned
from core.errors import FormatError
from core.events import Event
from core.kafka import zkdata
from core.model import PartitionTarget, TopicPartition
from core.snapshot import ZkSnapshot
from core.zk_path_events import (
    BrokersCordoned,
    ClusterConfigChanged,
    ZkIsrChange,
    ZkLogDirEvents,
    ZkPreferredElection,
    ZkReassignment,
    ZkTopicChange,
    ZkTopicDeletion,
)
from streaming.errors import StreamingError
from streaming.runtime.watch_thread import WatchThread
from streaming.zk.isr_notifications import read_isr_changes
from streaming.zk.liveness import Producer
from streaming.zk.publishing import publish_events

log = logging.getLogger(__name__)

DEFAULT_BROKER_CONFIG = zkdata.CONFIG_BROKERS + "/<default>"
#: Kafka's sequential notification znodes: the prefix and ten digits
_LOG_DIR_EVENT = re.compile(re.escape(zkdata.LOG_DIR_EVENT_PREFIX) + r"\d{10}")
_ISR_CHANGE = re.compile(re.escape(zkdata.ISR_CHANGE_PREFIX) + r"\d{10}")


class AdminWatchError(StreamingError):
    """The watcher could not publish a round of events; the message says why."""


class AdminPathWatcher:
    """Publishes the ZooKeeper admin paths' changes (see the module docstring).

    ``static_configs`` are the controller configs of the settings, by Kafka's names; ``on_configs`` is
    called with the effective ones (static, then ``<default>``, then ``<controller_id>``) whenever they
    change, from the watcher's thread."""

    def __init__(
        self,
        client: KazooClient,
        producer: Producer,
        topic: str,
        controller_epoch: int,
        controller_id: int,
        *,
        static_configs: Mapping[str, str] | None = None,
        on_configs: Callable[[tuple[tuple[str, str], ...]], None] | None = None,
        resync_interval_s: float = 30.0,
        flush_timeout_s: float = 30.0,
    ) -> None:
        self._zk = client
        self._producer = producer
        self.topic = topic
        self.epoch = controller_epoch
        self._controller_id = controller_id
        self._static = dict(static_configs or {})
        #: called with the effective configs whenever they change (e.g. the auto-rebalance schedule's update)
        self.on_configs = on_configs
        self._flush_timeout = flush_timeout_s
        self._lock = threading.Lock()
        self._thread = WatchThread("livectl-admin-watch", self._round, resync_interval_s)
        self._reassign_czxid: int | None = None
        self._preferred_czxid: int | None = None
        self._deleting: set[str] = set()
        self._topics: dict[str, frozenset[int]] = {}
        self._dirty_topics: set[str] = set()
        self._dirty_lock = threading.Lock()
        #: topic znodes this controller is writing (:meth:`expect`) and has written (:meth:`settle`), partition
        #: ids by topic, guarded by ``_dirty_lock``: the first are left for :meth:`settle` by a round that
        #: meets them, the second count as published by the next round
        self._expected: dict[str, frozenset[int]] = {}
        self._own: dict[str, frozenset[int]] = {}
        self._topics_watched = False
        #: topic -> the topic znode's data as the snapshot read it: the first round (which reads every topic
        #: znode to set its watch) need not decode the ones still as read (:meth:`prime`)
        self._primed_data: dict[str, bytes] = {}
        self._log_dir_events: set[str] = set()
        #: the effective controller configs last published (or baked into the query at its start)
        self.configs: tuple[tuple[str, str], ...] = effective_configs(self._static)
        #: the cordoned brokers last published (or read in the failover snapshot: :meth:`prime`); ``None``
        #: before either, so that the first round publishes what it reads
        self._cordoned: tuple[int, ...] | None = None
        #: the brokers a drain is recorded for (``/livectl/drains/<N>``, ``livectl brokers --drain``): shown, not
        #: published (the drain's moves are the tool's reassignments)
        self._draining: tuple[int, ...] = ()
        #: every event published, in order (for tests and the log)
        self.published: list[Event] = []

    # ------------------------------------------------------------------ life cycle

    def prime(self, snapshot: ZkSnapshot, topic_data: Mapping[str, bytes] | None = None) -> None:
        """Count what ``snapshot`` holds as handled (call it after reading the snapshot and before its
        reference is published). ``topic_data``: each topic znode's data as the snapshot's read got it
        (:meth:`streaming.zk.snapshot_reader.SnapshotReader.topic_data`); the first round then decodes only the topic
        znodes whose data differ — a failover's first round reads all of them (1,000 for 100k partitions)."""
        with self._lock:
            for path in (
                zkdata.DELETE_TOPICS,
                zkdata.BROKER_TOPICS,
                zkdata.LOG_DIR_EVENT_NOTIFICATION,
                zkdata.ISR_CHANGE_NOTIFICATION,
            ):
                self._zk.ensure_path(path)
            self._topics = {t.topic: frozenset(p for p, _ in t.partitions) for t in snapshot.topics}
            self._primed_data = {t: data for t, data in (topic_data or {}).items() if t in self._topics and data}
            self._deleting = set(snapshot.topics_to_delete)
            pending = {(t.topic, t.partition, t.replicas) for t in snapshot.pending_reassignments}
            self._reassign_czxid = self._seen_czxid(
                zkdata.REASSIGN_PARTITIONS,
                lambda d: {(t.topic, t.partition, t.replicas) for t in zkdata.decode_reassignment(d)} == pending,
            )
            self._cordoned = snapshot.cordoned_brokers
            preferred = set(snapshot.pending_preferred_elections)
            self._preferred_czxid = self._seen_czxid(
                zkdata.PREFERRED_REPLICA_ELECTION, lambda d: set(zkdata.decode_preferred_election(d)) == preferred
            )

    def read_configs(self) -> tuple[tuple[str, str], ...]:
        """The effective controller configs now (static, ``<default>``, ``<controller_id>``); they count as
        published: the caller hands them to the query it starts."""
        with self._lock:
            self.configs = self._read_configs(watch=False)
            return self.configs

    def start(self) -> None:
        """Publish what changed since :meth:`prime`, then follow changes on a thread of the watcher's own."""
        self.sync()
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._thread.stop(timeout)

    def sync(self) -> list[Event]:
        """Read every watched path now (re-arming the watches) and publish what changed; returns the events."""
        with self._lock:
            events: list[Event] = []
            commits: list[Callable[[], None]] = []
            for read in (
                self._configs_round,
                self._topics_round,
                self._deletions_round,
                self._reassignment_round,
                self._preferred_round,
                self._log_dirs_round,
                self._isr_changes_round,
                self._cordon_round,
                self._drains_round,
            ):
                read(events, commits)
            if events:
                self._publish(events)
                self.published.extend(events)
            for commit in commits:
                commit()
            return events

    # ------------------------------------------------------------------ one round per path

    def _configs_round(self, events: list[Event], commits: list[Callable[[], None]]) -> None:
        configs = self._read_configs(watch=True)
        if configs == self.configs:
            return
        events.append(ClusterConfigChanged(self.epoch, configs))

        def commit() -> None:
            self.configs = configs
            if self.on_configs is not None:
                self.on_configs(configs)

        commits.append(commit)

    @property
    def cordoned(self) -> tuple[int, ...]:
        """The cordoned brokers as last published (or read in the failover snapshot)."""
        return self._cordoned or ()

    @property
    def draining(self) -> tuple[int, ...]:
        """The brokers a drain is recorded for, as last read."""
        return self._draining

    def _drains_round(self, _events: list[Event], _commits: list[Callable[[], None]]) -> None:
        self._zk.exists(DRAINS, watch=self._on_event)
        try:
            children = self._zk.get_children(DRAINS, watch=self._on_event)
        except NoNodeError:
            children = []
        self._draining = tuple(sorted(int(c) for c in children if c.isdigit()))

    def _cordon_round(self, events: list[Event], commits: list[Callable[[], None]]) -> None:
        self._zk.exists(CORDONED_BROKERS, watch=self._on_event)
        try:
            data, _ = self._zk.get(CORDONED_BROKERS, watch=self._on_event)
        except NoNodeError:
            data = b""
        try:
            cordoned = decode_cordoned(data)
        except FormatError as e:
            log.error("keeping the cordoned brokers %s: %s", list(self.cordoned), e)
            return
        if cordoned == self._cordoned:
            return
        events.append(BrokersCordoned(self.epoch, cordoned))

        def commit() -> None:
            self._cordoned = cordoned

        commits.append(commit)

    def expect(self, topics: Mapping[str, frozenset[int]]) -> None:
        """The topic znodes (with the partition ids each will hold) this controller is about to write: a
        round that finds one of them as expected publishes nothing for it until :meth:`settle` says whether
        the write was this controller's. Without it, every topic the controller creates would come back as a
        :class:`~core.zk_path_events.ZkTopicChange` (ignored: the buckets already hold the partitions) — a micro-batch
        spent on the controller's own write."""
        with self._dirty_lock:
            for topic, partitions in topics.items():
                self._expected[topic] = self._expected.get(topic, frozenset()) | partitions

    def settle(self, topics: Mapping[str, frozenset[int]], failed: Collection[str]) -> None:
        """After the writes of :meth:`expect`: the topics written count as published; those in ``failed``
        (refused, or not known to be written) are read again by the next round, and whatever their znode then
        holds that was not published is published, as for anyone's write."""
        again = set(failed) & set(topics)
        with self._dirty_lock:
            for topic, partitions in topics.items():
                self._expected.pop(topic, None)
                if topic not in again:
                    self._own[topic] = self._own.get(topic, frozenset()) | partitions
            self._dirty_topics |= again
        if again:
            self._thread.wake()

    def _topics_round(self, events: list[Event], commits: list[Callable[[], None]]) -> None:
        # before the children are read: a topic written (and settled) since is then among them
        with self._dirty_lock:
            dirty = set(self._dirty_topics)
            own = dict(self._own)
            expected = dict(self._expected)
        known = dict(self._topics)
        for topic, partitions in own.items():
            known[topic] = known.get(topic, frozenset()) | partitions
        children = set(self._children(zkdata.BROKER_TOPICS))
        first = not self._topics_watched
        # the first round arms a data watch on every topic (Kafka's PartitionModificationsHandler)
        wanted = children if first else (children - set(known)) | (dirty & children)
        paths = sorted(zkdata.topic_path(t) for t in wanted)
        handles = [(p, self._zk.get_async(p, watch=self._on_topic_data)) for p in paths]
        primed = self._primed_data if first else {}
        seen: dict[str, frozenset[int]] = {t: ps for t, ps in known.items() if t in children}
        deferred: set[str] = set()
        for path, handle in handles:
            topic = path.rsplit("/", 1)[1]
            try:
                data, stat = handle.get()
            except NoNodeError:
                seen.pop(topic, None)
                continue
            if not data:
                continue  # Kafka's tools write the topic znode with its data in one create
            if primed.get(topic) == data:
                # the data the snapshot decoded: its partitions are the primed ones, all in ``known`` (this is the
                # first round: nothing has replaced what prime() set), so decoded it would add none
                seen[topic] = known[topic]
                continue
            try:
                znode = zkdata.decode_topic_znode(topic, data.decode(), stat.version)
            except (ValueError, KeyError, TypeError, AttributeError) as e:
                log.error("ignoring %s: not Kafka's topic JSON: %s", path, e)
                continue
            partitions = frozenset(p for p, _ in znode.partitions)
            new = partitions - known.get(topic, frozenset())
            if new and new <= expected.get(topic, frozenset()):
                deferred.add(topic)  # this controller's write, as far as can be told yet: settle() decides
                continue
            if new:
                event = self._checked(
                    ZkTopicChange(
                        self.epoch,
                        topic,
                        znode.partitions,
                        znode.topic_id,
                        self._topic_configs(topic),
                        znode.zk_version,
                    )
                )
                if event is not None:
                    events.append(event)
            seen[topic] = partitions | known.get(topic, frozenset())

        def commit() -> None:
            self._topics = seen
            self._topics_watched = True
            self._primed_data = {}
            with self._dirty_lock:
                self._dirty_topics -= dirty - deferred
                for topic, partitions in own.items():
                    if self._own.get(topic) == partitions:
                        del self._own[topic]

        commits.append(commit)

    def _deletions_round(self, events: list[Event], commits: list[Callable[[], None]]) -> None:
        children = set(self._children(zkdata.DELETE_TOPICS))
        for topic in sorted(children - self._deleting):
            event = self._checked(ZkTopicDeletion(self.epoch, topic))
            if event is not None:
                events.append(event)
            else:
                log.error("ignoring %s: not a valid topic name", zkdata.delete_topic_path(topic))

        def commit() -> None:
            self._deleting = children

        commits.append(commit)

    def _reassignment_round(self, events: list[Event], commits: list[Callable[[], None]]) -> None:
        got = self._created(zkdata.REASSIGN_PARTITIONS, self._reassign_czxid)
        if got is None:
            return
        czxid, data = got
        try:
            targets = tuple(PartitionTarget(t.topic, t.partition, t.replicas) for t in zkdata.decode_reassignment(data))
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            log.error("ignoring %s: not Kafka's reassignment JSON: %s", zkdata.REASSIGN_PARTITIONS, e)
            targets = ()
        event = self._checked(ZkReassignment(self.epoch, targets)) if targets else None
        if event is not None:
            events.append(event)
        elif targets:
            log.error("ignoring %s: an entry is not a valid reassignment", zkdata.REASSIGN_PARTITIONS)

        def commit() -> None:
            self._reassign_czxid = czxid

        commits.append(commit)

    def _preferred_round(self, events: list[Event], commits: list[Callable[[], None]]) -> None:
        got = self._created(zkdata.PREFERRED_REPLICA_ELECTION, self._preferred_czxid)
        if got is None:
            return
        czxid, data = got
        try:
            tps = tuple(TopicPartition(tp.topic, tp.partition) for tp in zkdata.decode_preferred_election(data))
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            log.error("ignoring %s: not Kafka's preferred election JSON: %s", zkdata.PREFERRED_REPLICA_ELECTION, e)
            tps = ()
        event = self._checked(ZkPreferredElection(self.epoch, tps)) if tps else None
        if event is not None:
            events.append(event)

        def commit() -> None:
            self._preferred_czxid = czxid

        commits.append(commit)

    def _log_dirs_round(self, events: list[Event], commits: list[Callable[[], None]]) -> None:
        children = {c for c in self._children(zkdata.LOG_DIR_EVENT_NOTIFICATION) if _LOG_DIR_EVENT.fullmatch(c)}
        new = sorted(children - self._log_dir_events)
        handles = [(c, self._zk.get_async(f"{zkdata.LOG_DIR_EVENT_NOTIFICATION}/{c}")) for c in new]
        notifications: list[tuple[str, int]] = []
        for name, handle in handles:
            try:
                data, _ = handle.get()
                o = json.loads(data)
                broker = o["broker"]
                if o.get("event", zkdata.LOG_DIR_FAILURE_EVENT) != zkdata.LOG_DIR_FAILURE_EVENT:
                    raise ValueError(f"unknown event {o.get('event')!r}")
                if isinstance(broker, bool) or not isinstance(broker, int):
                    raise ValueError("broker must be an integer")
            except NoNodeError:
                continue
            except (ValueError, KeyError, TypeError) as e:
                where = f"{zkdata.LOG_DIR_EVENT_NOTIFICATION}/{name}"
                log.error("ignoring %s: not Kafka's log dir event JSON: %s", where, e)
                continue
            notifications.append((name, broker))
        if notifications:
            event = self._checked(ZkLogDirEvents(self.epoch, tuple(notifications)))
            if event is not None:
                events.append(event)

        def commit() -> None:
            self._log_dir_events = (self._log_dir_events | set(new)) & children

        commits.append(commit)

    def _isr_changes_round(self, events: list[Event], commits: list[Callable[[], None]]) -> None:
        children = sorted(c for c in self._children(zkdata.ISR_CHANGE_NOTIFICATION) if _ISR_CHANGE.fullmatch(c))
        if not children:
            return
        handled, by_topic = read_isr_changes(self._zk, children)
        for topic, states in sorted(by_topic.items()):
            event = self._checked(ZkIsrChange(topic, tuple(sorted(states.items()))))
            if event is not None:
                events.append(event)

        def commit() -> None:
            paths = [f"{zkdata.ISR_CHANGE_NOTIFICATION}/{name}" for name in handled]
            for path, deleting in [(path, self._zk.delete_async(path)) for path in paths]:
                try:
                    deleting.get()
                except NoNodeError:
                    pass
                except KazooException as e:
                    # left for a later round, which publishes it again (taken at most once)
                    log.warning("could not delete %s, will publish it again: %r", path, e)

        commits.append(commit)

    # ------------------------------------------------------------------ helpers

    def _checked(self, event: Event) -> Event | None:
        """The event as the query will decode it, or ``None`` (logged) when the query would reject it."""
        try:
            return event_from_json(event_to_json(event))
        except FormatError as e:
            log.error("not publishing %s: %s", event.TYPE, e)
            return None

    def _seen_czxid(self, path: str, seen: Callable[[str], bool]) -> int | None:
        """The czxid of ``path`` when the snapshot already holds what it says, else ``None``."""
        try:
            data, stat = self._zk.get(path)
        except NoNodeError:
            return None
        try:
            return int(stat.czxid) if data and seen(data.decode()) else None
        except (ValueError, KeyError, TypeError, AttributeError):
            return None

    def _created(self, path: str, handled: int | None) -> tuple[int, str] | None:
        """``(czxid, data)`` of ``path`` if it exists as a znode not yet handled; arms an exists watch."""
        stat = self._zk.exists(path, watch=self._on_event)
        if stat is None or int(stat.czxid) == handled:
            return None
        try:
            data, stat = self._zk.get(path)
        except NoNodeError:
            return None
        return int(stat.czxid), data.decode() if data else ""

    def _children(self, path: str) -> list[str]:
        try:
            children: list[str] = self._zk.get_children(path, watch=self._on_event)
            return children
        except NoNodeError:
            self._zk.exists(path, watch=self._on_event)
            return []

    def _topic_configs(self, topic: str) -> tuple[tuple[str, str], ...]:
        try:
            data, _ = self._zk.get(zkdata.topic_config_path(topic))
        except NoNodeError:
            return ()
        try:
            return tuple(sorted(zkdata.decode_topic_config(data.decode()).items())) if data else ()
        except (ValueError, AttributeError) as e:
            log.error("ignoring %s: %s", zkdata.topic_config_path(topic), e)
            return ()

    def _read_configs(self, watch: bool) -> tuple[tuple[str, str], ...]:
        layers: list[Mapping[str, str]] = [self._static]
        for entity in ("<default>", str(self._controller_id)):
            path = zkdata.entity_config_path("brokers", entity)
            try:
                if watch:
                    self._zk.exists(path, watch=self._on_event)
                data, _ = self._zk.get(path, watch=self._on_event if watch else None)
            except NoNodeError:
                continue
            try:
                layers.append(zkdata.decode_topic_config(data.decode()) if data else {})
            except (ValueError, AttributeError) as e:
                log.error("ignoring %s: it is not Kafka's config JSON: %s", path, e)
        configs = effective_configs(*layers)
        checked = self._checked(ClusterConfigChanged(self.epoch, configs))
        if checked is None:
            log.error("keeping the controller configs %s: a dynamic value does not parse", dict(self.configs))
            return self.configs
        return configs

    def _on_event(self, _event: Any) -> None:
        self._thread.wake()

    def _on_topic_data(self, event: Any) -> None:
        path = getattr(event, "path", "") or ""
        if path.startswith(zkdata.BROKER_TOPICS + "/"):
            with self._dirty_lock:
                self._dirty_topics.add(path[len(zkdata.BROKER_TOPICS) + 1 :])
        self._thread.wake()

    def _round(self) -> None:
        try:
            self.sync()
        except (KazooException, AdminWatchError) as e:
            # a lost connection or session is the lease's to report (a controller whose session ended
            # says so itself, in one line); anything else is this watcher's
            quiet = isinstance(e, (ConnectionLoss, SessionExpiredError, ConnectionClosedError))
            (log.debug if quiet else log.warning)("admin-path watcher round failed, will retry: %r", e)

    def _publish(self, events: list[Event]) -> None:
        try:
            publish_events(self._producer, self.topic, events, _key_of, self._flush_timeout)
        except (KafkaError, OSError) as e:
            raise AdminWatchError(f"could not publish {len(events)} admin-path events to {self.topic}: {e!r}") from e


def _key_of(event: Event) -> str:
    topics = event.topics()
    return topics[0] if len(topics) == 1 else "admin"
