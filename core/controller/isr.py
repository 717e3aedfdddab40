"""Leader and ISR changes a broker asks for (Kafka's ``processAlterPartition``, ZooKeeper mode) or made
itself and notified (Kafka's ``processIsrChangeNotification``, inter-broker protocols below 2.7), and the
retry of a partition-state write ZooKeeper refused (:class:`core.events.PartitionStatesRead`). Every
leader/ISR write of this controller goes through :func:`core.isr_write.update_leader_and_isr`."""

from __future__ import annotations

from core.controller.reassignment import maybe_complete_reassignment, maybe_resume_reassignments
from core.controller.step_context import StepContext
from core.decisions import BrokerRequest
from core.events import AlterPartition, AlterPartitionRequest, PartitionStatesRead
from core.isr_write import update_leader_and_isr
from core.kafka.error_codes import KafkaError
from core.kafka.requests import ZERO_UUID, AlterPartitionResponse, AlterPartitionResult, RequestApi
from core.model import RECOVERED, RECOVERING, LeaderAndIsr, PartitionReplica, TopicPartition
from core.replica_machine import remove_replica_from_isr
from core.states import PartitionState
from core.zk_path_events import ZkIsrChange


def alter_partition(c: StepContext, ev: AlterPartition) -> None:
    """Kafka's ``processAlterPartition`` (ZooKeeper mode), for one partition, checks in Kafka's order:

    1. the sender must be registered at exactly ``broker_epoch`` (-1 included: Kafka compares for
       equality) -> else ``STALE_BROKER_EPOCH`` for the whole request;
    2. a proposal by topic id (``topic_id`` set: AlterPartition v2+) names the topic this controller
       holds under that id -> else ``UNKNOWN_TOPIC_ID``;
    3. ``leader_recovery_state`` is RECOVERED (0) or RECOVERING (1) -> else Kafka's
       ``LeaderRecoveryState.of`` throws and the whole request is answered ``UNKNOWN_SERVER_ERROR``;
    4. the partition has a leader and ISR -> else ``UNKNOWN_TOPIC_OR_PARTITION``;
    5. :func:`_validate_alter` (epochs, idempotent repeat, recovery transitions, eligibility).

    Nothing invalid is ever written. Like Kafka, every partition that got past 1–3 is sent in an
    UpdateMetadata to every registered broker, whatever its answer."""
    ctx = c.ctx
    tp = TopicPartition(ev.topic, ev.partition)
    broker = ctx.live_brokers.get(ev.broker_id)
    if broker is None or ev.broker_epoch != broker.epoch:
        _alter_response(c, ev, KafkaError.STALE_BROKER_EPOCH, None, None)
        return
    if ev.topic_id is not None and ctx.topic_ids.get(ev.topic) != ev.topic_id:
        _alter_response(c, ev, 0, KafkaError.UNKNOWN_TOPIC_ID, None)
        return
    if ev.leader_recovery_state not in (RECOVERED, RECOVERING):
        _alter_response(c, ev, KafkaError.UNKNOWN_SERVER_ERROR, None, None)
        return
    _alter_one(c, ev, tp)
    c.send_update_metadata(ctx.live_brokers.keys(), (tp,))


def alter_partition_request(c: StepContext, ev: AlterPartitionRequest) -> None:
    """One request's proposals, each as :func:`alter_partition` handles it alone, in the request's order (the
    same answers and writes as one record per partition: Kafka handles a request's partitions one by one)."""
    for proposal in ev.proposals():
        alter_partition(c, proposal)


def _alter_one(c: StepContext, ev: AlterPartition, tp: TopicPartition) -> None:
    ctx = c.ctx
    li = ctx.partition_leadership.get(tp)
    if li is None or tp not in ctx.partition_assignments:
        _alter_response(c, ev, 0, KafkaError.UNKNOWN_TOPIC_OR_PARTITION, None)
        return
    cur = li.leader_and_isr
    proposed = LeaderAndIsr(ev.broker_id, ev.new_isr, ev.leader_epoch, ev.partition_epoch, ev.leader_recovery_state)
    error = _validate_alter(c, tp, cur, proposed, by_topic_id=ev.topic_id is not None)
    if error is not None and error != "SAME":
        _alter_response(c, ev, 0, KafkaError[error], None)
        return
    if error == "SAME":
        _alter_response(c, ev, 0, 0, cur)
    else:
        _write_alter(c, ev, tp, cur)
    # Kafka checks every answered-with-a-state partition for a reassignment it may complete
    if tp in ctx.partitions_being_reassigned:
        maybe_complete_reassignment(c, tp)


def _write_alter(c: StepContext, ev: AlterPartition, tp: TopicPartition, cur: LeaderAndIsr) -> None:
    new = LeaderAndIsr(cur.leader, ev.new_isr, cur.leader_epoch, cur.partition_epoch, ev.leader_recovery_state)
    _alter_response(c, ev, 0, 0, update_leader_and_isr(c.ctx, c.fx, tp, new).leader_and_isr)


def _validate_alter(
    c: StepContext, tp: TopicPartition, cur: LeaderAndIsr, new: LeaderAndIsr, *, by_topic_id: bool = False
) -> str | None:
    """Kafka's checks in Kafka's order; then livectl's own (the sender must be the leader, the ISR
    must hold the leader and only distinct replicas: KRaft's rules, see docs/differences.md), then Kafka's
    KIP-841 eligibility (``INELIGIBLE_REPLICA`` from v2, the topic-id versions; before that
    ``OPERATION_NOT_ATTEMPTED``). ``"SAME"``: already in the proposed state (Kafka's
    ``equalsAllowStalePartitionEpoch``), answered with the current state."""
    if new.partition_epoch > cur.partition_epoch or new.leader_epoch > cur.leader_epoch:
        return KafkaError.NOT_CONTROLLER.name
    if new.leader_epoch < cur.leader_epoch:
        return KafkaError.FENCED_LEADER_EPOCH.name
    if (
        new.leader == cur.leader
        and new.leader_epoch == cur.leader_epoch
        and new.isr == cur.isr
        and new.leader_recovery_state == cur.leader_recovery_state
    ):
        return "SAME"
    if new.partition_epoch < cur.partition_epoch:
        return KafkaError.INVALID_UPDATE_VERSION.name
    if new.leader_recovery_state == RECOVERING and len(new.isr) > 1:
        return KafkaError.INVALID_REQUEST.name
    if cur.leader_recovery_state == RECOVERED and new.leader_recovery_state == RECOVERING:
        return KafkaError.INVALID_REQUEST.name
    if new.leader != cur.leader:
        return KafkaError.NOT_LEADER_OR_FOLLOWER.name
    replicas = c.ctx.replicas(tp)
    if new.leader not in new.isr or len(set(new.isr)) != len(new.isr) or any(r not in replicas for r in new.isr):
        return KafkaError.INVALID_REQUEST.name
    live = c.ctx.live_broker_ids
    if any(r not in live for r in new.isr):
        return KafkaError.INELIGIBLE_REPLICA.name if by_topic_id else KafkaError.OPERATION_NOT_ATTEMPTED.name
    return None


def _alter_response(
    c: StepContext, ev: AlterPartition, top_error: int, part_error: int | None, lai: LeaderAndIsr | None
) -> None:
    results: tuple[AlterPartitionResult, ...] = ()
    corr = ev.correlation_id if ev.correlation_id >= 0 else -1
    if part_error is not None:
        topic_id = ev.topic_id or c.ctx.topic_ids.get(ev.topic, ZERO_UUID)
        if lai is not None:
            known = (lai.leader, lai.leader_epoch, lai.isr, lai.partition_epoch, lai.leader_recovery_state)
        else:
            known = (-1, -1, (), -1, 0)
        results = (AlterPartitionResult(ev.topic, ev.partition, part_error, *known, corr, topic_id),)
    # a top-level error answers the whole request and has no entry to name it: the response does
    response = AlterPartitionResponse(top_error, results, correlation_id=corr if top_error else -1)
    c.fx.batch.responses.append(BrokerRequest(ev.broker_id, RequestApi.ALTER_PARTITION_RESPONSE, response))


def partition_states_read(c: StepContext, ev: PartitionStatesRead) -> None:
    """Kafka's retry after a ``BadVersion`` on a partition-state update: take the znode as read, then
    redo what the partition still needs (see :class:`core.events.PartitionStatesRead`)."""
    ctx = c.ctx
    adopted: list[TopicPartition] = []
    for partition, z in ev.states:
        tp = TopicPartition(ev.topic, partition)
        if tp not in ctx.partition_assignments:
            continue  # deleted since
        if z.controller_epoch > ctx.epoch:
            # Kafka aborts here: a newer controller wrote it, and this one will find itself fenced
            c.fx.fail(
                tp,
                ctx.partition_state(tp),
                ctx.partition_state(tp),
                f"the state znode was written by controller epoch {z.controller_epoch}, "
                f"newer than this controller's {ctx.epoch}",
            )
            continue
        la = LeaderAndIsr(z.leader, z.isr, z.leader_epoch, z.zk_version, z.leader_recovery_state)
        ctx.put_leadership(tp, la, z.controller_epoch)
        adopted.append(tp)
    if not adopted:
        return
    live = ctx.live_broker_ids
    deleting = ctx.topics_to_be_deleted
    offline_leader = [
        tp
        for tp in adopted
        if ctx.partition_state(tp) in (PartitionState.ONLINE, PartitionState.OFFLINE)
        and ctx.partition_leadership[tp].leader_and_isr.leader not in live
        and tp.topic not in deleting
    ]
    c.partition_states(offline_leader, PartitionState.OFFLINE)
    c.trigger_online_partition_state_change()
    for tp in adopted:
        la = ctx.partition_leadership[tp].leader_and_isr
        dead = [r for r in la.isr if r not in live]
        if la.leader not in live or not dead or tp.topic in deleting:
            continue
        for r in dead:
            remove_replica_from_isr(ctx, c.fx, PartitionReplica(tp.topic, tp.partition, r))
        recipients = [r for r in ctx.replicas(tp) if r in live]
        c.fx.batch.add_leader_and_isr(
            ctx, recipients, tp, ctx.partition_leadership[tp], ctx.assignment(tp), is_new=False
        )
    c.send_update_metadata(ctx.live_brokers.keys(), adopted)
    again = set(adopted)
    maybe_resume_reassignments(c, lambda tp, _ra: tp in again)


def zk_isr_change(c: StepContext, ev: ZkIsrChange) -> None:
    """Kafka's ``processIsrChangeNotification``: a leader on an inter-broker protocol below 2.7 wrote its
    partition's ISR itself (a compare-and-set at the znode version its last LeaderAndIsr gave it, keeping
    leader, leader epoch and the deciding controller's epoch) and notified. Kafka's controller reads the
    listed state znodes into its cache (``updateLeaderAndIsrCache``: the znode version becomes the partition
    epoch its next compare-and-set expects), sends UpdateMetadata for them to every live or shutting-down
    broker, and completes the reassignments they may finish.

    Kafka reads the znodes when it handles the notification; here they were read before the event was
    published, and the bucket may have written them since. So a znode is taken only where it is news and
    the leader's own write: the bucket holds the partition with the same leader and leader epoch at an older
    znode version, and no newer controller wrote it. Anything else changes nothing — a znode this state
    already holds (a repeat), one its own writes have passed, or one written under another leadership (this
    controller's next compare-and-set on it is refused and the re-read, :func:`partition_states_read`, takes
    it). UpdateMetadata goes out for the partitions taken only."""
    ctx = c.ctx
    taken: list[TopicPartition] = []
    for partition, z in ev.states:
        tp = TopicPartition(ev.topic, partition)
        li = ctx.partition_leadership.get(tp)
        if li is None or tp not in ctx.partition_assignments:
            continue
        cur = li.leader_and_isr
        if (
            z.zk_version <= cur.partition_epoch
            or (z.leader, z.leader_epoch) != (cur.leader, cur.leader_epoch)
            or z.controller_epoch > ctx.epoch
        ):
            continue
        la = LeaderAndIsr(z.leader, z.isr, z.leader_epoch, z.zk_version, z.leader_recovery_state)
        ctx.put_leadership(tp, la, z.controller_epoch)
        taken.append(tp)
    if not taken:
        return
    c.send_update_metadata(ctx.live_brokers.keys(), taken)
    # Kafka's notification path completes reassignments too (its ZooKeeper watch on each reassigning
    # partition's state znode is not livectl's: docs/real-brokers.md)
    for tp in taken:
        if tp in ctx.partitions_being_reassigned:
            maybe_complete_reassignment(c, tp)
