"""Events: everything that reaches ``core.controller.step``, as values.

Three families, all frozen dataclasses:

* **admin commands** (topic ``livectl.admin``), each with a ``request_id`` that its
  :class:`core.decisions.AdminResult` echoes;
* **broker events** (topic ``livectl.broker-events``): registrations appearing and vanishing
  (published by the driver's liveness bridge), AlterPartition, LeaderAndIsr / StopReplica
  responses, ControlledShutdown requests, log-dir failures;
* **internal events** made by the driver: controller failover (with a ZooKeeper snapshot), re-reads
  after refused writes, the auto leader rebalance tick, and the ZooKeeper admin paths a tool wrote.

Their stable, versioned JSON form (``{"version": 1, "type": <TYPE>, ...fields}``) is :mod:`core.codec`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from core.model import ElectionType, Endpoint, PartitionTarget, TopicPartition
from core.snapshot import PartitionStateZnode, TopicZnode, ZkSnapshot


class Event:
    """Base of every event. ``TYPE`` is the JSON ``type``; ``scope`` tells routing what it touches."""

    TYPE: ClassVar[str] = ""
    #: "topic" events go to the bucket of ``self.topic`` (or the topics of ``self.topics()``);
    #: "cluster" events are copied to every bucket.
    SCOPE: ClassVar[str] = "topic"

    def topics(self) -> tuple[str, ...]:
        """The topics this event touches (for routing); empty for cluster-scoped events."""
        return ()


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

    Routing splits a multi-topic command into one per topic (same ``request_id``).
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
class BrokerFailure(Event):
    """A registration vanished from ``/brokers/ids``."""

    TYPE: ClassVar[str] = "broker_failure"
    SCOPE: ClassVar[str] = "cluster"
    broker_id: int
    broker_epoch: int = -1


@dataclass(frozen=True)
class AlterPartition(Event):
    """A leader asks to change the ISR of one partition (Kafka's AlterPartition request)."""

    TYPE: ClassVar[str] = "alter_partition"
    broker_id: int
    broker_epoch: int
    topic: str
    partition: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]
    leader_recovery_state: int = 0
    #: the sender's id for this proposal, echoed as ``correlationId`` in the answer's partition entry (our
    #: transport has no request header to carry Kafka's correlation id); -1 = none
    correlation_id: int = -1
    #: Kafka's topic id (base64) when the proposal names its topic by id, as AlterPartition v2+ does
    #: (Kafka >= 2.8 brokers); ``topic`` still routes it to its bucket. None: by name (v0/v1)
    topic_id: str | None = None

    def topics(self) -> tuple[str, ...]:
        return (self.topic,)


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


# --------------------------------------------------------------------------- ZooKeeper admin paths
# Published by the driver's admin-path watcher (``streaming/zk/admin_watch.py``) when a ZooKeeper-era tool writes
# a path Kafka's controller watches, with the controller epoch it was read under: a bucket applies it only under
# that epoch, so after a takeover (whose snapshot read the same znodes) it is not applied a second time.


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
    created."""

    TYPE: ClassVar[str] = "zk_topic_change"
    controller_epoch: int
    topic: str
    partitions: tuple[tuple[int, tuple[int, ...]], ...]
    topic_id: str | None = None
    configs: tuple[tuple[str, str], ...] = ()

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
