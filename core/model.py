"""The controller's value model: what a Kafka engineer calls a partition, a replica, a broker, a
partition's leadership and its replica assignment.

Plain frozen values, shared by the events, the snapshot, the controller's context, its decisions and
the shell.

One broker is one :class:`Broker`: the registration under ``/brokers/ids/<id>`` as the controller holds it
live, as a failover snapshot lists it and as :func:`core.kafka.zkdata.decode_broker_registration` reads it
(Kafka's ``Broker`` with its epoch). Three other types name a broker and stay apart, because they carry
other facts: ``core.placement.BrokerRack`` is placement's input (an id and the rack placement may use, which
``--disable-rack-aware`` blanks); ``core.kafka.requests.BrokerAddress`` is how a LeaderAndIsr request names a
live leader on the wire (id, host, port); ``admin.zkread.BrokerRegistration`` is the znode as the admin tools
show it (its JSON whole). The broker events carry their fields flat, in their own JSON form.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from functools import cached_property

# --------------------------------------------------------------------------- partitions and replicas


@dataclass(frozen=True, order=True)
class TopicPartition:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


def _tp_key(tp: TopicPartition) -> tuple[str, int]:
    return (tp.topic, tp.partition)


def sort_tps(tps: Iterable[TopicPartition]) -> list[TopicPartition]:
    """``sorted(tps)`` without the dataclass comparison methods (much faster on large sets)."""
    return sorted(tps, key=_tp_key)


@dataclass(frozen=True, order=True)
class PartitionReplica:
    """A replica of a partition on one broker (Kafka's ``PartitionAndReplica``)."""

    topic: str
    partition: int
    replica: int

    @classmethod
    def of(cls, tp: TopicPartition, replica: int) -> PartitionReplica:
        """The replica of ``tp`` on broker ``replica``, whose :attr:`topic_partition` is ``tp`` itself. Given
        the key object a context holds, look-ups by the replica's partition find that key by identity, not
        by the dataclass ``__eq__`` (a failover looks each partition up ~10 times per replica)."""
        pr = cls(tp.topic, tp.partition, replica)
        # set as an attribute, not through ``__dict__``: reading ``__dict__`` makes the instance a dict of its
        # own (another object for the collector to track, +64 bytes); the cached property finds it either way
        object.__setattr__(pr, "topic_partition", tp)
        return pr

    @cached_property
    def topic_partition(self) -> TopicPartition:
        """The partition (an equal value; the one given to :meth:`of`), kept after the first use."""
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True)
class PartitionTarget:
    """One entry of Kafka's reassignment JSON: the target replicas of a partition. ``replicas`` empty
    means cancel."""

    topic: str
    partition: int
    replicas: tuple[int, ...]


class ElectionType(Enum):
    """Kafka's ``ElectionType``."""

    PREFERRED = "PREFERRED"
    UNCLEAN = "UNCLEAN"


# --------------------------------------------------------------------------- brokers


@dataclass(frozen=True)
class Endpoint:
    """One listener of a broker registration (``/brokers/ids/<id>`` ``endpoints``)."""

    listener: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"


@dataclass(frozen=True, slots=True)
class Broker:
    """A registered broker (``/brokers/ids/<id>``); ``epoch`` is the registration's czxid (Kafka's
    broker epoch)."""

    id: int
    epoch: int
    rack: str | None = None
    endpoints: tuple[Endpoint, ...] = ()


# --------------------------------------------------------------------------- leadership

#: Kafka's ``LeaderAndIsr.NoLeader``
NO_LEADER = -1
#: Kafka's ``LeaderAndIsr.LeaderDuringDelete`` (UpdateMetadata for topics being deleted)
LEADER_DURING_DELETE = -2
#: Kafka's ``LeaderAndIsr.NoEpoch``
NO_EPOCH = -1
#: Kafka's ``LeaderAndIsr.EpochDuringDelete``
EPOCH_DURING_DELETE = -2
#: ``LeaderRecoveryState``
RECOVERED = 0
RECOVERING = 1


@dataclass(frozen=True, slots=True)
class LeaderAndIsr:
    """The content of ``/brokers/topics/<t>/partitions/<p>/state``; ``partition_epoch`` is that
    znode's version (what compare-and-set writes expect)."""

    leader: int
    isr: tuple[int, ...]
    leader_epoch: int = 0
    partition_epoch: int = 0
    leader_recovery_state: int = RECOVERED

    def new_leader_and_isr(self, leader: int, isr: tuple[int, ...]) -> LeaderAndIsr:
        """Kafka's ``newLeaderAndIsr``: leader and ISR set, leader epoch + 1, recovery state kept."""
        return LeaderAndIsr(leader, isr, self.leader_epoch + 1, self.partition_epoch, self.leader_recovery_state)

    def new_recovering_leader_and_isr(self, leader: int, isr: tuple[int, ...]) -> LeaderAndIsr:
        """After an unclean election: like :meth:`new_leader_and_isr` but ``RECOVERING`` (KIP-704)."""
        return LeaderAndIsr(leader, isr, self.leader_epoch + 1, self.partition_epoch, RECOVERING)

    def new_leader(self, leader: int) -> LeaderAndIsr:
        return self.new_leader_and_isr(leader, self.isr)

    def new_epoch(self) -> LeaderAndIsr:
        """Kafka's ``newEpoch``: same leader and ISR, leader epoch + 1 (e.g. a new replica set)."""
        return LeaderAndIsr(
            self.leader, self.isr, self.leader_epoch + 1, self.partition_epoch, self.leader_recovery_state
        )

    def with_partition_epoch(self, partition_epoch: int) -> LeaderAndIsr:
        return LeaderAndIsr(self.leader, self.isr, self.leader_epoch, partition_epoch, self.leader_recovery_state)


@dataclass(frozen=True, slots=True)
class LeaderIsrAndControllerEpoch:
    leader_and_isr: LeaderAndIsr
    controller_epoch: int


# --------------------------------------------------------------------------- replica assignment


def _diff(a: Sequence[int], b: Iterable[int]) -> tuple[int, ...]:
    drop = set(b)
    return tuple(x for x in a if x not in drop)


def _distinct(xs: Iterable[int]) -> tuple[int, ...]:
    seen: set[int] = set()
    out: list[int] = []
    for x in xs:
        if x not in seen:
            seen.add(x)
            out.append(x)
    return tuple(out)


@dataclass(frozen=True, slots=True)
class ReplicaAssignment:
    """Kafka's ``ReplicaAssignment``: ``replicas`` in assignment order (the head is the preferred leader),
    plus the replicas being added and removed by an ongoing KIP-455 reassignment.

    During a reassignment from origin replicas ``ORS`` to target replicas ``TRS`` the partition holds
    ``RS = distinct(TRS ++ ORS)``, ``adding = RS - ORS`` and ``removing = RS - TRS``. ``RS`` is written to
    ZooKeeper first; ``RS = TRS`` (nothing adding or removing) is written last, so that a controller that
    fails over in between can recover the origin from ZooKeeper.
    """

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    @property
    def origin_replicas(self) -> tuple[int, ...]:
        """The replicas before the reassignment started (``RS - adding``)."""
        return _diff(self.replicas, self.adding_replicas)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        """The replicas once the reassignment completes (``RS - removing``)."""
        return _diff(self.replicas, self.removing_replicas)

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding_replicas) or bool(self.removing_replicas)

    def reassign_to(self, target: Sequence[int]) -> ReplicaAssignment:
        """The assignment while moving from this assignment's origin to ``target``."""
        origin = self.origin_replicas
        full = _distinct((*target, *origin))
        return ReplicaAssignment(full, _diff(full, origin), _diff(full, target))

    def remove_replica(self, replica: int) -> ReplicaAssignment:
        return ReplicaAssignment(
            _diff(self.replicas, (replica,)),
            _diff(self.adding_replicas, (replica,)),
            _diff(self.removing_replicas, (replica,)),
        )

    def completed(self) -> ReplicaAssignment:
        """``RS = TRS`` with nothing adding or removing."""
        return ReplicaAssignment(self.target_replicas)
