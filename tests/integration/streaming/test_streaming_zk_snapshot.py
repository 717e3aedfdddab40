"""Reading Kafka's ZooKeeper layout into a ZkSnapshot, against a real ZooKeeper."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from broker_registration import registration
from kazoo.client import KazooClient
from kazoo.exceptions import UnimplementedError

from core.decisions import ZkOp, ZkWrite
from core.model import Endpoint, PartitionTarget, TopicPartition
from core.snapshot import PartitionStateZnode
from sinks.ports import Fence
from sinks.zookeeper import ZooKeeperSink
from streaming.zk import snapshot_reader as zk_snapshot
from streaming.zk.snapshot_reader import read_snapshot

pytestmark = pytest.mark.integration


@pytest.fixture
def zk(zk_chrooted: KazooClient) -> KazooClient:
    return zk_chrooted


def _state(leader: int, isr: list[int], epoch: int = 0) -> str:
    return json.dumps({"version": 1, "leader": leader, "leader_epoch": epoch, "controller_epoch": 3, "isr": isr})


def test_snapshot_reads_kafkas_layout(zk: KazooClient) -> None:
    zk.create("/controller_epoch", b"3")
    zk.set("/controller_epoch", b"3")
    zk.create("/brokers/ids/1", registration("h1", 9001, "r1"), ephemeral=True, makepath=True)
    zk.create("/brokers/ids/2", registration("h2", 9002), ephemeral=True)
    topic = {
        "version": 3,
        "topic_id": "AAAAAAAAAAAAAAAAAAAAAA",
        "partitions": {"0": [1, 2], "1": [2, 1, 3]},
        "adding_replicas": {"1": [3]},
        "removing_replicas": {},
    }
    zk.create("/brokers/topics/t", json.dumps(topic).encode(), makepath=True)
    zk.set("/brokers/topics/t", json.dumps(topic).encode())
    zk.create("/brokers/topics/t/partitions/0/state", _state(1, [1, 2]).encode(), makepath=True)
    zk.create("/brokers/topics/t/partitions/1/state", _state(2, [2, 1], 4).encode(), makepath=True)
    zk.set("/brokers/topics/t/partitions/1/state", _state(2, [2, 1], 5).encode())
    zk.create("/brokers/topics/old", b'{"version":2,"partitions":{"0":[1]}}')  # its state znode is missing
    reassign = {"version": 1, "partitions": [{"topic": "t", "partition": 1, "replicas": [2, 3]}]}
    zk.create("/admin/reassign_partitions", json.dumps(reassign).encode(), makepath=True)
    zk.create("/admin/delete_topics/old", b"", makepath=True)
    zk.create("/admin/preferred_replica_election", b'{"version":1,"partitions":[{"topic":"t","partition":0}]}')
    zk.create("/config/topics/t", b'{"version":1,"config":{"unclean.leader.election.enable":"true"}}', makepath=True)

    snap = read_snapshot(zk)
    assert (snap.controller_epoch, snap.controller_epoch_zk_version) == (3, 1)
    czxid1 = zk.exists("/brokers/ids/1").czxid
    assert [(b.id, b.epoch, b.rack) for b in snap.brokers] == [
        (1, czxid1, "r1"),
        (2, zk.exists("/brokers/ids/2").czxid, None),
    ]
    assert snap.brokers[0].endpoints[0] == Endpoint("PLAINTEXT", "h1", 9001, "PLAINTEXT")
    by_topic = {t.topic: t for t in snap.topics}
    assert by_topic["t"].partitions == ((0, (1, 2)), (1, (2, 1, 3)))
    assert by_topic["t"].adding_replicas == ((1, (3,)),)
    assert by_topic["t"].topic_id == "AAAAAAAAAAAAAAAAAAAAAA" and by_topic["t"].zk_version == 1
    assert dict(snap.partition_states) == {
        TopicPartition("t", 0): PartitionStateZnode(1, 0, (1, 2), 3, 0),
        TopicPartition("t", 1): PartitionStateZnode(2, 5, (2, 1), 3, 1),
    }
    assert snap.pending_reassignments == (PartitionTarget("t", 1, (2, 3)),)
    assert snap.topics_to_delete == ("old",)
    assert snap.pending_preferred_elections == (TopicPartition("t", 0),)
    assert snap.topic_configs == (("t", (("unclean.leader.election.enable", "true"),)),)


def test_multi_read_answers_what_per_znode_gets_answer(zk: KazooClient) -> None:
    # 250 znodes (three multiRead requests, the last one short), every 7th missing, one empty; behind a chroot
    paths = [f"/mr/n{i}" for i in range(250)]
    for i, p in enumerate(paths):
        if i % 7:
            zk.create(p, b"" if i == 1 else f"value {i}".encode(), makepath=True)
    zk.set(paths[3], b"changed")
    multi = zk_snapshot.multi_get_all(zk, paths, window=150)
    single = zk_snapshot.get_all(zk, paths, window=5000)
    assert len(multi) == 250 - len(range(0, 250, 7))
    assert {p: (d, st.version, st.czxid) for p, (d, st) in multi.items()} == {
        p: (d, st.version, st.czxid) for p, (d, st) in single.items()
    }
    assert multi[paths[3]][0] == b"changed" and multi[paths[3]][1].version == 1 and multi[paths[1]][0] == b""


def test_a_server_without_multi_read_is_read_znode_by_znode(zk: KazooClient, monkeypatch: Any) -> None:
    zk.create("/old/a", b"1", makepath=True)

    def unimplemented(*_: Any) -> Any:
        raise UnimplementedError()

    monkeypatch.setattr(zk_snapshot, "multi_get_all", unimplemented)
    got = zk_snapshot.read_znodes(zk, ["/old/a", "/old/missing"], window=10)
    assert list(got) == ["/old/a"] and got["/old/a"][0] == b"1"


def test_an_empty_zookeeper_gives_an_empty_snapshot(zk: KazooClient) -> None:
    snap = read_snapshot(zk)
    assert (snap.controller_epoch, snap.brokers, snap.topics, snap.partition_states) == (0, (), (), ())


def test_a_large_tree_is_read_whole_by_every_kind_of_read(zk: KazooClient, record_property: Any) -> None:
    """20,000 partitions (20 topics of 1,000: 60,000 znodes): several windows of ``multiRead`` requests for a
    cold read, one get each for a standby's read ahead, and the read after winning with some states rewritten
    — each the same snapshot, every partition in it. (The 100k figures are ``bench/snapshot_cost.py``'s and
    ``bench/snapshot_reread.py``'s.)"""
    zk.create("/controller_epoch", b"1")
    sink = ZooKeeperSink(zk, Fence(1, 0), "setup")
    writes: list[ZkWrite] = []
    topics, per_topic = 20, 1000
    for t in range(topics):
        assignment = {str(p): [1, 2, 3] for p in range(per_topic)}
        writes.append(
            ZkWrite(
                ZkOp.CREATE,
                f"/brokers/topics/t{t}",
                json.dumps({"version": 2, "partitions": assignment}),
                make_parents=True,
            )
        )
        writes += [
            ZkWrite(ZkOp.CREATE, f"/brokers/topics/t{t}/partitions/{p}/state", _state(1, [1, 2, 3]), make_parents=True)
            for p in range(per_topic)
        ]
    t0 = time.perf_counter()
    assert sink.write_batch(0, writes).ok
    setup = time.perf_counter() - t0
    t0 = time.perf_counter()
    snap = read_snapshot(zk)
    elapsed = time.perf_counter() - t0
    assert len(snap.topics) == topics
    assert {(tp.topic, tp.partition) for tp, _ in snap.partition_states} == {
        (f"t{t}", p) for t in range(topics) for p in range(per_topic)
    }
    record_property("snapshot_20k_s", round(elapsed, 2))
    print(f"\n20k partitions: created in {setup:.1f} s (60k znodes), snapshot read in {elapsed:.1f} s")

    reader = zk_snapshot.SnapshotReader(zk, window=2000)
    assert reader.read(ahead=True) == snap and reader.last_state_reads == topics * per_topic
    for p in range(0, per_topic, 100):
        zk.set(f"/brokers/topics/t3/partitions/{p}/state", _state(2, [2, 3]).encode())
    warm = reader.read()
    assert warm == read_snapshot(zk) and warm != snap
    assert (reader.last_state_reads, reader.last_topics_kept) == (10, topics - 1)
