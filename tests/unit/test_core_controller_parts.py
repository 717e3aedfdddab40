"""The parts the controller's handlers share: the one leader/ISR write, each state machine's startup,
and topic deletion's queue — each on a hand-built context, outside ``step``."""

from __future__ import annotations

import json

import pytest

from core import deletion, partition_machine, replica_machine
from core.context import ControllerContext
from core.decisions import BrokerRequest, ZkOp, ZkWrite
from core.isr_write import update_leader_and_isr
from core.kafka.requests import RequestApi
from core.model import (
    Broker,
    Endpoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    PartitionReplica,
    ReplicaAssignment,
    TopicPartition,
)
from core.requests import Effects
from core.states import PartitionState, ReplicaState

pytestmark = pytest.mark.unit

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
T2 = TopicPartition("t", 2)


def cluster(live: tuple[int, ...], partitions: dict[TopicPartition, tuple[int, ...]]) -> ControllerContext:
    ctx = ControllerContext(controller_id=0, epoch=2)
    for b in live:
        ctx.add_live_broker(Broker(b, 10 + b, None, (Endpoint("PLAINTEXT", f"h{b}", 9000 + b),)))
    for tp, replicas in partitions.items():
        ctx.set_assignment(tp, ReplicaAssignment(replicas))
        ctx.topic_ids.setdefault(tp.topic, "AAAAAAAAAAAAAAAAAAAAAQ")
    return ctx


def state_writes(fx: Effects) -> dict[str, tuple[ZkOp, dict[str, object], int]]:
    return {w.path: (w.op, json.loads(w.data or "null"), w.expected_version) for w in fx.zk}


def sent(decisions: list[object], api: RequestApi) -> list[int]:
    return sorted(d.broker_id for d in decisions if isinstance(d, BrokerRequest) and d.api is api)


def test_update_leader_and_isr_writes_once_at_the_held_version_and_records_the_next() -> None:
    ctx = cluster((1, 2, 3), {T0: (1, 2, 3)})
    ctx.put_leadership(T0, LeaderAndIsr(1, (1, 2, 3), leader_epoch=4, partition_epoch=7), 1)
    fx = Effects()
    li = update_leader_and_isr(ctx, fx, T0, LeaderAndIsr(2, (2, 3), leader_epoch=5, partition_epoch=7))
    assert fx.zk == [
        ZkWrite(
            ZkOp.SET,
            "/brokers/topics/t/partitions/0/state",
            '{"version":1,"leader":2,"leader_epoch":5,"controller_epoch":2,"isr":[2,3]}',
            7,
        )
    ]
    assert li == LeaderIsrAndControllerEpoch(LeaderAndIsr(2, (2, 3), 5, 8), 2)
    assert ctx.partition_leadership[T0] == li
    assert fx.batch.flush(ctx) == []  # the write alone: what to send is the caller's


def test_replica_startup_moves_live_replicas_online_and_shrinks_the_isr_of_dead_ones() -> None:
    ctx = cluster((1, 2), {T0: (1, 2, 3)})
    ctx.put_leadership(T0, LeaderAndIsr(1, (1, 2, 3), leader_epoch=0, partition_epoch=0), 2)
    fx = Effects()
    replica_machine.startup(ctx, fx)
    assert {pr.replica: ctx.replica_state(pr) for pr in ctx.replicas_for_partitions([T0])} == {
        1: ReplicaState.ONLINE,
        2: ReplicaState.ONLINE,
        3: ReplicaState.OFFLINE,
    }
    path = "/brokers/topics/t/partitions/0/state"
    op, data, version = state_writes(fx)[path]
    assert (op, data["leader"], data["isr"], data["leader_epoch"], version) == (ZkOp.SET, 1, [1, 2], 1, 0)
    decisions = fx.decisions(ctx)
    assert sent(decisions, RequestApi.STOP_REPLICA) == []  # broker 3 is down: nothing is sent to it
    assert sent(decisions, RequestApi.LEADER_AND_ISR) == [1, 2]
    assert not fx.failures


def test_replica_startup_of_given_replicas_leaves_the_others_alone() -> None:
    ctx = cluster((1, 2), {T0: (1, 2), T1: (2, 1)})
    ctx.put_leadership(T0, LeaderAndIsr(1, (1, 2)), 2)
    ctx.put_leadership(T1, LeaderAndIsr(2, (2, 1)), 2)
    replica_machine.startup(ctx, Effects(), [PartitionReplica("t", 1, 2)])
    assert ctx.replica_states == {PartitionReplica("t", 1, 2): ReplicaState.ONLINE}


def test_partition_startup_initialises_every_state_then_elects_new_and_offline_ones() -> None:
    deleted = TopicPartition("gone", 0)
    ctx = cluster((1, 2), {T0: (1, 2), T1: (3, 1), T2: (2, 1), deleted: (3, 2)})
    ctx.put_leadership(T1, LeaderAndIsr(3, (3, 1), leader_epoch=2, partition_epoch=5), 1)
    ctx.put_leadership(T2, LeaderAndIsr(2, (2, 1)), 1)
    ctx.put_leadership(deleted, LeaderAndIsr(3, (3, 2)), 1)
    ctx.topics_to_be_deleted.add("gone")
    fx = Effects()
    failures = partition_machine.startup(ctx, fx)
    assert failures == {}
    assert {tp: ctx.partition_state(tp) for tp in (T0, T1, T2, deleted)} == {
        T0: PartitionState.ONLINE,  # New, then created with a leader
        T1: PartitionState.ONLINE,  # Offline (its leader's broker is down), then elected
        T2: PartitionState.ONLINE,  # its leader is up: nothing to do
        deleted: PartitionState.OFFLINE,  # queued for deletion: no election
    }
    writes = state_writes(fx)
    assert set(writes) == {"/brokers/topics/t/partitions/0/state", "/brokers/topics/t/partitions/1/state"}
    op, data, _ = writes["/brokers/topics/t/partitions/0/state"]
    assert (op, data["leader"], data["isr"]) == (ZkOp.CREATE, 1, [1, 2])
    op, data, version = writes["/brokers/topics/t/partitions/1/state"]
    assert (op, data["leader"], data["leader_epoch"], version) == (ZkOp.SET, 1, 3, 5)


def test_partition_startup_without_an_electable_replica_reports_the_failure() -> None:
    ctx = cluster((1,), {T0: (2, 3)})
    fx = Effects()
    failures = partition_machine.startup(ctx, fx)
    assert list(failures) == [T0]
    assert ctx.partition_state(T0) is PartitionState.NEW
    assert fx.zk == []


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


def test_a_partition_a_newer_controller_wrote_is_neither_elected_nor_shrunk() -> None:
    ctx = cluster((2, 3), {T0: (1, 2, 3)})
    ctx.put_leadership(T0, LeaderAndIsr(1, (1, 2, 3)), 3)  # controller epoch 3 > this one's 2
    ctx.put_partition_state(T0, PartitionState.OFFLINE)
    ctx.put_replica_state(PartitionReplica("t", 0, 1), ReplicaState.ONLINE)
    fx = Effects()
    elected = partition_machine.apply(ctx, fx, [T0], PartitionState.ONLINE)
    shrunk = replica_machine.apply(ctx, fx, [PartitionReplica("t", 0, 1)], ReplicaState.OFFLINE)
    reason = (
        "Leader and isr path written by another controller. This probably means the current controller with "
        "epoch 2 went through a soft failure and another controller was elected with epoch 3. Aborting state "
        "change by this controller"
    )
    assert elected == {T0: reason}
    assert shrunk == {PartitionReplica("t", 0, 1): reason}
    assert fx.zk == []
    assert ctx.partition_leadership[T0] == LeaderIsrAndControllerEpoch(LeaderAndIsr(1, (1, 2, 3)), 3)
