"""Failover snapshots split by bucket, and a takeover handling the records that waited for its reference."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from shell_pipeline import ADMIN, BUCKETS, EVENTS, Pipeline, store_at

from core import events as ev
from core.codec.events import event_to_json
from core.model import Broker, PartitionTarget, TopicPartition
from core.snapshot import PartitionStateZnode, TopicZnode, ZkSnapshot
from sinks.memory import MemoryZooKeeper
from sinks.ports import Fence
from streaming.query import failover, routing
from streaming.query.failover import StoreSnapshots
from streaming.query.validation import InputValidator

pytestmark = pytest.mark.unit


def test_snapshot_is_split_by_bucket(tmp_path: Path) -> None:
    topics = tuple(TopicZnode(f"t{i}", ((0, (1, 2)),)) for i in range(20))
    states = tuple((TopicPartition(f"t{i}", 0), PartitionStateZnode(1, 0, (1, 2), 1, 0)) for i in range(20))
    snap = ZkSnapshot(3, 2, (Broker(1, 7), Broker(2, 8)), topics, states, topics_to_delete=("t3",))
    parts = failover.split_snapshot(snap, BUCKETS)
    assert sorted(t.topic for part in parts for t in part.topics) == sorted(t.topic for t in topics)
    for b, part in enumerate(parts):
        assert all(routing.bucket_of(t.topic, BUCKETS) == b for t in part.topics)
        assert part.brokers == snap.brokers and part.controller_epoch == 3
    ref = failover.write_snapshot(store_at(tmp_path), 7, snap, BUCKETS)
    assert ref["type"] == "controller_failover_ref" and ref["controller_epoch"] == 3
    for b in range(BUCKETS):
        assert failover.load_bucket_failover(ref, b, StoreSnapshots(store_at(tmp_path))).snapshot == parts[b]


def test_every_part_of_the_snapshot_goes_to_its_topics_bucket_in_order() -> None:
    names = [f"t{i}" for i in range(30)]
    snap = ZkSnapshot(
        3,
        2,
        (Broker(1, 7), Broker(2, 8)),
        tuple(TopicZnode(t, ((0, (1, 2)),)) for t in names),
        tuple((TopicPartition(t, p), PartitionStateZnode(1, 0, (1, 2), 1, 0)) for t in names for p in range(3)),
        pending_reassignments=tuple(PartitionTarget(t, 1, (2, 1)) for t in names[::2]),
        topics_to_delete=tuple(names[::3]),
        pending_preferred_elections=tuple(TopicPartition(t, 2) for t in names[::4]),
        topic_configs=tuple((t, (("retention.ms", "1"),)) for t in names[::5]),
        offline_replica_topics=tuple(names[::6]),
    )

    def of(topic: str, b: int) -> bool:
        return routing.bucket_of(topic, BUCKETS) == b

    parts = failover.split_snapshot(snap, BUCKETS)
    assert len(parts) == BUCKETS
    for b, part in enumerate(parts):
        # the definition: each field filtered by its topic's bucket, in the snapshot's order
        assert part == ZkSnapshot(
            3,
            2,
            snap.brokers,
            tuple(t for t in snap.topics if of(t.topic, b)),
            tuple(ps for ps in snap.partition_states if of(ps[0].topic, b)),
            pending_reassignments=tuple(p for p in snap.pending_reassignments if of(p.topic, b)),
            topics_to_delete=tuple(t for t in snap.topics_to_delete if of(t, b)),
            pending_preferred_elections=tuple(tp for tp in snap.pending_preferred_elections if of(tp.topic, b)),
            topic_configs=tuple(c for c in snap.topic_configs if of(c[0], b)),
            offline_replica_topics=tuple(t for t in snap.offline_replica_topics if of(t, b)),
        )
    assert sum(len(p.partition_states) for p in parts) == 90 and all(p.topics for p in parts)


def _snapshot_of_tree(zk: MemoryZooKeeper, brokers: tuple[int, ...]) -> ZkSnapshot:
    """What a controller elected now reads from the fake tree (as
    :func:`streaming.zk.snapshot_reader.read_snapshot`)."""
    from core.kafka.zksnapshot import snapshot_from_znodes

    data, version = zk.get("/controller_epoch")
    znodes = {path: (d.decode() or None, v) for path, (d, v) in zk.nodes.items()}
    infos = tuple(Broker(b, 100 + b) for b in brokers)
    return snapshot_from_znodes(znodes, infos, int(data), version)


def test_a_takeover_handles_the_records_that_waited_for_its_reference_after_it(
    tmp_path: Path, validator: InputValidator
) -> None:
    # the first controller creates a topic, then dies; a reassignment arrives while nobody is controller
    brokers = (1, 2, 3, 4, 5, 6)
    first = Pipeline.failed_over(tmp_path, validator, brokers)
    zk = first.zk
    first.run_batch([(ADMIN, event_to_json(ev.CreateTopic("c1", "moving", 1, 3, replica_assignment=((1, 2, 3),))))])
    # the second is elected, reads the tree, and publishes its reference after the waiting command; the
    # source's barrier gives the bucket both in one micro-batch, on the checkpoint's state
    zk.set("/controller_epoch", b"2")
    second = Pipeline(tmp_path, zk, Fence(2, 1), validator)
    second.states, second.offsets, second.batch, second.clock = first.states, first.offsets, first.batch, first.clock
    snapshot = _snapshot_of_tree(zk, brokers)
    ref = failover.ref_to_json(failover.write_snapshot(store_at(tmp_path), 1000, snapshot, BUCKETS))
    reassign = ev.ReassignPartitions("r1", (PartitionTarget("moving", 0, (4, 5, 6)),))
    second.run_batch([(ADMIN, event_to_json(reassign)), (EVENTS, ref)])
    topic = json.loads(zk.get("/brokers/topics/moving")[0])
    assert topic["partitions"]["0"] == [4, 5, 6, 1, 2, 3]
    # handled after the snapshot, the reassignment is in the bucket's state as in ZooKeeper: it goes on
    # to the end (handled before it, the snapshot would have dropped it and the topic znode kept RS)
    state = json.loads(zk.get("/brokers/topics/moving/partitions/0/state")[0])
    version = zk.get("/brokers/topics/moving/partitions/0/state")[1]
    caught_up = ev.AlterPartition(1, 101, "moving", 0, state["leader_epoch"], version, (1, 2, 3, 4, 5, 6))
    second.run_batch([(EVENTS, event_to_json(caught_up))])
    topic = json.loads(zk.get("/brokers/topics/moving")[0])
    assert topic["partitions"]["0"] == [4, 5, 6]
    assert topic.get("adding_replicas", {}) == {} and topic.get("removing_replicas", {}) == {}
    results = [m.value_json() for m in second.requests.messages if m.topic == "livectl.admin-results"]
    assert [r["status"] for r in results if r["request_id"] == "r1"][-1] == "ok"
