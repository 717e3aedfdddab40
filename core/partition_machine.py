"""The partition state machine (Kafka's ``ZkPartitionStateMachine``).

:func:`handle_state_changes` moves partitions to a target state. Valid previous states are in
:mod:`core.states`; an invalid transition leaves the state unchanged and comes back as a failure.
Side effects, in order, per target state:

* ``NewPartition``: state only (the assignment is already in the context).
* ``OnlinePartition`` from ``NewPartition``: leader = first live replica, ISR = live replicas, leader
  epoch 0; ``CREATE /brokers/topics/<t>/partitions/<p>/state``; LeaderAndIsr (``isNew``) to the ISR;
  UpdateMetadata to every broker. No live replica: failure, state unchanged.
* ``OnlinePartition`` from ``OnlinePartition`` / ``OfflinePartition``: elect with ``strategy``
  (:mod:`core.election`); compare-and-set ``SET`` of the state znode at the partition epoch (which then
  rises by one); LeaderAndIsr to the strategy's recipients; UpdateMetadata to every broker. No leader:
  failure, state unchanged, nothing written. Leadership written by a newer controller epoch: failure.
* ``OfflinePartition`` / ``NonExistentPartition``: state only.

:func:`startup` is what a new controller runs once it has read ZooKeeper (Kafka's
``PartitionStateMachine.startup``): every partition's state from its leadership, then
:func:`trigger_online_partition_state_change`.
"""

from __future__ import annotations

from collections.abc import Iterable

from core.context import ControllerContext
from core.decisions import ANY_VERSION, ZkOp, ZkWrite
from core.election import (
    ElectionResult,
    ElectionStrategy,
    elect_controlled_shutdown,
    elect_offline,
    elect_preferred,
    elect_reassign,
    initial_leader_and_isr,
)
from core.isr_write import newer_controller_wrote, update_leader_and_isr
from core.kafka.zkdata import encode_partition_state, partition_state_path
from core.machine_result import StateChangeResult
from core.model import TopicPartition, sort_tps
from core.request_batch import Effects
from core.states import PARTITION_VALID_PREVIOUS, PartitionState

__all__ = [
    "ElectionStrategy",
    "apply",
    "handle_state_changes",
    "initialize_partition_state",
    "needs_leader",
    "startup",
    "trigger_online_partition_state_change",
]


def handle_state_changes(
    ctx: ControllerContext,
    partitions: Iterable[TopicPartition],
    target_state: PartitionState,
    strategy: ElectionStrategy | None = None,
    *,
    default_unclean: bool = False,
) -> StateChangeResult:
    """Move ``partitions`` to ``target_state``; returns ``(new context, decisions, failures)``.

    ``strategy`` is needed for elections (``OnlinePartition`` from Online/Offline); ``None`` means the
    offline strategy with the topic's ``unclean.leader.election.enable`` (default ``default_unclean``)."""
    new = ctx.copy()
    fx = Effects()
    apply(new, fx, partitions, target_state, strategy, default_unclean=default_unclean)
    failures = list(fx.failures)
    fx.failures = []
    return StateChangeResult(new, fx.decisions(new), failures)


def apply(
    ctx: ControllerContext,
    fx: Effects,
    partitions: Iterable[TopicPartition],
    target: PartitionState,
    strategy: ElectionStrategy | None = None,
    *,
    default_unclean: bool = False,
) -> dict[TopicPartition, str]:
    """In place: mutate ``ctx``, append to ``fx``; returns the failed partitions with the reason."""
    failed: dict[TopicPartition, str] = {}
    valid_prev = PARTITION_VALID_PREVIOUS[target]
    valid: list[TopicPartition] = []
    for tp in partitions:
        cur = ctx.partition_state(tp)
        if cur in valid_prev:
            valid.append(tp)
        else:
            reason = f"Invalid state transition for partition {tp} from {cur} to {target}"
            failed[tp] = reason
            fx.fail(tp, cur, target, reason)
    if target is PartitionState.ONLINE:
        to_elect: list[TopicPartition] = []
        for tp in valid:
            if ctx.partition_state(tp) is PartitionState.NEW:
                init_failure = _initialize(ctx, fx, tp)
                if init_failure is not None:
                    failed[tp] = init_failure
                    fx.fail(tp, PartitionState.NEW, target, init_failure)
            else:
                to_elect.append(tp)
        for tp in to_elect:
            cur = ctx.partition_state(tp)
            elect_failure = _elect(ctx, fx, tp, strategy or ElectionStrategy.OFFLINE, default_unclean)
            if elect_failure is not None:
                failed[tp] = elect_failure
                fx.fail(tp, cur, target, elect_failure)
    else:
        for tp in valid:
            ctx.put_partition_state(tp, target)
    return failed


def _initialize(ctx: ControllerContext, fx: Effects, tp: TopicPartition) -> str | None:
    replicas = ctx.replicas(tp)
    live = [r for r in replicas if ctx.is_replica_online(r, tp)]
    lai = initial_leader_and_isr(replicas, live)
    if lai is None:
        return (
            f"Controller {ctx.controller_id} epoch {ctx.epoch} encountered error during state change of partition "
            f"{tp} from New to Online, assigned replicas are [{','.join(map(str, replicas))}], live brokers are "
            f"[{','.join(map(str, sorted(ctx.live_broker_ids)))}]. No assigned replica is alive."
        )
    if tp in ctx.partition_leadership:
        return f"Failed to create the state znode of partition {tp}: it already exists"
    fx.zk.append(
        ZkWrite(
            ZkOp.CREATE,
            partition_state_path(tp.topic, tp.partition),
            encode_partition_state(lai, ctx.epoch),
            ANY_VERSION,
            make_parents=True,
        )
    )
    ctx.put_leadership(tp, lai, ctx.epoch)
    li = ctx.partition_leadership[tp]
    fx.batch.add_leader_and_isr(ctx, lai.isr, tp, li, ctx.assignment(tp), is_new=True)
    ctx.put_partition_state(tp, PartitionState.ONLINE)
    return None


def _elect(
    ctx: ControllerContext, fx: Effects, tp: TopicPartition, strategy: ElectionStrategy, default_unclean: bool
) -> str | None:
    li = ctx.partition_leadership.get(tp)
    if li is None:
        return f"LeaderAndIsr information doesn't exist for partition {tp} in {ctx.partition_state(tp)} state"
    fenced = newer_controller_wrote(ctx, li)
    if fenced is not None:
        return fenced
    cur = li.leader_and_isr
    ra = ctx.assignment(tp)
    replicas = ra.replicas
    result: ElectionResult
    if strategy is ElectionStrategy.CONTROLLED_SHUTDOWN:
        live_sd = {r for r in replicas if ctx.is_replica_online(r, tp, include_shutting_down=True)}
        result = elect_controlled_shutdown(replicas, cur, live_sd, ctx.shutting_down_broker_ids)
    else:
        live = {r for r in replicas if ctx.is_replica_online(r, tp)}
        if strategy is ElectionStrategy.OFFLINE:
            result = elect_offline(replicas, cur, live, ctx.unclean_enabled(tp.topic, default_unclean))
        elif strategy is ElectionStrategy.OFFLINE_UNCLEAN:
            result = elect_offline(replicas, cur, live, True)
        elif strategy is ElectionStrategy.REASSIGN:
            result = elect_reassign(ra.target_replicas, cur, live)
        else:
            result = elect_preferred(replicas, cur, live)
    new = result.leader_and_isr
    if new is None:
        return f"Failed to elect leader for partition {tp} under strategy {strategy.value}"
    li = update_leader_and_isr(ctx, fx, tp, new)
    fx.batch.add_leader_and_isr(ctx, result.recipients, tp, li, ra, is_new=False)
    ctx.put_partition_state(tp, PartitionState.ONLINE)
    return None


def startup(ctx: ControllerContext, fx: Effects, *, default_unclean: bool = False) -> dict[TopicPartition, str]:
    """Kafka's ``PartitionStateMachine.startup``: :func:`initialize_partition_state` for every partition,
    then New and Offline partitions -> Online; returns the failures."""
    initialize_partition_state(ctx, ctx.partition_assignments)
    return trigger_online_partition_state_change(ctx, fx, default_unclean=default_unclean)


def initialize_partition_state(ctx: ControllerContext, partitions: Iterable[TopicPartition]) -> None:
    """Kafka's ``initializePartitionState``: New without a leader and ISR, Online when the leader's
    replica is online, else Offline. State only: nothing is written or sent."""
    leaderships, states, offline_or_new = ctx.partition_leadership, ctx.partition_states, ctx.offline_or_new_partitions
    for tp in partitions:
        li = leaderships.get(tp)
        if li is None:
            ctx.put_partition_state(tp, PartitionState.NEW)
        elif ctx.is_replica_online(li.leader_and_isr.leader, tp):
            # put_partition_state(tp, ONLINE), without a look-up in an empty set (a failover's usual case)
            states[tp] = PartitionState.ONLINE
            if offline_or_new:
                offline_or_new.discard(tp)
        else:
            ctx.put_partition_state(tp, PartitionState.OFFLINE)


def needs_leader(ctx: ControllerContext, tp: TopicPartition) -> bool:
    """Whether a partition takes part in leader elections: not when its topic is queued for deletion
    (Kafka's rule), except while the partition is being reassigned — the deletion waits for that
    reassignment, which cannot finish without a leader to bring the new replicas into the ISR."""
    return tp.topic not in ctx.topics_to_be_deleted or tp in ctx.partitions_being_reassigned


def trigger_online_partition_state_change(
    ctx: ControllerContext, fx: Effects, topic: str | None = None, *, default_unclean: bool = False
) -> dict[TopicPartition, str]:
    """Kafka's ``triggerOnlinePartitionStateChange``: New and Offline partitions (of ``topic``, or all)
    that :func:`needs_leader` -> Online with the offline strategy; returns the failures."""
    tps = sort_tps(
        tp for tp in ctx.offline_or_new_partitions if needs_leader(ctx, tp) and (topic is None or tp.topic == topic)
    )
    return apply(ctx, fx, tps, PartitionState.ONLINE, ElectionStrategy.OFFLINE, default_unclean=default_unclean)
