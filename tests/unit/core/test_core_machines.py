"""Both state machines: every valid and invalid transition, and each transition's side effects."""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from typing import Any

import pytest

from core import partition_machine, replica_machine
from core.context import ControllerContext
from core.decisions import BrokerRequest, ZkOp, ZkWrite
from core.election import ElectionStrategy
from core.kafka.requests import RequestApi
from core.model import Broker, Endpoint, LeaderAndIsr, PartitionReplica, ReplicaAssignment, TopicPartition
from core.states import (
    PARTITION_VALID_PREVIOUS,
    REPLICA_VALID_PREVIOUS,
    PartitionState,
    ReplicaState,
    is_valid_partition_transition,
    is_valid_replica_transition,
)

pytestmark = pytest.mark.unit

TP = TopicPartition("t", 0)


def ctx_with(
    brokers: tuple[int, ...] = (1, 2, 3),
    replicas: tuple[int, ...] = (1, 2, 3),
    lai: LeaderAndIsr | None = None,
    state: PartitionState | None = None,
) -> ControllerContext:
    ctx = ControllerContext(controller_id=0, epoch=1)
    for b in brokers:
        ctx.add_live_broker(Broker(b, 10 + b, None, (Endpoint("PLAINTEXT", f"h{b}", 9000 + b),)))
    ctx.set_assignment(TP, ReplicaAssignment(replicas))
    ctx.topic_ids["t"] = "AAAAAAAAAAAAAAAAAAAAAQ"
    if lai is not None:
        ctx.put_leadership(TP, lai, 1)
    if state is not None:
        ctx.put_partition_state(TP, state)
    return ctx


def requests(decisions: Sequence[object], api: RequestApi) -> dict[int, dict[str, Any]]:
    """Broker -> the body it gets (a shared UpdateMetadata as each addressee's own copy)."""
    return {
        r.broker_id: r.body_json()
        for d in decisions
        if isinstance(d, BrokerRequest) and d.api is api
        for r in d.fan_out()
    }


def zk_writes(decisions: Sequence[object]) -> list[ZkWrite]:
    return [d for d in decisions if isinstance(d, ZkWrite)]


# --------------------------------------------------------------------------- valid previous states


def test_valid_previous_states_are_kafkas() -> None:
    P, R = PartitionState, ReplicaState  # noqa: N806
    assert {
        P.NEW: {P.NON_EXISTENT},
        P.ONLINE: {P.NEW, P.ONLINE, P.OFFLINE},
        P.OFFLINE: {P.NEW, P.ONLINE, P.OFFLINE},
        P.NON_EXISTENT: {P.OFFLINE},
    } == PARTITION_VALID_PREVIOUS
    assert {
        R.NEW: {R.NON_EXISTENT},
        R.ONLINE: {R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE},
        R.OFFLINE: {R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE},
        R.DELETION_STARTED: {R.OFFLINE},
        R.DELETION_SUCCESSFUL: {R.DELETION_STARTED},
        R.DELETION_INELIGIBLE: {R.OFFLINE, R.DELETION_STARTED},
        R.NON_EXISTENT: {R.DELETION_SUCCESSFUL},
    } == REPLICA_VALID_PREVIOUS
    assert P.NEW.valid_previous_states == {P.NON_EXISTENT}
    assert R.NEW.valid_previous_states == {R.NON_EXISTENT}
    assert str(P.NEW) == "NewPartition" and str(R.NEW) == "NewReplica"


@pytest.mark.parametrize(("current", "target"), list(itertools.product(PartitionState, PartitionState)))
def test_every_partition_transition(current: PartitionState, target: PartitionState) -> None:
    lai = LeaderAndIsr(1, (1, 2, 3)) if current in (PartitionState.ONLINE, PartitionState.OFFLINE) else None
    ctx = ctx_with(lai=lai, state=current)
    new, _decisions, failures = partition_machine.handle_state_changes(ctx, [TP], target, ElectionStrategy.OFFLINE)
    assert ctx.partition_state(TP) is current  # the input is not modified
    if is_valid_partition_transition(current, target):
        assert new.partition_state(TP) is target
        assert failures == []
    else:
        assert new.partition_state(TP) is current
        assert len(failures) == 1
        assert failures[0].from_state == str(current) and failures[0].to_state == str(target)
        assert "Invalid state transition" in failures[0].reason


@pytest.mark.parametrize(("current", "target"), list(itertools.product(ReplicaState, ReplicaState)))
def test_every_replica_transition(current: ReplicaState, target: ReplicaState) -> None:
    ctx = ctx_with(lai=LeaderAndIsr(1, (1, 2, 3)), state=PartitionState.ONLINE)
    pr = PartitionReplica("t", 0, 2)
    ctx.put_replica_state(pr, current)
    new, _decisions, failures = replica_machine.handle_state_changes(ctx, [pr], target)
    assert ctx.replica_state(pr) is current
    if is_valid_replica_transition(current, target):
        assert new.replica_state(pr) is target
        assert failures == []
        if target is ReplicaState.NON_EXISTENT:
            assert 2 not in new.replicas(TP)
    else:
        assert new.replica_state(pr) is current
        assert len(failures) == 1 and "Invalid state transition" in failures[0].reason


# --------------------------------------------------------------------------- partition side effects


def test_new_to_online_initialises_leader_and_isr() -> None:
    ctx = ctx_with(brokers=(2, 3), state=PartitionState.NEW)
    new, ds, failures = partition_machine.handle_state_changes(ctx, [TP], PartitionState.ONLINE)
    assert failures == []
    lai = new.leader_and_isr(TP)
    assert lai == LeaderAndIsr(2, (2, 3), 0, 0)
    (w,) = zk_writes(ds)
    assert (w.op, w.path, w.make_parents) == (ZkOp.CREATE, "/brokers/topics/t/partitions/0/state", True)
    assert json.loads(w.data or "") == {
        "version": 1,
        "leader": 2,
        "leader_epoch": 0,
        "controller_epoch": 1,
        "isr": [2, 3],
    }
    lisr = requests(ds, RequestApi.LEADER_AND_ISR)
    assert set(lisr) == {2, 3}
    ps = lisr[2]["topicStates"][0]["partitionStates"][0]
    assert ps["isNew"] is True and ps["replicas"] == [1, 2, 3] and ps["leader"] == 2
    assert set(requests(ds, RequestApi.UPDATE_METADATA)) == {2, 3}
    um = [d for d in ds if isinstance(d, BrokerRequest) and d.api is RequestApi.UPDATE_METADATA]
    assert [d.recipients() for d in um] == [(2, 3)]  # one request naming both brokers
    order = [d.api for d in ds if isinstance(d, BrokerRequest)]
    assert order == sorted(order, key=lambda a: ["LeaderAndIsr", "UpdateMetadata", "StopReplica"].index(a.value))


def test_new_to_online_without_live_replica_fails() -> None:
    ctx = ctx_with(brokers=(7,), state=PartitionState.NEW)
    new, ds, failures = partition_machine.handle_state_changes(ctx, [TP], PartitionState.ONLINE)
    assert new.partition_state(TP) is PartitionState.NEW
    assert ds == [] and "No assigned replica is alive" in failures[0].reason


def test_new_to_online_when_state_znode_exists_fails() -> None:
    ctx = ctx_with(lai=LeaderAndIsr(1, (1,)), state=PartitionState.NEW)
    _new, _ds, failures = partition_machine.handle_state_changes(ctx, [TP], PartitionState.ONLINE)
    assert "already exists" in failures[0].reason


@pytest.mark.parametrize(
    ("strategy", "brokers", "isr", "leader", "new_isr", "recipients"),
    [
        (ElectionStrategy.OFFLINE, (2, 3), (1, 2, 3), 2, (2, 3), {2, 3}),
        (ElectionStrategy.OFFLINE, (3,), (1, 2), None, None, None),
        (ElectionStrategy.OFFLINE_UNCLEAN, (3,), (1, 2), 3, (3,), {3}),
        (ElectionStrategy.PREFERRED, (1, 2, 3), (2, 1, 3), 1, (2, 1, 3), {1, 2, 3}),
        (ElectionStrategy.PREFERRED, (2, 3), (2, 3), None, None, None),
        (ElectionStrategy.REASSIGN, (1, 2, 3), (3, 2), 2, (3, 2), {1, 2, 3}),
    ],
)
def test_online_election_strategies(  # noqa: PLR0917
    strategy: ElectionStrategy,
    brokers: tuple[int, ...],
    isr: tuple[int, ...],
    leader: int | None,
    new_isr: tuple[int, ...] | None,
    recipients: set[int] | None,
) -> None:
    ctx = ctx_with(brokers=brokers, lai=LeaderAndIsr(isr[0], isr, 5, 7), state=PartitionState.OFFLINE)
    new, ds, failures = partition_machine.handle_state_changes(ctx, [TP], PartitionState.ONLINE, strategy)
    if leader is None:
        assert failures and "Failed to elect leader" in failures[0].reason
        assert new.partition_state(TP) is PartitionState.OFFLINE and ds == []
        return
    lai = new.leader_and_isr(TP)
    assert lai is not None and (lai.leader, lai.isr, lai.leader_epoch, lai.partition_epoch) == (leader, new_isr, 6, 8)
    (w,) = zk_writes(ds)
    assert (w.op, w.expected_version) == (ZkOp.SET, 7)
    assert set(requests(ds, RequestApi.LEADER_AND_ISR)) == recipients
    if strategy is ElectionStrategy.OFFLINE_UNCLEAN:
        assert lai.leader_recovery_state == 1 and '"leader_recovery_state":1' in (w.data or "")


def test_controlled_shutdown_strategy() -> None:
    ctx = ctx_with(lai=LeaderAndIsr(1, (1, 2, 3)), state=PartitionState.ONLINE)
    ctx.shutting_down_broker_ids.add(1)
    new, ds, _ = partition_machine.handle_state_changes(
        ctx, [TP], PartitionState.ONLINE, ElectionStrategy.CONTROLLED_SHUTDOWN
    )
    assert new.leader_and_isr(TP) == LeaderAndIsr(2, (2, 3), 1, 1)
    assert set(requests(ds, RequestApi.LEADER_AND_ISR)) == {1, 2, 3}


def test_offline_strategy_uses_topic_unclean_config() -> None:
    ctx = ctx_with(brokers=(3,), lai=LeaderAndIsr(1, (1,)), state=PartitionState.OFFLINE)
    ctx.unclean_leader_election["t"] = True
    new, _, failures = partition_machine.handle_state_changes(ctx, [TP], PartitionState.ONLINE)
    assert failures == [] and new.leader_and_isr(TP) == LeaderAndIsr(3, (3,), 1, 1, 1)


def test_election_fenced_by_newer_controller_epoch() -> None:
    ctx = ctx_with(lai=LeaderAndIsr(1, (1, 2)), state=PartitionState.OFFLINE)
    ctx.put_leadership(TP, LeaderAndIsr(1, (1, 2)), 9)
    _, ds, failures = partition_machine.handle_state_changes(ctx, [TP], PartitionState.ONLINE)
    assert ds == [] and "another controller" in failures[0].reason


def test_election_without_leadership_fails() -> None:
    ctx = ctx_with(state=PartitionState.OFFLINE)
    _, ds, failures = partition_machine.handle_state_changes(ctx, [TP], PartitionState.ONLINE)
    assert ds == [] and "doesn't exist" in failures[0].reason


# --------------------------------------------------------------------------- replica side effects


def test_new_replica_gets_leader_and_isr_is_new() -> None:
    ctx = ctx_with(lai=LeaderAndIsr(1, (1, 2)))
    new, ds, _ = replica_machine.handle_state_changes(ctx, [PartitionReplica("t", 0, 3)], ReplicaState.NEW)
    lisr = requests(ds, RequestApi.LEADER_AND_ISR)
    assert set(lisr) == {3}
    assert lisr[3]["topicStates"][0]["partitionStates"][0]["isNew"] is True
    assert new.replica_state(PartitionReplica("t", 0, 3)) is ReplicaState.NEW


def test_new_replica_cannot_be_the_leader() -> None:
    ctx = ctx_with(lai=LeaderAndIsr(1, (1, 2)))
    new, _, failures = replica_machine.handle_state_changes(ctx, [PartitionReplica("t", 0, 1)], ReplicaState.NEW)
    assert "being requested to become leader" in failures[0].reason
    assert new.replica_state(PartitionReplica("t", 0, 1)) is ReplicaState.NON_EXISTENT


def test_new_replica_without_leadership_is_state_only() -> None:
    ctx = ctx_with()
    new, ds, _ = replica_machine.handle_state_changes(ctx, [PartitionReplica("t", 0, 1)], ReplicaState.NEW)
    assert ds == [] and new.replica_state(PartitionReplica("t", 0, 1)) is ReplicaState.NEW


def test_online_from_new_adds_missing_replica_to_assignment() -> None:
    ctx = ctx_with(replicas=(1, 2))
    pr = PartitionReplica("t", 0, 3)
    ctx.put_replica_state(pr, ReplicaState.NEW)
    new, ds, _ = replica_machine.handle_state_changes(ctx, [pr], ReplicaState.ONLINE)
    assert new.replicas(TP) == (1, 2, 3) and ds == []
    assert TP in new.partitions_on_broker(3)


def test_online_from_offline_sends_leader_and_isr() -> None:
    ctx = ctx_with(lai=LeaderAndIsr(1, (1,)))
    pr = PartitionReplica("t", 0, 2)
    ctx.put_replica_state(pr, ReplicaState.OFFLINE)
    _, ds, _ = replica_machine.handle_state_changes(ctx, [pr], ReplicaState.ONLINE)
    assert set(requests(ds, RequestApi.LEADER_AND_ISR)) == {2}


@pytest.mark.parametrize(
    ("lai", "replica", "expected"),
    [
        (LeaderAndIsr(1, (1, 2, 3)), 2, LeaderAndIsr(1, (1, 3), 1, 1)),
        (LeaderAndIsr(1, (1, 2, 3)), 1, LeaderAndIsr(-1, (2, 3), 1, 1)),
        (LeaderAndIsr(1, (1,)), 1, LeaderAndIsr(-1, (1,), 1, 1)),  # the last ISR member stays
        (LeaderAndIsr(1, (1, 3)), 2, LeaderAndIsr(1, (1, 3), 0, 0)),  # not in the ISR: no write
    ],
)
def test_offline_replica_shrinks_isr(lai: LeaderAndIsr, replica: int, expected: LeaderAndIsr) -> None:
    ctx = ctx_with(lai=lai)
    pr = PartitionReplica("t", 0, replica)
    ctx.put_replica_state(pr, ReplicaState.ONLINE)
    new, ds, _ = replica_machine.handle_state_changes(ctx, [pr], ReplicaState.OFFLINE)
    assert new.leader_and_isr(TP) == expected
    assert len(zk_writes(ds)) == (0 if expected.leader_epoch == 0 else 1)
    stop = requests(ds, RequestApi.STOP_REPLICA)
    assert stop[replica]["topicStates"][0]["partitionStates"][0]["deletePartition"] is False
    assert set(requests(ds, RequestApi.LEADER_AND_ISR)) == {1, 2, 3} - {replica}


def test_offline_replica_of_topic_being_deleted_sends_no_leader_and_isr() -> None:
    ctx = ctx_with(lai=LeaderAndIsr(1, (1, 2)))
    ctx.topics_to_be_deleted.add("t")
    pr = PartitionReplica("t", 0, 2)
    ctx.put_replica_state(pr, ReplicaState.ONLINE)
    _, ds, _ = replica_machine.handle_state_changes(ctx, [pr], ReplicaState.OFFLINE)
    assert requests(ds, RequestApi.LEADER_AND_ISR) == {}
    stop = requests(ds, RequestApi.STOP_REPLICA)[2]
    assert stop["topicStates"][0]["partitionStates"][0]["leaderEpoch"] == -2
    um = requests(ds, RequestApi.UPDATE_METADATA)
    for body in um.values():
        ps = body["topicStates"][0]["partitionStates"][0]
        assert (ps["leader"], ps["leaderEpoch"]) == (-2, -2)


def test_offline_replica_without_leadership_sends_update_metadata() -> None:
    ctx = ctx_with()
    pr = PartitionReplica("t", 0, 2)
    ctx.put_replica_state(pr, ReplicaState.NEW)
    new, ds, _ = replica_machine.handle_state_changes(ctx, [pr], ReplicaState.OFFLINE)
    assert set(requests(ds, RequestApi.UPDATE_METADATA)) == {1, 2, 3}
    assert new.replica_state(pr) is ReplicaState.OFFLINE


def test_offline_replica_fenced_by_newer_controller() -> None:
    ctx = ctx_with()
    ctx.put_leadership(TP, LeaderAndIsr(1, (1, 2)), 5)
    pr = PartitionReplica("t", 0, 2)
    ctx.put_replica_state(pr, ReplicaState.ONLINE)
    new, _, failures = replica_machine.handle_state_changes(ctx, [pr], ReplicaState.OFFLINE)
    assert "another controller" in failures[0].reason and new.replica_state(pr) is ReplicaState.ONLINE


def test_deletion_started_sends_stop_replica_with_delete() -> None:
    ctx = ctx_with(lai=LeaderAndIsr(1, (1, 2)))
    pr = PartitionReplica("t", 0, 2)
    ctx.put_replica_state(pr, ReplicaState.OFFLINE)
    _, ds, _ = replica_machine.handle_state_changes(ctx, [pr], ReplicaState.DELETION_STARTED)
    ps = requests(ds, RequestApi.STOP_REPLICA)[2]["topicStates"][0]["partitionStates"][0]
    assert ps == {"partitionIndex": 0, "leaderEpoch": 0, "deletePartition": True}


def test_requests_to_dead_brokers_are_dropped() -> None:
    ctx = ctx_with(brokers=(1,), lai=LeaderAndIsr(1, (1, 2)))
    pr = PartitionReplica("t", 0, 2)
    ctx.put_replica_state(pr, ReplicaState.OFFLINE)
    _, ds, _ = replica_machine.handle_state_changes(ctx, [pr], ReplicaState.DELETION_STARTED)
    assert ds == []
