"""Replicas a broker placed on livectl's controller id, repaired (unlike Kafka, on purpose: docs/differences.md).

The channel advertises the controller's node among the live brokers, so a topic a broker creates itself may
name the controller's id as a replica, where it would never come online. A new partition's such replica is
replaced by a live broker (:func:`repair_controller_replicas`), at a topic change
(:func:`core.controller.topics.zk_topic_change`) and at a takeover
(:func:`repair_controller_replicas_on_failover`); the topic znode is rewritten by compare-and-set at the
version this controller knows, and a refused rewrite comes back as a topic change (:func:`unwritten_repairs`).

The version is kept in the context (``topic_znode_versions``, :func:`read_topic_version`): the highest a topic
change read, or the one the controller's own write made. A topic change carries the version its reading saw,
which may be older than the controller's own rewrite in an earlier micro-batch (the watcher's reading of the
version the driver's reading also handed back, published before the redo reached ZooKeeper): that reading says
nothing of whether the repair was written, and its version would be refused.
"""

from __future__ import annotations

from core.controller.step_context import StepContext
from core.decisions import ANY_VERSION, ZkOp, ZkWrite
from core.kafka.zkdata import encode_topic_znode, topic_path
from core.model import ReplicaAssignment, TopicPartition
from core.placement import BrokerRack, replacement_broker
from core.snapshot import ZkSnapshot
from core.states import ReplicaState
from core.zk_path_events import ZkTopicChange


def rewrite_topic_znode(c: StepContext, topic: str, version: int) -> None:
    """``/brokers/topics/<topic>`` as the context assigns it, by compare-and-set at ``version``; the context
    then knows the version after it (refused, the reading that follows tells the version there is)."""
    ctx = c.ctx
    assignment = {tp.partition: ctx.assignment(tp) for tp in ctx.partitions_for_topic(topic)}
    c.fx.zk.append(
        ZkWrite(ZkOp.SET, topic_path(topic), encode_topic_znode(assignment, ctx.topic_ids.get(topic)), version)
    )
    if version != ANY_VERSION:
        ctx.topic_znode_versions[topic] = version + 1


def read_topic_version(c: StepContext, ev: ZkTopicChange) -> bool:
    """``ev``'s reading of a topic this controller knows: its version kept when it is not older than the one
    the context knows. True when it is older (a reading from before the controller's own write, or before a
    later reading): what it shows of the repairs is out of date."""
    ctx = c.ctx
    known = ctx.topic_znode_versions.get(ev.topic)
    if ev.zk_version is None or ev.topic not in ctx.topic_partitions:
        return False
    if known is not None and ev.zk_version < known:
        return True
    ctx.topic_znode_versions[ev.topic] = ev.zk_version
    return False


def topic_version(c: StepContext, ev: ZkTopicChange) -> int:
    """The version a rewrite of ``ev``'s topic expects: the one the context knows, else ``ev``'s (unknown: any)."""
    known = c.ctx.topic_znode_versions.get(ev.topic)
    if known is not None:
        return known
    return ANY_VERSION if ev.zk_version is None else ev.zk_version


def unwritten_repairs(c: StepContext, ev: ZkTopicChange) -> list[TopicPartition]:
    """The partitions of ``ev`` this controller knows whose replicas in the znode name its id (no broker of
    that id registered) while its own assignment does not: its repair of them (:func:`repair_controller_replicas`,
    or the failover's, :func:`repair_controller_replicas_on_failover`) was refused by ZooKeeper. None when
    this step already rewrites the topic's znode (a second reading of the same znode in one micro-batch: that
    rewrite covers them)."""
    ctx = c.ctx
    cid = ctx.controller_id
    if cid < 0 or cid in ctx.live_brokers:
        return []
    out = []
    for p, reps in ev.partitions:
        if cid not in reps:
            continue
        tp = TopicPartition(ev.topic, p)
        ra = ctx.partition_assignments.get(tp)
        if ra is not None and cid not in ra.replicas:
            out.append(tp)
    path = topic_path(ev.topic)
    if out and any(w.op is ZkOp.SET and w.path == path for w in c.fx.zk):
        return []
    return out


def send_again(c: StepContext, topic: str, created: set[TopicPartition], repaired: set[TopicPartition]) -> None:
    """The LeaderAndIsr (to the live replicas) and UpdateMetadata (to every broker) of each partition of
    ``topic`` with a leadership, but those ``created`` in this step (they have theirs): ZooKeeper refused the
    topic znode's rewrite in an earlier micro-batch, and every request of the topic in it was withheld
    (:mod:`streaming.query.refusals`). The ``repaired`` ones never reached a broker: sent as new (``isNew``)."""
    ctx = c.ctx
    live = ctx.live_broker_ids
    for tp in sorted(ctx.partitions_for_topic(topic)):
        li = ctx.partition_leadership.get(tp)
        if tp in created or li is None:
            continue
        recipients = [r for r in ctx.replicas(tp) if r in live]
        c.fx.batch.add_leader_and_isr(ctx, recipients, tp, li, ctx.assignment(tp), is_new=tp in repaired)


def repair_controller_replicas_on_failover(c: StepContext, snap: ZkSnapshot) -> None:
    """Kafka's ``onControllerFailover`` reads every topic; a topic a broker created while no controller was
    active (livectl failing over) may name this controller's id as a replica, and no topic change will come
    for it. Before the state machines start, with the context just read from ``snap``, each partition naming
    this controller's id (no broker of that id registered; not being reassigned, not queued for deletion) is
    repaired as :func:`zk_topic_change` repairs a new one, and its topic's znode rewritten at the version read
    (refused: read again, see :func:`zk_topic_change`):

    * a partition with no state znode yet (New): :func:`repair_controller_replicas`;
    * a partition with a state whose ISR holds exactly one broker that is not a replica: that broker (a
      repair whose state znode was written but whose topic znode rewrite ZooKeeper refused);
    * any other partition with a state keeps the replica (offline there, as Kafka keeps it): moving an
      online partition's replica is a reassignment's work."""
    ctx = c.ctx
    cid = ctx.controller_id
    if cid < 0 or cid in ctx.live_brokers:
        return
    deleting = set(snap.topics_to_delete)
    new: dict[TopicPartition, tuple[int, ...]] = {}
    done: dict[TopicPartition, tuple[int, ...]] = {}
    for tp in sorted(ctx.partitions_on_broker(cid)):
        if tp.topic in deleting or tp in ctx.partitions_being_reassigned:
            continue
        reps = ctx.replicas(tp)
        li = ctx.partition_leadership.get(tp)
        if li is None:
            new[tp] = reps
            continue
        extra = [b for b in li.leader_and_isr.isr if b not in reps]
        if len(extra) == 1 and reps.count(cid) == 1:
            done[tp] = tuple(extra[0] if r == cid else r for r in reps)
    done.update(repair_controller_replicas(c, new))
    for tp, reps in done.items():
        ctx.set_assignment(tp, ReplicaAssignment(reps))
    versions = {t.topic: t.zk_version for t in snap.topics}
    for topic in sorted({tp.topic for tp in done}):
        rewrite_topic_znode(c, topic, versions.get(topic, ANY_VERSION))


def repair_controller_replicas(
    c: StepContext, new: dict[TopicPartition, tuple[int, ...]]
) -> dict[TopicPartition, tuple[int, ...]]:
    """The new partitions whose replica on this controller's id (advertised to the brokers as a live broker
    by the channel, :func:`channel.convert.advertise_controller`, and so among those a broker places a topic
    it creates on) is replaced by a live broker: not shutting down, not cordoned, not already a replica of
    the partition, rack- and load-aware as a drain chooses (:func:`core.placement.replacement_broker`), the
    load counting the replacements made here. Nothing when a broker of the controller's id is registered (it
    is a real replica then). A partition no broker can take keeps the replica (it stays offline there) and a
    :class:`core.decisions.StateChangeFailure` says why."""
    ctx = c.ctx
    cid = ctx.controller_id
    if cid < 0 or cid in ctx.live_brokers or not any(cid in reps for reps in new.values()):
        return {}
    live = ctx.live_broker_ids
    brokers = [BrokerRack(b.id, b.rack) for b in sorted(ctx.live_brokers.values(), key=lambda b: b.id) if b.id in live]
    load = {b.id: len(ctx.partitions_on_broker(b.id)) for b in brokers}
    out: dict[TopicPartition, tuple[int, ...]] = {}
    for tp in sorted(new):
        reps = new[tp]
        if cid not in reps:
            continue
        dest = replacement_broker(cid, reps, brokers, c.cordoned, load)
        if dest is None:
            cordoned = sorted(b.id for b in brokers if b.id in c.cordoned and b.id not in reps)
            why = f", {len(cordoned)} cordoned: {', '.join(map(str, cordoned))}" if cordoned else ""
            c.fx.fail(
                f"[Topic={tp.topic},Partition={tp.partition},Replica={cid}]",
                ReplicaState.NON_EXISTENT,
                ReplicaState.NEW,
                f"Replica {cid} of {tp} is on livectl's controller id, under which no broker is registered, and no "
                f"live broker can take its place (replicas {list(reps)}, live brokers "
                f"{sorted(b.id for b in brokers)}{why}): it is left there, offline, until a broker registers as "
                f"{cid} or the partition is reassigned.",
            )
            continue
        out[tp] = tuple(dest if r == cid else r for r in reps)
        load[dest] = load.get(dest, 0) + 1
    return out
