"""Broker request batching: the typed bodies of :class:`core.decisions.BrokerRequest`.

One :class:`RequestBatch` collects the requests of one ``step`` (Kafka's
``ControllerBrokerRequestBatch``) and :meth:`RequestBatch.flush` turns them into decisions: all
LeaderAndIsr requests (brokers ascending), then the UpdateMetadata, then all StopReplica, then the
controller's answers to broker requests. Requests to brokers that are not registered (live or shutting
down) are dropped. Every LeaderAndIsr for a partition also adds UpdateMetadata for it to every
registered broker. Adding the same partition twice for a broker keeps the latest state (``isNew`` and
``deletePartition`` stay true once set).

The requests are typed values (:mod:`core.kafka.requests`); their wire form (Kafka's field names) is
:mod:`core.kafka.request_encoding`'s. Partition entries are sorted by topic, then partition, and carry the
topic's id as the context knows it when the batch is flushed. An UpdateMetadata with no partitions only
announces the live brokers.

The UpdateMetadata of one flush is **one** request to a set of brokers, as Kafka's
``sendUpdateMetadataRequests(brokers, partitions)`` builds one body for the whole set: a
:class:`~core.decisions.BrokerRequest` whose ``addressees`` name each registered broker of the set with
its broker epoch (Kafka puts the destination's epoch in each copy; here each addressee's copy is
:meth:`~core.decisions.BrokerRequest.fan_out`), ``broker_id`` -1 and the body's ``brokerEpoch`` -1. The
set gathers every ``add_update_metadata`` of the step and the partition states are one map, as in
Kafka's batch, so one flush has at most one UpdateMetadata. The shell writes it once per micro-batch
where Kafka sends one RPC per broker. Each bucket sends the UpdateMetadata of its own partitions; the
shell merges the bodies of equal addressee sets (the live brokers are identical across buckets).

The controller's answers to broker requests (ControlledShutdownResponse, AlterPartitionResponse) are
built where they are decided and go out after the batched requests.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from dataclasses import dataclass, field

from core.context import ControllerContext
from core.decisions import AdminResult, BrokerRequest, Decision, StateChangeFailure, ZkWrite
from core.kafka.requests import (
    SHARED_BROKER_ID,
    ZERO_UUID,
    Addressee,
    LeaderAndIsrRequest,
    LisrPartitionState,
    MetadataPartitionState,
    RequestApi,
    StopReplicaPartition,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from core.model import (
    EPOCH_DURING_DELETE,
    NO_EPOCH,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from core.request_states import (
    leader_and_isr_state,
    leader_node,
    metadata_brokers,
    metadata_state,
    sorted_states,
    update_metadata_state,
)

#: the body's ``brokerEpoch`` of a shared request (each addressee's own is in the request's addressees)
NO_BROKER_EPOCH = -1


@dataclass
class RequestBatch:
    """Requests collected during one step; see the module docstring."""

    leader_and_isr: dict[int, dict[TopicPartition, LisrPartitionState]] = field(default_factory=dict)
    update_metadata_brokers: set[int] = field(default_factory=set)
    update_metadata_partitions: dict[TopicPartition, MetadataPartitionState] = field(default_factory=dict)
    stop_replica: dict[int, dict[TopicPartition, tuple[int, bool]]] = field(default_factory=dict)
    responses: list[BrokerRequest] = field(default_factory=list)
    _new: set[tuple[int, TopicPartition]] = field(default_factory=set)
    #: (partition, isNew) -> the leadership, assignment and topic id its LeaderAndIsr state was last built
    #: from, and that state: a function of those immutable values, so the same objects give it again
    #: (a failover adds each partition once per replica)
    _lisr_built: dict[
        tuple[TopicPartition, bool], tuple[LeaderIsrAndControllerEpoch, ReplicaAssignment, str, LisrPartitionState]
    ] = field(default_factory=dict)
    #: inside :meth:`fixed_liveness`: partition -> the context's leadership and assignment objects its
    #: UpdateMetadata state was last taken from
    _um_taken: dict[TopicPartition, tuple[LeaderIsrAndControllerEpoch | None, ReplicaAssignment | None]] | None = None

    @contextmanager
    def fixed_liveness(self) -> Iterator[None]:
        """A block in which the caller changes no broker's liveness or shutdown, no offline log dir, no
        topic's deletion queueing and no topic id — only leaderships, assignments and replica states. An
        UpdateMetadata state depends on nothing else, and both of those are replaced (never mutated) when
        they change, so inside the block a partition's state is taken again only when the context holds a
        different leadership or assignment object than when it was last taken; otherwise the state it would
        take is the one already held."""
        outer = self._um_taken
        if outer is None:
            self._um_taken = {}
        try:
            yield
        finally:
            if outer is None:
                self._um_taken = None

    def add_leader_and_isr(
        self,
        ctx: ControllerContext,
        broker_ids: Iterable[int],
        tp: TopicPartition,
        li: LeaderIsrAndControllerEpoch,
        assignment: ReplicaAssignment,
        *,
        is_new: bool,
    ) -> None:
        """Kafka's ``addLeaderAndIsrRequestForBrokers`` (also UpdateMetadata to every broker): see
        :meth:`_add_leader_and_isr`."""
        self._add_leader_and_isr(ctx, ((tp, broker_ids, li, assignment),), is_new=is_new, from_context=False)

    def add_leader_and_isr_to_replicas(
        self, ctx: ControllerContext, entries: Iterable[tuple[TopicPartition, Iterable[int]]]
    ) -> None:
        """For each ``(partition, brokers)`` of ``entries`` whose partition has a leadership, in turn:
        ``add_leader_and_isr(ctx, brokers, tp, leadership, ctx.assignment(tp), is_new=False)``, for a caller
        that changes nothing in ``ctx`` meanwhile and names each partition once (a replica startup's Online
        step: Kafka's ``addLeaderAndIsrRequestForBrokers`` per online replica, here one entry per partition
        with its online replicas). Partitions without a leadership are skipped."""
        leaderships, assignments = ctx.partition_leadership, ctx.partition_assignments
        self._add_leader_and_isr(
            ctx,
            (
                (tp, brokers, li, assignments.get(tp) or ReplicaAssignment(()))  # ctx.assignment(tp)
                for tp, brokers in entries
                if (li := leaderships.get(tp)) is not None
            ),
            is_new=False,
            from_context=True,
        )

    def _add_leader_and_isr(
        self,
        ctx: ControllerContext,
        entries: Iterable[tuple[TopicPartition, Iterable[int], LeaderIsrAndControllerEpoch, ReplicaAssignment]],
        *,
        is_new: bool,
        from_context: bool,
    ) -> None:
        """Kafka's ``addLeaderAndIsrRequestForBrokers(brokerIds, tp, leadership, assignment, isNew)`` for each
        ``(tp, brokers, leadership, assignment)`` of ``entries`` in turn — the one place its rules are kept:

        * each broker id >= 0 of ``brokers`` gets the partition's LeaderAndIsr state (replacing one it has),
          with ``isNew`` when the call says so or when this batch already sent the partition to the broker
          as new (Kafka's ``isNew || alreadyNew``; it then stays new until the flush);
        * every registered broker (live or shutting down) gets an UpdateMetadata of the partition, its
          state taken from ``ctx`` now (Kafka's ``addUpdateMetadataRequestForBrokers(
          liveOrShuttingDownBrokerIds, Set(tp))``).

        ``from_context``: the entries' leaderships and assignments are ``ctx``'s own, ``ctx`` does not change
        during the call and each partition comes once (:meth:`add_leader_and_isr_to_replicas`). The states
        are then the same functions of the same values, made without the memos that serve repeated calls
        for one partition (:meth:`_lisr_state`, :meth:`fixed_liveness`): the UpdateMetadata state from the
        entry's leadership and assignment, and the LeaderAndIsr states once per entry."""
        lisr, new_keys, um = self.leader_and_isr, self._new, self.update_metadata_partitions
        topic_ids = ctx.topic_ids
        lisr_state = leader_and_isr_state if from_context else self._lisr_state
        topic: str | None = None
        topic_id = ZERO_UUID
        added = False
        for tp, brokers, li, assignment in entries:
            if tp.topic != topic:  # a topic's partitions usually come together: its id read once for them
                topic = tp.topic
                topic_id = topic_ids.get(topic, ZERO_UUID)
            state_new: LisrPartitionState | None = None
            state_old: LisrPartitionState | None = None
            for b in brokers:
                if b < 0:
                    continue
                per = lisr.get(b)
                if per is None:
                    per = lisr[b] = {}
                if is_new or (new_keys and (b, tp) in new_keys):
                    if is_new:
                        new_keys.add((b, tp))
                    if state_new is None:
                        state_new = lisr_state(tp, li, assignment, True, topic_id)
                    per[tp] = state_new
                else:
                    if state_old is None:
                        state_old = lisr_state(tp, li, assignment, False, topic_id)
                    per[tp] = state_old
            if from_context:
                um[tp] = metadata_state(ctx, tp, li, assignment.replicas, topic_id)
            else:
                self._take_update_metadata(ctx, tp)
            added = True
        if added:
            self.add_update_metadata(ctx, ctx.live_brokers.keys(), ())

    def _lisr_state(
        self,
        tp: TopicPartition,
        li: LeaderIsrAndControllerEpoch,
        assignment: ReplicaAssignment,
        is_new: bool,
        topic_id: str,
    ) -> LisrPartitionState:
        built = self._lisr_built.get((tp, is_new))
        if built is not None and built[0] is li and built[1] is assignment and built[2] == topic_id:
            return built[3]
        state = leader_and_isr_state(tp, li, assignment, is_new, topic_id)
        self._lisr_built[(tp, is_new)] = (li, assignment, topic_id, state)
        return state

    def _take_update_metadata(self, ctx: ControllerContext, tp: TopicPartition) -> None:
        taken = self._um_taken
        if taken is not None:
            source = (ctx.partition_leadership.get(tp), ctx.partition_assignments.get(tp))
            prev = taken.get(tp)
            if prev is not None and prev[0] is source[0] and prev[1] is source[1]:
                return  # the same state as held (see fixed_liveness)
            taken[tp] = source
        s = update_metadata_state(ctx, tp)
        if s is not None:
            self.update_metadata_partitions[tp] = s

    def add_update_metadata(
        self, ctx: ControllerContext, broker_ids: Iterable[int], tps: Iterable[TopicPartition]
    ) -> None:
        """Kafka's ``addUpdateMetadataRequestForBrokers``; partition states are taken now. Broker ids below 0
        (no broker) are skipped."""
        held = self.update_metadata_brokers
        # a set already held whole (the live brokers, added once per partition) changes nothing: skip the pass
        if not (isinstance(broker_ids, AbstractSet) and broker_ids <= held):
            held.update(b for b in broker_ids if b >= 0)
        for tp in tps:
            self._take_update_metadata(ctx, tp)

    def add_stop_replica(
        self, ctx: ControllerContext, broker_ids: Iterable[int], tp: TopicPartition, *, delete: bool
    ) -> None:
        """Kafka's ``addStopReplicaRequestForBrokers``."""
        if tp.topic in ctx.topics_to_be_deleted:
            epoch = EPOCH_DURING_DELETE
        else:
            li = ctx.partition_leadership.get(tp)
            epoch = li.leader_and_isr.leader_epoch if li is not None else NO_EPOCH
        for b in broker_ids:
            if b < 0:
                continue
            per = self.stop_replica.setdefault(b, {})
            prev = per.get(tp)
            per[tp] = (epoch, delete or (prev is not None and prev[1]))

    def forget_broker(self, broker_id: int) -> None:
        """Drop the LeaderAndIsr, UpdateMetadata and StopReplica requests collected for ``broker_id``: it has
        just registered (again), and they were meant for no broker or for its previous incarnation — the
        StopReplica of its failure's Offline replicas, say. Kafka sends those before the broker registers
        again, and drops a request to a broker it has removed (``ControllerChannelManager.removeBroker``);
        here the batch is sent once, after the whole step, to the brokers registered then, so a broker that
        failed and came back within one step would otherwise get them at its new epoch, after its startup's
        LeaderAndIsr (issue 41: the restarted broker stopped on every partition). The answers to its own
        requests stay."""
        self.leader_and_isr.pop(broker_id, None)
        self.stop_replica.pop(broker_id, None)
        self.update_metadata_brokers.discard(broker_id)
        if self._new:
            self._new = {k for k in self._new if k[0] != broker_id}

    def is_empty(self) -> bool:
        return not (self.leader_and_isr or self.update_metadata_brokers or self.stop_replica or self.responses)

    def flush(self, ctx: ControllerContext) -> list[BrokerRequest]:
        """The batched requests, in Kafka's order, to registered brokers only; empties the batch."""
        out: list[BrokerRequest] = []
        live = ctx.live_brokers
        cid, cepoch = ctx.controller_id, ctx.epoch
        for b in sorted(self.leader_and_isr):
            if b not in live:
                continue
            entries = self.leader_and_isr[b]
            leader_ids = {s.leader for s in entries.values()}
            leaders = tuple(leader_node(live[x]) for x in sorted(leader_ids) if x in live)
            states = sorted_states(ctx, entries.values())
            body = LeaderAndIsrRequest(cid, cepoch, live[b].epoch, 0, states, leaders)
            out.append(BrokerRequest(b, RequestApi.LEADER_AND_ISR, body))
        addressees = tuple(Addressee(b, live[b].epoch) for b in sorted(self.update_metadata_brokers) if b in live)
        if addressees:
            # Kafka sends this one body to each broker of the set, each copy with the broker's epoch: here it
            # is one request naming its addressees, sent once (see the module docstring)
            um_states = sorted_states(ctx, self.update_metadata_partitions.values())
            um = UpdateMetadataRequest(cid, cepoch, NO_BROKER_EPOCH, um_states, metadata_brokers(ctx))
            out.append(BrokerRequest(SHARED_BROKER_ID, RequestApi.UPDATE_METADATA, um, addressees))
        for b in sorted(self.stop_replica):
            if b not in live:
                continue
            stops = tuple(
                StopReplicaPartition(tp.topic, tp.partition, e, d)
                for tp, (e, d) in sorted(self.stop_replica[b].items(), key=lambda kv: (kv[0].topic, kv[0].partition))
            )
            out.append(BrokerRequest(b, RequestApi.STOP_REPLICA, StopReplicaRequest(cid, cepoch, live[b].epoch, stops)))
        # answers to a broker's own request go out even if it has just been fenced
        out.extend(self.responses)
        self.leader_and_isr = {}
        self.update_metadata_brokers = set()
        self.update_metadata_partitions = {}
        self.stop_replica = {}
        self.responses = []
        self._new = set()
        self._lisr_built = {}
        if self._um_taken is not None:
            self._um_taken = {}
        return out


@dataclass
class Effects:
    """Everything one step decides, in order: ZooKeeper writes, the request batch, admin results and
    per-item failures. :meth:`decisions` flattens them (ZooKeeper writes first, as Kafka writes
    ZooKeeper before it sends requests)."""

    zk: list[ZkWrite] = field(default_factory=list)
    batch: RequestBatch = field(default_factory=RequestBatch)
    admin: list[AdminResult] = field(default_factory=list)
    failures: list[StateChangeFailure] = field(default_factory=list)

    def fail(self, item: object, from_state: object, to_state: object, reason: str) -> None:
        self.failures.append(StateChangeFailure(str(item), str(from_state), str(to_state), reason))

    def decisions(self, ctx: ControllerContext) -> list[Decision]:
        out: list[Decision] = [*self.zk, *self.batch.flush(ctx), *self.admin, *self.failures]
        self.zk = []
        self.admin = []
        self.failures = []
        return out
