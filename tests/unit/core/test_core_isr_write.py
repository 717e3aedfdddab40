"""The one leader/ISR write (Kafka's ``updateLeaderAndIsr``), on a hand-built context outside ``step``."""

from __future__ import annotations

import pytest
from core_context import T0, cluster

from core.decisions import ZkOp, ZkWrite
from core.isr_write import update_leader_and_isr
from core.model import LeaderAndIsr, LeaderIsrAndControllerEpoch
from core.request_batch import Effects

pytestmark = pytest.mark.unit


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
