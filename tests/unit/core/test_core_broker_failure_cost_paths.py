"""The shortcuts of a broker failure's and a failover's bucket call (issue 15, slice bf) give exactly what the
long way gives: a replica that carries its context's partition key, the controller gauges counted in one
pass, and one filter for the UpdateMetadata addressees."""

from __future__ import annotations

import pickle
from dataclasses import replace

import pytest

from core.context import ControllerContext
from core.controller.metrics import imbalance, metrics
from core.controller.state import ControllerState
from core.model import (
    Broker,
    Endpoint,
    LeaderAndIsr,
    PartitionReplica,
    ReplicaAssignment,
    TopicPartition,
)
from core.replica_machine import startup
from core.request_batch import Effects, RequestBatch
from core.states import PartitionState

pytestmark = pytest.mark.unit


def test_a_replica_made_of_a_key_carries_that_key_and_is_the_same_value() -> None:
    tp = TopicPartition("t", 4)
    made = PartitionReplica.of(tp, 2)
    plain = PartitionReplica("t", 4, 2)
    assert made.topic_partition is tp
    assert plain.topic_partition == tp and plain.topic_partition is not tp
    assert plain.topic_partition is plain.topic_partition  # built once, then kept
    assert made == plain and hash(made) == hash(plain) and repr(made) == repr(plain)
    assert sorted([PartitionReplica.of(TopicPartition("t", 5), 1), made]) == [made, PartitionReplica("t", 5, 1)]
    assert {made: 1}[plain] == 1
    again = pickle.loads(pickle.dumps(made))
    assert again == made and again.topic_partition == tp
    moved = replace(made, partition=5)  # a new value: its partition is its own, not the old key
    assert moved.topic_partition == TopicPartition("t", 5)


def test_replica_startup_keys_its_replicas_by_the_contexts_own_partition_objects() -> None:
    ctx = ControllerContext(controller_id=1, epoch=2)
    for b in (1, 2):
        ctx.add_live_broker(Broker(b, 10 + b, None, (Endpoint("PLAINTEXT", f"b{b}", 9092),)))
    keys = [TopicPartition("t", p) for p in range(3)]
    for tp in keys:
        ctx.set_assignment(tp, ReplicaAssignment((1, 2, 3)))
        ctx.put_leadership(tp, LeaderAndIsr(1, (1, 2, 3)), 2)
    startup(ctx, Effects())
    by_identity = {id(k) for k in keys}
    assert len(ctx.replica_states) == 9
    assert all(id(pr.topic_partition) in by_identity for pr in ctx.replica_states)
    assert all(id(pr.topic_partition) in by_identity for pr in ctx.replicas_on_brokers((1, 3)))


def _metrics_the_long_way(state: ControllerState) -> tuple[int, int]:
    ctx = state.context
    imbalanced = under = 0
    for tp, li in ctx.partition_leadership.items():
        if tp.topic in ctx.topics_to_be_deleted:
            continue
        ra = ctx.assignment(tp)
        if ra.replicas:  # Kafka 3.9's hasPreferredLeader, negated
            preferred, lai = ra.replicas[0], li.leader_and_isr
            if ra.is_being_reassigned and preferred in ra.adding_replicas:
                imbalanced += preferred in lai.isr
            else:
                imbalanced += lai.leader != preferred
        # the replication factor during a reassignment is the origin's (replicas minus adding: Kafka's
        # TopicCommand and broker-side replicationFactor)
        if len(li.leader_and_isr.isr) < len(ra.replicas) - len(ra.adding_replicas):
            under += 1
    return imbalanced, under


#: (RS, adding, removing, leader and ISR) and whether Kafka 3.9 counts the partition in
#: PreferredReplicaImbalanceCount
GAUGE_CASES = [
    ((1, 2, 3), (), (), LeaderAndIsr(1, (1, 2, 3)), False),  # balanced, fully replicated
    ((1, 2, 3), (), (), LeaderAndIsr(2, (2, 3)), True),  # not the preferred leader, under-replicated
    # reassigning to (4, 2, 3), led by 1: the preferred replica 4 is being added and not in the ISR yet
    ((4, 1, 2, 3), (4,), (1,), LeaderAndIsr(1, (1, 2, 3)), False),
    # the adding preferred replica 4 is in the ISR: counted, though it leads (3.9's hasPreferredLeader)
    ((4, 1, 2), (4,), (), LeaderAndIsr(4, (4, 1, 2)), True),
    ((2, 1, 3), (), (3,), LeaderAndIsr(1, (1, 2, 3)), True),  # removing only: the preferred replica 2 does not lead
    ((1, 2), (), (1, 2), LeaderAndIsr(1, (1,)), False),  # removing everything: 1 is still RS's head and leads
]


@pytest.mark.parametrize(("rs", "adding", "removing", "lai", "counted"), GAUGE_CASES)
def test_preferred_replica_imbalance_count_is_kafka_39s(
    rs: tuple[int, ...], adding: tuple[int, ...], removing: tuple[int, ...], lai: LeaderAndIsr, counted: bool
) -> None:
    ctx = ControllerContext(controller_id=1, epoch=2)
    tp = TopicPartition("t", 0)
    ctx.set_assignment(tp, ReplicaAssignment(rs, adding, removing))
    ctx.put_leadership(tp, lai, 2)
    assert metrics(ControllerState(ctx))["PreferredReplicaImbalanceCount"] == int(counted)


def test_gauges_counted_in_one_pass_match_the_long_way() -> None:
    ctx = ControllerContext(controller_id=1, epoch=2)
    cases = [case[:4] for case in GAUGE_CASES]
    for p, (rs, adding, removing, lai) in enumerate(cases):
        tp = TopicPartition("t", p)
        ctx.set_assignment(tp, ReplicaAssignment(rs, adding, removing))
        ctx.put_leadership(tp, lai, 2)
        ctx.put_partition_state(tp, PartitionState.ONLINE)
    ctx.put_leadership(TopicPartition("u", 0), LeaderAndIsr(3, (3,)), 2)  # leadership without assignment
    gone = TopicPartition("gone", 0)
    ctx.set_assignment(gone, ReplicaAssignment((2, 1)))
    ctx.put_leadership(gone, LeaderAndIsr(1, (1,)), 2)
    ctx.topics_to_be_deleted.add("gone")
    state = ControllerState(ctx)
    m = metrics(state)
    assert (m["PreferredReplicaImbalanceCount"], m["UnderReplicatedPartitions"]) == _metrics_the_long_way(state)
    assert (m["PreferredReplicaImbalanceCount"], m["UnderReplicatedPartitions"]) == (3, 2)
    assert imbalance(state) == {1: (1, 3), 2: (1, 1), 4: (1, 2)}


def test_update_metadata_addressees_skip_no_broker_ids_on_every_path() -> None:
    ctx = ControllerContext(controller_id=1, epoch=2)
    for b in (1, 2):
        ctx.add_live_broker(Broker(b, 10 + b))
    tp = TopicPartition("t", 0)
    ctx.set_assignment(tp, ReplicaAssignment((1, 2)))
    ctx.put_leadership(tp, LeaderAndIsr(1, (1, 2)), 2)
    batch = RequestBatch()
    batch.add_update_metadata(ctx, [-1, 2], ())
    assert batch.update_metadata_brokers == {2}
    batch.add_update_metadata(ctx, {-1, 1}, ())  # a set not held whole: filtered, not taken as is
    assert batch.update_metadata_brokers == {1, 2}
    held = batch.update_metadata_brokers
    batch.add_leader_and_isr(ctx, (1, -1), tp, ctx.partition_leadership[tp], ctx.assignment(tp), is_new=False)
    assert batch.update_metadata_brokers is held and held == {1, 2}
    assert set(batch.leader_and_isr) == {1}
    assert set(batch.update_metadata_partitions) == {tp}
