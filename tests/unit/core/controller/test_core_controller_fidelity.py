"""Kafka fidelity of the core, with plain values: StopReplica answers for topics whose deletion has not
started, topic creation on unregistered brokers, AlterPartition validation."""

from __future__ import annotations

import json
from typing import Any

import pytest
from core_support import Cluster, startup

from core.codec.events import event_from_json, event_to_json
from core.controller import ControllerConfig
from core.decisions import AdminResult, BrokerRequest, Decision, StateChangeFailure, ZkOp, ZkWrite
from core.errors import FormatError
from core.events import (
    AlterPartition,
    BrokerFailure,
    CreatePartitions,
    CreateTopic,
    DeleteTopic,
    PartitionError,
    ReassignPartitions,
    StopReplicaResponse,
    TopicCreationRefused,
)
from core.kafka.error_codes import KafkaError
from core.kafka.requests import RequestApi
from core.model import PartitionReplica, PartitionTarget, TopicPartition
from core.snapshot import PartitionStateZnode, TopicZnode
from core.states import PartitionState, ReplicaState

pytestmark = pytest.mark.unit


def make(brokers: tuple[int, ...] = (1, 2, 3), config: ControllerConfig | None = None) -> Cluster:
    return Cluster.start(list(brokers), config)


def create(c: Cluster, topic: str, assignment: tuple[tuple[int, ...], ...]) -> list[AdminResult]:
    ds = c.run(CreateTopic(f"create-{topic}", topic, replica_assignment=assignment))
    return [d for d in ds if isinstance(d, AdminResult)]


# ---------------------------------------------------------------- item 5: deletion bookkeeping


def _queued_not_started() -> Cluster:
    """Topic ``t`` queued for deletion while its partition is being reassigned: deletion waits."""
    c = make((1, 2, 3, 4))
    create(c, "t", ((1, 2),))
    c.run(ReassignPartitions("r", (PartitionTarget("t", 0, (3, 4)),)))
    assert TopicPartition("t", 0) in c.ctx.partitions_being_reassigned
    c.run(DeleteTopic("d", "t"))
    assert "t" in c.ctx.topics_to_be_deleted
    assert "t" not in c.ctx.topics_with_deletion_started
    return c


@pytest.mark.parametrize("code", [0, 56], ids=["success", "storage-error"])
def test_stop_replica_answer_for_a_topic_whose_deletion_has_not_started_changes_nothing(code: int) -> None:
    c = _queued_not_started()
    before = {pr: s for pr, s in c.ctx.replica_states.items() if pr.topic == "t"}
    ineligible = set(c.ctx.topics_ineligible_for_deletion)
    ds = c.run(StopReplicaResponse(1, (PartitionError("t", 0, code),)))
    assert not [d for d in ds if isinstance(d, StateChangeFailure)]
    assert {pr: s for pr, s in c.ctx.replica_states.items() if pr.topic == "t"} == before
    assert c.ctx.topics_ineligible_for_deletion == ineligible
    assert c.ctx.replica_state(PartitionReplica("t", 0, 1)) is ReplicaState.ONLINE
    assert not [d for d in ds if isinstance(d, AdminResult)]


def test_stop_replica_answer_for_a_topic_not_queued_changes_nothing() -> None:
    c = make()
    create(c, "u", ((1, 2),))
    ds = c.run(StopReplicaResponse(1, (PartitionError("u", 0, 56),)))
    assert not [d for d in ds if isinstance(d, StateChangeFailure)]
    assert c.ctx.replica_state(PartitionReplica("u", 0, 1)) is ReplicaState.ONLINE


# ---------------------------------------------------------------- item 6: creation on unregistered brokers


def test_create_topic_names_unregistered_brokers_as_kafka_allows() -> None:
    """Kafka's CreateTopics accepts an explicit assignment naming brokers that are not registered: the
    partition gets a leader among the live replicas, or stays New until one registers."""
    c = make((1, 2))
    (res,) = create(c, "t", ((1, 5), (5, 6)))
    assert (res.status.value, res.error) == ("ok", None)
    assert c.ctx.replicas(TopicPartition("t", 0)) == (1, 5)
    lai = c.leader_and_isr(TopicPartition("t", 0))
    assert (lai.leader, lai.isr) == (1, (1,))
    assert "/brokers/topics/t/partitions/0/state" in c.zk.nodes
    # no live replica: no state znode, no leader, no request for it
    assert c.ctx.partition_state(TopicPartition("t", 1)) is PartitionState.NEW
    assert "/brokers/topics/t/partitions/1/state" not in c.zk.nodes
    assert c.ctx.leadership(TopicPartition("t", 1)) is None
    # broker 5 registers: Kafka's onBrokerStartup brings New partitions online
    c.run(startup(5))
    lai = c.leader_and_isr(TopicPartition("t", 1))
    assert (lai.leader, lai.isr) == (5, (5,))
    assert c.ctx.partition_state(TopicPartition("t", 1)) is PartitionState.ONLINE
    assert "/brokers/topics/t/partitions/1/state" in c.zk.nodes


def test_create_partitions_still_refuses_unregistered_brokers() -> None:
    """Kafka's AdminZkClient.createPartitions checks the brokers are registered."""
    c = make((1, 2))
    create(c, "t", ((1, 2),))
    ds = c.run(CreatePartitions("p", "t", 2, ((1, 7),)))
    (res,) = [d for d in ds if isinstance(d, AdminResult)]
    assert res.error == "INVALID_REPLICA_ASSIGNMENT"
    assert "Unknown broker(s) in replica assignment: 7." in res.message


# ---------------------------------------------------------------- item 4: AlterPartition as Kafka validates it


def _cluster_with_t() -> Cluster:
    c = make()
    create(c, "t", ((1, 2, 3),))
    return c


def _propose(c: Cluster, **kw: object) -> tuple[dict[str, Any], list[Decision]]:
    """One AlterPartition for t-0 from its leader (fields overridable); its answer and the decisions."""
    lai = c.leader_and_isr(TopicPartition("t", 0))
    args: dict[str, Any] = {
        "broker_id": lai.leader,
        "broker_epoch": c.ctx.live_brokers[lai.leader].epoch,
        "topic": "t",
        "partition": 0,
        "leader_epoch": lai.leader_epoch,
        "partition_epoch": lai.partition_epoch,
        "new_isr": (1, 2),
    }
    args.update(kw)
    ds = c.run(AlterPartition(**args))
    (answer,) = [d for d in ds if isinstance(d, BrokerRequest) and d.api is RequestApi.ALTER_PARTITION_RESPONSE]
    return answer.body_json(), ds


def _partition_code(body: dict[str, Any]) -> int:
    return int(body["topics"][0]["partitions"][0]["errorCode"])


def _state_writes(ds: list[Decision]) -> list[ZkWrite]:
    return [d for d in ds if isinstance(d, ZkWrite) and d.path.endswith("/state")]


@pytest.mark.parametrize("lrs", [25, 2, -1, 127, -128])
def test_unknown_leader_recovery_state_is_unknown_server_error_and_never_written(lrs: int) -> None:
    """Kafka's ``LeaderRecoveryState.of`` throws for anything but 0 and 1: the whole AlterPartition is
    answered UNKNOWN_SERVER_ERROR and nothing is written."""
    c = _cluster_with_t()
    before = c.ctx.leadership(TopicPartition("t", 0))
    body, ds = _propose(c, leader_recovery_state=lrs)
    assert body["errorCode"] == KafkaError.UNKNOWN_SERVER_ERROR.value == -1
    assert body["topics"] == []
    assert _state_writes(ds) == []
    assert c.ctx.leadership(TopicPartition("t", 0)) == before
    assert f'"leader_recovery_state":{lrs}' not in str(c.zk.nodes)


def test_broker_epoch_minus_one_is_stale_as_in_kafka() -> None:
    """Kafka compares the request's broker epoch with the registered one for equality: -1 is stale."""
    c = _cluster_with_t()
    body, ds = _propose(c, broker_epoch=-1)
    assert (body["errorCode"], body["topics"]) == (KafkaError.STALE_BROKER_EPOCH, [])
    assert _state_writes(ds) == []
    body, _ = _propose(c, broker_epoch=c.ctx.live_brokers[1].epoch + 1)
    assert body["errorCode"] == KafkaError.STALE_BROKER_EPOCH


@pytest.mark.parametrize(
    ("overrides", "code"),
    [
        ({"leader_epoch": -1}, KafkaError.FENCED_LEADER_EPOCH),
        ({"partition_epoch": -1}, KafkaError.INVALID_UPDATE_VERSION),
        ({"leader_epoch": 1}, KafkaError.NOT_CONTROLLER),
        ({"leader_recovery_state": 1}, KafkaError.INVALID_REQUEST),  # RECOVERING with an ISR of two
        ({"leader_recovery_state": 1, "new_isr": (1,)}, KafkaError.INVALID_REQUEST),  # RECOVERED -> RECOVERING
        ({"new_isr": (1, 2, 2)}, KafkaError.INVALID_REQUEST),  # duplicate (KRaft's rule)
        ({"new_isr": (1, -1)}, KafkaError.INVALID_REQUEST),  # not a replica
        ({"new_isr": ()}, KafkaError.INVALID_REQUEST),  # without the leader
    ],
    ids=["old-leader-epoch", "old-partition-epoch", "future-epoch", "recovering-isr", "to-recovering", "dup",
         "negative", "empty"],
)  # fmt: skip
def test_out_of_range_proposals_get_kafkas_answer_and_no_write(overrides: dict[str, Any], code: int) -> None:
    c = _cluster_with_t()
    before = c.ctx.leadership(TopicPartition("t", 0))
    body, ds = _propose(c, **overrides)
    assert (body["errorCode"], _partition_code(body)) == (0, code)
    assert _state_writes(ds) == []
    assert c.ctx.leadership(TopicPartition("t", 0)) == before
    # Kafka sends UpdateMetadata for every partition it looked at, whatever the answer
    um = [d for d in ds if isinstance(d, BrokerRequest) and d.api is RequestApi.UPDATE_METADATA]
    assert [d.recipients() for d in um] == [(1, 2, 3)]  # one request to the three brokers


def test_alter_partition_by_topic_id() -> None:
    """AlterPartition v2+ names the topic by id: an id this controller does not hold under that topic is
    UNKNOWN_TOPIC_ID (echoed in the answer); the right id is accepted; ineligible replicas are then
    INELIGIBLE_REPLICA (v0/v1, by name: OPERATION_NOT_ATTEMPTED)."""
    c = _cluster_with_t()
    tid = c.ctx.topic_ids["t"]
    other = "AAAAAAAAAAAAAAAAAAAAAQ"
    assert other != tid
    body, ds = _propose(c, topic_id=other)
    assert _partition_code(body) == KafkaError.UNKNOWN_TOPIC_ID
    assert body["topics"][0]["topicId"] == other
    assert _state_writes(ds) == []
    body, ds = _propose(c, topic_id=tid)
    assert _partition_code(body) == KafkaError.NONE
    assert body["topics"][0]["partitions"][0]["isr"] == [1, 2]
    assert len(_state_writes(ds)) == 1
    c.run(BrokerFailure(3))
    body, _ = _propose(c, topic_id=tid, new_isr=(1, 2, 3))
    assert _partition_code(body) == KafkaError.INELIGIBLE_REPLICA
    body, _ = _propose(c, new_isr=(1, 2, 3))
    assert _partition_code(body) == KafkaError.OPERATION_NOT_ATTEMPTED


def _alter_record(**kw: Any) -> str:
    o = {
        "version": 1,
        "type": "alter_partition",
        "broker_id": 1,
        "broker_epoch": -1,
        "topic": "t",
        "partition": 0,
        "leader_epoch": -1,
        "partition_epoch": -1,
        "new_isr": [1, 1, -1],
        "leader_recovery_state": 25,
    }
    o.update(kw)
    return json.dumps(o)


def test_decoder_accepts_what_kafka_answers_and_names_what_the_wire_cannot_carry() -> None:
    e = event_from_json(_alter_record())
    assert isinstance(e, AlterPartition)
    assert (e.broker_epoch, e.leader_epoch, e.partition_epoch, e.new_isr, e.leader_recovery_state) == (
        -1,
        -1,
        -1,
        (1, 1, -1),
        25,
    )
    assert event_from_json(event_to_json(e)) == e
    for field_, value in [
        ("leader_recovery_state", 128),
        ("leader_epoch", 2**31),
        ("new_isr", [2**31]),
        ("topic_id", "not-a-topic-id"),
    ]:
        with pytest.raises(FormatError) as err:
            event_from_json(_alter_record(**{field_: value}))
        assert err.value.field.startswith(field_), err.value


def test_the_input_suite_agrees_with_the_decoder_on_alter_partition() -> None:
    """great-expectations must not reject as malformed what the core answers (negative epochs, an ISR
    with duplicates or negative ids, an unknown recovery state)."""
    from streaming.query.validation import InputValidator, Rejection

    records = [_alter_record(), _alter_record(new_isr=[-5], leader_recovery_state=0, topic_id="AAAAAAAAAAAAAAAAAAAAAA")]
    validator = InputValidator()
    out = validator.check(records, ["broker-events"] * len(records))
    assert not [o for o in out if isinstance(o, Rejection)], out
    assert [type(o) for o in out] == [AlterPartition, AlterPartition]
    (bad,) = validator.check([_alter_record(leader_recovery_state=300)], ["broker-events"])
    assert isinstance(bad, Rejection)
    # the driver's re-read of a topic someone else created passes the suite too
    read = TopicCreationRefused(
        "t",
        "AAAAAAAAAAAAAAAAAAAAAQ",
        TopicZnode("t", ((0, (3, 1)),), topic_id="AAAAAAAAAAAAAAAAAAAAAA"),
        ((0, PartitionStateZnode(3, 2, (3, 1), 1, 7)),),
    )
    assert validator.check([event_to_json(read)], ["broker-events"]) == [read]


# ---------------------------------------------------------------- item 3: a topic someone else created


def _refused(c: Cluster, topic: str, znode: TopicZnode | None, states: Any = (), configs: Any = ()) -> list[Decision]:
    """ZooKeeper as it is after the refusal: the bucket's own creation never reached it, theirs did."""
    for path in [p for p in c.zk.nodes if p == f"/brokers/topics/{topic}" or p.startswith(f"/brokers/topics/{topic}/")]:
        del c.zk.nodes[path]
    if znode is not None:
        c.zk.nodes[f"/brokers/topics/{topic}"] = ("{}", 0)
        for p, st in states:
            c.zk.nodes[f"/brokers/topics/{topic}/partitions/{p}/state"] = ("{}", st.zk_version)
    return c.run(TopicCreationRefused(topic, c.ctx.topic_ids[topic], znode, tuple(states), tuple(configs)))


def test_topic_created_by_someone_else_replaces_the_buckets_own_creation() -> None:
    c = make()
    create(c, "t", ((1, 2), (2, 3)))
    theirs = TopicZnode("t", ((0, (3, 1)), (1, (2, 1)), (2, (1, 3))), topic_id="AAAAAAAAAAAAAAAAAAAAAQ")
    # their partition 1 already has a state (leader 2, epoch 5); 0 and 2 have none yet
    state = PartitionStateZnode(2, 5, (2, 1), 1, 0)
    ds = _refused(c, "t", theirs, [(1, state)], [("unclean.leader.election.enable", "true")])
    assert [c.ctx.replicas(TopicPartition("t", p)) for p in range(3)] == [(3, 1), (2, 1), (1, 3)]
    assert c.ctx.topic_ids["t"] == "AAAAAAAAAAAAAAAAAAAAAQ"
    assert c.ctx.unclean_leader_election["t"] is True
    lai = c.leader_and_isr(TopicPartition("t", 1))
    assert (lai.leader, lai.leader_epoch, lai.isr, lai.partition_epoch) == (2, 5, (2, 1), 0)
    creates = sorted(d.path for d in ds if isinstance(d, ZkWrite) and d.op is ZkOp.CREATE)
    assert creates == ["/brokers/topics/t/partitions/0/state", "/brokers/topics/t/partitions/2/state"]
    assert not [d for d in ds if isinstance(d, ZkWrite) and d.path == "/brokers/topics/t"]
    lisr = {
        (r.broker_id, p["partitionIndex"], p["leader"], p["leaderEpoch"])
        for r in ds
        if isinstance(r, BrokerRequest) and r.api is RequestApi.LEADER_AND_ISR
        for t in r.body_json()["topicStates"]
        for p in t["partitionStates"]
    }
    assert {(2, 1, 2, 5), (1, 1, 2, 5), (3, 0, 3, 0), (1, 0, 3, 0), (1, 2, 1, 0), (3, 2, 1, 0)} <= lisr
    assert all(rs is ReplicaState.ONLINE for pr, rs in c.ctx.replica_states.items() if pr.topic == "t")


def test_topic_creation_refused_is_ignored_once_the_bucket_moved_on_and_drops_a_vanished_topic() -> None:
    c = make()
    create(c, "t", ((1, 2),))
    own = c.ctx.leadership(TopicPartition("t", 0))
    ds = c.run(TopicCreationRefused("t", "AAAAAAAAAAAAAAAAAAAAAQ", TopicZnode("t", ((0, (3,)),))))
    assert ds == [] and c.ctx.leadership(TopicPartition("t", 0)) == own
    _refused(c, "t", None)
    assert "t" not in c.ctx.topic_partitions and "t" not in c.ctx.topic_ids


def test_topic_creation_refused_round_trips_as_json() -> None:
    ev = TopicCreationRefused(
        "t",
        "AAAAAAAAAAAAAAAAAAAAAQ",
        TopicZnode("t", ((0, (3, 1)),), ((0, (3,)),), (), "AAAAAAAAAAAAAAAAAAAAAA", 4),
        ((0, PartitionStateZnode(3, 2, (3, 1), 1, 7)),),
        (("cleanup.policy", "compact"),),
    )
    assert event_from_json(event_to_json(ev)) == ev
    gone = TopicCreationRefused("t", "AAAAAAAAAAAAAAAAAAAAAQ", None)
    assert event_from_json(event_to_json(gone)) == gone
    with pytest.raises(FormatError) as err:
        event_from_json(event_to_json(ev).replace('"partitions":[[0,[3,1]]]', '"partitions":[[0]]'))
    assert err.value.field.startswith("znode.partitions")
