"""A bucket's state through its JSON form: ``context_to_dict`` / ``context_from_dict`` (and
``ControllerState.to_dict`` / ``from_dict``) give back an equal context whose every index answers as the
original's, and equal to the context the mutating API builds from the same dict (the decode builds its
indexes in bulk)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from core_support import Cluster

from core.context import ControllerContext
from core.context_codec import context_from_dict, context_to_dict
from core.controller import ControllerConfig, ControllerState, step
from core.errors import DecodeStoppedError
from core.events import (
    AlterTopicConfig,
    BrokerFailure,
    ControlledShutdown,
    DeleteTopic,
    LeaderAndIsrResponse,
    PartitionError,
    ReassignPartitions,
    Tick,
)
from core.model import (
    Broker,
    LeaderAndIsr,
    PartitionReplica,
    PartitionTarget,
    ReplicaAssignment,
    TopicPartition,
)
from core.states import PartitionState, ReplicaState

pytestmark = pytest.mark.unit

#: Kafka's KAFKA_STORAGE_ERROR: the replica's log dir is offline
STORAGE_ERROR = 56


def create(c: Cluster, topic: str, assignment: tuple[tuple[int, ...], ...], **configs: str) -> None:
    c.create_topic(topic, assignment, **configs)


def busy_cluster() -> Cluster:
    """Several topics, a reassignment in flight, a topic queued for deletion (its deletion waiting on an
    ineligible replica), an offline log dir, a failed broker and a broker shutting down."""
    c = Cluster.start([1, 2, 3, 4, 5], ControllerConfig())
    create(c, "alpha", ((1, 2, 3), (2, 3, 4), (3, 4, 5), (4, 5, 1)), unclean_leader_election_enable="true")
    create(c, "beta", ((5, 1), (1, 2), (2, 5)), retention_ms="1000")
    create(c, "gamma", ((3,), (4,), (5,), (1,), (2,)))
    create(c, "delta", ((2, 4), (4, 2)))
    create(c, "eps", ((3,), (4,)))  # eps-0 goes offline with broker 3
    c.run(AlterTopicConfig("cfg", "beta", (("unclean.leader.election.enable", "false"),)))
    c.run(ReassignPartitions("move", (PartitionTarget("alpha", 0, (4, 5, 1)), PartitionTarget("beta", 1, (3, 4)))))
    c.run(LeaderAndIsrResponse(2, (PartitionError("delta", 0, STORAGE_ERROR),)))
    c.run(BrokerFailure(3))
    c.run(DeleteTopic("del", "gamma"))
    c.run(ControlledShutdown(5, 105))
    return c


def by_mutating_api(d: dict[str, Any]) -> ControllerContext:
    """The context of ``d`` built partition by partition through the context's mutating methods (what
    ``context_from_dict`` built before its bulk path): the reference the bulk build must equal."""
    ctx = ControllerContext(controller_id=d["controller_id"], epoch=d["epoch"], epoch_zk_version=d["epoch_zk_version"])
    bulk = context_from_dict(d)  # the parts the decode copies as they are (no index): brokers, sets, configs
    ctx.live_brokers = dict(bulk.live_brokers)
    ctx.shutting_down_broker_ids = set(d["shutting_down"])
    for topic, parts in d["topics"].items():
        ctx.topic_partitions[topic] = set()
        for p_str, (reps, adding, removing, lead, pstate, rstates) in parts.items():
            tp = TopicPartition(topic, int(p_str))
            ctx.set_assignment(tp, ReplicaAssignment(tuple(reps), tuple(adding), tuple(removing)))
            if lead is not None:
                leader, isr, le, pe, lrs, ce = lead
                ctx.put_leadership(tp, LeaderAndIsr(leader, tuple(isr), le, pe, lrs), ce)
            ctx.put_partition_state(tp, PartitionState(pstate))
            for r, st in rstates.items():
                ctx.put_replica_state(PartitionReplica(topic, tp.partition, int(r)), ReplicaState(st))
    for topic, p, r, st in d["stray_replica_states"]:
        ctx.put_replica_state(PartitionReplica(topic, p, r), ReplicaState(st))
    for name in (
        "topic_ids",
        "replicas_on_offline_dirs",
        "topics_to_be_deleted",
        "topics_ineligible_for_deletion",
        "topics_with_deletion_started",
        "partitions_being_reassigned",
        "unclean_leader_election",
        "topic_configs",
        "topic_znode_versions",
    ):
        setattr(ctx, name, getattr(bulk, name))
    return ctx


def assert_same_context(got: ControllerContext, want: ControllerContext, *, same_order: bool) -> None:
    """Equal, field by field (indexes included), the index queries answering alike and, with ``same_order``,
    the maps in the same order (the JSON form orders partitions by topic and id, so a decoded context's maps
    are in that order, not in the order of the original's changes)."""
    assert got == want
    for name in want.__dataclass_fields__:
        assert getattr(got, name) == getattr(want, name), name
    if same_order:
        for name in ("partition_assignments", "partition_leadership", "partition_states", "replica_states"):
            assert list(getattr(got, name)) == list(getattr(want, name)), name
        assert list(got.topic_partitions) == list(want.topic_partitions)
        assert list(got.topic_ids) == list(want.topic_ids)
    brokers = sorted({*want.partitions_by_broker, *want.live_brokers, 99})
    for b in brokers:
        assert got.partitions_on_broker(b) == want.partitions_on_broker(b)
        assert got.partitions_led_by(b) == want.partitions_led_by(b)
    assert got.replicas_on_brokers(brokers) == want.replicas_on_brokers(brokers)
    assert got.live_broker_ids == want.live_broker_ids
    assert sorted(got.offline_or_new_partitions) == sorted(want.offline_or_new_partitions)
    for topic in want.topic_partitions:
        assert got.partitions_for_topic(topic) == want.partitions_for_topic(topic)
        assert got.replicas_for_topic(topic) == want.replicas_for_topic(topic)
    for tp in want.partition_assignments:
        assert got.replicas(tp) == want.replicas(tp)
        assert got.offline_replicas(tp, want.replicas(tp)) == want.offline_replicas(tp, want.replicas(tp))
        assert got.leadership(tp) == want.leadership(tp)
        assert got.partition_state(tp) is want.partition_state(tp)


def through_json(d: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(json.dumps(d))
    return result


def test_busy_cluster_round_trips_equal_with_its_indexes() -> None:
    c = busy_cluster()
    ctx = c.ctx
    # the cluster is in the states the decode has to index
    assert ctx.partitions_being_reassigned and ctx.topics_to_be_deleted and ctx.shutting_down_broker_ids
    assert ctx.replicas_on_offline_dirs and ctx.offline_or_new_partitions and ctx.topic_configs
    assert any(ra.is_being_reassigned for ra in ctx.partition_assignments.values())
    assert 3 not in ctx.live_brokers
    d = through_json(context_to_dict(ctx))
    back = context_from_dict(d)
    assert_same_context(back, ctx, same_order=False)
    assert_same_context(back, by_mutating_api(d), same_order=True)
    assert context_to_dict(back) == context_to_dict(ctx)


def test_state_round_trips_and_steps_alike() -> None:
    c = busy_cluster()
    back = ControllerState.from_dict(through_json(c.state.to_dict()))
    assert back == c.state
    assert back.to_bytes() == c.state.to_bytes()
    for events in ([BrokerFailure(1)], [Tick(10)], [DeleteTopic("del2", "delta")]):
        want_state, want = step(c.state, events)
        got_state, got = step(back, events)
        assert got == want
        assert got_state.to_bytes() == want_state.to_bytes()


def test_a_decode_asked_to_stop_ends_at_the_next_topic() -> None:
    c = busy_cluster()
    d = through_json(c.state.to_dict())
    topics = len(d["context"]["topics"])
    assert topics > 2
    asked: list[int] = []

    def stop_at_the_third() -> bool:
        asked.append(1)
        return len(asked) == 3

    with pytest.raises(DecodeStoppedError):
        ControllerState.from_dict(d, stop=stop_at_the_third)
    assert len(asked) == 3
    never_stopped = ControllerState.from_dict(d, stop=lambda: False)
    assert never_stopped == c.state and never_stopped.to_bytes() == c.state.to_bytes()


def hand_built() -> ControllerContext:
    """What the controller's paths rarely leave but the format carries: a replica state off the assignment
    (stray), a partition without leadership or state, a topic without partitions, an empty offline set."""
    ctx = ControllerContext(controller_id=2, epoch=7, epoch_zk_version=6)
    ctx.add_live_broker(Broker(1, 11))
    ctx.add_live_broker(Broker(2, 12, "rack-b"))
    a0, a1, b0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
    ctx.set_assignment(a0, ReplicaAssignment((1, 2)))
    ctx.set_assignment(a1, ReplicaAssignment((2, 1, 3), (3,), (1,)))
    ctx.set_assignment(b0, ReplicaAssignment((1, 2)))
    ctx.topic_partitions["empty"] = set()
    ctx.topic_znode_versions["a"] = 3  # the topic znode's version where known (issue 42)
    ctx.put_leadership(a0, LeaderAndIsr(1, (1, 2), 4, 9), 7)
    ctx.put_leadership(b0, LeaderAndIsr(1, (1, 2), 4, 9), 7)  # equal to a-0's: shared after the decode
    ctx.put_partition_state(a0, PartitionState.ONLINE)
    ctx.put_partition_state(a1, PartitionState.NEW)
    ctx.put_replica_state(PartitionReplica("a", 0, 2), ReplicaState.ONLINE)
    ctx.put_replica_state(PartitionReplica("a", 0, 5), ReplicaState.OFFLINE)  # broker 5 is not in RS: stray
    ctx.put_replica_state(PartitionReplica("a", 1, 3), ReplicaState.NEW)
    ctx.replicas_on_offline_dirs = {2: {a0}, 1: set()}
    ctx.partitions_being_reassigned = {a1}
    return ctx


def test_rare_shapes_round_trip() -> None:
    ctx = hand_built()
    d = through_json(context_to_dict(ctx))
    back = context_from_dict(d)
    assert_same_context(back, ctx, same_order=False)
    assert_same_context(back, by_mutating_api(d), same_order=True)
    assert back.partitions_by_broker[3] == {TopicPartition("a", 1)}
    assert back.offline_or_new_partitions == {TopicPartition("a", 1)}
    assert TopicPartition("b", 0) not in back.partition_states  # NonExistentPartition: stored as absent


def test_a_state_stored_before_the_topic_znode_versions_were_kept_reads_them_as_unknown() -> None:
    c = busy_cluster()
    c.state.context.topic_znode_versions["alpha"] = 4
    d = through_json(c.state.to_dict())
    assert d["context"]["topic_versions"] == {"alpha": 4}
    del d["context"]["topic_versions"]  # as a checkpoint written before the field was added holds it
    back = ControllerState.from_dict(d)
    assert back.context.topic_znode_versions == {}
    c.state.context.topic_znode_versions.clear()
    assert back == c.state


def test_equal_values_are_shared_after_the_decode() -> None:
    back = context_from_dict(through_json(context_to_dict(hand_built())))
    a0, b0 = TopicPartition("a", 0), TopicPartition("b", 0)
    assert back.partition_assignments[a0] is back.partition_assignments[b0]
    assert back.partition_leadership[a0] is back.partition_leadership[b0]
    assert back.partition_assignments[a0].replicas is back.partition_leadership[a0].leader_and_isr.isr


def reference_topics(ctx: ControllerContext) -> dict[str, Any]:
    """The ``topics`` part of ``context_to_dict``, written plainly, one partition at a time (it encodes equal
    values once)."""
    topics: dict[str, Any] = {}
    for topic in sorted(ctx.topic_partitions):
        parts: dict[str, Any] = {}
        for p in sorted(ctx.topic_partitions[topic]):
            tp = TopicPartition(topic, p)
            ra = ctx.assignment(tp)
            li = ctx.leadership(tp)
            lead = None
            if li is not None:
                l_ = li.leader_and_isr
                lead = [l_.leader, list(l_.isr), l_.leader_epoch, l_.partition_epoch, l_.leader_recovery_state]
                lead.append(li.controller_epoch)
            rstates = {}
            for r in ra.replicas:
                pr = PartitionReplica(topic, p, r)
                if pr in ctx.replica_states:
                    rstates[str(r)] = ctx.replica_states[pr].value
            state = ctx.partition_state(tp).value
            parts[str(p)] = [
                list(ra.replicas),
                list(ra.adding_replicas),
                list(ra.removing_replicas),
                lead,
                state,
                rstates,
            ]
        topics[topic] = parts
    return topics


def test_encode_is_the_plain_encoding() -> None:
    busy = busy_cluster().ctx
    rare = hand_built()
    # a state of many partitions with equal values, and one where the same replica list carries other states
    many = ControllerContext()
    for p in range(12):
        tp = TopicPartition("m", p)
        many.set_assignment(tp, ReplicaAssignment((p % 3, (p + 1) % 3)))
        many.put_leadership(tp, LeaderAndIsr(p % 3, (p % 3, (p + 1) % 3) if p % 4 else (p % 3,)), 1)
        many.put_partition_state(tp, PartitionState.ONLINE if p % 5 else PartitionState.OFFLINE)
        for r in many.replicas(tp)[: 1 + p % 2]:
            many.put_replica_state(PartitionReplica("m", p, r), ReplicaState.ONLINE if p % 3 else ReplicaState.OFFLINE)
    for ctx in (busy, rare, many, context_from_dict(through_json(context_to_dict(busy)))):
        d = context_to_dict(ctx)
        assert d["topics"] == reference_topics(ctx)
        assert json.dumps(d) == json.dumps(through_json(d))
