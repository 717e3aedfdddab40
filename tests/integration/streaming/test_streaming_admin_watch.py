"""The admin-path watcher against real ZooKeeper and the real broker: kazoo writes Kafka's ``ZkData`` JSON,
the watcher publishes each change once, primed with the failover snapshot read from the same tree."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaPartition
from kazoo.client import KazooClient
from kazoo.security import OPEN_ACL_UNSAFE, make_acl
from waiting import wait_until

from core.codec.events import event_from_json
from core.events import Event
from core.model import PartitionTarget, TopicPartition
from core.snapshot import PartitionStateZnode
from core.zk_path_events import (
    ClusterConfigChanged,
    ZkIsrChange,
    ZkLogDirEvents,
    ZkPreferredElection,
    ZkReassignment,
    ZkTopicChange,
    ZkTopicDeletion,
)
from sinks.requests import ensure_topics
from streaming.zk.admin_watch import AdminPathWatcher
from streaming.zk.snapshot_reader import read_snapshot

pytestmark = pytest.mark.integration

EPOCH = 7


def _json(o: Any) -> bytes:
    return json.dumps(o).encode()


def _topic(partitions: dict[int, list[int]]) -> bytes:
    """``TopicZNode.encode`` of Kafka 2.x (version 2: no topic id)."""
    return _json(
        {
            "version": 2,
            "partitions": {str(p): r for p, r in partitions.items()},
            "adding_replicas": {},
            "removing_replicas": {},
        }
    )


def _state(leader: int, leader_epoch: int, isr: list[int], controller_epoch: int = 1) -> bytes:
    """``TopicPartitionStateZNode.encode`` of Kafka 3.9 (what a leader below IBP 2.7 writes too)."""
    return _json(
        {"controller_epoch": controller_epoch, "leader": leader, "version": 1, "leader_epoch": leader_epoch, "isr": isr}
    )


def _reassign(entries: list[tuple[str, int, list[int]]]) -> bytes:
    return _json({"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": r} for t, p, r in entries]})


@pytest.fixture
def events_topic(kafka_broker: Any) -> Iterator[tuple[str, KafkaProducer]]:
    topic = f"aw-{uuid.uuid4().hex[:8]}"
    ensure_topics(kafka_broker.bootstrap, [topic])
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap, acks="all", linger_ms=0)
    yield topic, producer
    producer.close()


def _read(bootstrap: str, topic: str) -> list[Event]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    tp = KafkaPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    end = consumer.end_offsets([tp])[tp]
    out: list[Event] = []
    deadline = time.monotonic() + 10
    while consumer.position(tp) < end and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=200).values():
            out.extend(event_from_json(r.value) for r in records)
    consumer.close()
    return out


def test_each_path_is_published_once_after_the_snapshot(
    zk_chrooted: KazooClient, kafka_broker: Any, events_topic: tuple[str, KafkaProducer]
) -> None:
    zk = zk_chrooted
    topic, producer = events_topic
    # the tree the new controller finds: a topic, a pending reassignment, a topic queued for deletion
    zk.create("/brokers/topics/t", _topic({0: [1, 2]}), makepath=True)
    zk.create("/admin/reassign_partitions", _reassign([("t", 0, [2, 3])]), makepath=True)
    zk.create("/admin/delete_topics/old", b"", makepath=True)
    snapshot = read_snapshot(zk)
    # written after the snapshot was read and before the watcher was primed: not in the snapshot
    zk.create("/admin/delete_topics/late", b"")
    configs: list[tuple[tuple[str, str], ...]] = []
    watcher = AdminPathWatcher(
        zk,
        producer,
        topic,
        EPOCH,
        1000,
        static_configs={"auto.leader.rebalance.enable": "true", "leader.imbalance.check.interval.seconds": "300"},
        on_configs=configs.append,
        resync_interval_s=60,
    )
    assert watcher.read_configs() == (
        ("auto.leader.rebalance.enable", "true"),
        ("leader.imbalance.check.interval.seconds", "300"),
    )
    watcher.prime(snapshot)
    watcher.start()
    try:
        assert watcher.published == [ZkTopicDeletion(EPOCH, "late")], "the snapshot's own content is not published"

        def wait(n: int) -> list[Event]:
            return list(wait_until(f"{n} events", lambda: len(watcher.published) >= n and watcher.published, 20))

        # the reassignment znode's data changes (a tool or the controller rewriting it): not a creation
        _, stat = zk.get("/admin/reassign_partitions")
        zk.set("/admin/reassign_partitions", _reassign([("t", 0, [3, 1])]), version=stat.version)
        # the controller's own rewrite of a topic znode that adds no partition: nothing
        zk.set("/brokers/topics/t", _topic({0: [2, 1]}))
        # a new reassignment znode: published once
        zk.delete("/admin/reassign_partitions")
        zk.create("/admin/reassign_partitions", _reassign([("t", 0, [1, 3]), ("u", 0, [1])]))
        got = wait(2)
        assert got[1] == ZkReassignment(EPOCH, (PartitionTarget("t", 0, (1, 3)), PartitionTarget("u", 0, (1,))))

        # AdminZkClient.createTopic (config first) and addPartitions
        zk.create(
            "/config/topics/u",
            _json({"version": 1, "config": {"unclean.leader.election.enable": "true"}}),
            makepath=True,
        )
        zk.create("/brokers/topics/u", _topic({0: [1, 4]}))
        got = wait(3)
        assert got[2] == ZkTopicChange(
            EPOCH, "u", ((0, (1, 4)),), None, (("unclean.leader.election.enable", "true"),), zk_version=0
        )
        zk.set("/brokers/topics/t", _topic({0: [2, 1], 1: [1, 2]}))
        got = wait(4)
        assert got[3] == ZkTopicChange(EPOCH, "t", ((0, (2, 1)), (1, (1, 2))), zk_version=2)

        zk.create("/admin/delete_topics/u", b"")
        assert wait(5)[4] == ZkTopicDeletion(EPOCH, "u")
        zk.create(
            "/admin/preferred_replica_election", _json({"version": 1, "partitions": [{"topic": "t", "partition": 1}]})
        )
        assert wait(6)[5] == ZkPreferredElection(EPOCH, (TopicPartition("t", 1),))
        path = zk.create(
            "/log_dir_event_notification/log_dir_event_",
            _json({"version": 1, "broker": 2, "event": 1}),
            sequence=True,
            makepath=True,
        )
        assert wait(7)[6] == ZkLogDirEvents(EPOCH, ((path.rsplit("/", 1)[1], 2),))

        # kafka-configs --entity-default: the dynamic value wins over the settings'
        zk.create(
            "/config/brokers/<default>",
            _json({"version": 1, "config": {"auto.leader.rebalance.enable": "false", "log.retention.ms": "1"}}),
            makepath=True,
        )
        expected = (("auto.leader.rebalance.enable", "false"), ("leader.imbalance.check.interval.seconds", "300"))
        assert wait(8)[7] == ClusterConfigChanged(EPOCH, expected)
        assert configs == [expected]
        # the controller's own broker entity wins over <default>
        zk.create(
            "/config/brokers/1000", _json({"version": 1, "config": {"leader.imbalance.check.interval.seconds": "5"}})
        )
        assert wait(9)[8] == ClusterConfigChanged(
            EPOCH, (("auto.leader.rebalance.enable", "false"), ("leader.imbalance.check.interval.seconds", "5"))
        )

        # a resync reads everything again and publishes nothing more: not in its own round, nor in a round of
        # the watcher's thread after it (the watches it set again). The later marker: a topic queued for
        # deletion, written after the resync; the watches fire in order, so what a round would publish for the
        # resync is published before it or with it
        assert watcher.sync() == []
        zk.create("/admin/delete_topics/marker", b"")
        assert wait(10)[9:] == [ZkTopicDeletion(EPOCH, "marker")]
        assert len(watcher.published) == 10
        assert _read(kafka_broker.bootstrap, topic) == watcher.published, "every event is on the topic, in order"
    finally:
        watcher.stop()


def test_the_controllers_own_topic_writes_do_not_come_back_unless_they_failed(
    zk_chrooted: KazooClient, events_topic: tuple[str, KafkaProducer]
) -> None:
    zk = zk_chrooted
    topic, producer = events_topic
    zk.create("/brokers/topics/t", _topic({0: [1, 2]}), makepath=True)
    watcher = AdminPathWatcher(zk, producer, topic, EPOCH, 1000, resync_interval_s=60)
    watcher.prime(read_snapshot(zk))
    watcher.start()
    try:

        def round_done() -> None:
            # a round of the watcher's own, on its thread, has met every znode written so far
            before = watcher.sync()
            assert before == [], f"a round published {before}"

        # the controller creates a topic and adds a partition to another (Kafka's createTopic / addPartitions
        # as the controller writes them): each write is expected before, settled after — nothing comes back
        watcher.expect({"own": frozenset({0, 1}), "t": frozenset({0, 1})})
        zk.create("/brokers/topics/own", _topic({0: [1, 2], 1: [2, 3]}))
        zk.set("/brokers/topics/t", _topic({0: [1, 2], 1: [2, 1]}))
        # a round after the writes (the one the watches wake the thread for runs the same code, at no known
        # time): it meets the new topic while it is expected and leaves it to settle()
        round_done()
        watcher.settle({"own": frozenset({0, 1}), "t": frozenset({0, 1})}, failed=())
        round_done()
        assert watcher.published == []

        # the controller's create failed because someone else wrote the topic first: read as anyone's write
        watcher.expect({"raced": frozenset({0})})
        zk.create("/brokers/topics/raced", _topic({0: [3, 1]}))
        round_done()  # it meets the raced topic as expected
        assert watcher.published == [], "undecided while the controller's own write may be what is there"
        watcher.settle({"raced": frozenset({0})}, failed=["raced"])
        got = wait_until("the raced topic", lambda: watcher.published, 20)
        assert got == [ZkTopicChange(EPOCH, "raced", ((0, (3, 1)),), zk_version=0)]

        # a partition someone else adds later to the controller's topic is published as ever. It is also the
        # later marker for everything above: the watches fire in order, so had any write of the controller's
        # own come back, it would be published before this one
        zk.set("/brokers/topics/own", _topic({0: [1, 2], 1: [2, 3], 2: [3, 1]}))
        got = wait_until("the added partition", lambda: len(watcher.published) >= 2 and watcher.published, 20)
        assert got == [
            ZkTopicChange(EPOCH, "raced", ((0, (3, 1)),), zk_version=0),
            ZkTopicChange(EPOCH, "own", ((0, (1, 2)), (1, (2, 3)), (2, (3, 1))), zk_version=1),
        ]
    finally:
        watcher.stop()


def test_the_first_round_decodes_only_the_topic_znodes_the_snapshot_did_not_read_as_they_are(
    zk_chrooted: KazooClient, events_topic: tuple[str, KafkaProducer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Primed with the topic znodes' data as the snapshot's read got them, the first round (which reads every
    topic znode to set its watch) decodes only those whose data differ now — and publishes what a watcher
    primed without them publishes: the changes since the read."""
    from core.kafka import zkdata
    from streaming.zk.snapshot_reader import SnapshotReader

    zk = zk_chrooted
    topic, producer = events_topic
    for name in ("same", "grown", "recreated", "recreated-other", "gone"):
        zk.create(f"/brokers/topics/{name}", _topic({0: [1, 2]}), makepath=True)
    reader = SnapshotReader(zk)
    snapshot = reader.read()
    data = reader.topic_data(snapshot)
    assert set(data) == {"same", "grown", "recreated", "recreated-other", "gone"}
    assert reader.topic_data(read_snapshot(zk)) == {}, "another read's snapshot has none"
    # after the read, before the watcher's first round
    zk.set("/brokers/topics/grown", _topic({0: [1, 2], 1: [2, 3]}))
    zk.delete("/brokers/topics/recreated")
    zk.create("/brokers/topics/recreated", _topic({0: [1, 2]}))  # the same bytes: nothing new either way
    zk.delete("/brokers/topics/recreated-other")
    zk.create("/brokers/topics/recreated-other", _topic({0: [3, 1], 1: [1, 2]}))
    zk.delete("/brokers/topics/gone")
    zk.create("/brokers/topics/new", _topic({0: [2, 3]}))

    decoded: list[str] = []
    decode = zkdata.decode_topic_znode

    def counted(name: str, *args: Any, **kwargs: Any) -> Any:
        decoded.append(name)
        return decode(name, *args, **kwargs)

    monkeypatch.setattr(zkdata, "decode_topic_znode", counted)
    published: list[list[Event]] = []
    for primed in (None, data):
        watcher = AdminPathWatcher(zk, producer, topic, EPOCH, 1000, resync_interval_s=60)
        watcher.prime(snapshot, primed)
        decoded.clear()
        published.append(watcher.sync())
        if primed is not None:
            assert sorted(decoded) == ["grown", "new", "recreated-other"]
        else:
            assert sorted(decoded) == ["grown", "new", "recreated", "recreated-other", "same"]
        assert watcher.sync() == [], "the next round: nothing again"
    assert published[0] == published[1]
    assert sorted(
        (e.topic, tuple(p for p, _ in e.partitions)) for e in published[1] if isinstance(e, ZkTopicChange)
    ) == [
        ("grown", (0, 1)),
        ("new", (0,)),
        ("recreated-other", (0, 1)),
    ]


def test_the_cordoned_brokers_are_read_with_the_snapshot_and_followed(
    zk_chrooted: KazooClient, events_topic: tuple[str, KafkaProducer]
) -> None:
    """Issue 44, item 1: ``/livectl/cordoned_brokers`` is in a new controller's snapshot (a standby that takes
    over finds it there) and each later change is published once as :class:`BrokersCordoned`."""
    from core.cordon import CORDONED_BROKERS, DRAINS, encode_cordoned
    from core.zk_path_events import BrokersCordoned

    zk = zk_chrooted
    topic, producer = events_topic
    zk.create(CORDONED_BROKERS, encode_cordoned([2]).encode(), makepath=True)
    snapshot = read_snapshot(zk)
    assert snapshot.cordoned_brokers == (2,)
    watcher = AdminPathWatcher(zk, producer, topic, EPOCH, 1000, resync_interval_s=60)
    watcher.prime(snapshot)
    watcher.start()
    try:
        assert watcher.published == [] and watcher.cordoned == (2,), "the snapshot's set is not published again"
        zk.set(CORDONED_BROKERS, encode_cordoned([2, 3]).encode())
        wait_until("the cordon", lambda: watcher.published == [BrokersCordoned(EPOCH, (2, 3))], 20)
        zk.delete(CORDONED_BROKERS)
        wait_until("the uncordon", lambda: watcher.published[1:] == [BrokersCordoned(EPOCH, ())], 20)
        zk.create(CORDONED_BROKERS, encode_cordoned([4]).encode())
        wait_until(
            "a cordon after the znode was gone", lambda: watcher.published[2:] == [BrokersCordoned(EPOCH, (4,))], 20
        )
        assert watcher.sync() == [] and watcher.cordoned == (4,)
        # a drain's record (livectl brokers --drain) is followed for the status page and the metrics, not published
        assert watcher.draining == ()
        zk.create(f"{DRAINS}/3", b'{"version":1,"batch_size":10,"throttle":-1}', makepath=True)
        wait_until("the drain seen", lambda: watcher.draining == (3,), 20)
        zk.delete(f"{DRAINS}/3")
        wait_until("the drain gone", lambda: watcher.draining == (), 20)
        assert watcher.published[3:] == []
    finally:
        watcher.stop()


ISR_CHANGES = "/isr_change_notification"


def test_isr_change_notifications_are_published_with_the_state_znodes_then_deleted(
    zk_chrooted: KazooClient, kafka_broker: Any, events_topic: tuple[str, KafkaProducer]
) -> None:
    zk = zk_chrooted
    topic, producer = events_topic
    zk.create("/brokers/topics/t", _topic({0: [1, 2, 3], 1: [2, 3, 1]}), makepath=True)
    for p, leader in ((0, 1), (1, 2)):
        zk.create(f"/brokers/topics/t/partitions/{p}/state", _state(leader, 4, [1, 2, 3]), makepath=True)
    watcher = AdminPathWatcher(zk, producer, topic, EPOCH, 1000, resync_interval_s=60)
    watcher.prime(read_snapshot(zk))
    watcher.start()

    def leader_writes_isr(partition: int, leader: int, isr: list[int]) -> PartitionStateZnode:
        """Kafka's ZkAlterPartitionManager below IBP 2.7: the leader's compare-and-set of the state znode."""
        path = f"/brokers/topics/t/partitions/{partition}/state"
        _, stat = zk.get(path)
        zk.set(path, _state(leader, 4, isr), version=stat.version)
        return PartitionStateZnode(leader, 4, tuple(isr), 1, stat.version + 1)

    def wait(n: int) -> list[Event]:
        return list(wait_until(f"{n} events", lambda: len(watcher.published) >= n and watcher.published, 20))

    try:
        z0 = leader_writes_isr(0, 1, [1, 3])
        # then its notification, as propagateIsrChanges writes it (and one that is not Kafka's JSON)
        zk.create(
            f"{ISR_CHANGES}/isr_change_",
            b'{"version":1,"partitions":[{"topic":"t","partition":0},{"topic":"gone","partition":0}]}',
            sequence=True,
        )
        zk.create(f"{ISR_CHANGES}/isr_change_", b"{", sequence=True)
        assert wait(1) == [ZkIsrChange("t", ((0, z0),))], "a partition without a state znode is left out"
        wait_until("the notifications deleted", lambda: zk.get_children(ISR_CHANGES) == [], 20)
        assert _read(kafka_broker.bootstrap, topic) == watcher.published

        # ZooKeeper refuses the deletion (no DELETE on the parent): the notification stays and every later
        # round publishes it again, with the state znodes as they then are (the buckets take it once)
        zk.set_acls(ISR_CHANGES, [make_acl("world", "anyone", read=True, write=True, create=True, admin=True)])
        z1 = leader_writes_isr(1, 2, [2, 3])
        path = zk.create(
            f"{ISR_CHANGES}/isr_change_", b'{"version":1,"partitions":[{"topic":"t","partition":1}]}', sequence=True
        )
        again = ZkIsrChange("t", ((1, z1),))
        assert wait(2)[1] == again
        assert watcher.sync() == [again]
        assert zk.get_children(ISR_CHANGES) == [path.rsplit("/", 1)[1]]
        z1 = leader_writes_isr(1, 2, [2, 3, 1])
        zk.set_acls(ISR_CHANGES, OPEN_ACL_UNSAFE)
        newer = ZkIsrChange("t", ((1, z1),))
        assert watcher.sync() == [newer]
        assert zk.get_children(ISR_CHANGES) == []
        assert watcher.sync() == []
        published = watcher.published
        assert published[0] == ZkIsrChange("t", ((0, z0),)) and published[-1] == newer
        assert set(published[1:-1]) == {again} and len(published) >= 4
        assert _read(kafka_broker.bootstrap, topic) == published, "every event is on the topic, in order"
    finally:
        watcher.stop()
