"""Broker lifecycle: startup, registration changes, failure, controlled shutdown and log-dir failures
(Kafka's ``onBrokerStartup``, ``processBrokerModification`` / ``onBrokerUpdate``, ``onBrokerFailure``,
``onReplicasBecomeOffline``, ``processControlledShutdown``, ``onBrokerLogDirFailure`` and the LeaderAndIsr
response handling)."""

from __future__ import annotations

from core import deletion
from core.controller.reassignment import maybe_resume_reassignments
from core.controller.step_context import StepContext
from core.decisions import ANY_VERSION, BrokerRequest, ZkOp, ZkWrite
from core.election import ElectionStrategy
from core.events import (
    BrokerFailure,
    BrokerModification,
    BrokerStartup,
    ControlledShutdown,
    LeaderAndIsrResponse,
    LogDirFailure,
)
from core.kafka.error_codes import KafkaError
from core.kafka.requests import ControlledShutdownResponse, RequestApi
from core.kafka.zkdata import LOG_DIR_EVENT_NOTIFICATION
from core.model import Broker, PartitionReplica, TopicPartition, sort_tps
from core.partition_machine import needs_leader
from core.states import PartitionState, ReplicaState
from core.zk_path_events import BrokersCordoned, ZkLogDirEvents

KAFKA_STORAGE_ERROR = int(KafkaError.KAFKA_STORAGE_ERROR)


def on_broker_startup(c: StepContext, new_brokers: list[int]) -> None:
    ctx = c.ctx
    for b in new_brokers:
        ctx.replicas_on_offline_dirs.pop(b, None)
    existing = sorted(set(ctx.live_brokers) - set(new_brokers))
    c.send_update_metadata(existing)
    with_leaders = [tp for tp in ctx.partition_leadership if tp.topic not in ctx.topics_to_be_deleted]
    c.send_update_metadata(new_brokers, with_leaders)
    replicas = ctx.replicas_on_brokers(new_brokers)
    c.replica_states(replicas, ReplicaState.ONLINE)
    c.trigger_online_partition_state_change()
    new_set = set(new_brokers)
    maybe_resume_reassignments(c, lambda _tp, ra: any(r in new_set for r in ra.target_replicas))
    to_resume = {pr.topic for pr in replicas if pr.topic in ctx.topics_to_be_deleted}
    if to_resume:
        deletion.resume_deletion_for_topics(ctx, c.fx, to_resume)


def on_broker_failure(c: StepContext, dead: list[int]) -> None:
    for b in dead:
        c.ctx.replicas_on_offline_dirs.pop(b, None)
    on_replicas_become_offline(c, c.ctx.replicas_on_brokers(dead))


def on_replicas_become_offline(c: StepContext, offline: list[PartitionReplica]) -> None:
    ctx = c.ctx
    for_deletion = [pr for pr in offline if pr.topic in ctx.topics_to_be_deleted]
    not_for_deletion = [pr for pr in offline if pr.topic not in ctx.topics_to_be_deleted]
    live = ctx.live_broker_ids
    dirs = ctx.replicas_on_offline_dirs
    with_offline_leader = []
    for tp, li in ctx.partition_leadership.items():
        leader = li.leader_and_isr.leader
        if (leader not in live or (leader in dirs and tp in dirs[leader])) and needs_leader(ctx, tp):
            with_offline_leader.append(tp)
    with_offline_leader.sort(key=lambda tp: (tp.topic, tp.partition))
    c.partition_states(with_offline_leader, PartitionState.OFFLINE)
    n_candidates = sum(1 for tp in ctx.offline_or_new_partitions if needs_leader(ctx, tp))
    failures = c.trigger_online_partition_state_change()
    c.replica_states(not_for_deletion, ReplicaState.OFFLINE)
    if for_deletion:
        deletion.fail_replica_deletion(ctx, c.fx, for_deletion)
    if not not_for_deletion and len(failures) == n_candidates:
        c.send_update_metadata(ctx.live_brokers.keys())


def broker_startup(c: StepContext, ev: BrokerStartup) -> None:
    ctx = c.ctx
    broker = Broker(ev.broker_id, ev.broker_epoch, ev.rack, ev.endpoints)
    existing = ctx.live_brokers.get(ev.broker_id)
    if existing is not None:
        if ev.broker_epoch <= existing.epoch:
            return
        # a bounced broker: Kafka handles it as a failure followed by a startup
        ctx.remove_live_broker(ev.broker_id)
        on_broker_failure(c, [ev.broker_id])
    ctx.add_live_broker(broker)
    # what this step collected for the broker was for no broker or its previous incarnation (Kafka sent it
    # before the registration, or dropped it): the new one gets its startup's requests only
    c.fx.batch.forget_broker(ev.broker_id)
    on_broker_startup(c, [ev.broker_id])


def broker_modification(c: StepContext, ev: BrokerModification) -> None:
    """Kafka's ``processBrokerModification``: a live (or shutting-down) broker rewrote its registration in
    place. When its endpoints changed, the new registration replaces the one held (its rack with it) and
    ``onBrokerUpdate`` sends UpdateMetadata with the live brokers and no partition states to every live or
    shutting-down broker, so that clients learn the new endpoints.

    Nothing happens for a broker not registered here (its startup brings its registration), for another
    epoch (an older one is a registration since replaced; a newer one is a re-registration, the startup's
    to handle) or when the endpoints are the same: Kafka compares the endpoints (and the features, which
    livectl does not hold; UpdateMetadata carries none), so a rack that changed alone is not taken either."""
    existing = c.ctx.live_brokers.get(ev.broker_id)
    if existing is None or existing.epoch != ev.broker_epoch or existing.endpoints == ev.endpoints:
        return
    c.ctx.add_live_broker(Broker(ev.broker_id, ev.broker_epoch, ev.rack, ev.endpoints))
    c.send_update_metadata(c.ctx.live_or_shutting_down_broker_ids)


def broker_failure(c: StepContext, ev: BrokerFailure) -> None:
    existing = c.ctx.live_brokers.get(ev.broker_id)
    if existing is None or (ev.broker_epoch >= 0 and ev.broker_epoch < existing.epoch):
        return
    c.ctx.remove_live_broker(ev.broker_id)
    on_broker_failure(c, [ev.broker_id])


def controlled_shutdown(c: StepContext, ev: ControlledShutdown) -> None:
    ctx = c.ctx
    broker = ctx.live_brokers.get(ev.broker_id)
    if broker is None:
        _shutdown_response(c, ev.broker_id, KafkaError.BROKER_NOT_AVAILABLE, [])
        return
    if ev.broker_epoch >= 0 and ev.broker_epoch < broker.epoch:
        _shutdown_response(c, ev.broker_id, KafkaError.STALE_BROKER_EPOCH, [])
        return
    ctx.shutting_down_broker_ids.add(ev.broker_id)
    act_on = sort_tps(
        tp
        for tp in ctx.partitions_on_broker(ev.broker_id)
        if len(ctx.replicas(tp)) > 1 and tp in ctx.partition_leadership and tp.topic not in ctx.topics_to_be_deleted
    )
    led = [tp for tp in act_on if ctx.partition_leadership[tp].leader_and_isr.leader == ev.broker_id]
    followed = [tp for tp in act_on if ctx.partition_leadership[tp].leader_and_isr.leader != ev.broker_id]
    c.partition_states(led, PartitionState.ONLINE, ElectionStrategy.CONTROLLED_SHUTDOWN)
    for tp in followed:
        c.fx.batch.add_stop_replica(ctx, (ev.broker_id,), tp, delete=False)
    c.replica_states([PartitionReplica.of(tp, ev.broker_id) for tp in followed], ReplicaState.OFFLINE)
    _shutdown_response(c, ev.broker_id, 0, ctx.partitions_led_by(ev.broker_id))


def _shutdown_response(c: StepContext, broker_id: int, error_code: int, remaining: list[TopicPartition]) -> None:
    body = ControlledShutdownResponse(error_code, tuple(remaining))
    c.fx.batch.responses.append(BrokerRequest(broker_id, RequestApi.CONTROLLED_SHUTDOWN_RESPONSE, body))


def log_dir_failure(c: StepContext, ev: LogDirFailure) -> None:
    if ev.broker_id in c.ctx.live_brokers:
        c.replica_states(c.ctx.replicas_on_brokers([ev.broker_id]), ReplicaState.ONLINE)


def leader_and_isr_response(c: StepContext, ev: LeaderAndIsrResponse) -> None:
    ctx = c.ctx
    if ev.error_code != 0:
        return
    offline = set()
    online = set()
    for pe in ev.partitions:
        tp = TopicPartition(pe.topic, pe.partition)
        if tp not in ctx.partition_assignments:
            continue
        if pe.error_code == KAFKA_STORAGE_ERROR:
            offline.add(tp)
        elif pe.error_code == 0:
            online.add(tp)
    previous = ctx.replicas_on_offline_dirs.get(ev.broker_id, set())
    current = (previous - online) | offline
    if current:
        ctx.replicas_on_offline_dirs[ev.broker_id] = current
    else:
        ctx.replicas_on_offline_dirs.pop(ev.broker_id, None)
    new_offline = sorted(current - previous)
    if new_offline:
        prs = [PartitionReplica.of(tp, ev.broker_id) for tp in new_offline]
        on_replicas_become_offline(c, prs)


def zk_log_dir_events(c: StepContext, ev: ZkLogDirEvents) -> None:
    """Kafka's ``processLogDirEventNotification``: ``onBrokerLogDirFailure`` for the brokers named,
    then the notification znodes are deleted."""
    if not c.read_under_this_epoch(ev.controller_epoch):
        return
    for broker in sorted({b for _, b in ev.notifications}):
        log_dir_failure(c, LogDirFailure(broker))
    for name, _ in ev.notifications:
        c.fx.zk.append(ZkWrite(ZkOp.DELETE, f"{LOG_DIR_EVENT_NOTIFICATION}/{name}", None, ANY_VERSION))


def brokers_cordoned(c: StepContext, ev: BrokersCordoned) -> None:
    """``/livectl/cordoned_brokers`` changed (:mod:`core.cordon`): placement skips these brokers from now on;
    the replicas already on them stay."""
    if not c.read_under_this_epoch(ev.controller_epoch):
        return
    c.cordoned = frozenset(ev.brokers)
