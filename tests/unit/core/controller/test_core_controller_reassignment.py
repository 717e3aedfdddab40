"""KIP-455 reassignment: the seed walk {1,2,3} -> {4,5,6} and the KAFKA-42 controller-failover cases."""

from __future__ import annotations

import json

import pytest
from core_support import Cluster

from core.decisions import AdminResult, AdminStatus, Decision, ZkWrite
from core.events import BrokerFailure, CancelReassignment, CreateTopic, ReassignPartitions
from core.kafka.requests import RequestApi
from core.kafka.zkdata import REASSIGN_PARTITIONS, encode_reassignment
from core.model import PartitionReplica, PartitionTarget, ReplicaAssignment, TopicPartition
from core.states import ReplicaState

pytestmark = pytest.mark.unit

TP = TopicPartition("t", 0)
STATE = "/brokers/topics/t/partitions/0/state"


def _cluster() -> Cluster:
    c = Cluster.start([1, 2, 3, 4, 5, 6])
    c.run(CreateTopic("create", "t", replica_assignment=((1, 2, 3),), partitions=1, replication_factor=3))
    return c


def _walk(c: Cluster) -> tuple[tuple[int, ...], int, tuple[int, ...]]:
    """(AR, leader, ISR) as ZooKeeper holds them."""
    topic = json.loads(c.zk.get("/brokers/topics/t") or "{}")
    state = json.loads(c.zk.get(STATE) or "{}")
    return tuple(topic["partitions"]["0"]), state["leader"], tuple(state["isr"])


def _admin(c: Cluster) -> list[AdminResult]:
    return [d for d in c.decisions if isinstance(d, AdminResult)]


def test_seed_walk_ar_leader_isr_step_by_step() -> None:
    c = _cluster()
    assert _walk(c) == ((1, 2, 3), 1, (1, 2, 3))  # initial state
    c.run(ReassignPartitions("r", (PartitionTarget("t", 0, (4, 5, 6)),)))
    ar, leader, isr = _walk(c)
    assert set(ar) == {1, 2, 3, 4, 5, 6} and (leader, isr) == (1, (1, 2, 3))
    topic = json.loads(c.zk.get("/brokers/topics/t") or "")
    assert topic["adding_replicas"] == {"0": [4, 5, 6]} and topic["removing_replicas"] == {"0": [1, 2, 3]}
    assert [a.status for a in _admin(c)] == [AdminStatus.IN_PROGRESS]
    # new replicas got LeaderAndIsr with isNew, everybody got the new RS
    lisr4 = c.requests(RequestApi.LEADER_AND_ISR, 4)[0].body_json()
    assert lisr4["topicStates"][0]["partitionStates"][0]["isNew"] is True
    # the leader brings the new replicas into the ISR: step 2 of the walk
    before = len(c.zk.history)
    c.catch_up(TP)
    writes = [w for w in c.zk.history[before:] if w.path == STATE]
    walk = [(json.loads(w.data or "")["leader"], tuple(json.loads(w.data or "")["isr"])) for w in writes]
    assert walk[0] == (1, (1, 2, 3, 4, 5, 6))  # step 2 (AlterPartition)
    assert walk[1] == (4, (1, 2, 3, 4, 5, 6))  # step 7 (leader moved into RAR)
    assert walk[-1] == (4, (4, 5, 6))  # step 8 (old replicas out of the ISR)
    assert _walk(c) == ((4, 5, 6), 4, (4, 5, 6))  # step 10
    # RS = TRS is the last topic znode write
    topic_writes = [w for w in c.zk.history[before:] if w.path == "/brokers/topics/t"]
    assert json.loads(topic_writes[-1].data or "")["partitions"] == {"0": [4, 5, 6]}
    assert c.ctx.assignment(TP) == ReplicaAssignment((4, 5, 6))
    assert TP not in c.ctx.partitions_being_reassigned
    for r in (1, 2, 3):
        assert c.ctx.replica_state(PartitionReplica("t", 0, r)) is ReplicaState.NON_EXISTENT
    stops = {r.broker_id: r.body_json() for r in c.requests(RequestApi.STOP_REPLICA)}
    assert set(stops) == {1, 2, 3}
    assert all(s["topicStates"][0]["partitionStates"][0]["deletePartition"] for s in stops.values())
    assert [(a.request_id, a.status) for a in _admin(c)] == [("r", AdminStatus.OK)]


@pytest.mark.parametrize("fail_after", [0, 1, 2])
def test_failover_between_each_step_resumes_and_finishes(fail_after: int) -> None:
    """KAFKA-42 cases 1-5: a new controller (snapshot of the writes so far) after each step finishes."""
    c = _cluster()
    if fail_after == 0:
        c.failover()
    c.run(ReassignPartitions("r", (PartitionTarget("t", 0, (4, 5, 6)),)))
    if fail_after == 1:
        c.failover()
        assert TP in c.ctx.partitions_being_reassigned
        assert c.ctx.assignment(TP).target_replicas == (4, 5, 6)
    c.catch_up(TP)
    if fail_after == 2:
        c.failover()
    assert _walk(c) == ((4, 5, 6), 4, (4, 5, 6))
    assert c.ctx.assignment(TP) == ReplicaAssignment((4, 5, 6))
    assert not c.ctx.partitions_being_reassigned


@pytest.mark.parametrize("cut", range(7))
def test_failover_after_any_prefix_of_the_writes(cut: int) -> None:
    """Crash in the middle of a step: only the first ``cut`` ZooKeeper writes of the completing step
    landed. A new controller reading that ZooKeeper resumes and finishes the reassignment."""
    c = _cluster()
    c.run(ReassignPartitions("r", (PartitionTarget("t", 0, (4, 5, 6)),)))
    # compute the completing step's writes without applying them
    from core.controller import step
    from core.events import AlterPartition

    li = c.ctx.leadership(TP)
    assert li is not None
    lai = li.leader_and_isr
    ev = AlterPartition(
        1, c.ctx.live_brokers[1].epoch, "t", 0, lai.leader_epoch, lai.partition_epoch, (1, 2, 3, 4, 5, 6)
    )
    _, ds = step(c.state, [ev])
    writes = [d for d in ds if isinstance(d, ZkWrite)]
    assert len(writes) == 6  # ISR expansion, leader move, three ISR shrinks, RS = TRS
    c.zk.apply(writes[:cut])
    c.failover()
    # the new controller may need the leader to report the ISR again
    if c.ctx.partitions_being_reassigned:
        c.catch_up(TP)
    assert _walk(c) == ((4, 5, 6), 4, (4, 5, 6))
    assert not c.ctx.partitions_being_reassigned


def test_legacy_admin_path_is_resumed_and_deleted() -> None:
    """KAFKA-42 case 1: the admin path is written but the controller died before acting on it."""
    c = _cluster()
    c.zk.nodes[REASSIGN_PARTITIONS] = (encode_reassignment([PartitionTarget("t", 0, (4, 5, 6))]), 0)
    c.failover()
    assert TP in c.ctx.partitions_being_reassigned
    assert REASSIGN_PARTITIONS in c.zk.nodes
    c.catch_up(TP)
    assert _walk(c) == ((4, 5, 6), 4, (4, 5, 6))
    assert REASSIGN_PARTITIONS not in c.zk.nodes


def test_legacy_admin_path_already_complete() -> None:
    """KAFKA-42 case 5: AR = RAR was written but the admin path still lists the partition."""
    c = _cluster()
    c.zk.nodes[REASSIGN_PARTITIONS] = (encode_reassignment([PartitionTarget("t", 0, (1, 2, 3))]), 0)
    c.failover()
    assert not c.ctx.partitions_being_reassigned
    assert REASSIGN_PARTITIONS not in c.zk.nodes


def test_leader_already_in_target() -> None:
    c = _cluster()
    c.run(ReassignPartitions("r", (PartitionTarget("t", 0, (1, 4)),)))
    epoch_before = c.leader_and_isr(TP).leader_epoch
    c.catch_up(TP)
    lai = c.ctx.leader_and_isr(TP)
    assert lai is not None and lai.leader == 1 and set(lai.isr) == {1, 4}
    assert lai.leader_epoch > epoch_before
    assert c.ctx.assignment(TP) == ReplicaAssignment((1, 4))


def test_dead_leader_in_target_is_reelected() -> None:
    c = _cluster()
    c.run(ReassignPartitions("r", (PartitionTarget("t", 0, (2, 1, 4)),)))
    c.catch_up(TP)
    assert c.ctx.assignment(TP) == ReplicaAssignment((2, 1, 4))


def test_supersede_stops_unneeded_adding_replicas() -> None:
    c = _cluster()
    c.run(ReassignPartitions("r1", (PartitionTarget("t", 0, (4, 5, 6)),)))
    c.run(ReassignPartitions("r2", (PartitionTarget("t", 0, (1, 2, 5)),)))
    ra = c.ctx.assignment(TP)
    assert ra.origin_replicas == (1, 2, 3) and ra.target_replicas == (1, 2, 5)
    assert 4 not in ra.replicas and 6 not in ra.replicas
    assert {r.broker_id for r in c.requests(RequestApi.STOP_REPLICA)} == {4, 6}
    assert [(a.request_id, a.status, a.error) for a in _admin(c)] == [
        ("r2", AdminStatus.IN_PROGRESS, None),
        ("r1", AdminStatus.ERROR, "REASSIGNMENT_SUPERSEDED"),  # never "completed"
    ]
    c.catch_up(TP)
    assert c.ctx.assignment(TP) == ReplicaAssignment((1, 2, 5))


def test_cancel_reverts_to_origin() -> None:
    c = _cluster()
    c.run(ReassignPartitions("r1", (PartitionTarget("t", 0, (4, 5, 6)),)))
    c.run(CancelReassignment("c1", (TP,)))
    assert c.ctx.assignment(TP) == ReplicaAssignment((1, 2, 3))
    assert not c.ctx.partitions_being_reassigned
    assert _walk(c)[0] == (1, 2, 3)
    statuses = {(a.request_id, a.status) for a in _admin(c)}
    assert ("c1", AdminStatus.OK) in statuses and ("r1", AdminStatus.ERROR) in statuses  # r1 was cancelled


def test_cancel_without_reassignment() -> None:
    c = _cluster()
    c.run(CancelReassignment("c1", (TP, TopicPartition("nope", 0))))
    (res,) = _admin(c)
    assert res.status is AdminStatus.ERROR
    details = res.details_json()["partitions"]
    assert details["t-0"]["error"] == "NO_REASSIGNMENT_IN_PROGRESS"
    assert details["nope-0"]["error"] == "UNKNOWN_TOPIC_OR_PARTITION"


@pytest.mark.parametrize(
    ("replicas", "error"),
    [
        ((1, 1), "INVALID_REPLICA_ASSIGNMENT"),
        ((1, 9), "INVALID_REPLICA_ASSIGNMENT"),
    ],
)
def test_invalid_reassignments(replicas: tuple[int, ...], error: str) -> None:
    c = _cluster()
    c.run(ReassignPartitions("r", (PartitionTarget("t", 0, replicas),)))
    (res,) = _admin(c)
    assert (res.status, res.error) == (AdminStatus.ERROR, error)
    assert not c.ctx.partitions_being_reassigned


def test_reassignment_to_dead_broker_and_unknown_partition() -> None:
    c = _cluster()
    c.run(BrokerFailure(6))
    c.run(ReassignPartitions("r", (PartitionTarget("t", 0, (4, 6)), PartitionTarget("t", 7, (1,)))))
    (res,) = _admin(c)
    details = res.details_json()["partitions"]
    assert details["t-0"]["error"] == "INVALID_REPLICA_ASSIGNMENT"
    assert details["t-7"]["error"] == "UNKNOWN_TOPIC_OR_PARTITION"


def test_reorder_only_completes_at_once() -> None:
    c = _cluster()
    c.run(ReassignPartitions("r", (PartitionTarget("t", 0, (3, 2, 1)),)))
    assert c.ctx.assignment(TP) == ReplicaAssignment((3, 2, 1))
    assert [a.status for a in _admin(c)] == [AdminStatus.OK]


def test_new_broker_startup_resumes_reassignment() -> None:
    from core_support import startup

    c = _cluster()
    c.run(ReassignPartitions("r", (PartitionTarget("t", 0, (1, 2, 4)),)))
    c.run(BrokerFailure(4))
    c.run(startup(4, epoch=200))
    c.catch_up(TP)
    assert c.ctx.assignment(TP) == ReplicaAssignment((1, 2, 4))


def _takeover(c: Cluster) -> list[Decision]:
    """A new controller on the same bucket state (as a takeover on a used checkpoint: the pending admin
    requests are kept), its context rebuilt from the fake ZooKeeper (:meth:`Cluster.failover` starts afresh)."""
    from core.events import ControllerFailover
    from core.kafka.zksnapshot import snapshot_from_znodes
    from core.model import Broker

    c.controller_epoch += 1
    brokers = [
        Broker(b.id, b.epoch, b.rack, b.endpoints) for b in sorted(c.ctx.live_brokers.values(), key=lambda b: b.id)
    ]
    return c.run(
        ControllerFailover(0, snapshot_from_znodes(c.zk.nodes, brokers, c.controller_epoch, c.controller_epoch - 1))
    )


def test_failover_mid_reassignment_reports_kafkas_online_to_new_failure_and_finishes() -> None:
    """The long run's ``OnlineReplica -> NewReplica`` failures (issue 41), small: a controller failover while a
    reassignment waits for its adding replica. Kafka 3.9's ``onControllerFailover`` does the same:
    ``ReplicaStateMachine.startup`` puts every replica of RS (ORS + TRS) on a live broker in OnlineReplica, then
    ``maybeResumeReassignments`` runs ``onPartitionReassignment``, whose step A2 moves AR to NewReplica —
    invalid from OnlineReplica, so logged as a failed state change and the replica stays Online. Step A1 has
    already sent the adding replica its LeaderAndIsr (new leader epoch, RS with AR and RR), so nothing is lost:
    the reassignment completes once the ISR catches up, with no other failure."""
    from core.decisions import StateChangeFailure

    c = Cluster.start([1, 2, 3, 4])
    c.run(CreateTopic("create", "t", replica_assignment=((1, 2, 3),), partitions=1, replication_factor=3))
    c.run(ReassignPartitions("r", (PartitionTarget("t", 0, (1, 2, 4)),)))
    li = c.ctx.leadership(TP)
    assert li is not None
    epoch_before = li.leader_and_isr.leader_epoch
    ds = _takeover(c)
    failures = [d for d in ds if isinstance(d, StateChangeFailure)]
    assert failures == [
        StateChangeFailure(
            "[Topic=t,Partition=0,Replica=4]",
            "OnlineReplica",
            "NewReplica",
            "Invalid state transition for replica 4 of partition t-0 from OnlineReplica to NewReplica",
        )
    ]
    assert c.ctx.replica_state(PartitionReplica("t", 0, 4)) is ReplicaState.ONLINE
    # A1 of the resumed reassignment: the adding replica's last LeaderAndIsr of the failover has the bumped
    # epoch and the reassignment's RS, AR and RR
    sent = c.requests(RequestApi.LEADER_AND_ISR, 4)[-1].body_json()["topicStates"][0]["partitionStates"][0]
    assert sent["leaderEpoch"] == epoch_before + 1
    assert (sorted(sent["replicas"]), sent["addingReplicas"], sent["removingReplicas"]) == ([1, 2, 3, 4], [4], [3])
    ds = c.catch_up(TP)
    assert not [d for d in ds if isinstance(d, StateChangeFailure)]
    assert c.ctx.assignment(TP) == ReplicaAssignment((1, 2, 4))
    assert not c.ctx.partitions_being_reassigned
    assert [(a.request_id, a.status) for a in _admin(c)] == [("r", AdminStatus.OK)]
