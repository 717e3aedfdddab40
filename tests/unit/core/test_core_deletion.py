"""Topic deletion's queue (Kafka's ``enqueueTopicsForDeletion``), on a hand-built context outside ``step``."""

from __future__ import annotations

import pytest
from core_context import T0, cluster

from core import deletion
from core.decisions import BrokerRequest
from core.kafka.requests import RequestApi
from core.model import LeaderAndIsr, ReplicaAssignment, TopicPartition
from core.request_batch import Effects
from core.states import PartitionState, ReplicaState

pytestmark = pytest.mark.unit


def test_enqueue_for_deletion_starts_a_plain_topic_and_holds_one_being_reassigned() -> None:
    u0 = TopicPartition("u", 0)
    ctx = cluster((1, 2), {T0: (1, 2), u0: (1, 2)})
    for tp in (T0, u0):
        ctx.put_leadership(tp, LeaderAndIsr(1, (1, 2)), 2)
        ctx.put_partition_state(tp, PartitionState.ONLINE)
        for pr in ctx.replicas_for_partitions([tp]):
            ctx.put_replica_state(pr, ReplicaState.ONLINE)
    ctx.set_assignment(T0, ReplicaAssignment((1, 2)).reassign_to((2, 1)))
    ctx.partitions_being_reassigned.add(T0)
    fx = Effects()
    completed = deletion.enqueue_topics_for_deletion(ctx, fx, ["t", "u"])
    assert completed == []
    assert ctx.topics_to_be_deleted == {"t", "u"}
    assert ctx.topics_ineligible_for_deletion == {"t"}
    assert ctx.topics_with_deletion_started == {"u"}
    assert ctx.partition_state(u0) is PartitionState.NON_EXISTENT
    assert ctx.partition_state(T0) is PartitionState.ONLINE
    assert {ctx.replica_state(pr) for pr in ctx.replicas_for_partitions([u0])} == {ReplicaState.DELETION_STARTED}
    # StopReplica (delete) to both brokers, for u-0 only
    stopped = {
        (d.broker_id, ts["topicName"], ps["partitionIndex"], ps["deletePartition"])
        for d in fx.decisions(ctx)
        if isinstance(d, BrokerRequest) and d.api is RequestApi.STOP_REPLICA
        for ts in d.body_json()["topicStates"]
        for ps in ts["partitionStates"]
    }
    assert stopped == {(1, "u", 0, True), (2, "u", 0, True)}
