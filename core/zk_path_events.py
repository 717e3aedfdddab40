"""Events of the ZooKeeper paths the driver watches for the controller, as values (:mod:`core.events` has the
rest and their base).

Published by the driver's admin-path watcher (``streaming/zk/admin_watch.py``) when a ZooKeeper-era tool writes
a path Kafka's controller watches (``/admin/reassign_partitions``, ``/admin/preferred_replica_election``,
``/admin/delete_topics``, ``/brokers/topics``, ``/log_dir_event_notification``), when the controller's configs
(``/config/brokers``) or livectl's cordoned brokers change. Each carries the controller epoch it was read under:
a bucket applies it only under that epoch, so after a takeover (whose snapshot read the same znodes) it is not
applied a second time. Frozen dataclasses; their JSON form is :mod:`core.codec.zk_paths`'.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from core.events import Event
from core.model import PartitionTarget, TopicPartition
from core.snapshot import PartitionStateZnode

__all__ = [
    "BrokersCordoned",
    "ClusterConfigChanged",
    "ZkLogDirEvents",
    "ZkPreferredElection",
    "ZkReassignment",
    "ZkTopicChange",
    "ZkTopicDeletion",
]


@dataclass(frozen=True)
class ZkReassignment(Event):
    """``/admin/reassign_partitions`` was created (Kafka's ``PartitionReassignmentHandler``): its
    entries, as Kafka's ``ReassignPartitionsZNode`` JSON lists them."""

    TYPE: ClassVar[str] = "zk_reassign_partitions"
    controller_epoch: int
    partitions: tuple[PartitionTarget, ...]

    def topics(self) -> tuple[str, ...]:
        return tuple(sorted({p.topic for p in self.partitions}))


@dataclass(frozen=True)
class ZkPreferredElection(Event):
    """``/admin/preferred_replica_election`` was created (Kafka's ``PreferredReplicaElectionHandler``)."""

    TYPE: ClassVar[str] = "zk_preferred_replica_election"
    controller_epoch: int
    partitions: tuple[TopicPartition, ...]

    def topics(self) -> tuple[str, ...]:
        return tuple(sorted({p.topic for p in self.partitions}))


@dataclass(frozen=True)
class ZkTopicDeletion(Event):
    """``/admin/delete_topics/<topic>`` appeared (Kafka's ``TopicDeletionHandler``)."""

    TYPE: ClassVar[str] = "zk_delete_topic"
    controller_epoch: int
    topic: str

    def topics(self) -> tuple[str, ...]:
        return (self.topic,)


@dataclass(frozen=True)
class ZkTopicChange(Event):
    """``/brokers/topics/<topic>`` appeared or changed (Kafka's ``TopicChangeHandler`` and
    ``PartitionModificationsHandler``): the assignment as the znode holds it, with the topic id and the
    configs of ``/config/topics/<topic>`` as read with it. Partitions the controller does not know are
    created. ``zk_version`` is the znode's version as read (``None`` from a watcher that did not say): the
    controller's repair of a replica placed on its own id rewrites the znode at that version."""

    TYPE: ClassVar[str] = "zk_topic_change"
    controller_epoch: int
    topic: str
    partitions: tuple[tuple[int, tuple[int, ...]], ...]
    topic_id: str | None = None
    configs: tuple[tuple[str, str], ...] = ()
    zk_version: int | None = None

    def topics(self) -> tuple[str, ...]:
        return (self.topic,)


@dataclass(frozen=True)
class ZkLogDirEvents(Event):
    """Children of ``/log_dir_event_notification`` (Kafka's ``LogDirEventNotificationHandler``):
    ``(sequence znode name, broker id)`` per notification; handled, the znodes are deleted."""

    TYPE: ClassVar[str] = "zk_log_dir_events"
    SCOPE: ClassVar[str] = "cluster"
    controller_epoch: int
    notifications: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class ZkIsrChange(Event):
    """Children of ``/isr_change_notification`` (Kafka's ``IsrChangeNotificationHandler``): leaders on an
    inter-broker protocol below 2.7 write their ISR changes to the partition-state znodes themselves and
    then list the partitions in a sequential notification. ``states`` are the state znodes of ``topic``'s
    listed partitions as the watcher read them after the notification (a znode that is gone is left out);
    the watcher deletes a notification once its events are published.

    A bucket takes a znode where it holds the same leader and leader epoch at an older znode version (the
    leader's own ISR change) and sends UpdateMetadata for those partitions to every registered broker; a
    znode it holds already, or one older than what it holds, changes nothing. So the event needs no epoch of
    its own: a repeat (a watcher that crashed before deleting the notification) or an event a previous
    controller published is applied at most once, and only if it is still news."""

    TYPE: ClassVar[str] = "zk_isr_change"
    topic: str
    #: (partition, the znode as read)
    states: tuple[tuple[int, PartitionStateZnode], ...]

    def topics(self) -> tuple[str, ...]:
        return (self.topic,)


@dataclass(frozen=True)
class ClusterConfigChanged(Event):
    """The controller's configs by Kafka's names (settings, then ``/config/brokers/<default>``, then
    ``/config/brokers/<controller id>``), as the driver read them; see :mod:`core.cluster_config`."""

    TYPE: ClassVar[str] = "cluster_config"
    SCOPE: ClassVar[str] = "cluster"
    controller_epoch: int
    configs: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class BrokersCordoned(Event):
    """``/livectl/cordoned_brokers`` changed (:mod:`core.cordon`): ``brokers`` are the cordoned brokers now,
    as the driver read them; no new replica is placed on them."""

    TYPE: ClassVar[str] = "brokers_cordoned"
    SCOPE: ClassVar[str] = "cluster"
    controller_epoch: int
    brokers: tuple[int, ...] = ()
