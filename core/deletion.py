"""Topic deletion (Kafka's ``TopicDeletionManager``), in place on a context and an effect list.

A topic is queued by :func:`enqueue_topics_for_deletion` (the DeleteTopics API, a new child of
``/admin/delete_topics``) or, on controller failover, by :func:`init`. A topic queued for deletion
(``/admin/delete_topics/<t>`` exists) goes through:

1. **start** (:func:`on_topic_deletion`, once per topic): partitions -> Offline -> NonExistent,
   UpdateMetadata with leader / leader epoch -2 to every broker; then
2. **replica deletion** (:func:`on_partition_deletion`): replicas on dead brokers ->
   ReplicaDeletionIneligible (the topic becomes ineligible); the others -> Offline (StopReplica
   without delete) -> ReplicaDeletionStarted (StopReplica with delete);
3. **StopReplica outcomes**: success -> ReplicaDeletionSuccessful (:func:`complete_replica_deletion`);
   error -> ReplicaDeletionIneligible and the topic ineligible (:func:`fail_replica_deletion`);
4. **retry** (:func:`resume_deletions`): a topic with no replica in DeletionStarted and some in
   DeletionIneligible has those replicas moved back to Offline, then, once eligible (not ineligible,
   nothing in DeletionStarted), step 2 again;
5. **completion**: all replicas ReplicaDeletionSuccessful -> NonExistentReplica, delete
   ``/brokers/topics/<t>`` (tree), ``/config/topics/<t>``, ``/admin/delete_topics/<t>``, forget the topic.

A topic is ineligible while a reassignment of one of its partitions is in progress or while a replica
is on a dead broker; :func:`resume_deletion_for_topics` lifts that.
"""

from __future__ import annotations

from collections.abc import Iterable

from core import partition_machine, replica_machine
from core.context import ControllerContext
from core.decisions import ANY_VERSION, ZkOp, ZkWrite
from core.kafka.zkdata import delete_topic_path, topic_config_path, topic_path
from core.model import PartitionReplica
from core.request_batch import Effects
from core.states import PartitionState, ReplicaState


def init(
    ctx: ControllerContext, fx: Effects, to_delete: Iterable[str], ineligible: Iterable[str], *, enabled: bool
) -> None:
    """Kafka's ``TopicDeletionManager.init`` on controller failover: with ``delete.topic.enable`` the
    topics of ``/admin/delete_topics`` are queued and those of ``ineligible`` among them marked so;
    without it their znodes are deleted and nothing is queued."""
    queued = set(to_delete)
    if enabled:
        ctx.topics_to_be_deleted = set(queued)
        ctx.topics_ineligible_for_deletion = set(ineligible) & queued
    else:
        for t in sorted(queued):
            fx.zk.append(ZkWrite(ZkOp.DELETE, delete_topic_path(t), None, ANY_VERSION))


def enqueue_topics_for_deletion(ctx: ControllerContext, fx: Effects, topics: Iterable[str]) -> list[str]:
    """Kafka's ``enqueueTopicsForDeletion``, as ``processTopicDeletion`` calls it: queue ``topics``, mark
    those with a partition being reassigned ineligible (the deletion waits for the reassignment), then
    try to make progress; returns the topics whose deletion completed. The caller has checked
    ``delete.topic.enable`` and that the topics exist."""
    queued = set(topics)
    ctx.topics_to_be_deleted.update(queued)
    reassigning = {tp.topic for tp in ctx.partitions_being_reassigned} & queued
    if reassigning:
        mark_topic_ineligible_for_deletion(ctx, reassigning)
    return resume_deletions(ctx, fx)


def mark_topic_ineligible_for_deletion(ctx: ControllerContext, topics: Iterable[str]) -> None:
    ctx.topics_ineligible_for_deletion.update(set(topics) & ctx.topics_to_be_deleted)


def is_topic_ineligible_for_deletion(ctx: ControllerContext, topic: str) -> bool:
    return topic in ctx.topics_ineligible_for_deletion


def is_topic_deletion_in_progress(ctx: ControllerContext, topic: str) -> bool:
    return ctx.is_any_replica_in_state(topic, ReplicaState.DELETION_STARTED)


def is_topic_eligible_for_deletion(ctx: ControllerContext, topic: str) -> bool:
    """Queued, nothing in ReplicaDeletionStarted, not ineligible — and (livectl) no reassignment of
    the topic in progress: Kafka lets a broker startup lift the ineligibility a reassignment set, which
    could start deleting replicas of a partition that is still being reassigned."""
    return (
        topic in ctx.topics_to_be_deleted
        and not is_topic_deletion_in_progress(ctx, topic)
        and not is_topic_ineligible_for_deletion(ctx, topic)
        and not any(tp.topic == topic for tp in ctx.partitions_being_reassigned)
    )


def resume_deletion_for_topics(ctx: ControllerContext, fx: Effects, topics: Iterable[str]) -> list[str]:
    to_resume = set(topics) & ctx.topics_to_be_deleted
    ctx.topics_ineligible_for_deletion -= to_resume
    if to_resume:
        return resume_deletions(ctx, fx)
    return []


def fail_replica_deletion(ctx: ControllerContext, fx: Effects, replicas: Iterable[PartitionReplica]) -> list[str]:
    failed = [r for r in replicas if r.topic in ctx.topics_to_be_deleted]
    if not failed:
        return []
    replica_machine.apply(ctx, fx, failed, ReplicaState.DELETION_INELIGIBLE)
    mark_topic_ineligible_for_deletion(ctx, {r.topic for r in failed})
    return resume_deletions(ctx, fx)


def complete_replica_deletion(ctx: ControllerContext, fx: Effects, replicas: Iterable[PartitionReplica]) -> list[str]:
    done = [r for r in replicas if r.topic in ctx.topics_to_be_deleted]
    replica_machine.apply(ctx, fx, done, ReplicaState.DELETION_SUCCESSFUL)
    return resume_deletions(ctx, fx)


def resume_deletions(ctx: ControllerContext, fx: Effects) -> list[str]:
    """Kafka's ``resumeDeletions``; returns the topics whose deletion completed."""
    completed: list[str] = []
    retry: list[str] = []
    eligible: list[str] = []
    for topic in sorted(ctx.topics_to_be_deleted):
        if ctx.are_all_replicas_in_state(topic, ReplicaState.DELETION_SUCCESSFUL):
            _complete_delete_topic(ctx, fx, topic)
            completed.append(topic)
            continue
        if not ctx.is_any_replica_in_state(topic, ReplicaState.DELETION_STARTED) and ctx.is_any_replica_in_state(
            topic, ReplicaState.DELETION_INELIGIBLE
        ):
            retry.append(topic)
        if is_topic_eligible_for_deletion(ctx, topic):
            eligible.append(topic)
    if retry:
        failed = [r for t in retry for r in ctx.replicas_in_state(t, ReplicaState.DELETION_INELIGIBLE)]
        replica_machine.apply(ctx, fx, failed, ReplicaState.OFFLINE)
    if eligible:
        on_topic_deletion(ctx, fx, eligible)
    return completed


def on_topic_deletion(ctx: ControllerContext, fx: Effects, topics: list[str]) -> None:
    unseen = [t for t in topics if t not in ctx.topics_with_deletion_started]
    if unseen:
        parts = [tp for t in unseen for tp in ctx.partitions_for_topic(t)]
        partition_machine.apply(ctx, fx, parts, PartitionState.OFFLINE)
        partition_machine.apply(ctx, fx, parts, PartitionState.NON_EXISTENT)
        ctx.topics_with_deletion_started.update(unseen)
    all_parts = [tp for t in topics for tp in ctx.partitions_for_topic(t)]
    fx.batch.add_update_metadata(ctx, ctx.live_brokers.keys(), all_parts)
    on_partition_deletion(ctx, fx, topics)


def on_partition_deletion(ctx: ControllerContext, fx: Effects, topics: list[str]) -> None:
    dead: list[PartitionReplica] = []
    retry: list[PartitionReplica] = []
    ineligible: set[str] = set()
    for topic in topics:
        for pr in ctx.replicas_for_topic(topic):
            if not ctx.is_replica_online(pr.replica, pr.topic_partition):
                dead.append(pr)
                ineligible.add(topic)
            elif ctx.replica_state(pr) is not ReplicaState.DELETION_SUCCESSFUL:
                retry.append(pr)
    replica_machine.apply(ctx, fx, dead, ReplicaState.DELETION_INELIGIBLE)
    replica_machine.apply(ctx, fx, retry, ReplicaState.OFFLINE)
    replica_machine.apply(ctx, fx, retry, ReplicaState.DELETION_STARTED)
    if ineligible:
        mark_topic_ineligible_for_deletion(ctx, ineligible)


def _complete_delete_topic(ctx: ControllerContext, fx: Effects, topic: str) -> None:
    done = ctx.replicas_in_state(topic, ReplicaState.DELETION_SUCCESSFUL)
    replica_machine.apply(ctx, fx, done, ReplicaState.NON_EXISTENT)
    fx.zk.append(ZkWrite(ZkOp.DELETE_TREE, topic_path(topic), None, ANY_VERSION))
    fx.zk.append(ZkWrite(ZkOp.DELETE, topic_config_path(topic), None, ANY_VERSION))
    fx.zk.append(ZkWrite(ZkOp.DELETE, delete_topic_path(topic), None, ANY_VERSION))
    ctx.remove_topic(topic)
