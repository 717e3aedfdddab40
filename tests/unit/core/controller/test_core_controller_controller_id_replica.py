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
from core.controller import step
from core.decisions import BrokerRequest, StateChangeFailure, ZkOp, ZkWrite
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


# ---------------------------------------------------------------------- the rewrite refused: read again, redone


def _refused(c: Cluster, ev: ZkTopicChange) -> list[ZkWrite]:
    """``ev`` decided, and every write but the topic znode's applied: ZooKeeper refused its compare-and-set
    (the dispatcher withholds every request of the topic then: none is kept here either)."""
    c.state, ds = step(c.state, [ev])
    path = topic_path(ev.topic)
    c.zk.apply(d for d in ds if not (isinstance(d, ZkWrite) and d.path == path))
    return [d for d in ds if isinstance(d, ZkWrite) and d.path == path]


def test_a_refused_rewrite_read_again_is_written_at_the_new_version_and_its_requests_sent_again() -> None:
    c = Cluster.start([1, 2, 3])
    ev = _broker_creates(c, {0: (0, 1), 1: (2, 3)})
    [refused] = _refused(c, ev)
    assert refused.expected_version == 0
    # in between, a broker's CreatePartitions (AdminZkClient.addPartitions) wrote the znode: version 1, the
    # existing partitions as they were, a new one on the controller id too
    added = {0: (0, 1), 1: (2, 3), 2: (0, 2)}
    data = encode_topic_znode({p: ReplicaAssignment(r) for p, r in added.items()}, TOPIC_ID)
    c.zk.tree.apply(ZkWrite(ZkOp.SET, topic_path(TOPIC), data))
    # the driver's reading of it after the refusal (streaming.query.refresh), and the watcher's of the same
    # version in the same micro-batch: one rewrite
    again = ZkTopicChange(EPOCH, TOPIC, tuple(sorted(added.items())), TOPIC_ID, (), 1)
    c.run(again, again)
    [write] = _topic_writes(c)
    assert write.expected_version == 1
    parts = {int(p): tuple(r) for p, r in json.loads(c.zk.get(topic_path(TOPIC)) or "")["partitions"].items()}
    assert parts == {0: (2, 1), 1: (2, 3), 2: (1, 2)}
    assert {tp.partition: c.ctx.replicas(tp) for tp in c.ctx.partitions_for_topic(TOPIC)} == parts
    # the requests the refusal withheld go out again, to real brokers: partition 0 as new, and partition 1 too
    sent = {
        (b, p["partitionIndex"], p["isNew"])
        for r in c.requests(RequestApi.LEADER_AND_ISR)
        for b in r.recipients()
        for t in r.body_json()["topicStates"]
        for p in t["partitionStates"]
    }
    assert sent == {(2, 0, True), (1, 0, True), (2, 1, False), (3, 1, False), (1, 2, True), (2, 2, True)}
    um = {p["partitionIndex"] for r in c.requests(RequestApi.UPDATE_METADATA) for p in _um_partitions(r)}
    assert um == {0, 1, 2}
    # the rewrite coming back: nothing more
    assert c.run(ZkTopicChange(EPOCH, TOPIC, tuple(sorted(parts.items())), TOPIC_ID, (), 2)) == []


def test_a_reading_older_than_the_controllers_own_rewrite_in_a_later_micro_batch_is_not_refused() -> None:
    """The refused rewrite read again by the driver (version 1) and by the watcher (the same version, read
    before the redo reached ZooKeeper), their events in two micro-batches: the redo writes version 2; the
    watcher's reading, older than that write, must not be rewritten at its version 1 (ZooKeeper would refuse
    it, and every request of the topic in that micro-batch would be withheld with it)."""
    c = Cluster.start([1, 2, 3])
    ev = _broker_creates(c, {0: (0, 1)})
    _refused(c, ev)
    added = {0: (0, 1), 1: (0, 2)}  # a broker's CreatePartitions in between: version 1
    data = encode_topic_znode({p: ReplicaAssignment(r) for p, r in added.items()}, TOPIC_ID)
    c.zk.tree.apply(ZkWrite(ZkOp.SET, topic_path(TOPIC), data))
    reading = ZkTopicChange(EPOCH, TOPIC, tuple(sorted(added.items())), TOPIC_ID, (), 1)
    c.run(reading)  # the driver's reading: redone, written at version 1
    [write] = _topic_writes(c)
    assert write.expected_version == 1
    repaired = {int(p): tuple(r) for p, r in json.loads(c.zk.get(topic_path(TOPIC)) or "")["partitions"].items()}
    assert all(CONTROLLER not in reps for reps in repaired.values())
    # the watcher's reading of version 1, in the next micro-batch (ZooKeeper holds version 2, the redo)
    assert c.run(reading) == [], "older than the controller's own write: nothing to redo, nothing refused"
    parts = {int(p): tuple(r) for p, r in json.loads(c.zk.get(topic_path(TOPIC)) or "")["partitions"].items()}
    assert parts == repaired


def test_a_reading_of_a_topic_whose_repair_reached_zookeeper_changes_nothing() -> None:
    c = Cluster.start([1, 2, 3])
    c.run(_broker_creates(c, {0: (0, 1)}))
    assert c.ctx.replicas(TopicPartition(TOPIC, 0)) == (2, 1)
    # the repaired znode read again (version 1): its partitions are known and hold the repair: nothing to do
    assert c.run(ZkTopicChange(EPOCH, TOPIC, ((0, (2, 1)),), TOPIC_ID, (), 1)) == []


def _um_partitions(r: BrokerRequest) -> list[dict[str, object]]:
    body = r.body_json()
    if "topicStates" in body:
        return [p for t in body["topicStates"] if t["topicName"] == TOPIC for p in t["partitionStates"]]
    return [p for p in body.get("partitionStates", []) if p.get("topicName") == TOPIC]


# ---------------------------------------------------------------------- at takeover (onControllerFailover)


def _state_znode(c: Cluster, topic: str, p: int, leader: int, isr: list[int]) -> None:
    body = {"controller_epoch": 1, "leader": leader, "version": 1, "leader_epoch": 0, "isr": isr}
    c.zk.tree.apply(
        ZkWrite(ZkOp.CREATE, f"{topic_path(topic)}/partitions/{p}/state", json.dumps(body), make_parents=True)
    )


def test_a_topic_a_broker_created_while_no_controller_was_active_is_repaired_at_takeover() -> None:
    c = Cluster.start([1, 2, 3])
    c.create_topic("kept", ((1, 2),))
    # while livectl fails over, a broker creates __consumer_offsets: the topic znode only, no partition state
    _broker_creates(c, {0: (0, 1, 2), 1: (1, 2, 3), 2: (2, 3, 0)})
    c.failover()
    [write] = _topic_writes(c)
    assert write.op is ZkOp.SET and write.expected_version == 0, "compare-and-set at the version the takeover read"
    parts = {int(p): tuple(r) for p, r in json.loads(c.zk.get(topic_path(TOPIC)) or "")["partitions"].items()}
    assert parts == {0: (3, 1, 2), 1: (1, 2, 3), 2: (2, 3, 1)}
    for p, reps in parts.items():
        tp = TopicPartition(TOPIC, p)
        assert c.ctx.replicas(tp) == reps
        assert c.ctx.partition_state(tp) is PartitionState.ONLINE
        lai = c.ctx.leader_and_isr(tp)
        assert lai is not None and lai.leader == reps[0] and CONTROLLER not in lai.isr
    assert _leader_and_isr_brokers(c) == {1, 2, 3}
    assert not _topic_writes(c, "kept")


def test_at_takeover_a_state_naming_the_replacement_is_kept_and_an_online_replica_left() -> None:
    c = Cluster.start([1, 2, 3])
    # a repair whose state znodes were written and whose topic znode rewrite was refused, then a takeover:
    # the ISR names the replacement (3), the topic znode still the controller id
    _broker_creates(c, {0: (0, 1), 1: (1, 0)})
    _state_znode(c, TOPIC, 0, 3, [3, 1])
    _state_znode(c, TOPIC, 1, 1, [1])  # online without a hint: a reassignment's work, left
    c.failover()
    assert c.ctx.replicas(TopicPartition(TOPIC, 0)) == (3, 1)
    assert c.ctx.replicas(TopicPartition(TOPIC, 1)) == (1, 0)
    [write] = _topic_writes(c)
    assert json.loads(write.data or "")["partitions"] == {"0": [3, 1], "1": [1, 0]}


def test_at_takeover_nothing_is_repaired_under_a_registered_controller_id_or_for_a_deleted_topic() -> None:
    c = Cluster.start([1, 2, 3])
    _broker_creates(c, {0: (0, 1)}, topic="gone")
    c.zk.tree.apply(ZkWrite(ZkOp.CREATE, "/admin/delete_topics/gone", "", make_parents=True))
    c.failover()
    assert not _topic_writes(c, "gone")
    _broker_creates(c, {0: (0, 1)})
    c.failover(controller_id=1)  # a controller whose id is a registered broker's: a real replica
    assert not _topic_writes(c)
    assert c.ctx.replicas(TopicPartition(TOPIC, 0)) == (0, 1)


def test_the_takeovers_rewrite_is_the_version_a_later_reading_is_measured_against() -> None:
    c = Cluster.start([1, 2, 3])
    _broker_creates(c, {0: (0, 1)})
    c.failover()
    epoch = c.controller_epoch
    assert c.ctx.topic_znode_versions == {TOPIC: 1}, "the version the takeover's rewrite at 0 made"
    # a reading of version 0 (under the new epoch) published before that rewrite reached ZooKeeper: neither
    # redone nor refused
    assert c.run(ZkTopicChange(epoch, TOPIC, ((0, (0, 1)),), TOPIC_ID, (), 0)) == []
    # a broker's CreatePartitions after it (version 2): its new partition repaired, written at version 2
    added = {0: c.ctx.replicas(TopicPartition(TOPIC, 0)), 1: (0, 3)}
    data = encode_topic_znode({p: ReplicaAssignment(r) for p, r in added.items()}, TOPIC_ID)
    c.zk.tree.apply(ZkWrite(ZkOp.SET, topic_path(TOPIC), data))
    c.run(ZkTopicChange(epoch, TOPIC, tuple(sorted(added.items())), TOPIC_ID, (), 2))
    [write] = _topic_writes(c)
    assert write.expected_version == 2 and c.ctx.topic_znode_versions == {TOPIC: 3}
    assert CONTROLLER not in c.ctx.replicas(TopicPartition(TOPIC, 1))
