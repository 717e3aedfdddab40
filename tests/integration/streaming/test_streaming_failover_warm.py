"""A read that remembers what it decoded gives exactly what a fresh read gives, against a real ZooKeeper,
whatever changed in between; a standby's reads ahead run on their own thread and stop when asked."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import replace

import pytest
from broker_registration import registration
from kazoo.client import KazooClient, KazooState
from waiting import wait_until

from core.codec.snapshot import encode_failover_json
from core.model import TopicPartition
from streaming.warm.failover_warm import ReadAhead, read_in_background
from streaming.zk.snapshot_reader import ReadAbortedError, SnapshotError, SnapshotReader, read_snapshot

pytestmark = pytest.mark.integration


@pytest.fixture
def zk(zk_chrooted: KazooClient) -> KazooClient:
    return zk_chrooted


def _state(leader: int, isr: list[int], epoch: int = 0) -> bytes:
    body = {"version": 1, "leader": leader, "leader_epoch": epoch, "controller_epoch": 3, "isr": isr}
    return json.dumps(body).encode()


def _topic(zk: KazooClient, name: str, partitions: int) -> None:
    body = {"version": 2, "partitions": {str(p): [1, 2] for p in range(partitions)}}
    zk.create(f"/brokers/topics/{name}", json.dumps(body).encode(), makepath=True)
    for p in range(partitions):
        zk.create(f"/brokers/topics/{name}/partitions/{p}/state", _state(1, [1, 2]), makepath=True)


def _cluster(zk: KazooClient) -> None:
    zk.create("/controller_epoch", b"3")
    zk.create("/brokers/ids/1", registration("h1", 9001), ephemeral=True, makepath=True)
    zk.create("/brokers/ids/2", registration("h2", 9002), ephemeral=True)
    for name in ("a", "b", "c"):
        _topic(zk, name, 3)
    zk.create("/config/topics/a", b'{"version":1,"config":{"retention.ms":"1"}}', makepath=True)


def test_a_remembering_read_equals_a_fresh_read_after_every_kind_of_change(zk: KazooClient) -> None:
    _cluster(zk)
    reader = SnapshotReader(zk)
    assert reader.read(ahead=True) == read_snapshot(zk)  # a standby's read ahead sets the watches
    assert reader.remembered == 3 + 9  # topic znodes and state znodes

    # the same data written again (a new version), new data, a deleted topic, a new topic, a new broker, admin paths
    zk.set("/brokers/topics/a/partitions/0/state", _state(1, [1, 2]))
    zk.set("/brokers/topics/a/partitions/1/state", _state(2, [2], 1))
    zk.delete("/brokers/topics/b", recursive=True)
    _topic(zk, "d", 2)
    zk.set("/brokers/topics/c", json.dumps({"version": 2, "partitions": {"0": [2, 1], "1": [1, 2]}}).encode())
    zk.create("/brokers/ids/3", registration("h3", 9003), ephemeral=True)
    zk.create("/admin/delete_topics/c", b"", makepath=True)
    zk.set("/controller_epoch", b"4")

    warm = reader.read()
    fresh = read_snapshot(zk)
    assert warm == fresh
    states = dict(warm.partition_states)
    assert [tp.topic for tp in states].count("b") == 0 and [t.topic for t in warm.topics] == ["a", "c", "d"]
    assert {tp.partition for tp in states if tp.topic == "c"} == {0, 1}  # c-2 is no longer in its assignment
    assert [(tp.partition, st.zk_version, st.isr) for tp, st in warm.partition_states if tp.topic == "a"] == [
        (0, 1, (1, 2)),
        (1, 1, (2,)),
        (2, 0, (1, 2)),
    ]
    assert (warm.controller_epoch, warm.controller_epoch_zk_version) == (4, 1)
    assert [b.id for b in warm.brokers] == [1, 2, 3]
    assert reader.remembered == 3 + 2 + 3 + 2 and reader.reads == 2
    # only the state znodes whose watch fired, and d's new ones, were read again (c-0 and c-1 unchanged)
    assert reader.last_state_reads == 2 + 2
    assert reader.read() == read_snapshot(zk) and reader.last_state_reads == 0


def test_a_change_made_just_before_a_read_is_in_it(zk: KazooClient) -> None:
    """What the watches carry is delivered before the answer to any later request: a read right after a
    write (as after an election) has it, however many writes precede it."""
    _cluster(zk)
    reader = SnapshotReader(zk)
    reader.read(ahead=True)
    for round_no in range(5):
        for p in range(3):
            zk.set(f"/brokers/topics/c/partitions/{p}/state", _state(2, [2, 1], round_no + 1))
        assert reader.read() == read_snapshot(zk)
        assert reader.last_state_reads == 3


def test_a_lost_connection_makes_the_next_read_read_every_state(zk: KazooClient) -> None:
    _cluster(zk)
    reader = SnapshotReader(zk)
    reader.read(ahead=True)
    reader.on_connection_state(KazooState.SUSPENDED)  # as kazoo's listener is told: watches may be gone
    assert reader.read() == read_snapshot(zk) and reader.last_state_reads == 9  # multiRead, no watches
    assert reader.last_state_reason == "all: ZooKeeper connection SUSPENDED"
    assert reader.read(ahead=True) == read_snapshot(zk) and reader.last_state_reads == 9  # watches set again
    assert reader.read() == read_snapshot(zk) and reader.last_state_reads == 0


def test_a_read_ahead_stops_half_way_when_asked(zk: KazooClient) -> None:
    _cluster(zk)
    stop = threading.Event()
    stop.set()
    reader = SnapshotReader(zk, window=2)
    with pytest.raises(ReadAbortedError):
        reader.read(ahead=True, abort=stop)
    assert reader.read() == read_snapshot(zk) and reader.last_state_reads == 9


def test_a_stopped_read_ahead_keeps_the_watches_it_had(zk: KazooClient) -> None:
    """Winning the lease stops a read ahead half-way: what it was to read is read by the next read, and the
    watches set before still count (not every state znode read again, as after a lost connection)."""
    _cluster(zk)
    reader = SnapshotReader(zk)
    reader.read(ahead=True)
    zk.set("/brokers/topics/a/partitions/0/state", _state(2, [2], 5))
    zk.set("/brokers/topics/b/partitions/1/state", _state(2, [2], 5))
    stop = threading.Event()
    stop.set()
    with pytest.raises(ReadAbortedError):
        reader.read(ahead=True, abort=stop)
    zk.set("/brokers/topics/c/partitions/2/state", _state(2, [2], 5))
    assert reader.read() == read_snapshot(zk)
    assert reader.last_state_reads == 3 and reader.last_state_reason == "the others watched, unchanged"
    assert reader.read() == read_snapshot(zk) and reader.last_state_reads == 0


def test_a_standby_reads_ahead_until_stopped_and_the_early_read_is_a_future(zk: KazooClient) -> None:
    _cluster(zk)
    reader = SnapshotReader(zk)
    prepared = threading.Event()
    before = set(threading.enumerate())
    ahead = ReadAhead(reader, interval_s=0.05, prepare=prepared.set).start()
    [thread] = [t for t in threading.enumerate() if t not in before and t.name == "livectl-read-ahead"]
    wait_until("two reads ahead", lambda: reader.reads >= 2, 20)
    ahead.stop()
    assert prepared.is_set() and reader.reads >= 2
    reads = reader.reads
    assert not thread.is_alive() and reader.reads == reads  # stopped: its thread has ended, nothing reads on

    zk.set("/brokers/topics/a/partitions/2/state", _state(2, [2], 7))
    won = read_in_background(reader).result(timeout=20)
    assert won == read_snapshot(zk)
    # the reads ahead encoded the partition states for the failover files; the read after winning keeps the
    # entries of what did not change, so the hand-off encodes only the state written since
    texts = reader.state_texts
    reused = [e for e in won.partition_states if id(e) in texts and texts[id(e)][0] is e]
    assert len(reused) == 8 and all(tp != TopicPartition("a", 2) for tp, _ in reused)
    assert encode_failover_json(1000, won, texts) == encode_failover_json(1000, won)


def test_a_failed_read_ahead_is_tried_again(zk: KazooClient, caplog: pytest.LogCaptureFixture) -> None:
    zk.create("/brokers/topics/bad", b"not json", makepath=True)
    reader = SnapshotReader(zk)

    def failures() -> int:
        return sum("reading the ZooKeeper snapshot ahead failed" in r.getMessage() for r in list(caplog.records))

    with caplog.at_level("WARNING", logger="livectl.app"):
        ahead = ReadAhead(reader, interval_s=0.05).start()
        try:
            # failed, and tried again (and failed again) while the znode is not Kafka's JSON
            wait_until("two failed reads ahead", lambda: failures() >= 2, 20)
            assert reader.reads == 0
            zk.delete("/brokers/topics/bad")
            wait_until("a read ahead after the bad znode went", lambda: reader.reads >= 1, 20)
        finally:
            ahead.stop()
    assert reader.reads >= 1


def test_many_changed_states_are_read_with_multiread_and_then_forgotten(
    zk: KazooClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from streaming.zk import snapshot_reader as zk_snapshot

    monkeypatch.setattr(zk_snapshot, "BULK_REREAD", 2)
    _cluster(zk)
    reader = SnapshotReader(zk)
    reader.read(ahead=True)
    for p in range(3):
        zk.set(f"/brokers/topics/a/partitions/{p}/state", _state(2, [2], 9))
    assert reader.read() == read_snapshot(zk) and reader.last_state_reads == 3
    # read without a watch: not trusted afterwards
    assert reader.read() == read_snapshot(zk) and reader.last_state_reads == 3


def test_unchanged_topics_are_taken_whole_and_the_rest_read_again(zk: KazooClient) -> None:
    """A topic whose topic znode is as read and none of whose state znodes' watches fired comes whole from the
    last read; any other change to a topic — a state written, its topic znode rewritten with the same data,
    the topic deleted and created again just as it was — makes it read and decoded again."""
    _cluster(zk)
    reader = SnapshotReader(zk)
    reader.read(ahead=True)
    assert reader.read() == read_snapshot(zk) and reader.last_topics_kept == 3

    zk.set("/brokers/topics/a/partitions/2/state", _state(2, [2], 4))
    assert reader.read() == read_snapshot(zk)
    assert (reader.last_topics_kept, reader.last_state_reads) == (2, 1)

    data, _ = zk.get("/brokers/topics/b")
    zk.set("/brokers/topics/b", data)  # the same assignment, a new version
    assert reader.read() == read_snapshot(zk)
    assert (reader.last_topics_kept, reader.last_state_reads) == (2, 0)

    zk.delete("/brokers/topics/c", recursive=True)
    _topic(zk, "c", 3)  # the same data and znode versions as before
    fresh = read_snapshot(zk)
    assert reader.read() == fresh and [st.zk_version for tp, st in fresh.partition_states if tp.topic == "c"] == [0] * 3
    assert (reader.last_topics_kept, reader.last_state_reads) == (2, 3)
    assert reader.read() == read_snapshot(zk) and reader.last_topics_kept == 3
    assert reader.remembered == 3 + 9


def test_a_state_znode_missing_when_read_is_read_until_it_exists(zk: KazooClient) -> None:
    """ZooKeeper sets no data watch on a znode that does not exist: a topic with a missing state znode (its
    creation half-way) is never taken whole, so the state written later is in the next read."""
    _cluster(zk)
    zk.delete("/brokers/topics/b/partitions/1/state")
    reader = SnapshotReader(zk)
    reader.read(ahead=True)
    assert reader.read() == read_snapshot(zk) and reader.last_topics_kept == 2 and reader.last_state_reads == 1
    zk.create("/brokers/topics/b/partitions/1/state", _state(1, [1, 2]))
    fresh = read_snapshot(zk)
    assert reader.read() == fresh and len(fresh.partition_states) == 9
    assert reader.read(ahead=True) == read_snapshot(zk) and reader.read() == read_snapshot(zk)
    assert reader.last_topics_kept == 3


def test_a_read_that_failed_to_decode_keeps_nothing_stale(zk: KazooClient) -> None:
    """A read that fails after it read the state znodes (a znode not in Kafka's format) must not let the next
    read take its topics whole as decoded before."""
    _cluster(zk)
    reader = SnapshotReader(zk)
    reader.read(ahead=True)
    zk.set("/brokers/topics/a/partitions/0/state", _state(2, [2], 6))
    zk.set("/brokers/topics/b/partitions/1/state", b'{"version":1,"leader":"x"}')
    with pytest.raises(SnapshotError):
        reader.read()
    zk.set("/brokers/topics/b/partitions/1/state", _state(2, [2], 6))
    assert reader.read() == read_snapshot(zk)  # a-0's change read by the failed read is in it
    assert reader.read() == read_snapshot(zk) and reader.last_topics_kept == 3


def test_a_standby_decides_after_each_read_ahead_and_a_stop_does_not_wait_for_a_decision(zk: KazooClient) -> None:
    from core.controller import ControllerConfig
    from streaming.query.decided import Decider, predicted
    from streaming.runtime.checkpoint_fs import MemoryCheckpointStore

    _cluster(zk)
    store = MemoryCheckpointStore("memory:/decide-ahead")
    decider = Decider(controller_id=1000, checkpoint_dir=store.root, num_buckets=2, config=ControllerConfig())
    ahead = ReadAhead(SnapshotReader(zk), interval_s=0.05, decider=decider).start()
    wait_until("both buckets decided ahead", lambda: len(decider.outcomes()) >= 2, 20)
    ahead.stop()
    # decided for the tree as it will be read after winning: the next epoch (ZooKeeper's /controller_epoch 3)
    assert {o.controller_epoch for o in decider.outcomes().values()} == {4}
    assert predicted(read_snapshot(zk)).controller_epoch == 4

    entered, release = threading.Event(), threading.Event()

    class Slow(Decider):
        def update(self, snapshot: object, state_texts: object, stop: threading.Event) -> int:
            entered.set()
            release.wait(30)
            return 0

    slow = Slow(controller_id=1000, checkpoint_dir=store.root, num_buckets=2, config=ControllerConfig())
    ahead = ReadAhead(SnapshotReader(zk), interval_s=0.05, decider=slow).start()
    try:
        assert entered.wait(20)
        started = time.monotonic()
        ahead.stop()  # the winner does not wait for the decision: its own step follows
        assert time.monotonic() - started < 1.0
    finally:
        release.set()


def test_a_long_round_of_reading_ahead_waits_long_enough_to_keep_its_share(zk: KazooClient) -> None:
    from core.controller import ControllerConfig
    from streaming.query.decided import Decider
    from streaming.runtime.checkpoint_fs import MemoryCheckpointStore

    _cluster(zk)
    store = MemoryCheckpointStore("memory:/work-share")
    decided = threading.Event()

    class Busy(Decider):
        def update(self, snapshot: object, state_texts: object, stop: threading.Event) -> int:
            until = time.thread_time() + 0.4  # a round of at least 0.4 s of CPU
            while time.thread_time() < until:
                sum(range(1000))
            decided.set()
            return 0

    busy = Busy(controller_id=1000, checkpoint_dir=store.root, num_buckets=2, config=ControllerConfig())
    reader = SnapshotReader(zk)
    ahead = ReadAhead(reader, interval_s=0.05, work_share=0.25, decider=busy).start()
    try:
        assert decided.wait(20)
        wait_until("the first round's pause", lambda: ahead.last_round is not None, 20)
        assert ahead.last_round is not None
        work_s, pause_s = ahead.last_round
        # at most a quarter of a core: three times the round's CPU time waited, not the 0.05 s interval
        assert work_s >= 0.4 and pause_s == pytest.approx(3 * work_s)
        assert reader.reads == 1
    finally:
        ahead.stop()
    with pytest.raises(ValueError, match="work_share"):
        ReadAhead(reader, work_share=0)


def test_a_standby_decides_with_the_controller_configs_zookeeper_holds_now(zk: KazooClient) -> None:
    from streaming.driver.side_threads import controller_config_now
    from streaming.settings import Settings

    settings = Settings(controller_id=1000, unclean_leader_election_enable=False, delete_topic_enable=True)
    assert controller_config_now(zk, settings) == settings.controller_config()
    # Kafka's dynamic broker configs: the cluster default, then this controller's own
    zk.create(
        "/config/brokers/<default>", b'{"version":1,"config":{"unclean.leader.election.enable":"true"}}', makepath=True
    )
    zk.create("/config/brokers/1000", b'{"version":1,"config":{"delete.topic.enable":"false"}}')
    now = controller_config_now(zk, settings)
    assert now.unclean_leader_election_enable and not now.delete_topic_enable
    assert now == replace(settings, unclean_leader_election_enable=True, delete_topic_enable=False).controller_config()
