"""The replica state machine's startup, on a hand-built context outside ``step``."""

from __future__ import annotations

import pytest
from core_context import T0, T1, cluster, sent, state_writes

from core import replica_machine
from core.decisions import ZkOp
from core.kafka.requests import RequestApi
from core.model import LeaderAndIsr, PartitionReplica
from core.request_batch import Effects
from core.states import ReplicaState

pytestmark = pytest.mark.unit


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
