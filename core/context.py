"""The controller's view of the cluster (Kafka's ``ControllerContext``).

A :class:`ControllerContext` is a plain, mutable container that the state machines and controller
operations update in place. ``core.controller.step`` copies it once per step (:meth:`copy`) and
mutates only the copy, so a caller's context never changes under it. The public machine entry points
(``core.partition_machine.handle_state_changes`` and ``core.replica_machine.handle_state_changes``)
do the same.

It holds, for the topics of one bucket (or all topics):

* live brokers (id, epoch, rack, endpoints) and shutting-down broker ids — always the whole cluster;
* topic -> partition -> :class:`ReplicaAssignment` (``partition_assignments`` plus an index of partitions
  by topic and by broker, kept in step by :meth:`set_assignment` / :meth:`remove_topic`);
* leadership per partition as :class:`LeaderIsrAndControllerEpoch`;
* partition states and replica states;
* controller id, epoch and the ``/controller_epoch`` znode version;
* topics queued for deletion, ineligible for deletion and with deletion started; partitions being
  reassigned; replicas on offline log dirs; per-topic ``unclean.leader.election.enable``;
* the version of a topic's znode as this controller last knew it (read in a topic change, or its own write's),
  where known (:mod:`core.controller.controller_replicas`).

Absent partition / replica states read as ``NonExistentPartition`` / ``NonExistentReplica``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import filterfalse

from core.model import (
    Broker,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    PartitionReplica,
    ReplicaAssignment,
    TopicPartition,
    sort_tps,
)
from core.states import PartitionState, ReplicaState


@dataclass
class ControllerContext:
    """See the module docstring. Mutable; copy with :meth:`copy` before mutating a shared one."""

    controller_id: int = -1
    epoch: int = 0
    epoch_zk_version: int = 0
    live_brokers: dict[int, Broker] = field(default_factory=dict)
    shutting_down_broker_ids: set[int] = field(default_factory=set)
    partition_assignments: dict[TopicPartition, ReplicaAssignment] = field(default_factory=dict)
    #: topic -> partition ids
    topic_partitions: dict[str, set[int]] = field(default_factory=dict)
    #: broker -> partitions whose full replica set (RS) names the broker
    partitions_by_broker: dict[int, set[TopicPartition]] = field(default_factory=dict)
    topic_ids: dict[str, str] = field(default_factory=dict)
    partition_leadership: dict[TopicPartition, LeaderIsrAndControllerEpoch] = field(default_factory=dict)
    partition_states: dict[TopicPartition, PartitionState] = field(default_factory=dict)
    #: partitions in NewPartition or OfflinePartition (what ``triggerOnlinePartitionStateChange`` visits)
    offline_or_new_partitions: set[TopicPartition] = field(default_factory=set)
    replica_states: dict[PartitionReplica, ReplicaState] = field(default_factory=dict)
    replicas_on_offline_dirs: dict[int, set[TopicPartition]] = field(default_factory=dict)
    topics_to_be_deleted: set[str] = field(default_factory=set)
    topics_ineligible_for_deletion: set[str] = field(default_factory=set)
    topics_with_deletion_started: set[str] = field(default_factory=set)
    partitions_being_reassigned: set[TopicPartition] = field(default_factory=set)
    #: per-topic ``unclean.leader.election.enable`` (absent = the cluster default)
    unclean_leader_election: dict[str, bool] = field(default_factory=dict)
    #: per-topic configs as written to ``/config/topics/<t>``
    topic_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    #: topic -> the version of ``/brokers/topics/<t>`` as this controller last knew it: the highest a topic
    #: change read, or the one its own write made (absent = unknown: a topic change's own version is taken)
    topic_znode_versions: dict[str, int] = field(default_factory=dict)

    # ------------------------------------------------------------------ copy

    def copy(self) -> ControllerContext:
        """A copy sharing only immutable values (one pass over each container)."""
        return ControllerContext(
            controller_id=self.controller_id,
            epoch=self.epoch,
            epoch_zk_version=self.epoch_zk_version,
            live_brokers=dict(self.live_brokers),
            shutting_down_broker_ids=set(self.shutting_down_broker_ids),
            partition_assignments=dict(self.partition_assignments),
            topic_partitions={t: set(ps) for t, ps in self.topic_partitions.items()},
            partitions_by_broker={b: set(ps) for b, ps in self.partitions_by_broker.items()},
            topic_ids=dict(self.topic_ids),
            partition_leadership=dict(self.partition_leadership),
            partition_states=dict(self.partition_states),
            offline_or_new_partitions=set(self.offline_or_new_partitions),
            replica_states=dict(self.replica_states),
            replicas_on_offline_dirs={b: set(ps) for b, ps in self.replicas_on_offline_dirs.items()},
            topics_to_be_deleted=set(self.topics_to_be_deleted),
            topics_ineligible_for_deletion=set(self.topics_ineligible_for_deletion),
            topics_with_deletion_started=set(self.topics_with_deletion_started),
            partitions_being_reassigned=set(self.partitions_being_reassigned),
            unclean_leader_election=dict(self.unclean_leader_election),
            topic_configs={t: dict(c) for t, c in self.topic_configs.items()},
            topic_znode_versions=dict(self.topic_znode_versions),
        )

    # ------------------------------------------------------------------ brokers

    @property
    def live_or_shutting_down_broker_ids(self) -> set[int]:
        return set(self.live_brokers)

    @property
    def live_broker_ids(self) -> set[int]:
        """Live brokers that are not shutting down (eligible leaders)."""
        return set(self.live_brokers) - self.shutting_down_broker_ids

    def add_live_broker(self, broker: Broker) -> None:
        self.live_brokers[broker.id] = broker

    def remove_live_broker(self, broker_id: int) -> None:
        self.live_brokers.pop(broker_id, None)
        self.shutting_down_broker_ids.discard(broker_id)

    def is_replica_online(self, broker_id: int, tp: TopicPartition, include_shutting_down: bool = False) -> bool:
        """Kafka's ``isReplicaOnline``: the broker is live (and not shutting down unless asked) and the
        replica's log dir is not offline."""
        if broker_id not in self.live_brokers:
            return False
        if not include_shutting_down and broker_id in self.shutting_down_broker_ids:
            return False
        offline = self.replicas_on_offline_dirs.get(broker_id)
        return offline is None or tp not in offline

    def offline_replicas(self, tp: TopicPartition, replicas: tuple[int, ...]) -> tuple[int, ...]:
        """The replicas of ``replicas`` (brokers holding ``tp``) that are not online (:meth:`is_replica_online`),
        in their order."""
        if self.shutting_down_broker_ids or self.replicas_on_offline_dirs:
            return tuple(r for r in replicas if not self.is_replica_online(r, tp))
        # no broker shutting down and no log dir offline (always so after a failover's snapshot): a replica
        # is online exactly when its broker is live, a C-level filter (this runs once per partition of an
        # UpdateMetadata)
        return tuple(filterfalse(self.live_brokers.__contains__, replicas))

    # ------------------------------------------------------------------ topics and assignments

    @property
    def all_topics(self) -> set[str]:
        return set(self.topic_partitions)

    def partitions_for_topic(self, topic: str) -> list[TopicPartition]:
        return [TopicPartition(topic, p) for p in sorted(self.topic_partitions.get(topic, ()))]

    def all_partitions(self) -> Iterator[TopicPartition]:
        return iter(self.partition_assignments)

    def assignment(self, tp: TopicPartition) -> ReplicaAssignment:
        """Kafka's ``partitionFullReplicaAssignment`` (empty when unknown)."""
        return self.partition_assignments.get(tp) or ReplicaAssignment(())

    def replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        """Kafka's ``partitionReplicaAssignment``: the full replica set RS."""
        ra = self.partition_assignments.get(tp)
        return ra.replicas if ra is not None else ()

    def set_assignment(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        """Kafka's ``updatePartitionFullReplicaAssignment``, keeping the broker index in step."""
        old = self.partition_assignments.get(tp)
        old_replicas = old.replicas if old is not None else ()
        for b in old_replicas:
            if b not in assignment.replicas:
                s = self.partitions_by_broker.get(b)
                if s is not None:
                    s.discard(tp)
        self.partition_assignments[tp] = assignment
        self.index_assigned((tp,), [b for b in assignment.replicas if b not in old_replicas])

    def index_assigned(self, tps: Collection[TopicPartition], brokers: Iterable[int]) -> None:
        """The indexes' rule for assigned partitions (``tps``): each is one of its topic's partition ids and is
        under every broker of its full replica set RS; ``brokers`` are those of RS it is not under yet. For
        :meth:`set_assignment`, and for a decode that sets ``partition_assignments`` in bulk and then indexes
        each distinct replica set once (:func:`core.context_codec.context_from_dict`)."""
        by_broker = self.partitions_by_broker
        for b in brokers:
            on_broker = by_broker.get(b)
            if on_broker is None:
                by_broker[b] = set(tps)
            else:
                on_broker.update(tps)
        topic_partitions = self.topic_partitions
        for tp in tps:
            ids = topic_partitions.get(tp.topic)
            if ids is None:
                ids = topic_partitions[tp.topic] = set()
            ids.add(tp.partition)

    def partitions_on_broker(self, broker_id: int) -> set[TopicPartition]:
        return self.partitions_by_broker.get(broker_id, set())

    def replicas_on_brokers(self, broker_ids: Iterable[int]) -> list[PartitionReplica]:
        out: list[PartitionReplica] = []
        for b in sorted(set(broker_ids)):
            out.extend(PartitionReplica.of(tp, b) for tp in sort_tps(self.partitions_on_broker(b)))
        return out

    def replicas_for_topic(self, topic: str) -> list[PartitionReplica]:
        out: list[PartitionReplica] = []
        for tp in self.partitions_for_topic(topic):
            out.extend(PartitionReplica(topic, tp.partition, r) for r in self.replicas(tp))
        return out

    def replicas_for_partitions(self, tps: Iterable[TopicPartition]) -> list[PartitionReplica]:
        return [PartitionReplica.of(tp, r) for tp in tps for r in self.replicas(tp)]

    def remove_topic(self, topic: str) -> None:
        """Forget everything about ``topic`` (Kafka's ``removeTopic``)."""
        for tp in self.partitions_for_topic(topic):
            ra = self.partition_assignments.pop(tp, None)
            if ra is not None:
                for b in ra.replicas:
                    s = self.partitions_by_broker.get(b)
                    if s is not None:
                        s.discard(tp)
                for r in ra.replicas:
                    self.replica_states.pop(PartitionReplica(topic, tp.partition, r), None)
            self.partition_leadership.pop(tp, None)
            self.partition_states.pop(tp, None)
            self.offline_or_new_partitions.discard(tp)
            self.partitions_being_reassigned.discard(tp)
            for s in self.replicas_on_offline_dirs.values():
                s.discard(tp)
        # replica states kept for replicas that left the assignment (rare; public machine API only)
        for pr in [pr for pr in self.replica_states if pr.topic == topic]:
            del self.replica_states[pr]
        self.topic_partitions.pop(topic, None)
        self.topic_ids.pop(topic, None)
        self.topics_to_be_deleted.discard(topic)
        self.topics_ineligible_for_deletion.discard(topic)
        self.topics_with_deletion_started.discard(topic)
        self.unclean_leader_election.pop(topic, None)
        self.topic_configs.pop(topic, None)
        self.topic_znode_versions.pop(topic, None)

    # ------------------------------------------------------------------ leadership

    def leadership(self, tp: TopicPartition) -> LeaderIsrAndControllerEpoch | None:
        return self.partition_leadership.get(tp)

    def leader_and_isr(self, tp: TopicPartition) -> LeaderAndIsr | None:
        li = self.partition_leadership.get(tp)
        return li.leader_and_isr if li is not None else None

    def put_leadership(self, tp: TopicPartition, leader_and_isr: LeaderAndIsr, controller_epoch: int) -> None:
        self.partition_leadership[tp] = LeaderIsrAndControllerEpoch(leader_and_isr, controller_epoch)

    def partitions_led_by(self, broker_id: int) -> list[TopicPartition]:
        """Kafka's ``partitionLeadersOnBroker`` (assignment order of the broker index, sorted)."""
        out = []
        for tp in self.partitions_on_broker(broker_id):
            li = self.partition_leadership.get(tp)
            if li is not None and li.leader_and_isr.leader == broker_id:
                out.append(tp)
        return sort_tps(out)

    # ------------------------------------------------------------------ states

    def partition_state(self, tp: TopicPartition) -> PartitionState:
        return self.partition_states.get(tp, PartitionState.NON_EXISTENT)

    def put_partition_state(self, tp: TopicPartition, state: PartitionState) -> None:
        if state is PartitionState.NON_EXISTENT:
            self.partition_states.pop(tp, None)
        else:
            self.partition_states[tp] = state
        if state is PartitionState.OFFLINE or state is PartitionState.NEW:
            self.offline_or_new_partitions.add(tp)
        elif self.offline_or_new_partitions:  # (an empty set's discard still hashes the dataclass, in Python)
            self.offline_or_new_partitions.discard(tp)

    def replica_state(self, pr: PartitionReplica) -> ReplicaState:
        return self.replica_states.get(pr, ReplicaState.NON_EXISTENT)

    def put_replica_state(self, pr: PartitionReplica, state: ReplicaState) -> None:
        if state is ReplicaState.NON_EXISTENT:
            self.replica_states.pop(pr, None)
        else:
            self.replica_states[pr] = state

    def replicas_in_state(self, topic: str, state: ReplicaState) -> list[PartitionReplica]:
        return [pr for pr in self.replicas_for_topic(topic) if self.replica_state(pr) is state]

    def is_any_replica_in_state(self, topic: str, state: ReplicaState) -> bool:
        return any(self.replica_state(pr) is state for pr in self.replicas_for_topic(topic))

    def are_all_replicas_in_state(self, topic: str, state: ReplicaState) -> bool:
        return all(self.replica_state(pr) is state for pr in self.replicas_for_topic(topic))

    # ------------------------------------------------------------------ deletion, configs

    def is_topic_queued_up_for_deletion(self, topic: str) -> bool:
        return topic in self.topics_to_be_deleted

    def unclean_enabled(self, topic: str, default: bool = False) -> bool:
        return self.unclean_leader_election.get(topic, default)
