"""Kafka's controller gauges and the leader-imbalance counts, per bucket (the driver sums them across
buckets)."""

from __future__ import annotations

from core import figures
from core.controller.elections import movable_partitions
from core.controller.state import ControllerState
from core.states import ReplicaState

__all__ = [
    "BUCKET_GAUGES",
    "KAFKA_CONTROLLER_GAUGES",
    "brokers_over_imbalance",
    "imbalance",
    "leader_moves",
    "metrics",
    "metrics_and_imbalance",
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
    return figures.preferred_leader_counts(state.context)


def leader_moves(state: ControllerState) -> tuple[dict[int, int], bool]:
    """This bucket's report for the leader-balance plan (:mod:`core.leader_balance`): per preferred broker its
    movable partitions (led by another broker, the preferred replica able to lead), and whether an
    ``elect-leaders --all`` is queued here."""
    movable = {b: len(tps) for b, tps in movable_partitions(state.context).items()}
    return movable, state.preferred_all_queued


def brokers_over_imbalance(counts: dict[int, tuple[int, int]], percentage: int) -> tuple[int, ...]:
    """Brokers whose imbalance ratio exceeds ``percentage`` / 100 (Kafka's strict comparison)."""
    return tuple(b for b, (bad, total) in sorted(counts.items()) if total and bad / total > percentage / 100)


def metrics(state: ControllerState) -> dict[str, int]:
    """Kafka's controller gauges for this bucket (sum them across buckets), with the partition figures of
    :mod:`core.figures` (``UnderReplicatedPartitions``, ``UnderMinIsrPartitionCount``: what every view shows)."""
    return _gauges(state, figures.partition_figures(state.context, state.config.min_insync_replicas))


def metrics_and_imbalance(state: ControllerState) -> tuple[dict[str, int], dict[int, tuple[int, int]]]:
    """:func:`metrics` and :func:`imbalance` in one pass over the bucket's partitions (what every step reports)."""
    fig = figures.partition_figures(state.context, state.config.min_insync_replicas, per_broker=True)
    return _gauges(state, fig), dict(fig.preferred_by_broker)


def _gauges(state: ControllerState, fig: figures.PartitionFigures) -> dict[str, int]:
    ctx = state.context
    to_delete = 0
    ineligible = 0
    for topic in ctx.topics_to_be_deleted:
        for pr in ctx.replicas_for_topic(topic):
            st = ctx.replica_state(pr)
            if st is not ReplicaState.DELETION_SUCCESSFUL:
                to_delete += 1
            if st is ReplicaState.DELETION_INELIGIBLE:
                ineligible += 1
    counts = fig.counts()
    return {
        "OfflinePartitionsCount": counts["OfflinePartitionsCount"],
        "PreferredReplicaImbalanceCount": counts["PreferredReplicaImbalanceCount"],
        "GlobalTopicCount": len(ctx.topic_partitions),
        "GlobalPartitionCount": len(ctx.partition_assignments),
        "TopicsToDeleteCount": len(ctx.topics_to_be_deleted),
        "ReplicasToDeleteCount": to_delete,
        "TopicsIneligibleToDeleteCount": len(ctx.topics_ineligible_for_deletion),
        "ReplicasIneligibleToDeleteCount": ineligible,
        "UnderReplicatedPartitions": counts["UnderReplicatedPartitions"],
        "UnderMinIsrPartitionCount": counts["UnderMinIsrPartitionCount"],
        "ReassigningPartitions": len(ctx.partitions_being_reassigned),
    }
