"""Leader elections on demand: the ElectLeaders API, ``/admin/preferred_replica_election``, the auto
leader rebalance and unclean election turned on (Kafka's ``onReplicaElection``,
``processReplicaLeaderElection``, ``checkAndTriggerAutoLeaderRebalance``,
``processUncleanLeaderElectionEnable``). The elections themselves are the partition state machine's
(:mod:`core.partition_machine`, :mod:`core.election`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from core.cluster_config import controller_fields
from core.context import ControllerContext
from core.controller.step_context import StepContext
from core.decisions import ANY_VERSION, AdminStatus, ZkOp, ZkWrite
from core.election import ElectionStrategy, preferred_leader
from core.events import AutoRebalanceTick, ElectLeaders
from core.kafka.error_codes import KafkaError
from core.kafka.zkdata import PREFERRED_REPLICA_ELECTION
from core.leader_balance import UNBOUNDED, pick_moves
from core.model import NO_LEADER, ElectionType, TopicPartition
from core.states import PartitionState
from core.zk_path_events import ClusterConfigChanged, ZkPreferredElection

#: the message of a partition an ``elect-leaders --all`` queued for the rebalance passes (its error is ``NONE``)
QUEUED = "queued: its preferred leader is elected by a leader-balance pass (leader.imbalance.max.leaders.per.interval)"


def elect_leaders(c: StepContext, cmd: ElectLeaders) -> None:
    ctx = c.ctx
    all_partitions = not cmd.partitions
    tps = sorted(ctx.partition_assignments) if all_partitions else list(cmd.partitions)
    results: dict[str, dict[str, str]] = {}
    electable: list[TopicPartition] = []
    for tp in tps:
        if tp not in ctx.partition_assignments:
            results[str(tp)] = {
                "error": KafkaError.UNKNOWN_TOPIC_OR_PARTITION.name,
                "message": "The partition does not exist.",
            }
        elif tp.topic in ctx.topics_to_be_deleted:
            results[str(tp)] = {
                "error": KafkaError.INVALID_TOPIC_EXCEPTION.name,
                "message": "The topic is being deleted",
            }
        elif not election_needed(c, tp, cmd.election_type):
            if not all_partitions:
                results[str(tp)] = {
                    "error": KafkaError.ELECTION_NOT_NEEDED.name,
                    "message": "Leader election not needed",
                }
        else:
            electable.append(tp)
    bound = c.config.leader_imbalance_max_leaders_per_interval
    if all_partitions and cmd.election_type is ElectionType.PREFERRED and bound < UNBOUNDED:
        _queue_preferred_all(c, cmd, electable, results, bound)
        return
    if cmd.election_type is ElectionType.PREFERRED:
        strategy, fail_error = ElectionStrategy.PREFERRED, KafkaError.PREFERRED_LEADER_NOT_AVAILABLE.name
    else:
        strategy, fail_error = ElectionStrategy.OFFLINE_UNCLEAN, KafkaError.ELIGIBLE_LEADERS_NOT_AVAILABLE.name
    failed = c.partition_states(electable, PartitionState.ONLINE, strategy)
    for tp in electable:
        if tp in failed:
            results[str(tp)] = {"error": fail_error, "message": failed[tp]}
        else:
            results[str(tp)] = {"error": KafkaError.NONE.name}
    errors = [
        r for r in results.values() if r["error"] not in (KafkaError.NONE.name, KafkaError.ELECTION_NOT_NEEDED.name)
    ]
    if errors:
        c.admin(cmd, AdminStatus.ERROR, errors[0]["error"], errors[0]["message"], {"partitions": results})
    else:
        c.admin(cmd, AdminStatus.OK, details={"partitions": results})


def _queue_preferred_all(
    c: StepContext, cmd: ElectLeaders, electable: list[TopicPartition], results: dict[str, dict[str, str]], bound: int
) -> None:
    """``elect-leaders --all`` (preferred) under ``leader.imbalance.max.leaders.per.interval``: no election
    now; the partitions whose preferred replica can lead are queued for the rebalance passes (at most
    ``bound`` leaders each, :mod:`core.leader_balance`), the others fail as Kafka's election would."""
    queued = 0
    for tp in electable:
        if preferred_can_lead(c.ctx, tp):
            results[str(tp)] = {"error": KafkaError.NONE.name, "message": QUEUED}
            queued += 1
        else:
            strategy = ElectionStrategy.PREFERRED.value
            results[str(tp)] = {
                "error": KafkaError.PREFERRED_LEADER_NOT_AVAILABLE.name,
                "message": f"Failed to elect leader for partition {tp} under strategy {strategy}",
            }
    if queued:
        c.preferred_all_queued = True
    details: dict[str, Any] = {"partitions": results, "queued": queued}
    # the same text in every bucket (the count is in details["queued"], which the driver's merge sums): one line
    message = f"preferred leader elections queued: at most {bound} per leader-balance pass" if queued else ""
    failures = [r for r in results.values() if r["error"] == KafkaError.PREFERRED_LEADER_NOT_AVAILABLE.name]
    if failures:
        c.admin(cmd, AdminStatus.ERROR, failures[0]["error"], failures[0]["message"], details)
    else:
        c.admin(cmd, AdminStatus.OK, message=message, details=details)


def election_needed(c: StepContext, tp: TopicPartition, kind: ElectionType) -> bool:
    lai = c.ctx.leader_and_isr(tp)
    if lai is None:
        return True
    if kind is ElectionType.PREFERRED:
        replicas = c.ctx.replicas(tp)
        return not replicas or lai.leader != replicas[0]
    return lai.leader == NO_LEADER or lai.leader not in c.ctx.live_broker_ids


def can_preferred_replica_be_leader(c: StepContext, tp: TopicPartition) -> bool:
    return preferred_can_lead(c.ctx, tp)


def preferred_can_lead(ctx: ControllerContext, tp: TopicPartition) -> bool:
    """Kafka's ``canPreferredReplicaBeLeader``: the head of the replica set is live and in the ISR."""
    lai = ctx.leader_and_isr(tp)
    if lai is None:
        return False
    replicas = ctx.replicas(tp)
    live = {r for r in replicas if ctx.is_replica_online(r, tp)}
    return preferred_leader(replicas, lai.isr, live) is not None


def auto_rebalance(c: StepContext, ev: AutoRebalanceTick) -> None:
    """Kafka 3.9's ``checkAndTriggerAutoLeaderRebalance`` for the brokers the driver found above the
    threshold: a candidate is a partition they are the preferred replica of, led by another broker, whose
    topic is not queued for deletion and whose preferred replica can lead (live, in the ISR:
    ``canPreferredReplicaBeLeader``); each gets a preferred election.

    Reassignments in progress do not hold the tick back, as in Kafka from 3.4 (KAFKA-10149) to 3.9, the
    last ZooKeeper-mode release; older releases took no candidate while any partition was being
    reassigned (``partitionsBeingReassigned.isEmpty``). A partition being reassigned is a candidate
    too: its preferred replica is the head of its full replica set, which is the head of the target
    replicas, and it can lead only once it is in the ISR (an adding replica that has not caught up
    cannot)."""
    brokers = ev.brokers if c.config.auto_leader_rebalance_enable else ()
    if not brokers and not c.preferred_all_queued:
        return
    # the bounded pass (core.leader_balance): at most ev.max_leaders, the brokers taken in turn; a queued
    # elect-leaders --all wants every movable partition of the bucket, whatever its broker's ratio
    movable = movable_partitions(c.ctx)
    wanted = movable if c.preferred_all_queued else {b: movable[b] for b in brokers if b in movable}
    picked = pick_moves(wanted, ev.max_leaders)
    c.partition_states(picked, PartitionState.ONLINE, ElectionStrategy.PREFERRED)
    if c.preferred_all_queued and not movable_partitions(c.ctx):
        c.preferred_all_queued = False


def zk_preferred_election(c: StepContext, ev: ZkPreferredElection) -> None:
    """Kafka's ``processReplicaLeaderElection`` for the ZooKeeper trigger: partitions that exist, are
    not being deleted and are not led by their preferred replica get a preferred election (one that
    cannot happen is reported as a failed transition), then the path is deleted."""
    if not c.read_under_this_epoch(ev.controller_epoch):
        return
    preferred_elections(c, ev.partitions)
    c.fx.zk.append(ZkWrite(ZkOp.DELETE, PREFERRED_REPLICA_ELECTION, None, ANY_VERSION))


def preferred_elections(c: StepContext, tps: Iterable[TopicPartition]) -> None:
    """The preferred elections ``/admin/preferred_replica_election`` asks for: of ``tps``, the partitions
    that exist, are not being deleted and are not led by their preferred replica (one that cannot
    happen is reported as a failed transition)."""
    ctx = c.ctx
    electable = {
        tp
        for tp in tps
        if tp in ctx.partition_assignments
        and tp.topic not in ctx.topics_to_be_deleted
        and election_needed(c, tp, ElectionType.PREFERRED)
    }
    c.partition_states(sorted(electable), PartitionState.ONLINE, ElectionStrategy.PREFERRED)


def cluster_config_changed(c: StepContext, ev: ClusterConfigChanged) -> None:
    """The controller configs changed (:mod:`core.cluster_config`). Unclean leader election turned on
    for the cluster elects the offline partitions it now allows (Kafka's
    ``processUncleanLeaderElectionEnable``)."""
    if not c.read_under_this_epoch(ev.controller_epoch):
        return
    was_unclean = c.config.unclean_leader_election_enable
    changes: dict[str, Any] = dict(controller_fields(ev.configs))
    c.config = replace(c.config, **changes)
    if c.config.unclean_leader_election_enable and not was_unclean:
        c.trigger_online_partition_state_change()


def auto_rebalance_candidates(ctx: ControllerContext, brokers: Iterable[int]) -> list[TopicPartition]:
    """Partitions (not queued for deletion) whose preferred replica (the head of the full replica set,
    Kafka's ``partitionReplicaAssignment(tp).head``, also during a reassignment) is one of ``brokers`` but
    whose leader is another broker — what ``checkAndTriggerAutoLeaderRebalance`` re-elects when their
    preferred replica can lead."""
    wanted = set(brokers)
    out = []
    for tp, ra in ctx.partition_assignments.items():
        if not ra.replicas or ra.replicas[0] not in wanted or tp.topic in ctx.topics_to_be_deleted:
            continue
        lai = ctx.leader_and_isr(tp)
        if lai is not None and lai.leader != ra.replicas[0]:
            out.append(tp)
    return sorted(out)


def movable_partitions(ctx: ControllerContext) -> dict[int, list[TopicPartition]]:
    """Per preferred broker, the partitions (not queued for deletion) another broker leads whose preferred
    replica can lead now (:func:`preferred_can_lead`): what a preferred election would move, ascending."""
    out: dict[int, list[TopicPartition]] = {}
    deleting, assignments = ctx.topics_to_be_deleted, ctx.partition_assignments
    for tp, li in ctx.partition_leadership.items():
        ra = assignments.get(tp)
        # most partitions are led by their preferred replica: that test first, the rest only for the others
        if ra is None or not ra.replicas or li.leader_and_isr.leader == ra.replicas[0] or tp.topic in deleting:
            continue
        if preferred_can_lead(ctx, tp):
            out.setdefault(ra.replicas[0], []).append(tp)
    return {b: sorted(tps) for b, tps in sorted(out.items())}
