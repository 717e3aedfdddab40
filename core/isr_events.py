"""The ISR changes a partition's leader asks the controller for (Kafka's AlterPartition), as values.

One proposal per partition (:class:`AlterPartition`, what the core handles and answers), and a leader's
proposals for many partitions in one record (:class:`AlterPartitionRequest`, as Kafka's brokers send every
pending partition in one request). :mod:`core.events` re-exports them with the other broker events; their JSON
form is :mod:`core.codec.broker`'s.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from operator import attrgetter
from typing import ClassVar

from core.event_base import Event

#: partitions per AlterPartition record: an entry is about 150 bytes (300 with a topic name of Kafka's longest), so
#: a record stays well under Kafka's 1 MB message size
PROPOSALS_PER_RECORD = 1000


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
class IsrProposal:
    """One partition of an :class:`AlterPartitionRequest`: :class:`AlterPartition` but the sender."""

    topic: str
    partition: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]
    leader_recovery_state: int = 0
    correlation_id: int = -1
    topic_id: str | None = None

    @classmethod
    def of(cls, proposal: AlterPartition) -> IsrProposal:
        """``proposal`` without its sender."""
        return cls(*_isr_fields(proposal))

    def sent_by(self, broker_id: int, broker_epoch: int) -> AlterPartition:
        """This proposal as ``broker_id`` at ``broker_epoch`` sent it."""
        return AlterPartition(broker_id, broker_epoch, *_isr_fields(self))


#: the fields :class:`IsrProposal` and :class:`AlterPartition` share, in order (the latter's after the sender's)
_isr_fields = attrgetter(*(f.name for f in fields(IsrProposal)))


@dataclass(frozen=True)
class AlterPartitionRequest(Event):
    """A leader's ISR proposals for many partitions in one record, as Kafka's brokers send every pending
    partition in one AlterPartition request: each handled and answered as its :class:`AlterPartition`
    (:meth:`proposals`), in order. Routed to each topic it names."""

    TYPE: ClassVar[str] = "alter_partition_request"
    broker_id: int
    broker_epoch: int
    partitions: tuple[IsrProposal, ...]

    @classmethod
    def of(cls, proposals: tuple[AlterPartition, ...]) -> AlterPartitionRequest:
        """``proposals`` as one request. Raises ValueError unless there is at least one and they share their
        sender and its broker epoch."""
        sender = (proposals[0].broker_id, proposals[0].broker_epoch) if proposals else None
        if sender is None or any((p.broker_id, p.broker_epoch) != sender for p in proposals):
            raise ValueError("one request holds the proposals of one sender at one broker epoch")
        return cls(*sender, tuple(IsrProposal.of(p) for p in proposals))

    @classmethod
    def records(
        cls, proposals: tuple[AlterPartition, ...], per_record: int = PROPOSALS_PER_RECORD
    ) -> tuple[AlterPartitionRequest, ...]:
        """``proposals`` (one sender's, at one broker epoch) as requests of at most ``per_record`` partitions
        each, in order: what one AlterPartition request of a broker becomes on the broker-events topic."""
        if per_record < 1:
            raise ValueError(f"per_record: must be at least 1, got {per_record}")
        return tuple(cls.of(proposals[i : i + per_record]) for i in range(0, len(proposals), per_record))

    def topics(self) -> tuple[str, ...]:
        return tuple(sorted({p.topic for p in self.partitions}))

    def proposals(self) -> tuple[AlterPartition, ...]:
        return tuple(p.sent_by(self.broker_id, self.broker_epoch) for p in self.partitions)
