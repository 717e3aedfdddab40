"""Every kind of ZooKeeper write the sink can have refused, against a real ZooKeeper: what the dispatcher
sends (or withholds), what it answers, and how the buckets redo it from ZooKeeper's content.

Each test runs the real core (``core.controller.step``) through the real ZooKeeper sink and the dispatcher;
a second kazoo client plays the other party (an ``AdminZkClient``-style tool or an operator) that changes a
znode underneath, writing Kafka's JSON. The request topic is the in-memory request sink; the refresher's
producer is a recorder (its Kafka path is covered by ``test_streaming_refresh.py``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import pytest
from broker_registration import registration
from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError
from request_bodies import recipients

from core import decisions as dc
from core.codec.events import event_from_json
from core.controller import ControllerState, initial_state, step
from core.events import (
    AlterTopicConfig,
    BrokerFailure,
    ControllerFailover,
    CreatePartitions,
    CreateTopic,
    DeleteTopic,
    Event,
    PartitionError,
    ReassignPartitions,
    StopReplicaResponse,
    TopicCreationRefused,
)
from core.kafka.zksnapshot import snapshot_from_znodes
from core.model import Broker, Endpoint, PartitionTarget, TopicPartition
from core.zk_path_events import ZkTopicChange
from sinks.errors import SinkUnavailableError
from sinks.memory import MemoryRequestSink, MemoryZkSink, MemoryZooKeeper
from sinks.ports import NOT_ATTEMPTED, Fence
from sinks.zookeeper import ZooKeeperSink
from streaming.query.dispatch import Dispatcher
from streaming.query.refresh import MAX_TOPIC_REREADS, StatesRefresher
from streaming.query.stateful import OUTPUT_COLUMNS, decision_rows
from streaming.zk.snapshot_reader import read_snapshot

pytestmark = pytest.mark.integration

BROKERS = (1, 2, 3)


@dataclass
class RecordingProducer:
    """The refresher's producer: keeps what it was given."""

    sent: list[tuple[str, bytes, bytes]] = field(default_factory=list)

    def send(self, topic: str, key: bytes, value: bytes) -> None:
        self.sent.append((topic, key, value))

    def flush(self) -> None:
        return None


@dataclass
class Harness:
    """One controller: the core's state, the real ZooKeeper sink, the dispatcher."""

    zk: KazooClient
    state: ControllerState
    dispatcher: Dispatcher
    requests: MemoryRequestSink
    producer: RecordingProducer
    batch: int = 0
    refused: list[Any] = field(default_factory=list)

    def run(self, *events: Event) -> dict[str, Any]:
        """One micro-batch: the core decides, the dispatcher carries out. Returns what went out."""
        self.state, ds = step(self.state, events)
        frame = pd.DataFrame(decision_rows(0, ds), columns=OUTPUT_COLUMNS)
        before = len(self.requests.messages)
        sent_before = len(self.producer.sent)
        report = self.dispatcher.dispatch(frame, self.batch)
        self.batch += 1
        out = self.requests.messages[before:]
        reads = [event_from_json(v) for _t, _k, v in self.producer.sent[sent_before:]]
        return {
            "report": report,
            "requests": [json.loads(m.value) for m in out if m.topic == self.requests.requests_topic],
            "results": [json.loads(m.value) for m in out if m.topic == self.requests.admin_results_topic],
            "reads": reads,
        }

    @property
    def ctx(self) -> Any:
        return self.state.context


def partitions_in(requests: list[dict[str, Any]], api: str) -> set[tuple[int, str, int]]:
    """(broker, topic, partition) of every partition state in the messages of ``api``."""
    return {
        (b, t["topicName"], p["partitionIndex"])
        for r in requests
        if r["api"] == api
        for b in recipients(r)
        for t in r["body"]["topicStates"]
        for p in t["partitionStates"]
    }


def lisr_leaders(requests: list[dict[str, Any]]) -> dict[tuple[str, int], tuple[int, int]]:
    return {
        (t["topicName"], p["partitionIndex"]): (p["leader"], p["leaderEpoch"])
        for r in requests
        if r["api"] == "LeaderAndIsr"
        for t in r["body"]["topicStates"]
        for p in t["partitionStates"]
    }


def zk_state(zk: KazooClient, topic: str, p: int) -> dict[str, Any]:
    data, _ = zk.get(f"/brokers/topics/{topic}/partitions/{p}/state")
    return dict(json.loads(data))


@pytest.fixture
def h(zk_chrooted: KazooClient) -> Iterator[Harness]:
    zk = zk_chrooted
    zk.create("/controller_epoch", b"1")
    fence = Fence(1, 0)
    requests = MemoryRequestSink(fence)
    producer = RecordingProducer()
    sink = ZooKeeperSink(zk, fence, "q")
    refresher = StatesRefresher(zk, producer, "livectl.broker-events", controller_epoch=1)
    dispatcher = Dispatcher(sink, requests, on_refused=refresher)
    brokers = [Broker(b, 100 + b, None, (Endpoint("PLAINTEXT", f"broker{b}", 9092 + b),)) for b in BROKERS]
    harness = Harness(zk, initial_state(), dispatcher, requests, producer)
    harness.run(ControllerFailover(0, snapshot_from_znodes({}, brokers, 1, 0)))
    yield harness


def _kafka_state(leader: int, epoch: int, isr: list[int], controller_epoch: int = 1) -> bytes:
    """A partition state znode as Kafka's ``TopicPartitionStateZNode`` encodes it."""
    body = {"controller_epoch": controller_epoch, "leader": leader, "version": 1, "leader_epoch": epoch, "isr": isr}
    return json.dumps(body).encode()


# ---------------------------------------------------------------------- partition state znodes


def test_state_create_refused_is_withheld_then_adopted_from_zookeeper(h: Harness) -> None:
    """A new partition's state znode already exists (someone initialised it): its LeaderAndIsr and
    UpdateMetadata are withheld, the znode is re-read and its bucket takes ZooKeeper's state."""
    h.run(CreateTopic("c", "t", replica_assignment=((1, 2),)))
    # a tool initialises partition 1 before livectl adds it
    h.zk.create("/brokers/topics/t/partitions/1/state", _kafka_state(2, 4, [2, 3]), makepath=True)
    out = h.run(CreatePartitions("p", "t", 2, ((3, 2),)))
    assert out["report"].zk_failed == 1
    assert not {tp for tp in partitions_in(out["requests"], "LeaderAndIsr") if tp[1:] == ("t", 1)}
    assert not {tp for tp in partitions_in(out["requests"], "UpdateMetadata") if tp[1:] == ("t", 1)}
    assert zk_state(h.zk, "t", 1)["leader"] == 2  # untouched
    (read,) = out["reads"]
    assert read.topic == "t" and [p for p, _ in read.states] == [1]
    again = h.run(read)
    lai = h.ctx.leadership(TopicPartition("t", 1)).leader_and_isr
    assert (lai.leader, lai.leader_epoch, lai.isr) == (2, 4, (2, 3))
    # what the brokers are told now is what ZooKeeper holds
    um = partitions_in(again["requests"], "UpdateMetadata")
    assert {(b, "t", 1) for b in BROKERS} <= um
    assert zk_state(h.zk, "t", 1)["leader_epoch"] == 4


def test_state_compare_and_set_refused_is_withheld_then_redone(h: Harness) -> None:
    h.run(CreateTopic("c", "t", replica_assignment=((1, 2), (2, 1))))
    # an operator rewrites t-0's state (the znode's version moves on)
    h.zk.set("/brokers/topics/t/partitions/0/state", _kafka_state(1, 0, [1, 2]))
    out = h.run(BrokerFailure(1, 101))
    # t-0 (led by 1) needed an election, refused: nothing about t-0 went out; t-1's ISR shrink did
    leaders = lisr_leaders(out["requests"])
    assert ("t", 0) not in leaders and ("t", 1) in leaders
    assert zk_state(h.zk, "t", 0)["leader"] == 1
    (read,) = out["reads"]
    redo = h.run(read)
    st = zk_state(h.zk, "t", 0)
    assert (st["leader"], st["isr"]) == (2, [2])
    assert lisr_leaders(redo["requests"])[("t", 0)] == (2, st["leader_epoch"])


# ---------------------------------------------------------------------- topic znodes


def test_topic_create_refused_answers_topic_already_exists_and_writes_nothing_beneath(h: Harness) -> None:
    """``/brokers/topics/<t>`` written by an AdminZkClient-style tool first: Kafka's CreateTopics answers
    TOPIC_ALREADY_EXISTS; no request about ``t`` goes out and nothing is written into the tool's topic."""
    tool = {"version": 3, "topic_id": "AAAAAAAAAAAAAAAAAAAAAQ", "partitions": {"0": [3, 1]}}
    h.zk.create("/brokers/topics/t", json.dumps(tool).encode(), makepath=True)
    out = h.run(CreateTopic("c", "t", replica_assignment=((1, 2), (2, 3))), CreateTopic("c2", "u", 1, 2))
    (t_result,) = [r for r in out["results"] if r["request_id"] == "c"]
    assert (t_result["status"], t_result["error"]) == ("error", "TOPIC_ALREADY_EXISTS")
    assert "Topic 't' already exists." in t_result["message"]
    (u_result,) = [r for r in out["results"] if r["request_id"] == "c2"]
    assert u_result["status"] == "ok"
    topics_sent = {tp[1] for api in ("LeaderAndIsr", "UpdateMetadata") for tp in partitions_in(out["requests"], api)}
    assert topics_sent == {"u"}
    assert json.loads(h.zk.get("/brokers/topics/t")[0]) == tool
    assert not h.zk.exists("/brokers/topics/t/partitions")
    assert out["report"].zk_failed == 3  # the topic znode, and both partition states beneath it
    # the driver read the tool's topic; its bucket drops its own creation and takes that one
    (read,) = out["reads"]
    assert isinstance(read, TopicCreationRefused) and read.znode is not None
    assert (read.topic, read.znode.partitions, read.states) == ("t", ((0, (3, 1)),), ())
    adopted = h.run(read)
    assert h.ctx.replicas(TopicPartition("t", 0)) == (3, 1)
    assert h.ctx.topic_ids["t"] == "AAAAAAAAAAAAAAAAAAAAAQ"
    assert TopicPartition("t", 1) not in h.ctx.partition_assignments
    st = zk_state(h.zk, "t", 0)
    assert (st["leader"], st["isr"]) == (3, [3, 1])
    assert lisr_leaders(adopted["requests"]) == {("t", 0): (3, 0)}
    assert {(b, "t", 0) for b in BROKERS} <= partitions_in(adopted["requests"], "UpdateMetadata")
    assert json.loads(h.zk.get("/brokers/topics/t")[0]) == tool


def test_topic_znode_gone_under_a_reassignment_withholds_the_topic(h: Harness) -> None:
    h.run(CreateTopic("c", "t", replica_assignment=((1, 2),)))
    # an operator removes the topic's tree underneath
    h.zk.delete("/brokers/topics/t", recursive=True)
    out = h.run(ReassignPartitions("r", (PartitionTarget("t", 0, (2, 3)),)))
    assert out["report"].zk_failed >= 1
    for api in ("LeaderAndIsr", "UpdateMetadata", "StopReplica"):
        assert not {tp for tp in partitions_in(out["requests"], api) if tp[1] == "t"}, api
    assert not h.zk.exists("/brokers/topics/t")


# ---------------------------------------------------------------------- a broker's replica on the controller id

OFFSETS = "__consumer_offsets"
OFFSETS_ID = "AAAAAAAAAAAAAAAAAAAAAg"


def _broker_topic(partitions: dict[int, list[int]]) -> bytes:
    """A topic znode as a broker's ``AdminZkClient`` writes it (Kafka 3.9's version 3)."""
    body = {
        "version": 3,
        "topic_id": OFFSETS_ID,
        "partitions": {str(p): r for p, r in partitions.items()},
        "adding_replicas": {},
        "removing_replicas": {},
    }
    return json.dumps(body).encode()


def _offsets_znode(zk: KazooClient) -> tuple[dict[int, list[int]], int]:
    data, stat = zk.get(f"/brokers/topics/{OFFSETS}")
    return {int(p): r for p, r in json.loads(data)["partitions"].items()}, stat.version


def _watcher_reading(zk: KazooClient) -> ZkTopicChange:
    """The admin watcher's event for the topic znode as it is now (streaming.zk.admin_watch)."""
    parts, version = _offsets_znode(zk)
    return ZkTopicChange(1, OFFSETS, tuple((p, tuple(r)) for p, r in sorted(parts.items())), OFFSETS_ID, (), version)


def test_a_repair_refused_by_a_write_in_between_is_read_again_and_redone(h: Harness) -> None:
    """The controller's repair of a replica a broker placed on its id (0 here) is a compare-and-set at the
    version read; a broker's CreatePartitions writes the znode in between. The refusal withholds the topic's
    requests; the driver reads the znode again and hands it back as a topic change; the bucket repairs what is
    there now, writes it at the new version and sends what was withheld."""
    h.zk.create(f"/brokers/topics/{OFFSETS}", _broker_topic({0: [0, 1, 2], 1: [1, 2, 3]}), makepath=True)
    event = _watcher_reading(h.zk)
    assert event.zk_version == 0
    # in between: AdminZkClient.addPartitions, the existing partitions as they were and one more on 0
    h.zk.set(f"/brokers/topics/{OFFSETS}", _broker_topic({0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 0, 1]}))
    out = h.run(event)
    assert out["report"].zk_failed == 1
    for api in ("LeaderAndIsr", "UpdateMetadata"):
        assert not {tp for tp in partitions_in(out["requests"], api) if tp[1] == OFFSETS}, api
    assert _offsets_znode(h.zk) == ({0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 0, 1]}, 1), "the other party's write stands"
    (read,) = out["reads"]
    assert read == _watcher_reading(h.zk), "read again as the watcher reads it, at version 1"
    again = h.run(read)
    assert again["report"].zk_failed == 0 and not again["reads"]
    parts, version = _offsets_znode(h.zk)
    assert version == 2
    assert all(0 not in reps and len(set(reps)) == 3 for reps in parts.values()), parts
    assert parts[1] == [1, 2, 3]
    assert {tp.partition: list(h.ctx.replicas(tp)) for tp in h.ctx.partitions_for_topic(OFFSETS)} == parts
    for p, reps in parts.items():
        st = zk_state(h.zk, OFFSETS, p)
        assert (st["leader"], st["isr"]) == (reps[0], reps)
    # what was withheld goes out now, to real brokers only
    lisr = partitions_in(again["requests"], "LeaderAndIsr")
    assert lisr == {(b, OFFSETS, p) for p, reps in parts.items() for b in reps}
    assert {(b, OFFSETS, p) for b in BROKERS for p in parts} <= partitions_in(again["requests"], "UpdateMetadata")


def test_a_reading_older_than_the_redo_in_a_later_micro_batch_is_not_refused_nor_its_requests_withheld(
    h: Harness,
) -> None:
    """The refused repair is read again twice at the same version: by the driver (handed back at once) and by
    the admin watcher, whose reading reaches the bucket a micro-batch after the redo wrote the znode. That
    reading is older than the controller's own write: no compare-and-set at its version (ZooKeeper would
    refuse it and withhold every request of the topic in that micro-batch: here a failed broker's new
    leaders)."""
    h.zk.create(f"/brokers/topics/{OFFSETS}", _broker_topic({0: [0, 1, 2], 1: [1, 2, 3]}), makepath=True)
    event = _watcher_reading(h.zk)
    h.zk.set(f"/brokers/topics/{OFFSETS}", _broker_topic({0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 0, 1]}))
    watcher = _watcher_reading(h.zk)  # the watcher, woken by that write, reads version 1 too
    out = h.run(event)
    assert out["report"].zk_failed == 1
    (read,) = out["reads"]
    assert read == watcher
    again = h.run(read)
    assert again["report"].zk_failed == 0
    parts, version = _offsets_znode(h.zk)
    assert version == 2 and all(0 not in reps for reps in parts.values()), parts
    led_by_3 = {p for p, reps in parts.items() if reps[0] == 3}
    assert led_by_3, parts
    # the watcher's reading of version 1 in the next micro-batch, with broker 3's failure
    later = h.run(watcher, BrokerFailure(3))
    assert later["report"].zk_failed == 0 and not later["reads"]
    assert _offsets_znode(h.zk) == (parts, 2)
    # sent, not withheld: every partition with a replica on 3 (its ISR shrunk), those it led with a new leader
    sent = {p: leader for (t, p), (leader, _) in lisr_leaders(later["requests"]).items() if t == OFFSETS}
    assert set(sent) == {p for p, reps in parts.items() if 3 in reps}, sent
    for p in led_by_3:
        assert sent[p] != 3 and zk_state(h.zk, OFFSETS, p)["leader"] == sent[p]


def test_a_repair_refused_every_time_is_read_again_a_bounded_number_of_times(h: Harness) -> None:
    h.zk.create(f"/brokers/topics/{OFFSETS}", _broker_topic({0: [0, 1]}), makepath=True)
    event = _watcher_reading(h.zk)
    for attempt in range(1, MAX_TOPIC_REREADS + 2):
        # someone writes the znode again between each reading and its redo (the same content, a new version)
        h.zk.set(f"/brokers/topics/{OFFSETS}", _broker_topic({0: [0, 1]}))
        out = h.run(event)
        assert out["report"].zk_failed == 1, attempt
        if attempt <= MAX_TOPIC_REREADS:
            (event,) = out["reads"]
            assert event.zk_version == attempt
        else:
            assert out["reads"] == [], "given up, with an error logged"
    assert _offsets_znode(h.zk)[0] == {0: [0, 1]}
    # the next topic change (or takeover) repairs it: a write that stands this time
    again = h.run(_watcher_reading(h.zk))
    assert again["report"].zk_failed == 0
    repaired = list(h.ctx.replicas(TopicPartition(OFFSETS, 0)))
    assert 0 not in repaired and _offsets_znode(h.zk)[0] == {0: repaired}


def _register(zk: KazooClient) -> None:
    for b in BROKERS:
        zk.create(f"/brokers/ids/{b}", registration(f"broker{b}", 9092 + b), makepath=True)


def test_a_topic_a_broker_created_while_no_controller_was_active_is_repaired_at_takeover(h: Harness) -> None:
    """No controller active (livectl failing over): no topic change is published for the broker's topic. The
    takeover reads it with everything else (Kafka's onControllerFailover) and repairs it: the znode rewritten
    at the version the snapshot read, its partitions started on real brokers."""
    _register(h.zk)
    h.zk.create(f"/brokers/topics/{OFFSETS}", _broker_topic({0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 0]}), makepath=True)
    out = h.run(ControllerFailover(0, read_snapshot(h.zk)))
    assert out["report"].zk_failed == 0
    parts, version = _offsets_znode(h.zk)
    assert version == 1
    assert all(0 not in reps and len(set(reps)) == 3 for reps in parts.values()), parts
    assert parts[1] == [1, 2, 3]
    for p, reps in parts.items():
        st = zk_state(h.zk, OFFSETS, p)
        assert (st["leader"], st["isr"]) == (reps[0], reps)
    assert partitions_in(out["requests"], "LeaderAndIsr") == {
        (b, OFFSETS, p) for p, reps in parts.items() for b in reps
    }


def test_a_takeovers_repair_refused_is_read_again_and_redone(h: Harness) -> None:
    _register(h.zk)
    h.zk.create(f"/brokers/topics/{OFFSETS}", _broker_topic({0: [0, 1]}), makepath=True)
    snapshot = read_snapshot(h.zk)
    # between the takeover's reading and its first micro-batch, the broker adds a partition
    h.zk.set(f"/brokers/topics/{OFFSETS}", _broker_topic({0: [0, 1], 1: [0, 2]}))
    out = h.run(ControllerFailover(0, snapshot))
    assert out["report"].zk_failed == 1
    assert not {tp for tp in partitions_in(out["requests"], "LeaderAndIsr") if tp[1] == OFFSETS}
    (read,) = out["reads"]
    assert read == _watcher_reading(h.zk)
    again = h.run(read)
    assert again["report"].zk_failed == 0
    parts, _ = _offsets_znode(h.zk)
    assert set(parts) == {0, 1} and all(0 not in reps for reps in parts.values()), parts
    assert partitions_in(again["requests"], "LeaderAndIsr") == {
        (b, OFFSETS, p) for p, reps in parts.items() for b in reps
    }


# ---------------------------------------------------------------------- configs and admin znodes


def test_topic_configs_are_set_or_created_as_kafka_does(h: Harness) -> None:
    # a config left behind by an earlier topic of the same name
    h.zk.create("/config/topics/t", b'{"version":1,"config":{"retention.ms":"1"}}', makepath=True)
    out = h.run(CreateTopic("c", "t", 1, 2, configs=(("cleanup.policy", "compact"),)))
    assert out["report"].zk_failed == 0
    assert json.loads(h.zk.get("/config/topics/t")[0])["config"] == {"cleanup.policy": "compact"}
    # the config znode removed by hand: altering the config creates it again
    h.zk.delete("/config/topics/t")
    out = h.run(AlterTopicConfig("a", "t", (("unclean.leader.election.enable", "true"),)))
    assert out["report"].zk_failed == 0
    assert json.loads(h.zk.get("/config/topics/t")[0])["config"]["unclean.leader.election.enable"] == "true"
    assert [r["status"] for r in out["results"]] == ["ok"]


def test_deletion_marker_already_there_and_already_gone_are_done(h: Harness) -> None:
    h.run(CreateTopic("c", "t", replica_assignment=((1, 2),)))
    # a tool marks the topic for deletion in the same breath as the admin command
    h.zk.create("/admin/delete_topics/t", b"", makepath=True)
    out = h.run(DeleteTopic("d", "t"))
    assert out["report"].zk_failed == 1
    # nothing withheld: the deletion goes on (UpdateMetadata with leader -2, StopReplica to the replicas)
    assert {(b, "t", 0) for b in BROKERS} <= partitions_in(out["requests"], "UpdateMetadata")
    assert {(1, "t", 0), (2, "t", 0)} <= partitions_in(out["requests"], "StopReplica")
    # someone removes the marker before the deletion completes: deleting it again is nothing to do
    h.zk.delete("/admin/delete_topics/t")
    done = h.run(
        StopReplicaResponse(1, (PartitionError("t", 0, 0),)), StopReplicaResponse(2, (PartitionError("t", 0, 0),))
    )
    assert [r["status"] for r in done["results"]] == ["ok"]
    assert not h.zk.exists("/brokers/topics/t") and not h.zk.exists("/config/topics/t")
    assert "t" not in h.ctx.topic_partitions


def test_not_attempted_writes_are_reported_as_such(h: Harness) -> None:
    """The sink's own report for a refused creation: the writes beneath it are not attempted."""
    h.zk.create("/brokers/topics/t", b'{"version":2,"partitions":{"0":[1]}}', makepath=True)
    sink = h.dispatcher.zk_sink
    assert isinstance(sink, ZooKeeperSink)
    writes = [
        dc.ZkWrite(dc.ZkOp.CREATE, "/brokers/topics/t", '{"version":2,"partitions":{"0":[2]}}', make_parents=True),
        dc.ZkWrite(dc.ZkOp.CREATE, "/brokers/topics/t/partitions/0/state", "{}", make_parents=True),
        dc.ZkWrite(dc.ZkOp.CREATE, "/brokers/topics/tt", '{"version":2,"partitions":{"0":[2]}}', make_parents=True),
    ]
    res = sink.write_batch(99, writes)
    assert [(f.index, f.error) for f in res.failed] == [(0, "NodeExists"), (1, NOT_ATTEMPTED)]
    assert res.applied == 1 and h.zk.exists("/brokers/topics/tt")
    assert not h.zk.exists("/brokers/topics/t/partitions")


class RacingSink(ZooKeeperSink):
    """The real sink, with another party changing the tree right after the first plan of each batch (the
    window between what the planner read and what ZooKeeper applies)."""

    def __init__(self, *args: Any, races: list[Any], **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.races = races
        self.plans = 0

    def _plan(self, *args: Any, **kw: Any) -> Any:
        txns = super()._plan(*args, **kw)
        self.plans += 1
        if self.plans == 1 and self.races:
            self.races.pop(0)()
        return txns

    def write_batch(self, batch_id: int, writes: Any) -> Any:
        self.plans = 0
        return super().write_batch(batch_id, writes)


def test_stale_plans_are_read_again_and_redone(zk_chrooted: KazooClient) -> None:
    """An upsert planned as a create meets a znode created meanwhile; a tree deletion meets a child
    added meanwhile (Kafka's deleteRecursive retries): both are re-read and redone, not refused."""
    zk = zk_chrooted
    zk.create("/controller_epoch", b"1")
    zk.create("/brokers/topics/gone/partitions/0/state", b"{}", makepath=True)
    races = [
        lambda: zk.create("/config/topics/t", b'{"version":1,"config":{"a":"1"}}', makepath=True),
        lambda: zk.create("/brokers/topics/gone/partitions/1", b"", makepath=True),
    ]
    sink = RacingSink(zk, Fence(1, 0), "q", races=races)
    upsert = dc.ZkWrite(dc.ZkOp.UPSERT, "/config/topics/t", '{"version":1,"config":{"b":"2"}}', make_parents=True)
    res = sink.write_batch(0, [upsert])
    assert (res.failed, res.applied, sink.plans) == ((), 1, 2)
    assert json.loads(zk.get("/config/topics/t")[0]) == {"version": 1, "config": {"b": "2"}}
    res = sink.write_batch(1, [dc.ZkWrite(dc.ZkOp.DELETE_TREE, "/brokers/topics/gone", None)])
    assert (res.failed, res.applied, sink.plans) == ((), 1, 2)
    assert not zk.exists("/brokers/topics/gone")


class CrashingSink(ZooKeeperSink):
    """The real sink, losing ZooKeeper (a timeout) when it submits its ``crash_at``-th transaction."""

    def __init__(self, *args: Any, crash_at: int, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.crash_at = crash_at
        self.submitted = 0

    def _submit(self, *args: Any, **kw: Any) -> Any:
        self.submitted += 1
        if self.submitted == self.crash_at:
            raise KazooTimeoutError("injected: ZooKeeper lost mid-batch")
        return super()._submit(*args, **kw)


def _refusing_batch() -> list[dc.ZkWrite]:
    return [
        dc.ZkWrite(dc.ZkOp.CREATE, "/brokers/topics/t", '{"version":2,"partitions":{"0":[2]}}', make_parents=True),
        dc.ZkWrite(dc.ZkOp.CREATE, "/brokers/topics/t/partitions/0/state", "{}", make_parents=True),
        dc.ZkWrite(dc.ZkOp.CREATE, "/x/a", "a"),
        dc.ZkWrite(dc.ZkOp.CREATE, "/x/b", "b"),
    ]


def test_a_replay_reports_the_refusals_its_first_attempt_recorded(zk_chrooted: KazooClient) -> None:
    """A crash after a refused creation: the replay skips what was done, reports the recorded refusal
    again and still attempts nothing beneath it, so the dispatcher holds back the same requests. The
    in-memory sink does the same."""
    zk = zk_chrooted
    zk.create("/controller_epoch", b"1")
    zk.create("/brokers/topics/t", b'{"version":2,"partitions":{"0":[1]}}', makepath=True)
    zk.create("/x")
    writes = _refusing_batch()
    first = CrashingSink(zk, Fence(1, 0), "q", ops_per_transaction=3, max_in_flight=1, crash_at=3)
    with pytest.raises(SinkUnavailableError):
        first.write_batch(5, writes)
    assert zk.exists("/x/a") and not zk.exists("/x/b")
    replay = ZooKeeperSink(zk, Fence(1, 0), "q").write_batch(5, writes)
    expected = [(0, "NodeExists"), (1, NOT_ATTEMPTED)]
    assert [(f.index, f.error) for f in replay.failed] == expected
    assert (replay.skipped, replay.applied) == (3, 1)
    assert zk.exists("/x/b") and not zk.exists("/brokers/topics/t/partitions")
    again = ZooKeeperSink(zk, Fence(1, 0), "q").write_batch(5, writes)
    assert [(f.index, f.error) for f in again.failed] == expected and again.applied == 0

    mem = MemoryZooKeeper()
    mem.create("/controller_epoch", b"1")
    mem.create("/brokers/topics/t", b"{}", make_parents=True)
    mem.create("/x")
    with pytest.raises(SinkUnavailableError):
        MemoryZkSink(mem, Fence(1, 0), "q", crash_after=3).write_batch(5, writes)
    mem_replay = MemoryZkSink(mem, Fence(1, 0), "q").write_batch(5, writes)
    assert [(f.index, f.error) for f in mem_replay.failed] == expected
    assert (mem_replay.skipped, mem_replay.applied) == (3, 1)
