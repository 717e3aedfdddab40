"""What a new controller reads from ZooKeeper on failover (Kafka's ``initializeControllerContext``), as
values: the partition-state and topic znodes as read, with their znode versions, and the whole
:class:`ZkSnapshot`. Built by the driver from ZooKeeper, carried by
:class:`core.events.ControllerFailover`; its JSON form is :mod:`core.codec.snapshot`'s.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.model import Broker, PartitionTarget, TopicPartition


@dataclass(frozen=True)
class PartitionStateZnode:
    """``/brokers/topics/<t>/partitions/<p>/state`` as read, with its znode version."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int
    leader_recovery_state: int = 0


@dataclass(frozen=True)
class TopicZnode:
    """``/brokers/topics/<t>`` as read: assignment plus KIP-455 adding / removing replicas."""

    topic: str
    partitions: tuple[tuple[int, tuple[int, ...]], ...]
    adding_replicas: tuple[tuple[int, tuple[int, ...]], ...] = ()
    removing_replicas: tuple[tuple[int, tuple[int, ...]], ...] = ()
    topic_id: str | None = None
    zk_version: int = 0


@dataclass(frozen=True)
class ZkSnapshot:
    """What a new controller reads from ZooKeeper on failover (Kafka's ``initializeControllerContext``)."""

    controller_epoch: int
    controller_epoch_zk_version: int
    brokers: tuple[Broker, ...]
    topics: tuple[TopicZnode, ...]
    partition_states: tuple[tuple[TopicPartition, PartitionStateZnode], ...]
    #: ``/admin/reassign_partitions`` (legacy path) contents
    pending_reassignments: tuple[PartitionTarget, ...] = ()
    #: children of ``/admin/delete_topics``
    topics_to_delete: tuple[str, ...] = ()
    #: ``/admin/preferred_replica_election`` contents
    pending_preferred_elections: tuple[TopicPartition, ...] = ()
    #: per-topic configs from ``/config/topics/<t>``
    topic_configs: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()
    #: children of ``/livectl/offline_replicas`` (:mod:`core.offline_replicas`): the topics whose record a
    #: new controller must rewrite or delete, since it knows no failed log dir yet
    offline_replica_topics: tuple[str, ...] = ()
    #: ``/livectl/cordoned_brokers`` (:mod:`core.cordon`): the brokers no new replica is placed on
    cordoned_brokers: tuple[int, ...] = ()
