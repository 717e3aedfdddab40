"""Events: everything that reaches ``core.controller.step``, as values.

Three families, all frozen dataclasses:

* **admin commands** (topic ``livectl.admin``), each with a ``request_id`` that its
  :class:`core.decisions.AdminResult` echoes;
* **broker events** (topic ``livectl.broker-events``): registrations appearing, changing in place and
  vanishing (published by the driver's liveness bridge), AlterPartition (:mod:`core.isr_events`, re-exported
  here), LeaderAndIsr / StopReplica responses, ControlledShutdown requests, log-dir failures;
* **internal events** made by the driver: controller failover (with a ZooKeeper snapshot), re-reads
  after refused writes, the auto leader rebalance tick. The ZooKeeper paths a tool writes, and the controller's
  configs and cordoned brokers, are the driver's events too, with the epoch they were read under:
  :mod:`core.zk_path_events`.

The base of them all is :class:`core.event_base.Event`. Their stable, versioned JSON form
(``{"version": 1, "type": <TYPE>, ...fields}``) is :mod:`core.codec`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from core.event_base import Event
from core.isr_events import AlterPartition, AlterPartitionRequest, IsrProposal
from core.model import ElectionType, Endpoint, PartitionTarget, TopicPartition
from core.snapshot import PartitionStateZnode, TopicZnode, ZkSnapshot

__all__ = [
    "AdminCommand",
    "AlterPartition",
    "AlterPartitionRequest",
    "AlterTopicConfig",
    "AutoRebalanceTick",
    "BrokerFailure",
    "BrokerModification",
    "BrokerStartup",
    "CancelReassignment",
    "ControlledShutdown",
    "ControllerFailover",
    "CreatePartitions",
    "CreateTopic",
    "DeleteTopic",
    "ElectLeaders",
    "Event",
    "IsrProposal",
    "LeaderAndIsrResponse",
    "LogDirFailure",
    "PartitionError",
    "PartitionStatesRead",
    "ReassignPartitions",
    "StopReplicaResponse",
    "Tick",
    "TopicCreationRefused",
]


# --------------------------------------------------------------------------- admin commands


class AdminCommand(Event):
    """An admin command. ``dry_run``: the controller answers with the decisions it would make for the
    command from its live state and applies none of them (:mod:`core.controller.dry_run`)."""

    request_id: str
    dry_run: bool


@dataclass(frozen=True)
class CreateTopic(AdminCommand):
    """Create ``topic`` with ``partitions`` × ``replication_factor`` placed by Kafka's default
    placement, or with the explicit ``replica_assignment`` (partition -> broker ids)."""

    TYPE: ClassVar[str] = "create_topic"
    request_id: str
    topic: str
    partitions: int = 0
    replication_factor: int = 0
    replica_assignment: tuple[tuple[int, ...], ...] = ()
    configs: tuple[tuple[str, str], ...] = ()
    dry_run: bool = False

    def topics(self) -> tuple[str, ...]:
        return (self.topic,)


@dataclass(frozen=True)
class DeleteTopic(AdminCommand):
    TYPE: ClassVar[str] = "delete_topic"
    request_id: str
    topic: str
    dry_run: bool = False

    def topics(self) -> tuple[str, ...]:
        return (self.topic,)


@dataclass(frozen=True)
class CreatePartitions(AdminCommand):
    """Grow ``topic`` to ``total_count`` partitions (``kafka-topics --alter --partitions``)."""

    TYPE: ClassVar[str] = "create_partitions"
    request_id: str
    topic: str
    total_count: int
    replica_assignment: tuple[tuple[int, ...], ...] = ()
    dry_run: bool = False

    def topics(self) -> tuple[str, ...]:
        return (self.topic,)


@dataclass(frozen=True)
class ReassignPartitions(AdminCommand):
    """Kafka's reassignment JSON ``{"version":1,"partitions":[{"topic","partition","replicas"}]}``.

    Routing splits a multi-topic command into one per bucket its topics live in (same ``request_id``).
    """

    TYPE: ClassVar[str] = "reassign_partitions"
    request_id: str
    partitions: tuple[PartitionTarget, ...]
    dry_run: bool = False

    def topics(self) -> tuple[str, ...]:
        return tuple(sorted({p.topic for p in self.partitions}))


@dataclass(frozen=True)
class CancelReassignment(AdminCommand):
    """Cancel the listed reassignments (KIP-455: reassign back to the origin replicas)."""

    TYPE: ClassVar[str] = "cancel_reassignment"
    request_id: str
    partitions: tuple[TopicPartition, ...]
    dry_run: bool = False

    def topics(self) -> tuple[str, ...]:
        return tuple(sorted({p.topic for p in self.partitions}))


@dataclass(frozen=True)
class ElectLeaders(AdminCommand):
    """``kafka-leader-election``: ``partitions`` empty means all partitions (cluster-scoped)."""

    TYPE: ClassVar[str] = "elect_leaders"
    request_id: str
    election_type: ElectionType
    partitions: tuple[TopicPartition, ...] = ()
    dry_run: bool = False

    def topics(self) -> tuple[str, ...]:
        return tuple(sorted({p.topic for p in self.partitions}))


@dataclass(frozen=True)
class AlterTopicConfig(AdminCommand):
    """Set topic configs and remove overrides (``delete_configs``, names), as ``kafka-configs --alter
    --add-config/--delete-config``; livectl acts on ``unclean.leader.election.enable``."""

    TYPE: ClassVar[str] = "alter_topic_config"
    request_id: str
    topic: str
    configs: tuple[tuple[str, str], ...]
    delete_configs: tuple[str, ...] = ()
    dry_run: bool = False

    def topics(self) -> tuple[str, ...]:
        return (self.topic,)


# --------------------------------------------------------------------------- broker events


@dataclass(frozen=True)
class BrokerStartup(Event):
    """A registration appeared under ``/brokers/ids`` (epoch = the znode's czxid).

    A startup for a broker already live with an older epoch is a bounce (Kafka handles it as failure
    followed by startup)."""

    TYPE: ClassVar[str] = "broker_startup"
    SCOPE: ClassVar[str] = "cluster"
    broker_id: int
    broker_epoch: int
    rack: str | None = None
    endpoints: tuple[Endpoint, ...] = ()


@dataclass(frozen=True)
class BrokerModification(Event):
    """A live broker rewrote its registration in place (same session: ``broker_epoch`` = the unchanged
    czxid), e.g. a dynamic listener update changed its endpoints. Kafka's ``BrokerModifications`` event,
    from the data watch on ``/brokers/ids/<id>``; ``rack`` and ``endpoints`` are the registration's new
    ones."""

    TYPE: ClassVar[str] = "broker_modification"
    SCOPE: ClassVar[str] = "cluster"
    broker_id: int
    broker_epoch: int
    rack: str | None = None
    endpoints: tuple[Endpoint, ...] = ()


@dataclass(frozen=True)
class BrokerFailure(Event):
    """A registration vanished from ``/brokers/ids``."""

    TYPE: ClassVar[str] = "broker_failure"
    SCOPE: ClassVar[str] = "cluster"
    broker_id: int
    broker_epoch: int = -1


@dataclass(frozen=True)
class PartitionError:
    topic: str
    partition: int
    error_code: int = 0


@dataclass(frozen=True)
class LeaderAndIsrResponse(Event):
    """A broker's answer to a LeaderAndIsr request; ``KAFKA_STORAGE_ERROR`` (56) marks the replica
    offline. Routed to each topic it names."""

    TYPE: ClassVar[str] = "leader_and_isr_response"
    broker_id: int
    partitions: tuple[PartitionError, ...]
    error_code: int = 0

    def topics(self) -> tuple[str, ...]:
        return tuple(sorted({p.topic for p in self.partitions}))


@dataclass(frozen=True)
class StopReplicaResponse(Event):
    """A broker's answer to StopReplica with ``delete_partition`` (drives topic deletion)."""

    TYPE: ClassVar[str] = "stop_replica_response"
    broker_id: int
    partitions: tuple[PartitionError, ...]
    error_code: int = 0

    def topics(self) -> tuple[str, ...]:
        return tuple(sorted({p.topic for p in self.partitions}))


@dataclass(frozen=True)
class ControlledShutdown(Event):
    """A broker asks to shut down cleanly (Kafka's ControlledShutdown request)."""

    TYPE: ClassVar[str] = "controlled_shutdown"
    SCOPE: ClassVar[str] = "cluster"
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True)
class LogDirFailure(Event):
    """A broker's log directory failed (``/log_dir_event_notification``)."""

    TYPE: ClassVar[str] = "log_dir_failure"
    SCOPE: ClassVar[str] = "cluster"
    broker_id: int


# --------------------------------------------------------------------------- internal events


@dataclass(frozen=True)
class ControllerFailover(Event):
    """This controller was elected: rebuild the context from ``snapshot`` and resume pending work.

    The driver restricts the snapshot to each bucket's topics before routing it."""

    TYPE: ClassVar[str] = "controller_failover"
    SCOPE: ClassVar[str] = "cluster"
    controller_id: int
    snapshot: ZkSnapshot


@dataclass(frozen=True)
class PartitionStatesRead(Event):
    """Partition-state znodes of ``topic`` as the driver re-read them after ZooKeeper refused this
    controller's compare-and-set on them (``BadVersion``: the znode changed under the version the
    controller held). Kafka's controller re-reads such partitions and retries (the retry loops of
    ``PartitionStateMachine.doElectLeaderForPartitions`` and ``ReplicaStateMachine.doRemoveReplicasFromIsr``):
    the partition's leadership is taken from the znode and what it still needs is done again — a leader
    that is not live is replaced, replicas that are not live leave the ISR, a reassignment resumes."""

    TYPE: ClassVar[str] = "partition_states_read"
    topic: str
    #: (partition, the znode as read); a partition whose znode is gone is left out
    states: tuple[tuple[int, PartitionStateZnode], ...]

    def topics(self) -> tuple[str, ...]:
        return (self.topic,)


@dataclass(frozen=True)
class TopicCreationRefused(Event):
    """ZooKeeper refused this controller's creation of ``/brokers/topics/<topic>`` with ``NodeExists``:
    someone else (an ``AdminZkClient``-style tool) had created the topic. ``refused_topic_id`` is the id
    the refused creation carried; ``znode``, ``states`` and ``configs`` are the topic as the driver read
    it afterwards (``znode`` None: gone again). The bucket forgets what it made of its own creation and
    takes the topic ZooKeeper holds, as Kafka's controller takes a topic a tool created: partitions with
    a state znode keep it, the others get one (New -> Online)."""

    TYPE: ClassVar[str] = "topic_creation_refused"
    topic: str
    refused_topic_id: str
    znode: TopicZnode | None
    states: tuple[tuple[int, PartitionStateZnode], ...] = ()
    configs: tuple[tuple[str, str], ...] = ()

    def topics(self) -> tuple[str, ...]:
        return (self.topic,)


@dataclass(frozen=True)
class AutoRebalanceTick(Event):
    """Periodic check (``leader.imbalance.check.interval.seconds``); ``brokers`` lists the brokers whose
    cluster-wide imbalance ratio (summed by the driver) is above the threshold.

    Under ``leader.imbalance.max.leaders.per.interval`` (:mod:`core.leader_balance`) the driver publishes the
    pass's limit of each bucket, by bucket number, in ``bucket_limits``; routing gives each bucket a tick with
    its own limit in ``max_leaders`` (0 for a bucket past the end) and no ``bucket_limits``. A bucket reads
    ``max_leaders`` only: ``None`` is no bound (Kafka's behaviour)."""

    TYPE: ClassVar[str] = "auto_rebalance_tick"
    SCOPE: ClassVar[str] = "cluster"
    brokers: tuple[int, ...] = ()
    max_leaders: int | None = None
    bucket_limits: tuple[int, ...] = ()

    def for_bucket(self, bucket: int) -> AutoRebalanceTick:
        """The tick ``bucket`` applies (its limit from :attr:`bucket_limits`; itself when unbounded)."""
        if not self.bucket_limits:
            return self
        limit = self.bucket_limits[bucket] if 0 <= bucket < len(self.bucket_limits) else 0
        return AutoRebalanceTick(self.brokers, limit)


@dataclass(frozen=True)
class Tick(Event):
    """Time passes: retry topic deletions that were waiting and similar periodic work."""

    TYPE: ClassVar[str] = "tick"
    SCOPE: ClassVar[str] = "cluster"
    now_ms: int = 0
