"""Re-read partition states after ZooKeeper refused a compare-and-set (Kafka's retry on BadVersion)."""

from __future__ import annotations

import json

import pytest
from core_support import Cluster

from core.codec.events import event_from_json, event_to_json
from core.controller import ControllerConfig, step
from core.decisions import StateChangeFailure, ZkWrite
from core.errors import FormatError
from core.events import BrokerFailure, CreateTopic, Event, PartitionStatesRead
from core.kafka.requests import RequestApi
from core.kafka.zkdata import decode_partition_state, partition_state_path
from core.model import TopicPartition
from core.snapshot import PartitionStateZnode
from core.states import PartitionState

pytestmark = pytest.mark.unit

T0 = TopicPartition("t", 0)
PATH = partition_state_path("t", 0)


def cluster() -> Cluster:
    c = Cluster.start([1, 2, 3], ControllerConfig())
    c.run(CreateTopic("c", "t", 1, 3, ((1, 2, 3),), ()))
    return c


def read(c: Cluster) -> PartitionStateZnode:
    data, version = c.zk.nodes[PATH]
    assert data is not None
    return decode_partition_state(data, version)


def change_under_the_controller(c: Cluster, **fields: object) -> None:
    """Another write of the same controller epoch that this state never saw (e.g. made between a
    takeover's snapshot and its failover)."""
    data, version = c.zk.nodes[PATH]
    o = {**json.loads(data or "{}"), **fields}
    c.zk.nodes[PATH] = (json.dumps(o), version + 1)


def refused_step(c: Cluster, *events: Event) -> list[ZkWrite]:
    """Run a step whose partition-state writes ZooKeeper refuses (nothing of them is applied)."""
    c.state, ds = step(c.state, events)
    return [d for d in ds if isinstance(d, ZkWrite) and d.path == PATH]


def test_a_refused_election_is_done_again_from_the_znode() -> None:
    c = cluster()
    assert read(c).leader == 1 and read(c).isr == (1, 2, 3)
    change_under_the_controller(c, isr=[1, 2], leader_epoch=read(c).leader_epoch + 1)
    stale = refused_step(c, BrokerFailure(1))
    assert stale and stale[0].expected_version == read(c).zk_version - 1  # BadVersion in ZooKeeper
    c.run(PartitionStatesRead("t", ((0, read(c)),)))
    now = read(c)
    assert (now.leader, now.isr) == (2, (2,))  # elected from the ISR ZooKeeper holds: 3 was not in it
    assert c.leader_and_isr(T0).partition_epoch == now.zk_version
    lisr = c.requests(RequestApi.LEADER_AND_ISR)
    assert {r.broker_id for r in lisr} == {2, 3}
    assert lisr[0].body_json()["topicStates"][0]["partitionStates"][0]["leader"] == 2


def test_dead_replicas_left_in_the_isr_are_removed_again() -> None:
    c = cluster()
    c.run(BrokerFailure(3))  # leader 1 keeps leading; ISR [1, 2]
    assert read(c).isr == (1, 2)
    # meanwhile ZooKeeper got an ISR with 3 back in it, written by this controller epoch
    change_under_the_controller(c, isr=[1, 2, 3])
    c.run(PartitionStatesRead("t", ((0, read(c)),)))
    assert (read(c).leader, read(c).isr) == (1, (1, 2))
    assert {r.broker_id for r in c.requests(RequestApi.LEADER_AND_ISR)} == {1, 2}


def test_a_state_that_needs_nothing_is_adopted_and_published() -> None:
    c = cluster()
    change_under_the_controller(c, isr=[1, 2])
    before = read(c)
    c.run(PartitionStatesRead("t", ((0, before),)))
    assert read(c) == before  # nothing written
    la = c.leader_and_isr(T0)
    assert (la.isr, la.partition_epoch) == ((1, 2), before.zk_version)
    assert [r.recipients() for r in c.requests(RequestApi.UPDATE_METADATA)] == [(1, 2, 3)]
    assert c.requests(RequestApi.LEADER_AND_ISR) == []


def test_a_znode_of_a_newer_controller_is_not_adopted() -> None:
    c = cluster()
    change_under_the_controller(c, controller_epoch=c.ctx.epoch + 1, leader=2)
    before = c.ctx.leader_and_isr(T0)
    ds = c.run(PartitionStatesRead("t", ((0, read(c)),)))
    assert c.ctx.leader_and_isr(T0) == before
    (failure,) = [d for d in ds if isinstance(d, StateChangeFailure)]
    assert "newer than this controller's" in failure.reason and failure.item == "t-0"


def test_unknown_partitions_are_ignored() -> None:
    c = cluster()
    ds = c.run(PartitionStatesRead("gone", ((0, PartitionStateZnode(1, 0, (1,), 1, 3)),)))
    assert ds == [] and c.ctx.partition_state(TopicPartition("gone", 0)) is PartitionState.NON_EXISTENT


def test_json_form_round_trips_and_names_bad_fields() -> None:
    states = ((0, PartitionStateZnode(2, 5, (2, 3), 4, 9)), (3, PartitionStateZnode(-1, 1, (1,), 4, 2)))
    e = PartitionStatesRead("t", states)
    assert event_from_json(event_to_json(e)) == e
    assert e.topics() == ("t",)
    with pytest.raises(FormatError, match=r"states\[0\]"):
        event_from_json('{"version":1,"type":"partition_states_read","topic":"t","states":[[0]]}')
    with pytest.raises(FormatError, match=r"states\[0\]\[1\]\.isr"):
        event_from_json(
            '{"version":1,"type":"partition_states_read","topic":"t","states":'
            '[[0,{"leader":1,"leader_epoch":0,"isr":"x","controller_epoch":1,"zk_version":0}]]}'
        )
    with pytest.raises(FormatError, match="states"):
        event_from_json('{"version":1,"type":"partition_states_read","topic":"t","states":{}}')
