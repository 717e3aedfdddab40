"""The shortcuts a large failover batch takes (issue 15, slice P) give exactly what the long way gives: the
request batch's states taken once per partition, the context's dump in one pass over the replica states,
and integer lists read without naming each item."""

from __future__ import annotations

import pytest
from core_support import typed_body

from core import jsonform as jf
from core.context import ControllerContext
from core.context_codec import context_from_dict, context_to_dict
from core.errors import FormatError
from core.model import (
    Broker,
    Endpoint,
    LeaderAndIsr,
    PartitionReplica,
    ReplicaAssignment,
    TopicPartition,
)
from core.request_batch import RequestBatch
from core.request_states import update_metadata_state
from core.states import PartitionState, ReplicaState

pytestmark = pytest.mark.unit


def _ctx() -> ControllerContext:
    ctx = ControllerContext(controller_id=1, epoch=3, epoch_zk_version=2)
    for b in (1, 2, 3):
        ctx.add_live_broker(Broker(b, 100 + b, None, (Endpoint("PLAINTEXT", f"b{b}", 9092),)))
    for p in range(3):
        tp = TopicPartition("t", p)
        ctx.set_assignment(tp, ReplicaAssignment((1, 2, 3)))
        ctx.put_leadership(tp, LeaderAndIsr(1, (1, 2, 3), 0, 0), 3)
        ctx.put_partition_state(tp, PartitionState.ONLINE)
    ctx.topic_ids["t"] = "AAAAAAAAAAAAAAAAAAAAAA"
    return ctx


def test_update_metadata_inside_fixed_liveness_is_taken_again_when_leadership_or_assignment_changes() -> None:
    ctx = _ctx()
    tp = TopicPartition("t", 0)
    batch = RequestBatch()
    with batch.fixed_liveness():
        batch.add_leader_and_isr(ctx, (1,), tp, ctx.partition_leadership[tp], ctx.assignment(tp), is_new=False)
        first = batch.update_metadata_partitions[tp]
        batch.add_leader_and_isr(ctx, (2,), tp, ctx.partition_leadership[tp], ctx.assignment(tp), is_new=False)
        assert batch.update_metadata_partitions[tp] is first  # same objects: the state held is the one taken
        ctx.put_leadership(tp, LeaderAndIsr(2, (2, 3), 1, 1), 3)
        batch.add_update_metadata(ctx, ctx.live_brokers.keys(), (tp,))
        assert batch.update_metadata_partitions[tp] == update_metadata_state(ctx, tp)
        assert batch.update_metadata_partitions[tp].leader == 2
        ctx.set_assignment(tp, ReplicaAssignment((2, 3, 1)))
        batch.add_update_metadata(ctx, ctx.live_brokers.keys(), (tp,))
        assert batch.update_metadata_partitions[tp].replicas == (2, 3, 1)
    # outside the block a liveness change is seen at once
    ctx.remove_live_broker(3)
    batch.add_update_metadata(ctx, ctx.live_brokers.keys(), (tp,))
    assert batch.update_metadata_partitions[tp].offline_replicas == (3,)


def test_flush_inside_fixed_liveness_starts_afresh() -> None:
    ctx = _ctx()
    tp = TopicPartition("t", 1)
    batch = RequestBatch()
    with batch.fixed_liveness():
        batch.add_leader_and_isr(ctx, (1,), tp, ctx.partition_leadership[tp], ctx.assignment(tp), is_new=False)
        assert batch.flush(ctx)
        batch.add_leader_and_isr(ctx, (2,), tp, ctx.partition_leadership[tp], ctx.assignment(tp), is_new=False)
        assert tp in batch.update_metadata_partitions  # taken again after the flush emptied the batch


def test_leader_and_isr_states_are_shared_only_for_the_same_inputs() -> None:
    ctx = _ctx()
    tp = TopicPartition("t", 2)
    batch = RequestBatch()
    li, ra = ctx.partition_leadership[tp], ctx.assignment(tp)
    batch.add_leader_and_isr(ctx, (1,), tp, li, ra, is_new=False)
    batch.add_leader_and_isr(ctx, (2,), tp, li, ra, is_new=False)
    assert batch.leader_and_isr[1][tp] is batch.leader_and_isr[2][tp]
    batch.add_leader_and_isr(ctx, (3,), tp, li, ra, is_new=True)
    assert batch.leader_and_isr[3][tp].is_new and not batch.leader_and_isr[1][tp].is_new
    ctx.topic_ids["t"] = "BBBBBBBBBBBBBBBBBBBBBB"
    batch.add_leader_and_isr(ctx, (1,), tp, li, ra, is_new=False)
    assert batch.leader_and_isr[1][tp].topic_id == "BBBBBBBBBBBBBBBBBBBBBB"
    moved = ReplicaAssignment((3, 2, 1))
    batch.add_leader_and_isr(ctx, (2,), tp, li, moved, is_new=False)
    assert batch.leader_and_isr[2][tp].replicas == (3, 2, 1)


def test_context_dump_lists_replica_states_in_assignment_order_and_strays_in_insertion_order() -> None:
    ctx = _ctx()
    ctx.set_assignment(TopicPartition("t", 1), ReplicaAssignment((3, 1, 2)))
    # inserted out of assignment order, one replica without a state, two strays
    ctx.replica_states[PartitionReplica("t", 1, 2)] = ReplicaState.OFFLINE
    ctx.replica_states[PartitionReplica("gone", 0, 5)] = ReplicaState.DELETION_STARTED
    ctx.replica_states[PartitionReplica("t", 1, 3)] = ReplicaState.ONLINE
    ctx.replica_states[PartitionReplica("t", 0, 9)] = ReplicaState.NEW
    d = context_to_dict(ctx)
    assert d["topics"]["t"]["1"][5] == {"3": ReplicaState.ONLINE.value, "2": ReplicaState.OFFLINE.value}
    assert list(d["topics"]["t"]["1"][5]) == ["3", "2"]
    assert d["topics"]["t"]["0"][5] == {} and d["topics"]["t"]["2"][5] == {}
    assert d["stray_replica_states"] == [
        ["gone", 0, 5, ReplicaState.DELETION_STARTED.value],
        ["t", 0, 9, ReplicaState.NEW.value],
    ]
    back = context_from_dict(d)
    assert back.replica_states == ctx.replica_states
    assert context_to_dict(back) == d


def test_int_seq_reads_plain_lists_and_names_the_bad_item() -> None:
    assert jf.int_seq([3, 1, 2], "isr") == (3, 1, 2)
    assert jf.int_seq([], "isr") == ()
    assert jf.int_seq((0, 2**63 - 1), "x", minimum=0) == (0, 2**63 - 1)
    with pytest.raises(FormatError, match=r"isr\[1\].*integer, got bool"):
        jf.int_seq([1, True], "isr")
    with pytest.raises(FormatError, match=r"isr\[2\].*>= 0"):
        jf.int_seq([1, 2, -1], "isr", minimum=0)
    with pytest.raises(FormatError, match=r"isr\[0\].*<= 10"):
        jf.int_seq([11], "isr", maximum=10)
    with pytest.raises(FormatError, match=r"x\[1\].*64 bits"):
        jf.int_seq([1, 2**63], "x")
    with pytest.raises(FormatError, match=r"isr\[0\].*integer, got float"):
        jf.int_seq([1.0], "isr")


def test_leader_and_isr_bodies_sharing_state_objects_encode_as_without_the_memo() -> None:
    from core.kafka.request_encoding import EncodeMemo, encode_text

    ctx = _ctx()
    batch = RequestBatch()
    for p in range(3):
        tp = TopicPartition("t", p)
        batch.add_leader_and_isr(ctx, (1, 2, 3), tp, ctx.partition_leadership[tp], ctx.assignment(tp), is_new=p == 1)
    requests = batch.flush(ctx)
    memo = EncodeMemo()
    with_memo = [encode_text(typed_body(r), memo) for r in requests]
    assert with_memo == [encode_text(typed_body(r)) for r in requests]
    assert '"isNew":true' in with_memo[0] and len(set(with_memo[:3])) == 3  # each broker's own epoch
