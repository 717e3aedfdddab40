"""The partition figures operators compare across views, each defined once, as Kafka defines it.

The CLI (``topics --describe`` filters, :mod:`admin.topics_read`), the bucket gauges summed for the status
page, the Prometheus endpoint and the Spark UI (:func:`core.controller.metrics`), and the status page's
lists (:mod:`core.observe`) all use the predicates below; :func:`partition_figures` applies them to one
bucket's context.

* **under-replicated**: Kafka's ``kafka-topics --under-replicated-partitions`` (``TopicCommand``'s
  ``isUnderReplicated``): the ISR is smaller than the replication factor, which during a reassignment is
  the origin's (replicas minus adding replicas). Whether the partition has a leader does not matter, so an
  offline partition whose last ISR is smaller than its replicas counts too. Kafka's broker gauge
  ``UnderReplicatedPartitions`` is counted by each leader and so leaves out partitions without one.
* **under min ISR**: ``kafka-topics --under-min-isr-partitions`` (``isUnderMinIsr``): no live leader, or
  an ISR smaller than the effective ``min.insync.replicas`` — the topic's own, else the cluster default
  (``/config/brokers/<default>``; for the controller also its ``min_insync_replicas`` setting), else
  Kafka's default 1. Kafka's broker gauge ``UnderMinIsrPartitionCount`` is counted by each leader too.
* **at min ISR**: ``--at-min-isr-partitions``: an ISR exactly the effective ``min.insync.replicas``.
* **unavailable**: ``--unavailable-partitions``: no live leader.
* **offline**: ``KafkaController``'s ``OfflinePartitionsCount``: partitions in ``OfflinePartition`` state,
  topics whose deletion has started excepted. Once the controller has handled a broker's failure these
  are the unavailable partitions.
* **preferred replica imbalance**: ``PreferredReplicaImbalanceCount`` (Kafka 3.9's ``hasPreferredLeader``):
  the preferred replica (head of the full replica set) does not lead; a preferred replica a reassignment
  is adding counts once it is in the ISR, whoever leads. Per broker, the auto leader rebalance ratio
  (``checkAndTriggerAutoLeaderRebalance``): of the partitions a broker prefers, those led by another.

A reassignment's data figures (bytes to move, moved, rate, time left) are defined once too, in
:mod:`core.move_progress`, from the brokers' DescribeLogDirs reports; ``reassign --verify`` / ``--list`` and the
status page show them.

Partitions of topics queued for deletion (``/admin/delete_topics``, which the CLI sees as "marked for
deletion") count in no figure but ``offline`` (which drops them once their deletion started, as Kafka does):
Kafka's brokers stop them and its tool no longer lists them once the deletion starts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from core.context import ControllerContext
from core.kafka.configs import MIN_INSYNC_REPLICAS
from core.model import NO_LEADER, TopicPartition
from core.states import PartitionState

__all__ = [
    "DEFAULT_MIN_ISR",
    "MIN_INSYNC_REPLICAS",
    "PartitionFigures",
    "effective_min_isr",
    "has_live_leader",
    "is_at_min_isr",
    "is_offline",
    "is_preferred_imbalanced",
    "is_under_min_isr",
    "is_under_replicated",
    "min_isr_of",
    "partition_figures",
    "preferred_leader_counts",
    "replication_factor",
]

#: Kafka's default of ``min.insync.replicas``
DEFAULT_MIN_ISR = 1


def replication_factor(replicas: Sequence[int], adding: Sequence[int]) -> int:
    """``TopicCommand``'s replication factor: during a reassignment the origin's (replicas minus adding)."""
    return len(replicas) - len(adding)


def is_under_replicated(replicas: Sequence[int], adding: Sequence[int], isr_size: int) -> bool:
    return isr_size < len(replicas) - len(adding)  # replication_factor, inline: the bucket's hot loop


Live = Mapping[int, object] | frozenset[int] | set[int]


def has_live_leader(leader: int, live: Live) -> bool:
    return leader != NO_LEADER and leader in live


def is_under_min_isr(leader: int, live: Live, isr_size: int, min_isr: int) -> bool:
    return leader == NO_LEADER or leader not in live or isr_size < min_isr


def is_at_min_isr(isr_size: int, min_isr: int) -> bool:
    return isr_size == min_isr


def min_isr_of(text: str | None) -> int | None:
    """A ``min.insync.replicas`` value as Kafka accepts it (an integer of at least 1), else ``None``."""
    try:
        value = int(text) if text is not None else None
    except ValueError:
        return None
    return value if value is not None and value >= 1 else None


def effective_min_isr(topic_configs: Mapping[str, str], cluster_default: int = DEFAULT_MIN_ISR) -> int:
    """The topic's own ``min.insync.replicas``, else the cluster default."""
    return min_isr_of(topic_configs.get(MIN_INSYNC_REPLICAS)) or cluster_default


def is_offline(state: PartitionState, deletion_started: bool) -> bool:
    return state is PartitionState.OFFLINE and not deletion_started


def is_preferred_imbalanced(preferred: int, adding: Sequence[int], leader: int, isr: Sequence[int]) -> bool:
    """Not ``hasPreferredLeader``: the preferred replica does not lead; one that a reassignment is adding
    counts only once it is in the ISR, whoever leads (Kafka's rule since 2.4)."""
    if preferred in adding:
        return preferred in isr
    return leader != preferred


@dataclass(frozen=True)
class PartitionFigures:
    """One context's figures: the partitions each one counts (unordered) and the imbalance count; with
    ``per_broker``, :func:`preferred_leader_counts` too (else empty)."""

    offline: tuple[TopicPartition, ...] = ()
    under_replicated: tuple[TopicPartition, ...] = ()
    under_min_isr: tuple[TopicPartition, ...] = ()
    preferred_imbalance: int = 0
    preferred_by_broker: Mapping[int, tuple[int, int]] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        """By Kafka's gauge names (``UnderMinIsrPartitionCount`` is a broker gauge of Kafka's, summed here)."""
        return {
            "OfflinePartitionsCount": len(self.offline),
            "PreferredReplicaImbalanceCount": self.preferred_imbalance,
            "UnderReplicatedPartitions": len(self.under_replicated),
            "UnderMinIsrPartitionCount": len(self.under_min_isr),
        }


def partition_figures(
    ctx: ControllerContext, cluster_min_isr: int = DEFAULT_MIN_ISR, *, per_broker: bool = False
) -> PartitionFigures:
    """The figures of one bucket's context, in one pass over its partitions (every bucket, every step: kept
    lean); ``cluster_min_isr``: the cluster default ``min.insync.replicas``; ``per_broker``: also
    :func:`preferred_leader_counts`, in the same pass."""
    started = ctx.topics_with_deletion_started
    offline_state = PartitionState.OFFLINE
    offline = [tp for tp, st in ctx.partition_states.items() if st is offline_state and tp.topic not in started]
    urp: list[TopicPartition] = []
    under_min: list[TopicPartition] = []
    imbalanced = 0
    preferred: dict[int, list[int]] = {}
    queued, leadership, live = ctx.topics_to_be_deleted, ctx.partition_leadership, ctx.live_brokers
    floors: dict[str, int] = {}
    # locals: no global lookup per partition
    under_replicated, under_min_isr = is_under_replicated, is_under_min_isr
    preferred_imbalanced = is_preferred_imbalanced
    no_isr: tuple[int, ...] = ()
    for tp, ra in ctx.partition_assignments.items():
        topic = tp.topic
        if topic in queued:
            continue
        li = leadership.get(tp)
        replicas, adding = ra.replicas, ra.adding_replicas
        if li is None:
            leader, isr = NO_LEADER, no_isr
        else:
            lai = li.leader_and_isr
            leader, isr = lai.leader, lai.isr
            # Kafka counts the partitions it holds leadership information of
            if replicas and preferred_imbalanced(replicas[0], adding, leader, isr):
                imbalanced += 1
        if per_broker and replicas:
            counts = preferred.get(replicas[0])
            if counts is None:
                counts = preferred[replicas[0]] = [0, 0]
            counts[1] += 1
            if li is not None and leader != replicas[0]:
                counts[0] += 1
        if under_replicated(replicas, adding, len(isr)):
            urp.append(tp)
        floor = floors.get(topic)
        if floor is None:
            floor = floors[topic] = effective_min_isr(ctx.topic_configs.get(topic, {}), cluster_min_isr)
        if under_min_isr(leader, live, len(isr), floor):
            under_min.append(tp)
    by_broker = {b: (c[0], c[1]) for b, c in sorted(preferred.items())}
    return PartitionFigures(tuple(offline), tuple(urp), tuple(under_min), imbalanced, by_broker)


def preferred_leader_counts(ctx: ControllerContext) -> dict[int, tuple[int, int]]:
    """Per preferred broker: (partitions it prefers that another broker leads, partitions it prefers),
    topics queued for deletion excepted — the auto leader rebalance's ratio; a partition without leadership
    information is not counted as led by another (Kafka's ``partitionLeadershipInfo(tp).exists(...)``)."""
    return dict(partition_figures(ctx, per_broker=True).preferred_by_broker)
