"""A topic a broker created itself, with a replica on livectl's controller id (issue 42, docs/real-brokers.md:
"topic creation by a broker"): the channel advertises the controller among the live brokers of every
UpdateMetadata, so a broker's own placement (CreateTopics sent to a broker, ``__consumer_offsets`` on a
consumer group's first use) may name it. The controller repairs the assignment before it creates the
partitions: the znode rewritten at the version read, requests only to real brokers."""

from __future__ import annotations

import json

import pytest
from core_support import Cluster, ZkConflictError, startup

from core.codec.events import event_from_json, event_to_json
from core.decisions import StateChangeFailure, ZkOp, ZkWrite
from core.kafka.requests import RequestApi
from core.kafka.zkdata import encode_topic_znode, topic_path
from core.model import ReplicaAssignment, TopicPartition
from core.states import PartitionState
from core.zk_path_events import BrokersCordoned, ZkTopicChange

pytestmark = pytest.mark.unit

EPOCH = 1  # Cluster.start's controller epoch
CONTROLLER = 0  # Cluster.start's controller id
TOPIC = "__consumer_offsets"
TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"


def _broker_creates(c: Cluster, assignment: dict[int, tuple[int, ...]], topic: str = TOPIC) -> ZkTopicChange:
    """The topic znode a broker writes (Kafka's ``AdminZkClient.createTopicWithAssignment``), version 0, and the
    watcher's event for it."""
    data = encode_topic_znode({p: ReplicaAssignment(r) for p, r in assignment.items()}, TOPIC_ID)
    c.zk.tree.apply(ZkWrite(ZkOp.CREATE, topic_path(topic), data, make_parents=True))
    return ZkTopicChange(EPOCH, topic, tuple(sorted(assignment.items())), TOPIC_ID, (), 0)


def _topic_writes(c: Cluster, topic: str = TOPIC) -> list[ZkWrite]:
    return [d for d in c.decisions if isinstance(d, ZkWrite) and d.path == topic_path(topic)]


def _leader_and_isr_brokers(c: Cluster) -> set[int]:
    return {b for r in c.requests(RequestApi.LEADER_AND_ISR) for b in r.recipients()}


def test_a_replica_on_the_controller_id_is_replaced_and_the_znode_rewritten_at_the_version_read() -> None:
    c = Cluster.start([1, 2, 3])
    # the broker's metadata lists 0 (the controller livectl advertises) among 1, 2, 3
    ev = _broker_creates(c, {0: (0, 1, 2), 1: (1, 2, 3), 2: (2, 3, 0)})
    c.run(ev)
    [write] = _topic_writes(c)
    assert write.op is ZkOp.SET and write.expected_version == 0, "compare-and-set at the version read"
    written = json.loads(c.zk.get(topic_path(TOPIC)) or "")
    assert written["topic_id"] == TOPIC_ID
    parts = {int(p): tuple(r) for p, r in written["partitions"].items()}
    assert parts[1] == (1, 2, 3), "a partition without the controller id is left as it is"
    # each replaced in place by the live broker not already a replica: 3 for partition 0, 1 for partition 2
    assert parts == {0: (3, 1, 2), 1: (1, 2, 3), 2: (2, 3, 1)}
    for p, reps in parts.items():
        tp = TopicPartition(TOPIC, p)
        assert c.ctx.replicas(tp) == reps
        assert c.ctx.partition_state(tp) is PartitionState.ONLINE
        lai = c.ctx.leader_and_isr(tp)
        assert lai is not None and CONTROLLER not in lai.isr and lai.leader == reps[0]
    assert _leader_and_isr_brokers(c) == {1, 2, 3}, "LeaderAndIsr only to real brokers"
    assert not [d for d in c.decisions if isinstance(d, StateChangeFailure)]
    # the rewrite coming back through the watcher adds no partition: nothing more happens
    assert c.run(ZkTopicChange(EPOCH, TOPIC, tuple(sorted(parts.items())), TOPIC_ID, (), 1)) == []


def test_the_replacement_is_load_aware_and_rack_aware() -> None:
    c = Cluster.start([1, 2, 3, 4], racks={1: "a", 2: "a", 3: "b", 4: "b"})
    c.create_topic("busy", ((3, 1), (3, 2)))  # broker 3 holds two replicas, 4 none
    c.run(_broker_creates(c, {0: (1, 0)}))  # another replica on rack a: a broker of rack b takes 0's place
    assert c.ctx.replicas(TopicPartition(TOPIC, 0)) == (1, 4)
    c.run(_broker_creates(c, {0: (0, 1)}, topic="t2"))
    # rack b again (no replica there): 3 holds two replicas, 4 one
    assert c.ctx.replicas(TopicPartition("t2", 0)) == (4, 1)
    c.run(_broker_creates(c, {0: (3, 0)}, topic="t3"))  # rack b held: rack a, where 1 holds three replicas, 2 one
    assert c.ctx.replicas(TopicPartition("t3", 0)) == (3, 2)


def test_new_partitions_a_broker_adds_are_repaired_too() -> None:
    c = Cluster.start([1, 2])
    c.run(_broker_creates(c, {0: (1, 2)}, topic="t"))
    assert not _topic_writes(c, "t")
    # CreatePartitions sent to a broker: its AdminZkClient.addPartitions rewrites the znode (version 1)
    data = encode_topic_znode({0: ReplicaAssignment((1, 2)), 1: ReplicaAssignment((0, 1))}, TOPIC_ID)
    c.zk.tree.apply(ZkWrite(ZkOp.SET, topic_path("t"), data))
    c.run(ZkTopicChange(EPOCH, "t", ((0, (1, 2)), (1, (0, 1))), TOPIC_ID, (), 1))
    [write] = _topic_writes(c, "t")
    assert write.expected_version == 1
    assert json.loads(write.data or "")["partitions"] == {"0": [1, 2], "1": [2, 1]}
    assert _leader_and_isr_brokers(c) == {1, 2}


def test_too_few_brokers_leave_the_replica_with_a_reason() -> None:
    c = Cluster.start([1, 2])
    c.run(_broker_creates(c, {0: (0, 1, 2), 1: (1, 0)}))
    p0, p1 = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)
    assert c.ctx.replicas(p0) == (0, 1, 2), "no live broker outside its replicas: left as it is"
    assert c.ctx.replicas(p1) == (1, 2), "the other partition is still repaired"
    [write] = _topic_writes(c)
    assert json.loads(write.data or "")["partitions"] == {"0": [0, 1, 2], "1": [1, 2]}
    [failure] = [d for d in c.decisions if isinstance(d, StateChangeFailure)]
    assert failure.item == f"[Topic={TOPIC},Partition=0,Replica=0]"
    assert "livectl's controller id" in failure.reason and "no live broker can take its place" in failure.reason
    assert "live brokers [1, 2]" in failure.reason
    assert c.ctx.partition_state(p0) is PartitionState.ONLINE, "its real replicas still serve it"
    assert _leader_and_isr_brokers(c) == {1, 2}


def test_nothing_is_written_when_no_replica_can_be_moved_and_cordoned_brokers_are_named() -> None:
    c = Cluster.start([1, 2])
    c.run(_broker_creates(c, {0: (0, 1)}, topic="cordon"))
    # 2 was free: repaired; now with 2 cordoned nothing can take it
    assert c.ctx.replicas(TopicPartition("cordon", 0)) == (2, 1)
    c.run(BrokersCordoned(EPOCH, (2,)))
    c.run(_broker_creates(c, {0: (0, 1)}))
    assert not _topic_writes(c), "nothing repaired: the znode stays as the broker wrote it"
    [failure] = [d for d in c.decisions if isinstance(d, StateChangeFailure)]
    assert "1 cordoned: 2" in failure.reason


def test_a_registered_broker_of_the_controller_id_is_a_real_replica() -> None:
    c = Cluster.start([1, 2])
    c.run(startup(CONTROLLER))  # a broker under the controller's id: Kafka's own case, nothing to repair
    c.run(_broker_creates(c, {0: (0, 1)}))
    assert not _topic_writes(c)
    assert c.ctx.replicas(TopicPartition(TOPIC, 0)) == (0, 1)
    assert 0 in _leader_and_isr_brokers(c)


def test_the_rewrite_is_refused_when_the_znode_changed_since_it_was_read() -> None:
    c = Cluster.start([1, 2, 3])
    ev = _broker_creates(c, {0: (0, 1)})
    data = encode_topic_znode({0: ReplicaAssignment((2, 1))}, TOPIC_ID)
    c.zk.tree.apply(ZkWrite(ZkOp.SET, topic_path(TOPIC), data))  # an operator's write in between: version 1
    with pytest.raises(ZkConflictError, match="BadVersion"):
        c.run(ev)


def test_the_events_zk_version_round_trips_and_is_left_out_when_unknown() -> None:
    ev = ZkTopicChange(EPOCH, "t", ((0, (0, 1)),), None, (), 0)
    assert event_from_json(event_to_json(ev)) == ev
    old = ZkTopicChange(EPOCH, "t", ((0, (0, 1)),))
    assert "zk_version" not in json.loads(event_to_json(old))
    assert event_from_json(event_to_json(old)) == old
