"""The failover's bulk paths (issue 15, slice K) decide exactly what the long way decides: replica startup
takes a partition's online replicas to Online in one batch call where Kafka (and the code before) adds a
LeaderAndIsr entry per replica; the snapshot's partition states and integer lists are read in one pass
when plainly fit, and by the checks that name the fault otherwise."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from core import jsonform as jf
from core.codec.snapshot import decode_snapshot
from core.context import ControllerContext
from core.controller import ControllerState, step
from core.errors import FormatError
from core.events import ControllerFailover
from core.model import (
    Broker,
    Endpoint,
    LeaderAndIsr,
    PartitionReplica,
    ReplicaAssignment,
    TopicPartition,
    sort_tps,
)
from core.replica_machine import apply, startup
from core.request_batch import Effects, RequestBatch
from core.snapshot import PartitionStateZnode, TopicZnode, ZkSnapshot
from core.states import ReplicaState

pytestmark = pytest.mark.unit


def _startup_the_long_way(ctx: ControllerContext, fx: Effects, replicas: list[PartitionReplica] | None) -> None:
    """Kafka's ``ReplicaStateMachine.startup`` replica by replica (the code before slice K)."""
    if replicas is None:
        replicas = [PartitionReplica.of(tp, r) for tp in sort_tps(ctx.partition_assignments) for r in ctx.replicas(tp)]
    online: list[PartitionReplica] = []
    offline: list[PartitionReplica] = []
    for pr in replicas:
        if ctx.is_replica_online(pr.replica, pr.topic_partition):
            ctx.put_replica_state(pr, ReplicaState.ONLINE)
            online.append(pr)
        else:
            ctx.put_replica_state(pr, ReplicaState.DELETION_INELIGIBLE)
            offline.append(pr)
    apply(ctx, fx, online, ReplicaState.ONLINE)
    apply(ctx, fx, offline, ReplicaState.OFFLINE)


def _mixed_context() -> ControllerContext:
    """Brokers 1-5 registered (4 shutting down, a log dir of 5 offline), 6 gone; topics with and without
    ids, one queued for deletion, partitions without leadership, one being reassigned, one whose
    leadership a newer controller wrote, a replica listed twice."""
    ctx = ControllerContext(controller_id=1, epoch=7, epoch_zk_version=3)
    for b in (1, 2, 3, 4, 5):
        ctx.add_live_broker(Broker(b, 100 + b, None, (Endpoint("PLAINTEXT", f"b{b}", 9092),)))
    ctx.shutting_down_broker_ids.add(4)
    placements = [(1, 2, 3), (2, 6, 1), (6, 5, 4), (3, 1, 2), (5, 4, 6), (1, 1, 2)]
    for topic in ("b", "a", "gone"):
        for p, reps in enumerate(placements):
            tp = TopicPartition(topic, p)
            ctx.set_assignment(tp, ReplicaAssignment(reps))
            if not (topic == "a" and p in (2, 3)):  # no state znode (2: no replica online either)
                epoch = 9 if (topic == "b" and p == 2) else 7
                ctx.put_leadership(tp, LeaderAndIsr(reps[0], tuple(dict.fromkeys(reps)), 4, 11), epoch)
    ctx.set_assignment(TopicPartition("a", 1), ReplicaAssignment((2, 6, 1, 3), (3,), (6,)))
    ctx.partitions_being_reassigned.add(TopicPartition("a", 1))
    ctx.topic_ids.update(a="AAAAAAAAAAAAAAAAAAAAAA", gone="GGGGGGGGGGGGGGGGGGGGGG")
    ctx.topics_to_be_deleted.add("gone")
    ctx.replicas_on_offline_dirs[5] = {TopicPartition("a", 2), TopicPartition("b", 4)}
    return ctx


def _all_online_context() -> ControllerContext:
    """Every replica online, as in a failover of a healthy cluster: no Offline step after the Online one."""
    ctx = ControllerContext(controller_id=2, epoch=3, epoch_zk_version=1)
    for b in (1, 2, 3):
        ctx.add_live_broker(Broker(b, 10 + b, "r1", (Endpoint("PLAINTEXT", f"b{b}", 9092),)))
    for topic in ("b", "a"):
        for p in range(4):
            tp = TopicPartition(topic, p)
            reps = ((1, 2, 3), (2, 3, 1), (3, 1, 2), (1, 2, 3))[p]
            ctx.set_assignment(tp, ReplicaAssignment(reps))
            ctx.put_leadership(tp, LeaderAndIsr(reps[0], reps[:2], 1, 5), 2)
    ctx.topic_ids["a"] = "AAAAAAAAAAAAAAAAAAAAAA"
    return ctx


@pytest.mark.parametrize("given", [False, True])
@pytest.mark.parametrize("make", [_mixed_context, _all_online_context])
def test_replica_startup_decides_what_the_replica_by_replica_way_decides(
    given: bool, make: Callable[[], ControllerContext]
) -> None:
    results = []
    for run in (startup, _startup_the_long_way):
        ctx = make()
        fx = Effects()
        if make is _mixed_context:  # a partition already sent as new in this step (an adopted topic's path)
            b0 = TopicPartition("b", 0)
            fx.batch.add_leader_and_isr(ctx, (2,), b0, ctx.partition_leadership[b0], ctx.assignment(b0), is_new=True)
        replicas = None
        if given:  # out of order, as a caller may list them
            replicas = [
                PartitionReplica(tp.topic, tp.partition, r)
                for tp in ctx.partition_assignments
                for r in ctx.replicas(tp)
            ]
            replicas.reverse()
        run(ctx, fx, replicas)
        decisions = fx.decisions(ctx)
        results.append((decisions, list(ctx.replica_states.items()), ctx.partition_leadership))
    fast, slow = results
    assert fast[0] == slow[0]
    assert fast[1] == slow[1]  # the same states in the same order
    assert fast[2] == slow[2]
    kinds = {type(d).__name__ for d in fast[0]}
    if make is _mixed_context:
        assert {"ZkWrite", "BrokerRequest", "StateChangeFailure"} <= kinds  # every effect took part
    else:
        assert kinds == {"BrokerRequest"} and len(fast[0]) == 4  # LeaderAndIsr to 1, 2, 3; UpdateMetadata


def _dead_broker_context() -> ControllerContext:
    """The mixed context without shutdown or offline log dirs (a context from a snapshot): broker 6 is
    the only reason a replica is offline."""
    ctx = _mixed_context()
    ctx.shutting_down_broker_ids.clear()
    ctx.replicas_on_offline_dirs.clear()
    return ctx


@pytest.mark.parametrize("make", [_mixed_context, _all_online_context, _dead_broker_context])
def test_offline_replicas_are_those_is_replica_online_refuses(make: Callable[[], ControllerContext]) -> None:
    ctx = make()
    for tp, ra in ctx.partition_assignments.items():
        for replicas in (ra.replicas, (), (*ra.replicas, 6, 1, 6)):
            want = tuple(r for r in replicas if not ctx.is_replica_online(r, tp))
            assert ctx.offline_replicas(tp, replicas) == want
    some = [ctx.offline_replicas(tp, ra.replicas) for tp, ra in ctx.partition_assignments.items()]
    assert any(some) is (make is not _all_online_context)


@pytest.mark.parametrize("make", [_mixed_context, _all_online_context])
def test_the_bulk_leader_and_isr_adds_what_one_call_per_partition_adds(make: Callable[[], ControllerContext]) -> None:
    """``add_leader_and_isr_to_replicas`` is ``add_leader_and_isr(..., is_new=False)`` per partition with a
    leadership, the context's assignment, the UpdateMetadata to every registered broker; a partition a
    broker was already sent as new stays new for it (Kafka's ``isNew || alreadyNew``)."""
    batches = []
    for bulk in (True, False):
        ctx = make()
        batch = RequestBatch()
        first = sort_tps(ctx.partition_assignments)[0]
        li = ctx.partition_leadership[first]
        batch.add_leader_and_isr(ctx, (2,), first, li, ctx.assignment(first), is_new=True)
        entries = [(tp, (*ctx.replicas(tp), -1)) for tp in sort_tps(ctx.partition_assignments)]
        if bulk:
            batch.add_leader_and_isr_to_replicas(ctx, entries)
        else:
            for tp, brokers in entries:
                leadership = ctx.partition_leadership.get(tp)
                if leadership is not None:
                    batch.add_leader_and_isr(ctx, brokers, tp, leadership, ctx.assignment(tp), is_new=False)
        assert batch.leader_and_isr[2][first].is_new and not batch.leader_and_isr[1][first].is_new
        held = (batch.leader_and_isr, batch.update_metadata_partitions, set(batch.update_metadata_brokers))
        batches.append((held, batch.flush(ctx)))
    assert batches[0] == batches[1]
    assert -1 not in batches[0][0][0] and batches[0][0][2] == set(make().live_brokers)


def test_failover_holds_back_the_deletion_of_queued_topics_with_an_offline_replica() -> None:
    """Kafka's ``fetchTopicDeletionsInProgress``: a queued topic with a replica on a broker that is not
    registered is ineligible, so its deletion does not start; a topic not queued is not marked."""
    ep = (Endpoint("PLAINTEXT", "h", 9092),)
    placements = {"a": ((1, 2), (2, 3)), "b": ((1, 2),), "c": ((1, 3),)}
    snap = ZkSnapshot(
        controller_epoch=4,
        controller_epoch_zk_version=3,
        brokers=(Broker(1, 11, None, ep), Broker(2, 12, None, ep)),
        topics=tuple(TopicZnode(t, tuple(enumerate(reps))) for t, reps in placements.items()),
        partition_states=tuple(
            (TopicPartition(t, p), PartitionStateZnode(reps[0], 1, tuple(r for r in reps if r != 3), 3, 0))
            for t, ps in placements.items()
            for p, reps in enumerate(ps)
        ),
        topics_to_delete=("a", "b"),
    )
    state, _ = step(ControllerState(), [ControllerFailover(1, snap)])
    ctx = state.context
    assert ctx.topics_to_be_deleted == {"a", "b"}
    assert ctx.topics_ineligible_for_deletion == {"a"}
    assert "a" not in ctx.topics_with_deletion_started and "b" in ctx.topics_with_deletion_started


def _snapshot_json(state: dict[str, object], topic: object = "t") -> dict[str, object]:
    return {
        "controller_epoch": 3,
        "controller_epoch_zk_version": 2,
        "brokers": [],
        "topics": [],
        "partition_states": [[{"topic": topic, "partition": 0}, state]],
    }


_STATE = {"leader": 1, "leader_epoch": 2, "isr": [1, 2], "controller_epoch": 3, "zk_version": 4}


@pytest.mark.parametrize(
    ("changes", "topic", "want"),
    [
        ({}, "t", PartitionStateZnode(1, 2, (1, 2), 3, 4, 0)),
        ({"leader_recovery_state": None}, "t", PartitionStateZnode(1, 2, (1, 2), 3, 4, 0)),
        ({"leader_recovery_state": 1, "isr": []}, "t", PartitionStateZnode(1, 2, (), 3, 4, 1)),
        ({"zk_version": 2**63 - 1, "leader": -1}, "t", PartitionStateZnode(-1, 2, (1, 2), 3, 2**63 - 1, 0)),
        ({}, "tö", PartitionStateZnode(1, 2, (1, 2), 3, 4, 0)),  # not ASCII: the checked path reads it
        ({"leader": True}, "t", "snapshot.leader: must be an integer, got bool"),
        ({"isr": [1, 2.0]}, "t", r"snapshot.isr\[1\]: must be an integer, got float"),
        ({"isr": None}, "t", "snapshot.isr: is required"),
        ({"leader_epoch": 2**63}, "t", "snapshot.leader_epoch: must fit in 64 bits"),
        ({"controller_epoch": "3"}, "t", "snapshot.controller_epoch: must be an integer, got str"),
        ({}, "", "snapshot.topic: must not be empty"),
        ({}, 7, "snapshot.topic: must be a string, got int"),
    ],
)
def test_snapshot_partition_states_read_alike_on_the_plain_and_the_checked_path(
    changes: dict[str, object], topic: object, want: PartitionStateZnode | str
) -> None:
    raw = _snapshot_json({**_STATE, **changes}, topic)
    if isinstance(want, str):
        with pytest.raises(FormatError, match=want):
            decode_snapshot(raw)
        return
    ((tp, st),) = decode_snapshot(raw).partition_states
    assert (tp, st) == (TopicPartition(str(topic), 0), want)
    assert type(st.isr) is tuple


@pytest.mark.parametrize(
    "values",
    [[], [0, 5, 3], [-(2**63), 2**63 - 1], [2**63], [1, True], [1, None], [0, 11], [-1, 3], [1.0], ["1"]],
)
@pytest.mark.parametrize(("minimum", "maximum"), [(None, None), (0, None), (0, 10), (-(2**70), 2**70)])
def test_int_seq_reads_a_list_as_its_items_checked_one_by_one_would(
    values: list[object], minimum: int | None, maximum: int | None
) -> None:
    def one_by_one() -> tuple[int, ...]:
        return tuple(jf._int_value(x, f"x[{i}]", minimum, maximum) for i, x in enumerate(values))

    try:
        want: tuple[int, ...] | str = one_by_one()
    except FormatError as e:
        want = str(e)
    try:
        got: tuple[int, ...] | str = jf.int_seq(values, "x", minimum=minimum, maximum=maximum)
    except FormatError as e:
        got = str(e)
    assert got == want


def test_integer_lists_encode_alike_from_the_memo_and_it_stays_bounded() -> None:
    from core.kafka.request_encoding import EncodeMemo, ints_text

    memo = EncodeMemo(max_ints=3)
    values = [(), (1,), (3, 1, 2), (1,), (-1, 2**63 - 1), (3, 1, 2), (0, 0), (4, 5), (6,), (7, 8), (4, 5)]
    want = [
        "[]",
        "[1]",
        "[3,1,2]",
        "[1]",
        "[-1,9223372036854775807]",
        "[3,1,2]",
        "[0,0]",
        "[4,5]",
        "[6]",
        "[7,8]",
        "[4,5]",
    ]
    assert [memo.ints(v) for v in values] == want and [ints_text(v) for v in values] == want
    unchecked, with_0_or_1 = memo.ints_held()
    assert 0 < len(unchecked) <= 3 and 0 < len(with_0_or_1) <= 3
    # no key of the unchecked memo holds an item a bool equals
    assert not any(0 in k or 1 in k for k in unchecked)
    assert memo.ints([4, 5]) == "[4,5]" and memo.ints(iter((6,))) == "[6]"  # not tuples: encoded each time
    with pytest.raises(ValueError, match="max_ints"):
        EncodeMemo(max_ints=0)


@pytest.mark.parametrize("first", [(), (1,), (1, 2), (0,), (2, 0)])
@pytest.mark.parametrize("bad", [(True,), (True, 2), (False,), (2, False), [True], [2, False]])
def test_an_integer_list_holding_a_bool_is_refused_whatever_the_memo_holds(first: tuple[int, ...], bad: object) -> None:
    """``(True,) == (1,)`` and ``(2, False) == (2, 0)``: a memo found by equality would answer a bool with
    its integer twin's text; the encoder refuses bools instead, memoised twin or not."""
    from core.kafka.request_encoding import EncodeMemo, ints_text

    memo = EncodeMemo()
    twin = tuple(int(x) for x in bad) if isinstance(bad, tuple) else None
    memo.ints(first)
    if twin is not None:
        assert memo.ints(twin) == "[" + ",".join(map(str, twin)) + "]"  # the twin memoised
    with pytest.raises(TypeError, match="holds a bool"):
        memo.ints(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="holds a bool"):
        ints_text(bad)  # type: ignore[arg-type]


def test_a_request_with_a_bool_in_an_integer_list_is_refused_by_both_encoders() -> None:
    from core.codec.decision_rows import sorted_entries
    from core.kafka.request_encoding import EncodeMemo, encode_text
    from core.kafka.requests import LeaderAndIsrRequest, LisrPartitionState

    ok = LeaderAndIsrRequest(0, 1, 2, 0, (LisrPartitionState("t", 0, 3, 1, 4, (1, 2), 7, (1, 2, 3)),), ())
    bad = LeaderAndIsrRequest(0, 1, 2, 0, (LisrPartitionState("t", 0, 3, 1, 4, (True, 2), 7, (1, 2, 3)),), ())
    assert '"isr":[1,2]' in encode_text(ok) and sorted_entries(ok)
    with pytest.raises(TypeError, match="holds a bool"):
        encode_text(bad)
    with pytest.raises(TypeError, match="holds a bool"):
        sorted_entries(bad)
    memo = EncodeMemo()
    assert encode_text(ok, memo) == encode_text(ok) and sorted_entries(ok, memo) == sorted_entries(ok)
    with pytest.raises(TypeError, match="holds a bool"):
        encode_text(bad, memo)
    with pytest.raises(TypeError, match="holds a bool"):
        sorted_entries(bad, memo)
