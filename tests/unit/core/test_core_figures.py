"""core.figures: each partition figure defined once (Kafka's ``kafka-topics`` filters and controller gauges), and
the controller's gauges and the status page's summary counting by it on one degraded cluster."""

from __future__ import annotations

import pytest
from core_support import Cluster

from core import figures, observe
from core.controller import ControllerConfig, ControllerState, metrics
from core.events import BrokerFailure
from core.model import TopicPartition
from core.states import PartitionState

pytestmark = pytest.mark.unit


def test_the_definitions_are_kafka_topics() -> None:
    # under-replicated: ISR below the replication factor, the origin's during a reassignment; no leader needed
    assert figures.is_under_replicated((1, 2, 3), (), 2)
    assert not figures.is_under_replicated((4, 1, 2, 3), (4,), 3)  # adding 4: the factor is 3
    assert figures.is_under_replicated((3,), (), 0)  # an offline partition whose ISR was emptied
    assert not figures.is_under_replicated((3,), (), 1)  # an offline partition keeps its last ISR
    # under min ISR: no live leader, or an ISR below the effective min.insync.replicas
    live = {1, 2}
    assert figures.is_under_min_isr(-1, live, 3, 2) and figures.is_under_min_isr(3, live, 3, 2)
    assert figures.is_under_min_isr(1, live, 1, 2) and not figures.is_under_min_isr(1, live, 2, 2)
    assert figures.is_at_min_isr(2, 2)
    assert figures.has_live_leader(1, {1, 2}) and not figures.has_live_leader(3, {1, 2})
    assert not figures.has_live_leader(-1, {1, 2})
    # the topic's own min.insync.replicas, else the cluster default; what Kafka refuses reads as unset
    assert figures.effective_min_isr({"min.insync.replicas": "3"}, 2) == 3
    assert figures.effective_min_isr({}, 2) == 2
    assert figures.effective_min_isr({"min.insync.replicas": "0"}, 2) == 2
    assert figures.effective_min_isr({"min.insync.replicas": "many"}) == figures.DEFAULT_MIN_ISR
    # offline: OfflinePartition state, topics whose deletion started excepted
    assert figures.is_offline(PartitionState.OFFLINE, False)
    assert not figures.is_offline(PartitionState.OFFLINE, True) and not figures.is_offline(PartitionState.ONLINE, False)


def tps(*names: str) -> set[TopicPartition]:
    return {TopicPartition(n.rsplit("-", 1)[0], int(n.rsplit("-", 1)[1])) for n in names}


def test_one_degraded_cluster_counts_the_same_everywhere() -> None:
    """The issue's case: a cluster default ``min.insync.replicas=2`` and two of four brokers down. The
    controller's gauges (what the Spark UI, Prometheus and the status page's counts show) and the status
    page's summary count by the same definitions, the cluster default included."""
    c = Cluster.start([1, 2, 3, 4], ControllerConfig(min_insync_replicas=2))
    c.create_topic("orders", ((1, 2, 3), (2, 3, 4), (3, 4, 1), (4, 1, 2)))
    c.create_topic("solo", ((3,),))
    c.create_topic("relaxed", ((1, 3),), min_insync_replicas="1")
    c.run(BrokerFailure(3))
    c.run(BrokerFailure(4))
    ctx = c.ctx
    got = figures.partition_figures(ctx, 2)
    assert set(got.offline) == tps("solo-0")
    # solo-0 kept its last ISR [3], its whole replica set: not under-replicated, but without a live leader
    assert set(got.under_replicated) == tps("orders-0", "orders-1", "orders-2", "orders-3", "relaxed-0")
    # orders-1 and -2 are down to one in-sync replica, below the cluster default; relaxed-0 allows one
    assert set(got.under_min_isr) == tps("orders-1", "orders-2", "solo-0")
    assert got.preferred_imbalance == 3  # orders-2 (3 preferred), orders-3 (4), solo-0 (3, no leader)
    counts = metrics(ControllerState(ctx, c.state.config))
    assert counts["OfflinePartitionsCount"] == 1
    assert counts["UnderReplicatedPartitions"] == 5
    assert counts["UnderMinIsrPartitionCount"] == 3
    assert counts["PreferredReplicaImbalanceCount"] == 3
    s = observe.summarize(ctx, cluster_min_isr=2)
    assert (s.offline_count, s.under_replicated_count, s.under_min_isr_count) == (1, 5, 3)
    # without the cluster default (Kafka's 1), only the partition without a leader is under min ISR
    assert figures.partition_figures(ctx).under_min_isr == (TopicPartition("solo", 0),)


def test_topics_queued_for_deletion_count_in_no_partition_figure() -> None:
    c = Cluster.start([1, 2], ControllerConfig(min_insync_replicas=2))
    c.create_topic("gone", ((1, 2),))
    c.run(BrokerFailure(2))
    assert len(figures.partition_figures(c.ctx, 2).under_replicated) == 1
    c.ctx.topics_to_be_deleted.add("gone")
    assert figures.partition_figures(c.ctx, 2) == figures.PartitionFigures()
