"""Controller failover (Kafka's ``onControllerFailover``): the new controller's context from the
ZooKeeper snapshot, then each part started in Kafka's order."""

from __future__ import annotations

from core import deletion, partition_machine, replica_machine
from core.context import ControllerContext
from core.controller.controller_replicas import repair_controller_replicas_on_failover
from core.controller.elections import preferred_elections
from core.controller.reassignment import maybe_resume_reassignments, start_zk_reassignments
from core.controller.step_context import UNCLEAN_CONFIG, StepContext
from core.decisions import ANY_VERSION, ZkOp, ZkWrite
from core.events import ControllerFailover
from core.kafka.zkdata import PREFERRED_REPLICA_ELECTION
from core.model import LeaderAndIsr, LeaderIsrAndControllerEpoch, ReplicaAssignment, TopicPartition
from core.snapshot import ZkSnapshot


def failover(c: StepContext, ev: ControllerFailover) -> None:
    """Kafka's ``onControllerFailover`` from the snapshot's reading of ZooKeeper: the context, topic
    deletion initialised, UpdateMetadata (brokers only) to every broker, both state machines started,
    reassignments resumed (the legacy ``/admin/reassign_partitions`` entries first: they take
    precedence), deletions resumed, pending preferred elections run. Before any of it, unlike Kafka, the
    replicas brokers placed on this controller's id are repaired
    (:func:`core.controller.controller_replicas.repair_controller_replicas_on_failover`)."""
    snap = ev.snapshot
    c.ctx = ctx = _context_from_snapshot(ev.controller_id, snap)
    c.offline_reset = frozenset(snap.offline_replica_topics)
    c.cordoned = frozenset(snap.cordoned_brokers)
    # unlike Kafka: a replica a broker placed on this controller's id while none was active
    repair_controller_replicas_on_failover(c, snap)
    fx = c.fx
    # Kafka's fetchTopicDeletionsInProgress: a topic with a replica offline or a partition being
    # reassigned cannot be deleted yet. Kafka tests every topic for an offline replica, but only the
    # answer for the topics queued for deletion is used (deletion.init keeps those): they alone are tested
    offline_topics = {
        topic
        for topic in set(snap.topics_to_delete)
        if any(ctx.offline_replicas(tp, ctx.replicas(tp)) for tp in ctx.partitions_for_topic(topic))
    }
    ineligible = offline_topics | {tp.topic for tp in ctx.partitions_being_reassigned}
    deletion.init(ctx, fx, snap.topics_to_delete, ineligible, enabled=c.config.delete_topic_enable)
    c.send_update_metadata(ctx.live_brokers.keys())
    replica_machine.startup(ctx, fx)
    partition_machine.startup(ctx, fx, default_unclean=c.config.unclean_leader_election_enable)
    # reassignments: the legacy path first (it takes precedence), then those in topic znodes
    legacy = [(TopicPartition(t.topic, t.partition), t.replicas) for t in snap.pending_reassignments]
    c.zk_reassignments = set()
    c.had_zk_reassignments = bool(legacy)
    start_zk_reassignments(c, legacy)
    started = {tp for tp, _ in legacy}
    maybe_resume_reassignments(c, lambda tp, _ra: tp not in started)
    deletion.resume_deletions(ctx, fx)
    preferred_elections(c, snap.pending_preferred_elections)
    if snap.pending_preferred_elections:
        fx.zk.append(ZkWrite(ZkOp.DELETE, PREFERRED_REPLICA_ELECTION, None, ANY_VERSION))


def _context_from_snapshot(controller_id: int, snap: ZkSnapshot) -> ControllerContext:
    ctx = ControllerContext(
        controller_id=controller_id, epoch=snap.controller_epoch, epoch_zk_version=snap.controller_epoch_zk_version
    )
    for b in snap.brokers:
        ctx.add_live_broker(b)
    # the context's partition objects by plain key: its leaderships are keyed by the same objects as its
    # assignments, so that look-ups of one partition in both find the key by identity (a dataclass's
    # __eq__ runs in Python; a failover looks each partition up several times)
    keys: dict[tuple[str, int], TopicPartition] = {}
    assignments, by_broker = ctx.partition_assignments, ctx.partitions_by_broker
    for tz in snap.topics:
        adding = dict(tz.adding_replicas)
        removing = dict(tz.removing_replicas)
        parts = ctx.topic_partitions.setdefault(tz.topic, set())
        if tz.topic_id:
            ctx.topic_ids[tz.topic] = tz.topic_id
        moving = bool(adding or removing)
        for p, reps in tz.partitions:
            if moving:
                ra = ReplicaAssignment(tuple(reps), tuple(adding.get(p, ())), tuple(removing.get(p, ())))
            else:  # the usual topic: no partition being reassigned
                ra = ReplicaAssignment(tuple(reps))
            known = keys.get((tz.topic, p))
            if known is not None:  # listed again (not from one ZooKeeper read): replace, as set_assignment does
                tp = known
                ctx.set_assignment(tp, ra)
            else:  # set_assignment of a partition the context has not seen: no old replicas to unindex
                tp = keys[(tz.topic, p)] = TopicPartition(tz.topic, p)
                for r in ra.replicas:
                    on_broker = by_broker.get(r)
                    if on_broker is None:
                        on_broker = by_broker[r] = set()
                    on_broker.add(tp)
                assignments[tp] = ra
                parts.add(p)
            if moving and ra.is_being_reassigned:
                ctx.partitions_being_reassigned.add(tp)
    leaderships = ctx.partition_leadership
    for tp, st in snap.partition_states:
        key = keys.get((tp.topic, tp.partition))
        if key is not None:  # ctx.put_leadership, inline
            leaderships[key] = LeaderIsrAndControllerEpoch(
                LeaderAndIsr(st.leader, st.isr, st.leader_epoch, st.zk_version, st.leader_recovery_state),
                st.controller_epoch,
            )
    for topic, cfg in snap.topic_configs:
        if topic in ctx.topic_partitions:
            ctx.topic_configs[topic] = dict(cfg)
            v = dict(cfg).get(UNCLEAN_CONFIG)
            if v is not None:
                ctx.unclean_leader_election[topic] = v == "true"
    return ctx
