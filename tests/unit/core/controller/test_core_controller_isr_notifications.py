"""ISR-change notifications (Kafka's ``processIsrChangeNotification``): a leader below inter-broker protocol
2.7 writes its partition's ISR to the state znode itself and lists the partition under
``/isr_change_notification``; the watcher publishes the znodes as read in a ``zk_isr_change`` event."""

from __future__ import annotations

import json

import pytest
from core_support import Cluster, ZkConflictError

from core.codec.events import event_from_json, event_to_json
from core.controller import ControllerConfig
from core.decisions import ZkWrite
from core.errors import FormatError
from core.events import BrokerFailure, CreateTopic, ReassignPartitions
from core.kafka.requests import RequestApi
from core.kafka.zk_notifications import decode_isr_change_notification, encode_isr_change_notification
from core.kafka.zkdata import decode_partition_state, partition_state_path
from core.model import PartitionTarget, TopicPartition
from core.snapshot import PartitionStateZnode
from core.zk_path_events import ZkIsrChange

pytestmark = pytest.mark.unit

T0 = TopicPartition("t", 0)
PATH = partition_state_path("t", 0)


def cluster(brokers: tuple[int, ...] = (1, 2, 3)) -> Cluster:
    c = Cluster.start(list(brokers), ControllerConfig())
    c.run(CreateTopic("c", "t", 1, 3, ((1, 2, 3),), ()))
    return c


def read(c: Cluster, path: str = PATH) -> PartitionStateZnode:
    data, version = c.zk.nodes[path]
    assert data is not None
    return decode_partition_state(data, version)


def leader_writes_isr(c: Cluster, isr: tuple[int, ...], path: str = PATH) -> PartitionStateZnode:
    """What Kafka's ``ZkAlterPartitionManager`` does below IBP 2.7: the state znode rewritten with the new ISR
    (leader, leader epoch and the deciding controller's epoch kept), one version more."""
    data, version = c.zk.nodes[path]
    c.zk.nodes[path] = (json.dumps({**json.loads(data or "{}"), "isr": list(isr)}), version + 1)
    return read(c, path)


def test_the_leaders_isr_change_is_taken_with_its_znode_version_and_sent_to_every_broker() -> None:
    c = cluster()
    before = c.leader_and_isr(T0)
    z = leader_writes_isr(c, (1, 3))
    ds = c.run(ZkIsrChange("t", ((0, z),)))
    la = c.leader_and_isr(T0)
    assert (la.leader, la.isr, la.leader_epoch) == (1, (1, 3), before.leader_epoch)
    assert la.partition_epoch == z.zk_version == before.partition_epoch + 1
    assert not [d for d in ds if isinstance(d, ZkWrite)], "ZooKeeper already holds it"
    (um,) = c.requests(RequestApi.UPDATE_METADATA)
    assert um.recipients() == (1, 2, 3)
    (state,) = um.body_json()["topicStates"][0]["partitionStates"]
    assert (state["partitionIndex"], state["isr"], state["zkVersion"]) == (0, [1, 3], z.zk_version)
    assert c.requests(RequestApi.LEADER_AND_ISR) == []


def test_the_controllers_next_compare_and_set_expects_the_leaders_version() -> None:
    c = cluster()
    z = leader_writes_isr(c, (1, 2))
    c.run(ZkIsrChange("t", ((0, z),)))
    c.run(BrokerFailure(1))  # the fake ZooKeeper refuses a write at a stale version (ZkConflictError)
    now = read(c)
    assert (now.leader, now.isr, now.zk_version) == (2, (2,), z.zk_version + 1)

    # without the notification, the controller's write is refused (and re-read: PartitionStatesRead)
    c = cluster()
    leader_writes_isr(c, (1, 2))
    with pytest.raises(ZkConflictError, match="BadVersion"):
        c.run(BrokerFailure(1))


def test_a_repeat_changes_nothing() -> None:
    c = cluster()
    event = ZkIsrChange("t", ((0, leader_writes_isr(c, (1, 3))),))
    c.run(event)
    after = c.state
    # the watcher stopped after publishing and before deleting the notification publishes it again
    assert c.run(event) == []
    assert c.state.to_dict() == after.to_dict()
    # a failover's snapshot read the znode already: the event is no news there either
    c.failover()
    assert c.run(event) == []


def test_a_znode_older_than_the_controllers_own_write_changes_nothing() -> None:
    c = cluster()
    stale = leader_writes_isr(c, (1, 2))
    c.run(ZkIsrChange("t", ((0, stale),)))
    c.run(BrokerFailure(2))  # the controller shrinks the ISR to [1] with a new leader epoch
    held = c.leader_and_isr(T0)
    assert held.isr == (1,) and held.partition_epoch > stale.zk_version
    assert c.run(ZkIsrChange("t", ((0, stale),))) == []
    assert c.ctx.leader_and_isr(T0) == held


def test_a_znode_of_another_leadership_or_a_newer_controller_is_left_to_the_re_read() -> None:
    c = cluster()
    held = c.ctx.leader_and_isr(T0)
    z = read(c)
    newer = z.zk_version + 1
    others = [
        # written under a leader epoch this controller never gave (its next write is refused and re-read)
        PartitionStateZnode(2, z.leader_epoch + 1, (2, 3), z.controller_epoch, newer),
        # the same leader epoch but another leader: not a leader's own ISR change
        PartitionStateZnode(2, z.leader_epoch, (2, 3), z.controller_epoch, newer),
        # a newer controller's znode: this one is about to be fenced
        PartitionStateZnode(z.leader, z.leader_epoch, (1, 2), c.ctx.epoch + 1, newer),
    ]
    for other in others:
        assert c.run(ZkIsrChange("t", ((0, other),))) == []
        assert c.ctx.leader_and_isr(T0) == held


def test_unknown_partitions_are_ignored_and_the_known_ones_taken() -> None:
    c = cluster()
    z = leader_writes_isr(c, (1, 2))
    gone = PartitionStateZnode(1, 0, (1,), 1, 5)
    c.run(ZkIsrChange("t", ((0, z), (7, gone))))
    assert c.leader_and_isr(T0).isr == (1, 2)
    assert c.ctx.leadership(TopicPartition("t", 7)) is None
    (um,) = c.requests(RequestApi.UPDATE_METADATA)
    assert [s["partitionIndex"] for s in um.body_json()["topicStates"][0]["partitionStates"]] == [0]
    assert c.run(ZkIsrChange("gone", ((0, gone),))) == []


def test_a_reassignment_completes_when_the_notified_isr_holds_its_targets() -> None:
    c = cluster((1, 2, 3, 4))
    c.run(ReassignPartitions("r", (PartitionTarget("t", 0, (1, 2, 4)),)))
    assert T0 in c.ctx.partitions_being_reassigned
    z = leader_writes_isr(c, (1, 2, 3, 4))  # 4 caught up: the leader adds it itself
    c.run(ZkIsrChange("t", ((0, z),)))
    assert T0 not in c.ctx.partitions_being_reassigned
    assert c.ctx.assignment(T0).replicas == (1, 2, 4)
    now = read(c)  # the completion's writes went through at the leader's version
    assert now.isr == (1, 2, 4) and now.zk_version > z.zk_version
    assert {r.broker_id for r in c.requests(RequestApi.STOP_REPLICA)} == {3}


def test_json_form_round_trips_and_names_bad_fields() -> None:
    e = ZkIsrChange("t", ((0, PartitionStateZnode(2, 5, (2, 3), 4, 9)), (3, PartitionStateZnode(1, 1, (1,), 4, 2))))
    assert event_from_json(event_to_json(e)) == e
    assert event_to_json(ZkIsrChange("t", e.states[:1])) == (
        '{"states":[[0,{"controller_epoch":4,"isr":[2,3],"leader":2,"leader_epoch":5,"leader_recovery_state":0,'
        '"zk_version":9}]],"topic":"t","type":"zk_isr_change","version":1}'
    )
    good = json.loads(event_to_json(e))
    bad = [
        ({**good, "states": {}}, "states"),
        ({**good, "states": [[0]]}, "states[0]"),
        ({**good, "states": [good["states"][0], good["states"][0]]}, "states"),
        ({**good, "states": [[0, {**good["states"][0][1], "isr": [2, 2]}]]}, "isr"),
        ({**good, "states": [[0, {**good["states"][0][1], "zk_version": -1}]]}, "zk_version"),
        ({k: v for k, v in good.items() if k != "topic"}, "topic"),
    ]
    for o, field in bad:
        with pytest.raises(FormatError) as info:
            event_from_json(json.dumps(o))
        assert field in str(info.value), (o, str(info.value))


def test_kafkas_notification_json_both_ways() -> None:
    # IsrChangeNotificationSequenceZNode.encode of Kafka 3.9
    kafka = b'{"version":1,"partitions":[{"topic":"t","partition":1},{"topic":"u","partition":0}]}'
    assert decode_isr_change_notification(kafka) == (TopicPartition("t", 1), TopicPartition("u", 0))
    assert decode_isr_change_notification(encode_isr_change_notification([TopicPartition("u", 0)])) == (
        TopicPartition("u", 0),
    )
    for data, field in [
        (b"[]", "isr change notification"),
        (b"{", "isr change notification"),
        (b'{"version":1}', "partitions"),
        (b'{"version":1,"partitions":[{"partition":0}]}', "partitions[0].topic"),
        (b'{"version":1,"partitions":[{"topic":"t","partition":true}]}', "partitions[0].partition"),
    ]:
        with pytest.raises(FormatError) as info:
            decode_isr_change_notification(data)
        assert info.value.field == field
