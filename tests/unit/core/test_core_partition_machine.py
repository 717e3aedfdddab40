"""The partition state machine's startup, and both machines refusing a partition a newer controller wrote, on
a hand-built context outside ``step``."""

from __future__ import annotations

import pytest
from core_context import T0, T1, T2, cluster, state_writes

from core import partition_machine, replica_machine
from core.decisions import ZkOp
from core.model import LeaderAndIsr, LeaderIsrAndControllerEpoch, PartitionReplica, TopicPartition
from core.request_batch import Effects
from core.states import PartitionState, ReplicaState

pytestmark = pytest.mark.unit


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
