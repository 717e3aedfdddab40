"""Kafka's controller gauges and the leader-imbalance counts, per bucket (the driver sums them across
buckets)."""

from __future__ import annotations

from core.controller.elections import movable_partitions
from core.controller.state import ControllerState
from core.states import PartitionState, ReplicaState

__all__ = [
    "BUCKET_GAUGES",
    "KAFKA_CONTROLLER_GAUGES",
    "brokers_over_imbalance",
    "imbalance",
    "leader_moves",
    "metrics",
]

#: Kafka's ``KafkaController`` gauges, in the order the Prometheus endpoint and the dispatcher's sums
#: carry them
KAFKA_CONTROLLER_GAUGES = (
    "ActiveControllerCount",
    "OfflinePartitionsCount",
    "PreferredReplicaImbalanceCount",
    "GlobalTopicCount",
    "GlobalPartitionCount",
    "TopicsToDeleteCount",
    "ReplicasToDeleteCount",
    "TopicsIneligibleToDeleteCount",
    "ReplicasIneligibleToDeleteCount",
)

#: the gauges the buckets' metrics rows carry as columns, summed across buckets (their order is the
#: decision rows' schema): ``ActiveControllerCount`` is the driver's role, not a bucket count, and
#: ``TopicsIneligibleToDeleteCount`` is not carried in the rows
BUCKET_GAUGES = tuple(
    g for g in KAFKA_CONTROLLER_GAUGES if g not in ("ActiveControllerCount", "TopicsIneligibleToDeleteCount")
)


def imbalance(state: ControllerState) -> dict[int, tuple[int, int]]:
    """Per preferred broker: (partitions not led by it, partitions it prefers) in this bucket — the
    driver sums these across buckets, divides and compares with
    ``leader.imbalance.per.broker.percentage`` (see :func:`brokers_over_imbalance`)."""
    ctx = state.context
    out: dict[int, list[int]] = {}
    deleting, leadership = ctx.topics_to_be_deleted, ctx.partition_leadership
    for tp, ra in ctx.partition_assignments.items():
        if not ra.replicas or tp.topic in deleting:
            continue
        counts = out.setdefault(ra.replicas[0], [0, 0])
        counts[1] += 1
        li = leadership.get(tp)
        if li is not None and li.leader_and_isr.leader != ra.replicas[0]:
            counts[0] += 1
    return {b: (c[0], c[1]) for b, c in sorted(out.items())}


def leader_moves(state: ControllerState) -> tuple[dict[int, int], bool]:
    """This bucket's report for the leader-balance plan (:mod:`core.leader_balance`): per preferred broker its
    movable partitions (led by another broker, the preferred replica able to lead), and whether an
    ``elect-leaders --all`` is queued here."""
    movable = {b: len(tps) for b, tps in movable_partitions(state.context).items()}
    return movable, state.preferred_all_queued


def brokers_over_imbalance(counts: dict[int, tuple[int, int]], percentage: int) -> tuple[int, ...]:
    """Brokers whose imbalance ratio exceeds ``percentage`` / 100 (Kafka's strict comparison)."""
    return tuple(b for b, (bad, total) in sorted(counts.items()) if total and bad / total > percentage / 100)


def _imbalanced(preferred: int, adding: tuple[int, ...], leader: int, isr: tuple[int, ...]) -> bool:
    """Kafka 3.9's ``PreferredReplicaImbalanceCount`` test for one partition (``!hasPreferredLeader``): its
    preferred replica (the head of the full replica set) does not lead; but a preferred replica that a
    reassignment is adding counts only once it is in the ISR, whoever leads (Kafka's own rule since 2.4;
    before, only the leader counted)."""
    if preferred in adding:
        return preferred in isr
    return leader != preferred


def metrics(state: ControllerState) -> dict[str, int]:
    """Kafka's controller gauges for this bucket (sum them across buckets)."""
    ctx = state.context
    offline = sum(
        1
        for tp, st in ctx.partition_states.items()
        if st is PartitionState.OFFLINE and tp.topic not in ctx.topics_with_deletion_started
    )
    imbalanced = 0
    # Kafka's broker-side UnderReplicatedPartitions, seen from the controller: ISR smaller than the
    # partition's full replica set (during a reassignment that set includes the adding replicas)
    under_replicated = 0
    deleting, assignments = ctx.topics_to_be_deleted, ctx.partition_assignments
    no_replicas: tuple[int, ...] = ()
    for tp, li in ctx.partition_leadership.items():  # one pass for both counts
        if tp.topic in deleting:
            continue
        ra = assignments.get(tp)
        replicas = ra.replicas if ra is not None else no_replicas
        lai = li.leader_and_isr
        if replicas and _imbalanced(replicas[0], ra.adding_replicas if ra is not None else (), lai.leader, lai.isr):
            imbalanced += 1
        if len(lai.isr) < len(replicas):
            under_replicated += 1
    to_delete = 0
    ineligible = 0
    for topic in ctx.topics_to_be_deleted:
        for pr in ctx.replicas_for_topic(topic):
            st = ctx.replica_state(pr)
            if st is not ReplicaState.DELETION_SUCCESSFUL:
                to_delete += 1
            if st is ReplicaState.DELETION_INELIGIBLE:
                ineligible += 1
    return {
        "OfflinePartitionsCount": offline,
        "PreferredReplicaImbalanceCount": imbalanced,
        "GlobalTopicCount": len(ctx.topic_partitions),
        "GlobalPartitionCount": len(ctx.partition_assignments),
        "TopicsToDeleteCount": len(ctx.topics_to_be_deleted),
        "ReplicasToDeleteCount": to_delete,
        "TopicsIneligibleToDeleteCount": len(ctx.topics_ineligible_for_deletion),
        "ReplicasIneligibleToDeleteCount": ineligible,
        "UnderReplicatedPartitions": under_replicated,
        "ReassigningPartitions": len(ctx.partitions_being_reassigned),
    }
