"""Topic deletion as the controller drives it: the DeleteTopics API, ``/admin/delete_topics`` and the
StopReplica answers (Kafka's ``processTopicDeletion`` and ``TopicDeletionStopReplicaResponseReceived``);
the deletion itself is :mod:`core.deletion` (Kafka's ``TopicDeletionManager``)."""

from __future__ import annotations

from core import deletion
from core.controller.step_context import StepContext
from core.decisions import ANY_VERSION, AdminResult, AdminStatus, ZkOp, ZkWrite
from core.events import DeleteTopic, StopReplicaResponse, Tick
from core.kafka.error_codes import KafkaError
from core.kafka.zkdata import delete_topic_path
from core.model import PartitionReplica, TopicPartition
from core.zk_path_events import ZkTopicDeletion


def delete_topic(c: StepContext, cmd: DeleteTopic) -> None:
    """The DeleteTopics API for one topic: ``/admin/delete_topics/<t>`` created, the topic queued
    (:func:`core.deletion.enqueue_topics_for_deletion`); answered ``in_progress``, then ``ok`` by
    :func:`complete_deletion_requests` once the topic is gone."""
    ctx = c.ctx
    if cmd.topic not in ctx.topic_partitions:
        c.admin(
            cmd, AdminStatus.ERROR, KafkaError.UNKNOWN_TOPIC_OR_PARTITION.name, f"Topic '{cmd.topic}' does not exist."
        )
        return
    if not c.config.delete_topic_enable:
        c.admin(cmd, AdminStatus.ERROR, KafkaError.TOPIC_DELETION_DISABLED.name, "Topic deletion is disabled.")
        return
    c.pending_deletions.setdefault(cmd.request_id, set()).add(cmd.topic)
    if cmd.topic in ctx.topics_to_be_deleted:
        c.admin(cmd, AdminStatus.IN_PROGRESS, message="Topic deletion is already in progress.")
        return
    c.fx.zk.append(ZkWrite(ZkOp.CREATE, delete_topic_path(cmd.topic), None, make_parents=True))
    deletion.enqueue_topics_for_deletion(ctx, c.fx, [cmd.topic])
    if cmd.topic in ctx.topic_partitions:
        c.admin(cmd, AdminStatus.IN_PROGRESS, message="Topic deletion started.")


def zk_topic_deletion(c: StepContext, ev: ZkTopicDeletion) -> None:
    """Kafka's ``processTopicDeletion`` for one child of ``/admin/delete_topics``: an unknown topic's
    znode is deleted; with ``delete.topic.enable`` false the znode is deleted and nothing else; else
    the topic is queued (ineligible while a partition of it is being reassigned) and deletion
    resumes. A topic already queued is left as it is."""
    if not c.read_under_this_epoch(ev.controller_epoch):
        return
    ctx = c.ctx
    if ev.topic not in ctx.topic_partitions or not c.config.delete_topic_enable:
        c.fx.zk.append(ZkWrite(ZkOp.DELETE, delete_topic_path(ev.topic), None, ANY_VERSION))
        return
    if ev.topic in ctx.topics_to_be_deleted:
        return
    deletion.enqueue_topics_for_deletion(ctx, c.fx, [ev.topic])


def stop_replica_response(c: StepContext, ev: StopReplicaResponse) -> None:
    """Kafka's ``TopicDeletionStopReplicaResponseReceived``. Kafka's request batch passes on only the
    entries of topics whose deletion has *started* (``isTopicDeletionInProgress``): an answer about a
    topic merely queued for deletion (or not queued at all, or forgotten) is no replica-deletion
    outcome and changes nothing."""
    ctx = c.ctx
    entries = [
        (TopicPartition(pe.topic, pe.partition), pe.error_code)
        for pe in ev.partitions
        if pe.topic in ctx.topic_partitions and pe.topic in ctx.topics_with_deletion_started
    ]
    in_error = [tp for tp, code in entries if ev.error_code != 0 or code != 0]
    ok = [tp for tp, code in entries if not (ev.error_code != 0 or code != 0)]
    if in_error:
        deletion.fail_replica_deletion(
            ctx, c.fx, [PartitionReplica(tp.topic, tp.partition, ev.broker_id) for tp in in_error]
        )
    if ok:
        deletion.complete_replica_deletion(
            ctx, c.fx, [PartitionReplica(tp.topic, tp.partition, ev.broker_id) for tp in ok]
        )


def tick(c: StepContext, _ev: Tick) -> None:
    deletion.resume_deletions(c.ctx, c.fx)


def complete_deletion_requests(c: StepContext) -> None:
    """Answer ``ok`` to the deletion requests all of whose topics are gone."""
    for rid in sorted(c.pending_deletions):
        topics = c.pending_deletions[rid]
        topics.intersection_update(c.ctx.topic_partitions)
        if not topics:
            del c.pending_deletions[rid]
            c.fx.admin.append(AdminResult(rid, DeleteTopic.TYPE, AdminStatus.OK, None, "Topic deleted."))
