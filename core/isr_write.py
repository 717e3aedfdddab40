"""The one compare-and-set write of a partition's leader and ISR (Kafka's ``updateLeaderAndIsr``).

Every change of an existing partition's leader, ISR or leader epoch goes through
:func:`update_leader_and_isr`: an election (:mod:`core.partition_machine`), an ISR shrink
(:mod:`core.replica_machine`), a reassignment's leader-epoch bump and an AlterPartition
(:mod:`core.controller`). Creating the state znode of a new partition is not an update: the partition
state machine creates it.
"""

from __future__ import annotations

from core.context import ControllerContext
from core.decisions import ZkOp, ZkWrite
from core.kafka.zkdata import encode_partition_state, partition_state_path
from core.model import LeaderAndIsr, LeaderIsrAndControllerEpoch, TopicPartition
from core.request_batch import Effects

__all__ = ["newer_controller_wrote", "update_leader_and_isr"]


def update_leader_and_isr(
    ctx: ControllerContext, fx: Effects, tp: TopicPartition, new: LeaderAndIsr
) -> LeaderIsrAndControllerEpoch:
    """Write ``new`` to ``/brokers/topics/<t>/partitions/<p>/state`` under this controller's epoch,
    expecting the znode at the partition epoch the context holds (ZooKeeper refuses the write if anyone
    wrote it since), and record it in the context with the partition epoch that write gives it (one
    more). The partition must have a leader and ISR in the context; the caller has checked that no newer
    controller wrote it. Returns the partition's new leadership."""
    expected = ctx.partition_leadership[tp].leader_and_isr.partition_epoch
    fx.zk.append(
        ZkWrite(
            ZkOp.SET,
            partition_state_path(tp.topic, tp.partition),
            encode_partition_state(new, ctx.epoch),
            expected,
        )
    )
    ctx.put_leadership(tp, new.with_partition_epoch(expected + 1), ctx.epoch)
    return ctx.partition_leadership[tp]


def newer_controller_wrote(ctx: ControllerContext, li: LeaderIsrAndControllerEpoch) -> str | None:
    """Kafka's refusal to update a partition whose leader and ISR a newer controller wrote (this one
    went through a soft failure and will find itself fenced): the failure reason, or ``None``."""
    if li.controller_epoch <= ctx.epoch:
        return None
    return (
        f"Leader and isr path written by another controller. This probably means the current controller with "
        f"epoch {ctx.epoch} went through a soft failure and another controller was elected with epoch "
        f"{li.controller_epoch}. Aborting state change by this controller"
    )
