"""Partition reassignment, KIP-455 (Kafka's ``onPartitionReassignment`` and what leads to it: the
AlterPartitionReassignments API, the legacy ``/admin/reassign_partitions`` path, resumption)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from core import deletion
from core.controller.step_context import StepContext
from core.controller.topics import topic_znode_problem
from core.decisions import AdminResult, AdminStatus
from core.election import ElectionStrategy
from core.events import CancelReassignment, ReassignPartitions
from core.isr_write import update_leader_and_isr
from core.kafka.error_codes import KafkaError, ReassignmentOutcome
from core.model import NO_LEADER, PartitionReplica, ReplicaAssignment, TopicPartition
from core.states import PartitionState, ReplicaState
from core.zk_path_events import ZkReassignment


def _validate_replicas(
    c: StepContext, tp: TopicPartition, replicas: Sequence[int], check_live: bool = True
) -> str | None:
    if not replicas:
        return "Empty replica list specified in partition reassignment."
    if len(set(replicas)) != len(replicas):
        return f"Duplicate replica ids in partition reassignment replica list: {list(replicas)}"
    if any(r < 0 for r in replicas):
        return f"Invalid broker id in replica list: {list(replicas)}"
    adding = c.ctx.assignment(tp).reassign_to(replicas).adding_replicas
    live = c.ctx.live_broker_ids
    if check_live and not set(adding) <= live:
        return (
            f"Replica assignment has brokers that are not alive. Replica list: {list(adding)}, "
            f"live broker list: {sorted(live)}"
        )
    return None


def trigger_reassignment(
    c: StepContext, tp: TopicPartition, target: Sequence[int] | None, check_live: bool = True
) -> tuple[str, str] | None:
    """Validate and start (or cancel, ``target`` None) one reassignment; an error name and message,
    or ``None`` when accepted. ``check_live`` False (the ZooKeeper path, as Kafka's
    ``maybeTriggerPartitionReassignment``): target brokers that are down are waited for."""
    ctx = c.ctx
    if tp not in ctx.partition_assignments or tp.topic in ctx.topics_to_be_deleted:
        return KafkaError.UNKNOWN_TOPIC_OR_PARTITION.name, "The partition does not exist."
    current = ctx.assignment(tp)
    if target is not None:
        problem = _validate_replicas(c, tp, target, check_live)
        if problem is not None:
            return KafkaError.INVALID_REPLICA_ASSIGNMENT.name, problem
        reassignment = current.reassign_to(target)
    elif current.is_being_reassigned:
        reassignment = current.reassign_to(current.origin_replicas)
    else:
        return KafkaError.NO_REASSIGNMENT_IN_PROGRESS.name, "No reassignment in progress."
    for rid, tps in c.pending_reassignments.items():
        if tp in tps:
            tps.discard(tp)
            c.interrupted.setdefault(rid, {})[str(tp)] = "superseded" if target is not None else "cancelled"
    on_partition_reassignment(c, tp, reassignment)
    return None


def reassign_partitions(c: StepContext, cmd: ReassignPartitions | CancelReassignment) -> None:
    results: dict[str, dict[str, str]] = {}
    accepted: set[TopicPartition] = set()
    items: list[tuple[TopicPartition, Sequence[int] | None]]
    if isinstance(cmd, ReassignPartitions):
        items = [(TopicPartition(t.topic, t.partition), t.replicas) for t in cmd.partitions]
    else:
        items = [(tp, None) for tp in cmd.partitions]
    too_big = reassigned_znodes_too_big(c, items)
    for tp, target in items:
        if tp.topic in too_big:
            results[str(tp)] = {"error": KafkaError.INVALID_REPLICA_ASSIGNMENT.name, "message": too_big[tp.topic]}
            continue
        c.zk_reassignments.discard(tp)
        err = trigger_reassignment(c, tp, target)
        if err is None:
            accepted.add(tp)
            results[str(tp)] = {"error": KafkaError.NONE.name}
        else:
            results[str(tp)] = {"error": err[0], "message": err[1]}
    if not accepted:
        first = next(iter(results.values()))
        c.admin(cmd, AdminStatus.ERROR, first["error"], first.get("message", ""), {"partitions": results})
        return
    still = {tp for tp in accepted if tp in c.ctx.partitions_being_reassigned}
    if still:
        c.pending_reassignments[cmd.request_id] = still
        c.admin(cmd, AdminStatus.IN_PROGRESS, details={"partitions": results})
    else:
        c.admin(cmd, AdminStatus.OK, details={"partitions": results})
    c.maybe_clear_zk_reassignment_path()


def reassigned_znodes_too_big(
    c: StepContext, items: Sequence[tuple[TopicPartition, Sequence[int] | None]]
) -> dict[str, str]:
    """Topics whose znode, with every reassignment of ``items`` started (the replicas listed as target
    + origin, adding and removing), would be over what ZooKeeper accepts: topic -> the reason."""
    ctx = c.ctx
    by_topic: dict[str, dict[int, ReplicaAssignment]] = {}
    for tp, target in items:
        if target is None or tp not in ctx.partition_assignments:
            continue
        by_topic.setdefault(tp.topic, {})[tp.partition] = ctx.assignment(tp).reassign_to(target)
    out: dict[str, str] = {}
    for topic, changed in by_topic.items():
        prospective = {tp.partition: ctx.assignment(tp) for tp in ctx.partitions_for_topic(topic)}
        prospective.update(changed)
        problem = topic_znode_problem(topic, prospective, ctx.topic_ids.get(topic))
        if problem is not None:
            out[topic] = problem
    return out


def is_reassignment_complete(c: StepContext, tp: TopicPartition, ra: ReplicaAssignment) -> bool:
    if not ra.is_being_reassigned:
        return True
    lai = c.ctx.leader_and_isr(tp)
    return lai is not None and set(ra.target_replicas) <= set(lai.isr)


def on_partition_reassignment(c: StepContext, tp: TopicPartition, reassignment: ReplicaAssignment) -> None:
    """KIP-455 ``onPartitionReassignment``. Not complete (target not all in the ISR): write RS (with
    adding / removing) to ``/brokers/topics/<t>``, stop replicas a superseded reassignment no longer
    needs, bump the leader epoch and send LeaderAndIsr to RS, adding replicas -> New. Complete:
    adding -> Online, RS := TRS in memory, move the leader into TRS if needed (else bump the epoch),
    removing replicas -> Offline -> deleted, write RS = TRS last, forget the reassignment,
    UpdateMetadata, resume a deletion of the topic."""
    ctx = c.ctx
    deletion.mark_topic_ineligible_for_deletion(ctx, [tp.topic])
    current = ctx.assignment(tp)
    lai = ctx.leader_and_isr(tp)
    unneeded_isr = [r for r in current.replicas if r not in reassignment.replicas and lai and r in lai.isr]
    if lai is not None and unneeded_isr and set(lai.isr) <= set(unneeded_isr):
        # livectl: Kafka would drop the whole ISR at once here (superseding or cancelling a
        # reassignment) and leave an ISR of non-replicas; keep those replicas as removing ones
        # until the target has caught up.
        reassignment = ReplicaAssignment(
            (*reassignment.replicas, *unneeded_isr),
            reassignment.adding_replicas,
            (*reassignment.removing_replicas, *unneeded_isr),
        )
    if current != reassignment:
        ctx.set_assignment(tp, reassignment)
        c.write_topic_znode(tp.topic)
        unneeded = [r for r in current.replicas if r not in reassignment.replicas]
        if unneeded:
            _stop_removed_replicas(c, tp, unneeded)
    ctx.partitions_being_reassigned.add(tp)
    adding = reassignment.adding_replicas
    removing = reassignment.removing_replicas
    if not is_reassignment_complete(c, tp, reassignment):
        _update_leader_epoch_and_send_request(c, tp, reassignment)
        c.replica_states([PartitionReplica(tp.topic, tp.partition, r) for r in adding], ReplicaState.NEW)
        return
    c.replica_states([PartitionReplica(tp.topic, tp.partition, r) for r in adding], ReplicaState.ONLINE)
    completed = reassignment.completed()
    ctx.set_assignment(tp, completed)
    _move_reassigned_leader_if_required(c, tp, completed)
    _stop_removed_replicas(c, tp, list(removing))
    c.write_topic_znode(tp.topic)
    ctx.partitions_being_reassigned.discard(tp)
    c.zk_reassignments.discard(tp)
    c.send_update_metadata(ctx.live_brokers.keys(), (tp,))
    deletion.resume_deletion_for_topics(ctx, c.fx, [tp.topic])


def _update_leader_epoch_and_send_request(c: StepContext, tp: TopicPartition, ra: ReplicaAssignment) -> None:
    ctx = c.ctx
    li = ctx.partition_leadership.get(tp)
    if li is None or li.controller_epoch > ctx.epoch:
        c.fx.fail(tp, ctx.partition_state(tp), PartitionState.ONLINE, "Failed to update the leader epoch")
        return
    updated = update_leader_and_isr(ctx, c.fx, tp, li.leader_and_isr.new_epoch())
    c.fx.batch.add_leader_and_isr(ctx, ra.replicas, tp, updated, ra, is_new=False)


def _move_reassigned_leader_if_required(c: StepContext, tp: TopicPartition, ra: ReplicaAssignment) -> None:
    lai = c.ctx.leader_and_isr(tp)
    leader = lai.leader if lai is not None else NO_LEADER
    if leader in ra.replicas and c.ctx.is_replica_online(leader, tp):
        _update_leader_epoch_and_send_request(c, tp, ra)
    else:
        c.partition_states([tp], PartitionState.ONLINE, ElectionStrategy.REASSIGN)


def _stop_removed_replicas(c: StepContext, tp: TopicPartition, removed: list[int]) -> None:
    prs = [PartitionReplica(tp.topic, tp.partition, r) for r in removed]
    for target in (
        ReplicaState.OFFLINE,
        ReplicaState.DELETION_STARTED,
        ReplicaState.DELETION_SUCCESSFUL,
        ReplicaState.NON_EXISTENT,
    ):
        c.replica_states(prs, target)


def maybe_complete_reassignment(c: StepContext, tp: TopicPartition) -> None:
    ra = c.ctx.assignment(tp)
    if is_reassignment_complete(c, tp, ra):
        on_partition_reassignment(c, tp, ra)


def maybe_resume_reassignments(
    c: StepContext, should_resume: Callable[[TopicPartition, ReplicaAssignment], bool]
) -> None:
    for tp in sorted(c.ctx.partitions_being_reassigned):
        ra = c.ctx.assignment(tp)
        if should_resume(tp, ra):
            on_partition_reassignment(c, tp, ra)


def start_zk_reassignments(c: StepContext, items: Sequence[tuple[TopicPartition, Sequence[int]]]) -> None:
    """Start the entries of ``/admin/reassign_partitions`` (Kafka's ``maybeTriggerPartitionReassignment``
    for the legacy path): target brokers that are down are waited for; an entry that cannot be started
    is dropped. The path is deleted once this bucket's entries are done."""
    for tp, target in items:
        c.zk_reassignments.add(tp)
        if trigger_reassignment(c, tp, target, check_live=False) is not None:
            c.zk_reassignments.discard(tp)
    c.zk_reassignments &= c.ctx.partitions_being_reassigned
    c.maybe_clear_zk_reassignment_path()


def zk_reassignment(c: StepContext, ev: ZkReassignment) -> None:
    """Kafka's ``processZkPartitionReassignment``: each entry is started as by the API, except that
    target brokers that are down are not refused (the reassignment waits for them); entries that
    cannot be started (unknown partition, topic being deleted, znode too big) are dropped. The path
    is deleted once this bucket's entries are done (see :mod:`core.controller`)."""
    if not c.read_under_this_epoch(ev.controller_epoch):
        return
    c.had_zk_reassignments = True
    items = [(TopicPartition(t.topic, t.partition), t.replicas) for t in ev.partitions]
    too_big = reassigned_znodes_too_big(c, items)
    start_zk_reassignments(c, [(tp, target) for tp, target in items if tp.topic not in too_big])


def complete_reassignment_requests(c: StepContext) -> None:
    """Answer the reassignment requests none of whose partitions is still being reassigned, and delete
    ``/admin/reassign_partitions`` when its entries are done."""
    c.zk_reassignments &= c.ctx.partitions_being_reassigned
    c.maybe_clear_zk_reassignment_path()
    for rid in sorted(c.pending_reassignments):
        tps = c.pending_reassignments[rid]
        tps.intersection_update(c.ctx.partitions_being_reassigned)
        if not tps:
            del c.pending_reassignments[rid]
            c.fx.admin.append(reassignment_outcome(rid, c.interrupted.pop(rid, {})))


def reassignment_outcome(request_id: str, interrupted: dict[str, str]) -> AdminResult:
    """The final answer of a reassignment request: ``ok`` when every partition reached its target;
    ``error`` ``REASSIGNMENT_CANCELLED`` / ``REASSIGNMENT_SUPERSEDED`` (one entry per such partition in
    the details) when a later cancellation or reassignment replaced some of them — never "completed"."""
    if not interrupted:
        return AdminResult(request_id, ReassignPartitions.TYPE, AdminStatus.OK, None, "Reassignment completed.")
    words = {"cancelled": "cancelled", "superseded": "superseded by a newer reassignment"}
    partitions = {
        tp: {"error": ReassignmentOutcome[how.upper()].value, "message": f"The reassignment of {tp} was {words[how]}."}
        for tp, how in sorted(interrupted.items())
    }
    kinds = sorted(set(interrupted.values()))
    outcome = ReassignmentOutcome.CANCELLED if kinds == ["cancelled"] else ReassignmentOutcome.SUPERSEDED
    message = "; ".join(p["message"] for p in partitions.values())
    details = {"partitions": partitions}
    return AdminResult(request_id, ReassignPartitions.TYPE, AdminStatus.ERROR, outcome.value, message, details)
