"""Kafka fidelity of the core, with plain values: StopReplica answers for topics whose deletion has not
started, topic creation on unregistered brokers, AlterPartition validation."""

from __future__ import annotations

import pytest
from core_support import Cluster, startup

from core.controller import ControllerConfig
from core.decisions import AdminResult, StateChangeFailure
from core.events import (
    CreatePartitions,
    CreateTopic,
    DeleteTopic,
    PartitionError,
    PartitionReplica,
    PartitionTarget,
    ReassignPartitions,
    StopReplicaResponse,
    TopicPartition,
)
from core.states import PartitionState, ReplicaState

pytestmark = pytest.mark.unit


def make(brokers: tuple[int, ...] = (1, 2, 3), **kw: object) -> Cluster:
    return Cluster.start(list(brokers), ControllerConfig(**kw))  # type: ignore[arg-type]


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
    lai = c.ctx.leadership(TopicPartition("t", 0)).leader_and_isr
    assert (lai.leader, lai.isr) == (1, (1,))
    assert "/brokers/topics/t/partitions/0/state" in c.zk.nodes
    # no live replica: no state znode, no leader, no request for it
    assert c.ctx.partition_state(TopicPartition("t", 1)) is PartitionState.NEW
    assert "/brokers/topics/t/partitions/1/state" not in c.zk.nodes
    assert c.ctx.leadership(TopicPartition("t", 1)) is None
    # broker 5 registers: Kafka's onBrokerStartup brings New partitions online
    c.run(startup(5))
    lai = c.ctx.leadership(TopicPartition("t", 1)).leader_and_isr
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
