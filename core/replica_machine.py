"""The replica state machine (Kafka's ``ZkReplicaStateMachine``).

:func:`handle_state_changes` moves replicas to a target state, broker by broker (ascending). Valid
previous states are in :mod:`core.states`; an invalid transition leaves the state unchanged and comes
back as a failure. Side effects, in order, per target state:

* ``NewReplica``: with leadership, LeaderAndIsr (``isNew``) to the replica — unless the replica is the
  partition's leader (failure); state New.
* ``OnlineReplica``: from New, add the replica to the assignment if missing; otherwise, with
  leadership, LeaderAndIsr to the replica. State Online.
* ``OfflineReplica``: StopReplica (no delete) to the replica; with leadership, remove the replica from
  the ISR (leader -1 if it led; the last ISR member is kept so the ISR is never empty; leader epoch + 1;
  compare-and-set write), then — unless the topic is queued for deletion — LeaderAndIsr to the other
  replicas; without leadership, UpdateMetadata to every broker. State Offline.
* ``ReplicaDeletionStarted``: state, then StopReplica (delete) to the replica.
* ``ReplicaDeletionSuccessful`` / ``ReplicaDeletionIneligible``: state only.
* ``NonExistentReplica``: remove the replica from the assignment and forget its state.

:func:`startup` is what a new controller runs once it has read ZooKeeper (Kafka's
``ReplicaStateMachine.startup``).
"""

from __future__ import annotations

from collections.abc import Iterable

from core.context import ControllerContext
from core.isr_write import newer_controller_wrote, update_leader_and_isr
from core.machine_result import StateChangeResult
from core.model import NO_LEADER, PartitionReplica, TopicPartition, sort_tps
from core.request_batch import Effects
from core.states import REPLICA_VALID_PREVIOUS, ReplicaState

__all__ = ["apply", "handle_state_changes", "remove_replica_from_isr", "startup"]


def handle_state_changes(
    ctx: ControllerContext, replicas: Iterable[PartitionReplica], target_state: ReplicaState
) -> StateChangeResult:
    """Move ``replicas`` to ``target_state``; returns ``(new context, decisions, failures)``."""
    new = ctx.copy()
    fx = Effects()
    apply(new, fx, replicas, target_state)
    failures = list(fx.failures)
    fx.failures = []
    return StateChangeResult(new, fx.decisions(new), failures)


def apply(
    ctx: ControllerContext, fx: Effects, replicas: Iterable[PartitionReplica], target: ReplicaState
) -> dict[PartitionReplica, str]:
    """In place: mutate ``ctx``, append to ``fx``; returns the failed replicas with the reason."""
    failed: dict[PartitionReplica, str] = {}
    by_broker: dict[int, list[PartitionReplica]] = {}
    for pr in replicas:
        by_broker.setdefault(pr.replica, []).append(pr)
    valid_prev = REPLICA_VALID_PREVIOUS[target]
    # a replica's transition changes leaderships, assignments and replica states, never a broker's liveness
    with fx.batch.fixed_liveness():
        for broker in sorted(by_broker):
            valid: list[PartitionReplica] = []
            for pr in by_broker[broker]:
                cur = ctx.replica_state(pr)
                if cur in valid_prev:
                    valid.append(pr)
                else:
                    reason = (
                        f"Invalid state transition for replica {pr.replica} of partition {pr.topic_partition} "
                        f"from {cur} to {target}"
                    )
                    failed[pr] = reason
                    fx.fail(_name(pr), cur, target, reason)
            _apply_valid(ctx, fx, valid, target, failed)
    return failed


def startup(ctx: ControllerContext, fx: Effects, replicas: Iterable[PartitionReplica] | None = None) -> None:
    """Kafka's ``ReplicaStateMachine.startup`` for ``replicas`` (default: every replica of every
    partition): each replica's state from its broker — Online when its replica is online, else
    ReplicaDeletionIneligible — then the online ones -> Online (LeaderAndIsr to them) and the others ->
    Offline (StopReplica, ISR shrink).

    The Online step is :func:`apply`'s to the online replicas, taken a partition at a time: each of them is
    Online already (valid, not New), so all it does is a LeaderAndIsr entry per replica of a partition with
    a leadership, which changes nothing in the context; the partition's entries are one
    :meth:`~core.request_batch.RequestBatch.add_leader_and_isr_to_replicas` call (the same batch)."""
    states = ctx.replica_states
    online: dict[TopicPartition, list[int]] = {}
    offline: list[PartitionReplica] = []
    if replicas is None:
        assignments = ctx.partition_assignments
        for tp in sort_tps(assignments):
            replicas_of_tp = assignments[tp].replicas
            down = ctx.offline_replicas(tp, replicas_of_tp)
            up: list[int] = []
            for r in replicas_of_tp:
                pr = PartitionReplica.of(tp, r)
                if r in down:
                    states[pr] = ReplicaState.DELETION_INELIGIBLE
                    offline.append(pr)
                else:
                    states[pr] = ReplicaState.ONLINE
                    up.append(r)
            if up:
                online[tp] = up
    else:
        for pr in replicas:
            tp = pr.topic_partition
            if ctx.is_replica_online(pr.replica, tp):
                states[pr] = ReplicaState.ONLINE
                online.setdefault(tp, []).append(pr.replica)
            else:
                states[pr] = ReplicaState.DELETION_INELIGIBLE
                offline.append(pr)
    fx.batch.add_leader_and_isr_to_replicas(ctx, online.items())
    apply(ctx, fx, offline, ReplicaState.OFFLINE)


def _name(pr: PartitionReplica) -> str:
    return f"[Topic={pr.topic},Partition={pr.partition},Replica={pr.replica}]"


def _apply_valid(
    ctx: ControllerContext,
    fx: Effects,
    valid: list[PartitionReplica],
    target: ReplicaState,
    failed: dict[PartitionReplica, str],
) -> None:
    if target is ReplicaState.NEW:
        for pr in valid:
            tp = pr.topic_partition
            li = ctx.partition_leadership.get(tp)
            if li is not None:
                if li.leader_and_isr.leader == pr.replica:
                    reason = (
                        f"Replica {pr.replica} for partition {tp} cannot be moved to NewReplica state as it is "
                        "being requested to become leader"
                    )
                    failed[pr] = reason
                    fx.fail(_name(pr), ctx.replica_state(pr), target, reason)
                    continue
                fx.batch.add_leader_and_isr(ctx, (pr.replica,), tp, li, ctx.assignment(tp), is_new=True)
            ctx.put_replica_state(pr, ReplicaState.NEW)
    elif target is ReplicaState.ONLINE:
        for pr in valid:
            tp = pr.topic_partition
            if ctx.replica_state(pr) is ReplicaState.NEW:
                ra = ctx.assignment(tp)
                if pr.replica not in ra.replicas:
                    ctx.set_assignment(
                        tp, type(ra)((*ra.replicas, pr.replica), ra.adding_replicas, ra.removing_replicas)
                    )
            else:
                li = ctx.partition_leadership.get(tp)
                if li is not None:
                    fx.batch.add_leader_and_isr(ctx, (pr.replica,), tp, li, ctx.assignment(tp), is_new=False)
            ctx.put_replica_state(pr, ReplicaState.ONLINE)
    elif target is ReplicaState.OFFLINE:
        for pr in valid:
            fx.batch.add_stop_replica(ctx, (pr.replica,), pr.topic_partition, delete=False)
        for pr in valid:
            tp = pr.topic_partition
            if tp in ctx.partition_leadership:
                isr_failure = remove_replica_from_isr(ctx, fx, pr)
                if isr_failure is not None:
                    failed[pr] = isr_failure
                    fx.fail(_name(pr), ctx.replica_state(pr), target, isr_failure)
                    continue
                if tp.topic not in ctx.topics_to_be_deleted:
                    recipients = [r for r in ctx.replicas(tp) if r != pr.replica]
                    fx.batch.add_leader_and_isr(
                        ctx, recipients, tp, ctx.partition_leadership[tp], ctx.assignment(tp), is_new=False
                    )
            else:
                fx.batch.add_update_metadata(ctx, ctx.live_brokers.keys(), (tp,))
            ctx.put_replica_state(pr, ReplicaState.OFFLINE)
    elif target is ReplicaState.DELETION_STARTED:
        for pr in valid:
            ctx.put_replica_state(pr, target)
            fx.batch.add_stop_replica(ctx, (pr.replica,), pr.topic_partition, delete=True)
    elif target is ReplicaState.NON_EXISTENT:
        for pr in valid:
            tp = pr.topic_partition
            if tp in ctx.partition_assignments:
                ctx.set_assignment(tp, ctx.assignment(tp).remove_replica(pr.replica))
            ctx.put_replica_state(pr, ReplicaState.NON_EXISTENT)
    else:
        for pr in valid:
            ctx.put_replica_state(pr, target)


def remove_replica_from_isr(ctx: ControllerContext, fx: Effects, pr: PartitionReplica) -> str | None:
    """Kafka's ``removeReplicasFromIsr`` for one replica: no-op when it is not in the ISR; else leader
    -1 if it led, ISR without it unless it is the last member, leader epoch + 1, compare-and-set write.
    Returns a failure reason or ``None``."""
    tp = pr.topic_partition
    li = ctx.partition_leadership[tp]
    fenced = newer_controller_wrote(ctx, li)
    if fenced is not None:
        return fenced
    cur = li.leader_and_isr
    if pr.replica not in cur.isr:
        return None
    leader = NO_LEADER if cur.leader == pr.replica else cur.leader
    isr = cur.isr if len(cur.isr) == 1 else tuple(r for r in cur.isr if r != pr.replica)
    new = cur.new_leader_and_isr(leader, isr)
    update_leader_and_isr(ctx, fx, tp, new)
    return None
