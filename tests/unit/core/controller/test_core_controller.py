"""Controller operations through ``step``: topics, brokers, shutdown, elections, AlterPartition, failover."""

from __future__ import annotations

import json
from typing import Any

import pytest
from core_support import Cluster, startup

from core.codec.decisions import decision_to_json
from core.codec.events import event_from_json, event_to_json
from core.context_codec import context_to_dict
from core.controller import (
    ControllerConfig,
    ControllerState,
    brokers_over_imbalance,
    imbalance,
    metrics,
    step,
)
from core.controller.metrics import BUCKET_GAUGES, KAFKA_CONTROLLER_GAUGES
from core.decisions import AdminResult, AdminStatus, ZkOp, ZkWrite
from core.events import (
    AlterPartition,
    AlterTopicConfig,
    AutoRebalanceTick,
    BrokerFailure,
    ControlledShutdown,
    CreatePartitions,
    CreateTopic,
    DeleteTopic,
    ElectLeaders,
    Event,
    LeaderAndIsrResponse,
    LogDirFailure,
    PartitionError,
    StopReplicaResponse,
    Tick,
)
from core.kafka.requests import RequestApi
from core.model import ElectionType, PartitionReplica, TopicPartition
from core.states import PartitionState, ReplicaState

pytestmark = pytest.mark.unit


def admin(c: Cluster) -> list[AdminResult]:
    return [d for d in c.decisions if isinstance(d, AdminResult)]


def one_admin(c: Cluster) -> AdminResult:
    (r,) = admin(c)
    return r


def tp(t: str, p: int) -> TopicPartition:
    return TopicPartition(t, p)


def make(brokers: tuple[int, ...] = (1, 2, 3), config: ControllerConfig | None = None) -> Cluster:
    return Cluster.start(list(brokers), config)


def create(c: Cluster, topic: str, assignment: tuple[tuple[int, ...], ...], **configs: str) -> None:
    c.create_topic(topic, assignment, **configs)
    assert one_admin(c).status is AdminStatus.OK


# --------------------------------------------------------------------------- topics


def test_create_topic_with_default_placement() -> None:
    c = make()
    c.run(CreateTopic("r", "t", 6, 2))
    res = one_admin(c)
    assert res.status is AdminStatus.OK
    parts = res.details_json()["partitions"]
    assert len(parts) == 6 and all(len(r) == 2 for r in parts.values())
    assert all(c.ctx.partition_state(tp("t", p)) is PartitionState.ONLINE for p in range(6))
    assert c.zk.get("/config/topics/t") == '{"version":1,"config":{}}'
    topic = json.loads(c.zk.get("/brokers/topics/t") or "")
    assert topic["version"] == 3 and len(topic["topic_id"]) == 22
    # deterministic: the same command on the same cluster gives the same placement
    c2 = make()
    c2.run(CreateTopic("r", "t", 6, 2))
    assert one_admin(c2).details == res.details


@pytest.mark.parametrize(
    ("cmd", "error"),
    [
        (CreateTopic("r", "t", 1, 4), "INVALID_REPLICATION_FACTOR"),
        (CreateTopic("r", "t", 1, 1, ((1, 1),)), "INVALID_REPLICA_ASSIGNMENT"),
        (CreateTopic("r", "t", 1, 1, configs=(("unclean.leader.election.enable", "maybe"),)), "INVALID_CONFIG"),
        (CreateTopic("r", "existing", 1, 1), "TOPIC_ALREADY_EXISTS"),
        (DeleteTopic("r", "nope"), "UNKNOWN_TOPIC_OR_PARTITION"),
        (CreatePartitions("r", "nope", 3), "UNKNOWN_TOPIC_OR_PARTITION"),
        (CreatePartitions("r", "existing", 1), "INVALID_PARTITIONS"),
        (CreatePartitions("r", "existing", 3, ((1,),)), "INVALID_REPLICA_ASSIGNMENT"),
        (CreatePartitions("r", "existing", 2, ((9, 1),)), "INVALID_REPLICA_ASSIGNMENT"),
        (AlterTopicConfig("r", "nope", (("a", "b"),)), "UNKNOWN_TOPIC_OR_PARTITION"),
        (AlterTopicConfig("r", "existing", (("unclean.leader.election.enable", "x"),)), "INVALID_CONFIG"),
    ],
)
def test_impossible_commands_get_errors(cmd: Event, error: str) -> None:
    c = make()
    create(c, "existing", ((1, 2),))
    c.run(cmd)
    res = one_admin(c)
    assert (res.status, res.error) == (AdminStatus.ERROR, error)


def test_create_partitions() -> None:
    c = make()
    create(c, "t", ((1, 2), (2, 3)))
    c.run(CreatePartitions("r", "t", 4))
    assert one_admin(c).status is AdminStatus.OK
    assert len(c.ctx.partitions_for_topic("t")) == 4
    assert json.loads(c.zk.get("/brokers/topics/t") or "")["partitions"].keys() == {"0", "1", "2", "3"}
    assert c.ctx.partition_state(tp("t", 3)) is PartitionState.ONLINE
    c.run(CreatePartitions("r2", "t", 5, ((3, 1),)))
    assert c.ctx.replicas(tp("t", 4)) == (3, 1)


def test_topic_deletion_full_cycle() -> None:
    c = make()
    create(c, "t", ((1, 2), (2, 3)))
    c.run(DeleteTopic("d", "t"))
    assert one_admin(c).status is AdminStatus.IN_PROGRESS
    assert "/admin/delete_topics/t" in c.zk.nodes
    assert c.ctx.partition_state(tp("t", 0)) is PartitionState.NON_EXISTENT
    um = c.requests(RequestApi.UPDATE_METADATA, 1)[0].body_json()
    ps = um["topicStates"][0]["partitionStates"][0]
    assert (ps["leader"], ps["leaderEpoch"]) == (-2, -2)
    assert metrics(c.state)["TopicsToDeleteCount"] == 1
    first = c.decisions
    c.run(DeleteTopic("d2", "t"))
    assert one_admin(c).status is AdminStatus.IN_PROGRESS
    c.decisions = first
    c.ack_stop_replicas()
    assert "t" not in c.ctx.topic_partitions
    assert not any(k.startswith("/brokers/topics/t") for k in c.zk.nodes)
    assert "/admin/delete_topics/t" not in c.zk.nodes and "/config/topics/t" not in c.zk.nodes
    assert not any(pr.topic == "t" for pr in c.ctx.replica_states)
    assert {(r.request_id, r.status) for r in admin(c)} == {("d", AdminStatus.OK), ("d2", AdminStatus.OK)}


def test_deletion_waits_for_dead_replicas_and_retries_failures() -> None:
    c = make()
    create(c, "t", ((1, 2),))
    c.run(BrokerFailure(2))
    c.run(DeleteTopic("d", "t"))
    assert c.ctx.replica_state(PartitionReplica("t", 0, 2)) is ReplicaState.DELETION_INELIGIBLE
    assert "t" in c.ctx.topics_ineligible_for_deletion
    # broker 1 fails its deletion
    assert c.ctx.replica_state(PartitionReplica("t", 0, 1)) is ReplicaState.DELETION_STARTED
    c.run(StopReplicaResponse(1, (PartitionError("t", 0, 56),)))
    # failed, then moved back to Offline for a retry once the topic is eligible again
    assert c.ctx.replica_state(PartitionReplica("t", 0, 1)) is ReplicaState.OFFLINE
    assert metrics(c.state)["ReplicasToDeleteCount"] == 2
    c.run(Tick(1))
    c.run(startup(2, epoch=300))
    assert c.ctx.replica_state(PartitionReplica("t", 0, 2)) is ReplicaState.DELETION_STARTED
    c.ack_stop_replicas()
    assert "t" not in c.ctx.topic_partitions


def test_deletion_disabled_and_reassignment_blocks_deletion() -> None:
    c = make(config=ControllerConfig(delete_topic_enable=False))
    create(c, "t", ((1,),))
    c.run(DeleteTopic("d", "t"))
    assert one_admin(c).error == "TOPIC_DELETION_DISABLED"


def test_alter_config_unclean_triggers_election() -> None:
    c = make()
    create(c, "t", ((1, 2),))
    c.run(BrokerFailure(2))
    c.run(BrokerFailure(1))
    assert c.ctx.partition_state(tp("t", 0)) is PartitionState.OFFLINE
    lai = c.ctx.leader_and_isr(tp("t", 0))
    assert lai is not None and lai.leader == -1 and lai.isr == (1,)
    c.run(startup(2, epoch=300))
    assert c.ctx.partition_state(tp("t", 0)) is PartitionState.OFFLINE  # 2 is not in the ISR
    c.run(AlterTopicConfig("a", "t", (("unclean.leader.election.enable", "true"),)))
    assert one_admin(c).status is AdminStatus.OK
    lai = c.ctx.leader_and_isr(tp("t", 0))
    assert lai is not None and lai.leader == 2 and lai.isr == (2,) and lai.leader_recovery_state == 1
    assert json.loads(c.zk.get("/config/topics/t") or "")["config"] == {"unclean.leader.election.enable": "true"}


# --------------------------------------------------------------------------- brokers


def test_broker_failure_and_startup() -> None:
    c = make()
    create(c, "t", ((1, 2), (2, 3), (3, 1)))
    c.run(BrokerFailure(1))
    assert c.leader_and_isr(tp("t", 0)).leader == 2
    assert c.leader_and_isr(tp("t", 2)).isr == (3,)
    assert c.requests(broker=1) == []
    assert c.ctx.replica_state(PartitionReplica("t", 0, 1)) is ReplicaState.OFFLINE
    c.run(startup(1, epoch=500))
    assert c.ctx.replica_state(PartitionReplica("t", 0, 1)) is ReplicaState.ONLINE
    um = c.requests(RequestApi.UPDATE_METADATA, 1)[0].body_json()
    assert len(um["topicStates"][0]["partitionStates"]) == 3
    assert {b["id"] for b in um["liveBrokers"]} == {1, 2, 3}
    assert set(c.requests(RequestApi.LEADER_AND_ISR)) != set()


def test_bounce_stale_and_duplicate_registrations() -> None:
    c = make()
    create(c, "t", ((1, 2),))
    epoch = c.ctx.live_brokers[1].epoch
    c.run(startup(1, epoch=100))  # same epoch: nothing
    assert c.decisions == []
    c.run(BrokerFailure(1, epoch - 1))  # stale failure: nothing
    assert 1 in c.ctx.live_brokers
    c.run(startup(1, epoch=400))  # newer epoch: bounce = failure then startup
    assert c.ctx.live_brokers[1].epoch == 401
    lai = c.ctx.leader_and_isr(tp("t", 0))
    assert lai is not None and lai.leader == 2 and lai.isr == (2,)
    c.run(BrokerFailure(9))
    assert c.decisions == []


def test_broker_failure_without_changes_sends_update_metadata() -> None:
    c = make()
    c.run(BrokerFailure(3))
    assert [r.recipients() for r in c.requests(RequestApi.UPDATE_METADATA)] == [(1, 2)]  # one request, two brokers


def test_controlled_shutdown() -> None:
    c = make()
    create(c, "t", ((1, 2), (2, 1)))
    create(c, "s", ((1,),))
    c.run(ControlledShutdown(1, c.ctx.live_brokers[1].epoch))
    (resp,) = c.requests(RequestApi.CONTROLLED_SHUTDOWN_RESPONSE)
    body = resp.body_json()
    assert body == {"errorCode": 0, "remainingPartitions": [{"topicName": "s", "partitionIndex": 0}]}
    assert c.leader_and_isr(tp("t", 0)).leader == 2
    assert c.leader_and_isr(tp("t", 1)).isr == (2,)
    assert 1 in c.ctx.shutting_down_broker_ids
    c.run(ControlledShutdown(1, 0))
    assert c.requests(RequestApi.CONTROLLED_SHUTDOWN_RESPONSE)[0].body_json()["errorCode"] == 77
    c.run(ControlledShutdown(9, 0))
    assert c.requests(RequestApi.CONTROLLED_SHUTDOWN_RESPONSE)[0].body_json()["errorCode"] == 8


@pytest.mark.parametrize("deregistered", [True, False], ids=["failure-then-startup", "bounce"])
def test_broker_back_from_controlled_shutdown_within_one_step_is_started_not_stopped(deregistered: bool) -> None:
    """Issue 41: broker 2 shut down cleanly under a controller that took over mid-shutdown; it deregistered
    and registered again before the new controller's next micro-batch, so one step held its failure (or,
    seen between two reads, a bounce) and its startup. Kafka sends the failure's requests before the
    broker is registered again and drops those to an unregistered broker (``removeBroker``): the restarted
    broker gets its replicas' LeaderAndIsr, never the StopReplica of its previous incarnation's exit."""
    c = make((2, 3, 4, 5))
    create(c, "t", ((2, 3, 4), (2, 4, 5)))
    c.failover(7)  # the controller replaced on the same cluster
    old = c.ctx.live_brokers[2].epoch
    c.run(ControlledShutdown(2, old))
    assert all(c.leader_and_isr(tp("t", p)).leader != 2 for p in (0, 1))
    back = startup(2, epoch=900)
    c.run(*([BrokerFailure(2, old)] if deregistered else []), back)
    assert c.requests(RequestApi.STOP_REPLICA, 2) == []
    (lisr,) = c.requests(RequestApi.LEADER_AND_ISR, 2)
    states = [s for ts in lisr.body_json()["topicStates"] for s in ts["partitionStates"]]
    assert sorted(s["partitionIndex"] for s in states) == [0, 1]
    assert all(s["leader"] not in (2, -1) for s in states) and lisr.body_json()["brokerEpoch"] == back.broker_epoch
    assert 2 not in c.ctx.shutting_down_broker_ids
    assert all(c.ctx.replica_state(PartitionReplica("t", p, 2)) is ReplicaState.ONLINE for p in (0, 1))
    for p in (0, 1):  # the follower catches up and its leader adds it back
        c.catch_up(tp("t", p))
        assert 2 in c.leader_and_isr(tp("t", p)).isr


def test_log_dir_failure() -> None:
    c = make()
    create(c, "t", ((1, 2),))
    c.run(LogDirFailure(1))
    assert {r.broker_id for r in c.requests(RequestApi.LEADER_AND_ISR)} == {1}
    c.run(LeaderAndIsrResponse(1, (PartitionError("t", 0, 56), PartitionError("x", 0, 0))))
    lai = c.ctx.leader_and_isr(tp("t", 0))
    assert lai is not None and lai.leader == 2 and lai.isr == (2,)
    c.run(LeaderAndIsrResponse(1, (PartitionError("t", 0, 0),)))
    assert not c.ctx.replicas_on_offline_dirs
    c.run(LeaderAndIsrResponse(1, (), error_code=11))
    assert c.decisions == []


# --------------------------------------------------------------------------- elections


def test_preferred_and_unclean_elections_on_demand() -> None:
    c = make()
    create(c, "t", ((1, 2), (2, 1)))
    c.run(BrokerFailure(1))
    c.run(startup(1, epoch=500))
    c.catch_up(tp("t", 0))
    c.run(ElectLeaders("e", ElectionType.PREFERRED, (tp("t", 0), tp("t", 1), tp("x", 0))))
    details = one_admin(c).details_json()["partitions"]
    assert details["t-0"]["error"] == "NONE" and details["t-1"]["error"] == "ELECTION_NOT_NEEDED"
    assert details["x-0"]["error"] == "UNKNOWN_TOPIC_OR_PARTITION"
    assert c.leader_and_isr(tp("t", 0)).leader == 1
    c.run(ElectLeaders("e2", ElectionType.UNCLEAN, (tp("t", 0),)))
    assert one_admin(c).details_json()["partitions"]["t-0"]["error"] == "ELECTION_NOT_NEEDED"


def test_preferred_election_not_available_and_unclean_election() -> None:
    c = make()
    create(c, "t", ((1, 2),))
    c.run(BrokerFailure(1))
    c.run(ElectLeaders("e", ElectionType.PREFERRED, (tp("t", 0),)))
    assert one_admin(c).error == "PREFERRED_LEADER_NOT_AVAILABLE"
    c.run(BrokerFailure(2))
    c.run(startup(1, epoch=500))  # 1 is not in the ISR any more
    assert c.leader_and_isr(tp("t", 0)).leader == -1
    c.run(ElectLeaders("u", ElectionType.UNCLEAN, ()))
    assert one_admin(c).status is AdminStatus.OK
    assert c.leader_and_isr(tp("t", 0)).leader == 1
    c.run(BrokerFailure(1))
    c.run(ElectLeaders("u2", ElectionType.UNCLEAN, (tp("t", 0),)))
    assert one_admin(c).error == "ELIGIBLE_LEADERS_NOT_AVAILABLE"


def test_auto_rebalance() -> None:
    c = make()
    create(c, "t", ((1, 2), (1, 2), (2, 1)))
    c.run(BrokerFailure(1))
    c.run(startup(1, epoch=500))
    for p in (0, 1):
        c.catch_up(tp("t", p))
    counts = imbalance(c.state)
    assert counts == {1: (2, 2), 2: (0, 1)}
    assert brokers_over_imbalance(counts, 10) == (1,)
    c.run(AutoRebalanceTick(brokers_over_imbalance(counts, 10)))
    assert c.leader_and_isr(tp("t", 0)).leader == 1
    assert metrics(c.state)["PreferredReplicaImbalanceCount"] == 0
    c.run(AutoRebalanceTick(()))
    assert c.decisions == []


# --------------------------------------------------------------------------- AlterPartition


def _alter(c: Cluster, **kw: object) -> dict[str, Any]:
    """The controller's AlterPartition answer (its JSON body) to the leader's request for "t"-0, with ``kw`` changed."""
    lai = c.ctx.leader_and_isr(tp("t", 0))
    assert lai is not None
    args: dict[str, object] = {
        "broker_id": lai.leader,
        "broker_epoch": c.ctx.live_brokers[lai.leader].epoch,
        "topic": "t",
        "partition": 0,
        "leader_epoch": lai.leader_epoch,
        "partition_epoch": lai.partition_epoch,
        "new_isr": (1,),
    }
    args.update(kw)
    c.run(AlterPartition(**args))  # type: ignore[arg-type]
    (resp,) = c.requests(RequestApi.ALTER_PARTITION_RESPONSE)
    return resp.body_json()


def _code(body: dict[str, Any]) -> int:
    return int(body["topics"][0]["partitions"][0]["errorCode"])


def test_alter_partition_success_and_idempotence() -> None:
    c = make()
    create(c, "t", ((1, 2, 3),))
    body = _alter(c, new_isr=(1, 2))
    assert _code(body) == 0
    lai = c.ctx.leader_and_isr(tp("t", 0))
    assert lai is not None and lai.isr == (1, 2) and lai.leader_epoch == 0 and lai.partition_epoch == 1
    assert [r.recipients() for r in c.requests(RequestApi.UPDATE_METADATA)] == [(1, 2, 3)]
    w = next(d for d in c.decisions if isinstance(d, ZkWrite))
    assert (w.op, w.expected_version) == (ZkOp.SET, 0)
    body = _alter(c, new_isr=(1, 2), partition_epoch=0)  # a retry of the same change
    assert _code(body) == 0


@pytest.mark.parametrize(
    ("kw", "code"),
    [
        ({"leader_epoch": 5}, 41),
        ({"partition_epoch": 5}, 41),
        ({"new_isr": (1, 3), "partition_epoch": -1}, 95),
        ({"broker_id": 2, "broker_epoch": 102}, 6),
        ({"new_isr": (2, 3)}, 42),
        ({"new_isr": (1, 7)}, 42),
        ({"leader_recovery_state": 1}, 42),
        ({"topic": "nope"}, 3),
    ],
)
def test_alter_partition_errors(kw: dict[str, object], code: int) -> None:
    c = make()
    create(c, "t", ((1, 2, 3),))
    create(c, "nope2", ((1,),))
    if kw.get("partition_epoch") == -1:
        _alter(c, new_isr=(1, 2))
        kw = {**kw, "partition_epoch": 0}
    assert _code(_alter(c, **kw)) == code


def test_alter_partition_fenced_and_ineligible() -> None:
    c = make()
    create(c, "t", ((1, 2, 3),))
    c.run(BrokerFailure(3))
    # by name (AlterPartition v0/v1) Kafka answers OPERATION_NOT_ATTEMPTED; by topic id, INELIGIBLE_REPLICA
    assert _code(_alter(c, new_isr=(1, 2, 3))) == 55
    c.run(BrokerFailure(1))
    lai = c.ctx.leader_and_isr(tp("t", 0))
    assert lai is not None
    assert _alter(c, broker_id=1, broker_epoch=101, leader_epoch=lai.leader_epoch)["errorCode"] == 77
    body = _alter(c, leader_epoch=lai.leader_epoch - 1)
    assert _code(body) == 74


def test_alter_partition_answer_echoes_the_correlation_id() -> None:
    c = make()
    create(c, "t", ((1, 2, 3),))
    ok = _alter(c, new_isr=(1, 2), correlation_id=77)
    fenced = _alter(c, new_isr=(1,), leader_epoch=5, correlation_id=78)
    plain = _alter(c, new_isr=(1, 2))
    assert [_code(b) for b in (ok, fenced, plain)] == [0, 41, 0]
    entries = [b["topics"][0]["partitions"][0] for b in (ok, fenced, plain)]
    assert [e.get("correlationId") for e in entries] == [77, 78, None]
    ev = AlterPartition(1, 101, "t", 0, 0, 0, (1,), correlation_id=77)
    assert event_from_json(event_to_json(ev)) == ev


# --------------------------------------------------------------------------- failover, state


def test_failover_initialises_states_and_elects() -> None:
    c = make()
    create(c, "t", ((1, 2), (2, 3)))
    c.zk.nodes["/brokers/topics/u"] = (
        '{"version":2,"partitions":{"0":[3,1]},"adding_replicas":{},"removing_replicas":{}}',
        0,
    )
    c.zk.nodes["/admin/preferred_replica_election"] = ('{"version":1,"partitions":[{"topic":"t","partition":0}]}', 0)
    c.zk.nodes["/admin/delete_topics/gone"] = (None, 0)
    c.zk.nodes["/config/topics/t"] = ('{"version":1,"config":{"unclean.leader.election.enable":"true"}}', 0)
    c.run(BrokerFailure(3))
    c.failover()
    assert c.ctx.epoch == 2
    assert c.ctx.partition_state(tp("u", 0)) is PartitionState.ONLINE  # New at failover, then elected
    assert c.leader_and_isr(tp("u", 0)).leader == 1
    assert c.ctx.replica_state(PartitionReplica("u", 0, 3)) is ReplicaState.OFFLINE
    assert c.ctx.unclean_enabled("t")
    assert "/admin/preferred_replica_election" not in c.zk.nodes
    assert "/admin/delete_topics/gone" not in c.zk.nodes
    ums = c.requests(RequestApi.UPDATE_METADATA)
    assert all(r.body_json()["controllerEpoch"] == 2 for r in ums)


def test_failover_with_deletion_disabled_clears_the_queue() -> None:
    c = make(config=ControllerConfig(delete_topic_enable=False))
    create(c, "t", ((1,),))
    c.zk.nodes["/admin/delete_topics/t"] = (None, 0)
    c.failover()
    assert "/admin/delete_topics/t" not in c.zk.nodes and "t" in c.ctx.topic_partitions


def test_failover_resumes_topic_deletion() -> None:
    c = make()
    create(c, "t", ((1, 2),))
    c.run(DeleteTopic("d", "t"))
    c.failover()
    assert "t" in c.ctx.topics_to_be_deleted
    c.ack_stop_replicas()
    assert "t" not in c.ctx.topic_partitions


def test_state_round_trips_through_bytes() -> None:
    c = make()
    create(c, "t", ((1, 2), (2, 3)))
    c.run(BrokerFailure(3))
    from core.events import ReassignPartitions
    from core.model import PartitionTarget

    c.run(ReassignPartitions("r", (PartitionTarget("t", 0, (2, 1)),)))
    c.run(DeleteTopic("d", "t"))
    c.run(LeaderAndIsrResponse(1, (PartitionError("t", 1, 56),)))
    data = c.state.to_bytes()
    back = ControllerState.from_bytes(data)
    assert back.to_bytes() == data
    assert context_to_dict(back.context) == context_to_dict(c.ctx)
    assert back.context.partitions_by_broker == c.ctx.partitions_by_broker
    with pytest.raises(ValueError, match="version"):
        ControllerState.from_dict({"version": 99})


def test_step_does_not_modify_its_input_and_decisions_serialise() -> None:
    c = make()
    before = c.state.to_bytes()
    state, ds = step(c.state, [CreateTopic("r", "t", 2, 2)])
    assert c.state.to_bytes() == before and state.to_bytes() != before
    for d in ds:
        json.loads(decision_to_json(d))


def test_metrics() -> None:
    c = make()
    create(c, "t", ((1, 2), (2, 1)))
    c.run(BrokerFailure(1))
    c.run(BrokerFailure(2))
    m = metrics(c.state)
    assert m["OfflinePartitionsCount"] == 2 and m["GlobalTopicCount"] == 1 and m["GlobalPartitionCount"] == 2


def test_bucket_metrics_carry_every_bucket_gauge() -> None:
    m = metrics(make().state)
    assert set(BUCKET_GAUGES) <= set(m) and set(BUCKET_GAUGES) < set(KAFKA_CONTROLLER_GAUGES)
    assert "ActiveControllerCount" not in m
