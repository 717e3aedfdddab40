"""The request-topic sink against real Apache Kafka: merging, Kafka's order, headers, replay."""

from __future__ import annotations

import json
import uuid
from typing import Any, TypedDict

import pytest
from kafka import KafkaConsumer, TopicPartition
from request_bodies import lisr_request, recipients, um_request

from core.decisions import AdminResult, AdminStatus, BrokerRequest
from core.kafka.requests import SHARED_BROKER_ID, Addressee, RequestApi, WireBody
from sinks.errors import ControllerFencedError
from sinks.memory import MemoryRequestSink
from sinks.ports import Fence, Rejected
from sinks.requests import TAIL_WINDOW, RequestSink, ensure_topics, partition_for_key
from sinks.requests.tail import TailAhead

pytestmark = pytest.mark.integration

FENCE = Fence(controller_epoch=3, epoch_zk_version=2)


class Topics(TypedDict):
    """A sink's three topics, as :class:`RequestSink`'s keyword arguments."""

    requests_topic: str
    admin_results_topic: str
    rejected_topic: str


@pytest.fixture
def topics(kafka_broker: Any) -> Topics:
    suffix = uuid.uuid4().hex[:8]
    names: Topics = {
        "requests_topic": f"req-{suffix}",
        "admin_results_topic": f"res-{suffix}",
        "rejected_topic": f"rej-{suffix}",
    }
    ensure_topics(
        kafka_broker.bootstrap,
        [names["requests_topic"], names["admin_results_topic"], names["rejected_topic"]],
        partitions=3,
    )
    return names


def _read_all(bootstrap: str, topic: str) -> list[Any]:
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    tps = [TopicPartition(topic, p) for p in sorted(c.partitions_for_topic(topic))]
    c.assign(tps)
    for tp in tps:
        c.seek(tp, 0)
    out: list[Any] = []
    while True:
        got = c.poll(timeout_ms=500, max_records=1000)
        if not got:
            break
        for records in got.values():
            out.extend(records)
    c.close()
    return sorted(out, key=lambda r: (r.partition, r.offset))


def _batch() -> list[BrokerRequest]:
    # two buckets' worth of requests, deliberately out of Kafka's order
    return [
        BrokerRequest(1, RequestApi.STOP_REPLICA, WireBody({"topicStates": [{"topicName": "x"}]})),
        um_request(1, "a", [1, 2]),
        lisr_request(1, "a", [0, 1]),
        lisr_request(2, "a", [2]),
        um_request(2, "a", [1, 2]),
        lisr_request(1, "b", [0]),
        um_request(1, "b", [2, 3]),
        BrokerRequest(2, RequestApi.CONTROLLED_SHUTDOWN_RESPONSE, WireBody({"errorCode": 0})),
        BrokerRequest(2, RequestApi.CONTROLLED_SHUTDOWN_RESPONSE, WireBody({"errorCode": 0})),
    ]


def test_requests_are_merged_per_broker_and_api_in_kafka_order(kafka_broker: Any, topics: Topics) -> None:
    with RequestSink(kafka_broker.bootstrap, FENCE, **topics) as sink:
        result = sink.write_requests(5, _batch())
    assert (result.written, result.skipped) == (6, 0)
    records = _read_all(kafka_broker.bootstrap, topics["requests_topic"])
    per_broker: dict[int, list[str]] = {}
    for r in records:
        v = json.loads(r.value)
        assert r.key == str(v["brokerId"]).encode()
        assert (v["controllerEpoch"], v["batchId"], v["version"]) == (3, 5, 1)
        headers = dict(r.headers)
        assert headers == {"api": v["api"].encode(), "batch_id": b"5", "controller_epoch": b"3"}
        per_broker.setdefault(v["brokerId"], []).append(v["api"])
        if (v["brokerId"], v["api"]) == (1, "LeaderAndIsr"):
            assert [t["topicName"] for t in v["body"]["topicStates"]] == ["a", "b"]
        if (v["brokerId"], v["api"]) == (1, "UpdateMetadata"):
            assert [b["id"] for b in v["body"]["liveBrokers"]] == [1, 2, 3]
    assert per_broker == {
        1: ["LeaderAndIsr", "UpdateMetadata", "StopReplica"],
        2: ["LeaderAndIsr", "UpdateMetadata", "ControlledShutdownResponse"],
    }


def _shared_batch() -> list[BrokerRequest]:
    """LeaderAndIsr to brokers 1-6, one UpdateMetadata for all six (two buckets' parts), StopReplica to 4."""
    um = um_request(1, "a", [1, 2, 3, 4, 5, 6])
    addressees = tuple(Addressee(b, 100 + b) for b in range(1, 7))
    shared = [
        BrokerRequest(SHARED_BROKER_ID, RequestApi.UPDATE_METADATA, WireBody({**um.body_json(), "brokerEpoch": -1}),
                      addressees),
        BrokerRequest(SHARED_BROKER_ID, RequestApi.UPDATE_METADATA,
                      WireBody({**um_request(1, "b", [1]).body_json(), "brokerEpoch": -1}), addressees),
    ]  # fmt: skip
    stop = BrokerRequest(4, RequestApi.STOP_REPLICA, WireBody({"topicStates": [{"topicName": "x"}]}))
    return [stop, *shared, *(lisr_request(b, "a", [b]) for b in range(1, 7))]


def test_a_shared_update_metadata_is_read_by_each_broker_in_its_own_partition(
    kafka_broker: Any, topics: Topics
) -> None:
    with RequestSink(kafka_broker.bootstrap, FENCE, **topics) as sink:
        result = sink.write_requests(5, _shared_batch())
    records = _read_all(kafka_broker.bootstrap, topics["requests_topic"])
    holding = {partition_for_key(str(b).encode(), [0, 1, 2]) for b in range(1, 7)}
    shared = [r for r in records if r.key == b"-1"]
    assert (
        len(holding) > 1
        and len(shared) == len(holding)
        and (result.written, result.skipped) == (6 + 1 + len(holding), 0)
    )
    for r in records:
        v = json.loads(r.value)
        # each broker's own messages where the producer's partitioner put them, and the shared copy with them
        for b in recipients(v):
            assert r.partition == partition_for_key(str(b).encode(), [0, 1, 2])
        if r.key == b"-1":
            assert v["version"] == 2 and [t["topicName"] for t in v["body"]["topicStates"]] == ["a", "b"]
    for b in range(1, 7):
        mine = [json.loads(r.value)["api"] for r in records if b in recipients(json.loads(r.value))]
        assert mine == (
            ["LeaderAndIsr", "UpdateMetadata", "StopReplica"] if b == 4 else ["LeaderAndIsr", "UpdateMetadata"]
        )
    # a replay after a crash (a new sink, a new epoch) reads the tail and sends nothing again
    with RequestSink(kafka_broker.bootstrap, Fence(4, 3), **topics) as newer:
        again = newer.write_requests(5, _shared_batch())
    assert (again.written, again.skipped) == (0, result.written)


def test_replay_after_a_partial_write_sends_only_what_is_missing(kafka_broker: Any, topics: Topics) -> None:
    batch = _batch()
    with RequestSink(kafka_broker.bootstrap, FENCE, **topics) as first:
        first.write_requests(6, [r for r in batch if r.broker_id == 2])  # "crashed" after broker 2's messages
        first.write_requests(7, [])  # nothing to send: no traffic
    with RequestSink(kafka_broker.bootstrap, FENCE, **topics) as restarted:
        replay = restarted.write_requests(6, batch)
        assert (replay.written, replay.skipped) == (3, 3)
        # the count the replay wait watches: the messages the broker acknowledged
        assert restarted.messages_acked == 3
        # the same instance replaying again knows it is done, and an older batch is skipped too
        assert restarted.write_requests(6, batch).written == 0
        assert restarted.write_requests(5, batch).written == 0
        assert restarted.write_requests(7, batch).written == 6
    with RequestSink(kafka_broker.bootstrap, FENCE, **topics) as third:
        assert third.write_requests(7, batch).written == 0
    # a controller elected after a crash replays the batch under a new epoch: nothing is sent twice
    with RequestSink(kafka_broker.bootstrap, Fence(4, 3), **topics) as newer:
        assert newer.write_requests(7, batch).written == 0
        assert newer.write_requests(8, batch[:1]).written == 1
    records = _read_all(kafka_broker.bootstrap, topics["requests_topic"])
    values = [json.loads(r.value) for r in records]
    idents = [(v["batchId"], v["brokerId"], v["api"]) for v in values]
    assert len(idents) == len(set(idents)) == 13
    assert [v["controllerEpoch"] for v in values if v["batchId"] == 8] == [4]
    # a new run (a new checkpoint: batch ids start again at 0) is not mistaken for a replay
    with RequestSink(kafka_broker.bootstrap, Fence(5, 4), **topics) as new_run:
        assert new_run.write_requests(6, batch).written == 6


def test_the_tail_read_reaches_back_past_a_small_window(kafka_broker: Any, topics: Topics) -> None:
    # the tail is read from the end, window by doubling window, until it reaches a message of an earlier
    # batch: with a window of 1 that takes several rounds over batch 4's messages
    batch = _batch()
    with RequestSink(kafka_broker.bootstrap, FENCE, tail_window=1, **topics) as first:
        assert first.write_requests(3, batch).written == 6
        first.write_requests(4, [r for r in batch if r.broker_id == 2])
    with RequestSink(kafka_broker.bootstrap, Fence(4, 3), tail_window=1, **topics) as newer:
        replay = newer.write_requests(4, batch)
        assert (replay.written, replay.skipped) == (3, 3)
    records = _read_all(kafka_broker.bootstrap, topics["requests_topic"])
    assert all(dict(r.headers)["batch_id"] in (b"3", b"4") for r in records) and len(records) == 12


def test_a_replay_longer_than_the_first_window_skips_every_message_already_written(
    kafka_broker: Any, topics: Topics
) -> None:
    # the default first window (TAIL_WINDOW) is smaller than a large batch's tail: the read widens until it
    # sees the batch before, so a replay still finds every message of its batch. Each message of batch 4 is
    # its own transaction here, so its own record batch (a broker may count offsets per record batch)
    brokers = [b for b in range(1, 1000) if partition_for_key(str(b).encode(), [0, 1, 2]) == 0][: 3 * TAIL_WINDOW]
    many = [lisr_request(b, "a", [0]) for b in brokers]
    with RequestSink(kafka_broker.bootstrap, FENCE, **topics) as first:
        assert first.write_requests(3, _batch()).written == 6
        for r in many:
            assert first.write_requests(4, [r]).written == 1
    with RequestSink(kafka_broker.bootstrap, Fence(4, 3), **topics) as newer:
        replay = newer.write_requests(4, many)
        assert (replay.written, replay.skipped) == (0, len(many))
        assert newer.write_requests(5, many[:2]).written == 2
    records = _read_all(kafka_broker.bootstrap, topics["requests_topic"])
    assert len(records) == 6 + len(many) + 2


def test_admin_results_and_rejected_records(kafka_broker: Any, topics: Topics) -> None:
    results = [
        AdminResult("r-1", "create_topic", AdminStatus.OK),
        AdminResult("r-2", "reassign_partitions", AdminStatus.IN_PROGRESS, details={"pending": 3}),
        AdminResult("r-2", "reassign_partitions", AdminStatus.OK),
    ]
    rejected = [Rejected("livectl.admin", 0, 41, '{"type":"nope"}', ("type: unknown event type 'nope'",))]
    with RequestSink(kafka_broker.bootstrap, FENCE, **topics) as sink:
        assert sink.write_admin_results(9, results[:2]).written == 2  # then "crash"
    with RequestSink(kafka_broker.bootstrap, FENCE, **topics) as sink:
        r = sink.write_admin_results(9, results)
        assert (r.written, r.skipped) == (1, 2)
        assert sink.write_rejected(9, rejected).written == 1
    with RequestSink(kafka_broker.bootstrap, FENCE, **topics) as sink:
        assert sink.write_rejected(9, rejected).skipped == 1
    got = _read_all(kafka_broker.bootstrap, topics["admin_results_topic"])
    values = sorted((r.key, json.loads(r.value)["status"]) for r in got)
    assert values == [(b"r-1", "ok"), (b"r-2", "in_progress"), (b"r-2", "ok")]
    first = json.loads(got[0].value)
    assert first["batch_id"] == 9 and first["controller_epoch"] == 3 and first["type"] == "admin_result"
    [rej] = _read_all(kafka_broker.bootstrap, topics["rejected_topic"])
    assert rej.key == b"livectl.admin/0/41"
    assert json.loads(rej.value)["reasons"] == ["type: unknown event type 'nope'"]
    assert json.loads(rej.value)["payload"] == '{"type":"nope"}'


def test_the_memory_fake_sends_the_same_messages(kafka_broker: Any, topics: Topics) -> None:
    fake = MemoryRequestSink(FENCE, **topics)
    with RequestSink(kafka_broker.bootstrap, FENCE, **topics) as sink:
        sink.write_requests(1, _batch())
    fake.write_requests(1, _batch())
    assert fake.write_requests(1, _batch()).skipped == 6
    real = {(r.key, r.value) for r in _read_all(kafka_broker.bootstrap, topics["requests_topic"])}
    assert real == {(m.key, m.value) for m in fake.messages}


def _predecessor_and_successor(bootstrap: str, topics: Topics) -> tuple[RequestSink, RequestSink]:
    """The sinks of two controllers of one cluster, epochs 3 and 4: one transactional id."""
    tid = f"livectl-test-{uuid.uuid4().hex[:8]}"
    return (
        RequestSink(bootstrap, FENCE, transactional_id=tid, **topics),
        RequestSink(bootstrap, Fence(4, 3), transactional_id=tid, **topics),
    )


def test_a_successors_first_write_fences_the_earlier_controllers_producer(kafka_broker: Any, topics: Topics) -> None:
    """Kafka's zombie fencing: the controllers of one cluster share a transactional id; the successor's
    first write initialises it, and the earlier controller (paused past its ZooKeeper fence check, then
    resumed) gets ``PRODUCER_FENCED`` as :class:`ControllerFencedError` and writes nothing more."""
    batch = _batch()
    old, new = _predecessor_and_successor(kafka_broker.bootstrap, topics)
    try:
        assert old.write_requests(6, batch).written == 6
        assert new.write_requests(7, batch[:2]).written == 2
        with pytest.raises(ControllerFencedError) as fenced:
            old.write_requests(7, batch)
        assert "newer controller" in fenced.value.reason
        with pytest.raises(ControllerFencedError):
            old.write_admin_results(7, [AdminResult("z", "create_topic", AdminStatus.OK)])
        assert new.write_admin_results(8, [AdminResult("n", "create_topic", AdminStatus.OK)]).written == 1
    finally:
        old.close()
        new.close()
    values = [json.loads(r.value) for r in _read_all(kafka_broker.bootstrap, topics["requests_topic"])]
    assert sorted((v["batchId"], v["controllerEpoch"]) for v in values) == [(6, 3)] * 6 + [(7, 4)] * 2
    results = [json.loads(r.value) for r in _read_all(kafka_broker.bootstrap, topics["admin_results_topic"])]
    assert [(r["request_id"], r["controller_epoch"]) for r in results] == [("n", 4)]


def test_a_started_sink_fences_the_earlier_controller_before_its_first_write(kafka_broker: Any, topics: Topics) -> None:
    """``start`` (a controller calls it as it wins the lease) initialises the transactional producer on a
    thread: the earlier controller is fenced before its successor has written anything, and the successor's
    first write uses that producer (a second init would fence the first)."""
    batch = _batch()
    old, new = _predecessor_and_successor(kafka_broker.bootstrap, topics)
    try:
        assert old.write_requests(6, batch).written == 6
        new.start().join(30)
        started = new._producer
        assert started is not None
        with pytest.raises(ControllerFencedError):
            old.write_requests(7, batch)
        assert new.write_requests(7, batch[:2]).written == 2
        assert new._producer is started
    finally:
        old.close()
        new.close()
    values = [json.loads(r.value) for r in _read_all(kafka_broker.bootstrap, topics["requests_topic"])]
    assert sorted((v["batchId"], v["controllerEpoch"]) for v in values) == [(6, 3)] * 6 + [(7, 4)] * 2


def test_a_sink_closed_while_its_producer_starts_keeps_none(kafka_broker: Any, topics: Topics) -> None:
    sink = RequestSink(kafka_broker.bootstrap, FENCE, transactional_id=f"livectl-test-{uuid.uuid4().hex[:8]}", **topics)
    starting = sink.start()
    sink.close()
    starting.join(30)
    assert not starting.is_alive() and sink._producer is None


def test_a_transactional_sink_replays_and_restarts_like_a_plain_one(kafka_broker: Any, topics: Topics) -> None:
    tid = f"livectl-test-{uuid.uuid4().hex[:8]}"
    batch = _batch()
    with RequestSink(kafka_broker.bootstrap, FENCE, transactional_id=tid, **topics) as first:
        first.write_requests(6, [r for r in batch if r.broker_id == 2])
    # the same controller restarted (a crash): its new producer takes the id over and replays the batch
    with RequestSink(kafka_broker.bootstrap, FENCE, transactional_id=tid, **topics) as restarted:
        assert (restarted.write_requests(6, batch).written, restarted.write_requests(6, batch).written) == (3, 0)
        assert restarted.write_requests(7, batch).written == 6
    assert len(_read_all(kafka_broker.bootstrap, topics["requests_topic"])) == 12


def _ahead(sink: RequestSink) -> TailAhead | None:
    """The tail the sink read ahead, as it is now (mypy keeps an attribute narrowed by an earlier assert)."""
    return sink._ahead


def _no_tail_read(sink: RequestSink) -> None:
    def refuse(topic: str, batch_id: int) -> set[tuple[int, str]]:
        raise AssertionError(f"the first write read the tail of {topic} for batch {batch_id} itself")

    sink._tail_identities = refuse  # type: ignore[method-assign]


def test_a_started_sink_settles_its_first_write_from_the_tail_it_read_once_the_earlier_one_was_fenced(
    kafka_broker: Any, topics: Topics
) -> None:
    """After ``start`` fenced the earlier controller nothing else writes the topic: its tail, read on the same
    thread, settles the replay of the batch the earlier controller had half written, without a read of its own."""
    batch = _batch()
    old, new = _predecessor_and_successor(kafka_broker.bootstrap, topics)
    try:
        assert old.write_requests(5, batch).written == 6
        assert old.write_requests(6, [r for r in batch if r.broker_id == 2]).written == 3
        new.start().join(30)
        assert new._ahead is not None
        _no_tail_read(new)
        replay = new.write_requests(6, batch)
        assert (replay.written, replay.skipped) == (3, 3)
        assert _ahead(new) is None
        assert new.write_requests(7, batch[:2]).written == 2
    finally:
        old.close()
        new.close()
    values = [json.loads(r.value) for r in _read_all(kafka_broker.bootstrap, topics["requests_topic"])]
    idents = [(v["batchId"], v["brokerId"], v["api"]) for v in values]
    assert len(idents) == len(set(idents)) == 6 + 6 + 2


def test_a_tail_read_ahead_that_does_not_reach_back_far_enough_is_read_again(kafka_broker: Any, topics: Topics) -> None:
    brokers = [b for b in range(1, 1000) if partition_for_key(str(b).encode(), [0, 1, 2]) == 0][: 3 * TAIL_WINDOW]
    many = [lisr_request(b, "a", [0]) for b in brokers]
    old, new = _predecessor_and_successor(kafka_broker.bootstrap, topics)
    try:
        assert old.write_requests(3, _batch()).written == 6
        for r in many:  # one transaction each: a longer tail of batch 4 than the window read ahead
            assert old.write_requests(4, [r]).written == 1
        new.start().join(30)
        ahead = new._ahead
        assert ahead is not None
        assert ahead.identities(4) is None  # the window holds batch 4 only: not settled
        replay = new.write_requests(4, many)
        assert (replay.written, replay.skipped) == (0, len(many))
    finally:
        old.close()
        new.close()


def test_a_new_run_after_a_tail_read_ahead_sends_everything(kafka_broker: Any, topics: Topics) -> None:
    old, new = _predecessor_and_successor(kafka_broker.bootstrap, topics)
    try:
        assert old.write_requests(9, _batch()).written == 6
        new.start().join(30)
        _no_tail_read(new)
        # a new checkpoint: batch ids start again, below the tail's
        assert new.write_requests(2, _batch()).written == 6
    finally:
        old.close()
        new.close()


def test_a_plain_sink_started_reads_no_tail_ahead(kafka_broker: Any, topics: Topics) -> None:
    # without a transactional id nothing fences an earlier controller: its writes could still follow a read
    with RequestSink(kafka_broker.bootstrap, FENCE, **topics) as sink:
        sink.start().join(30)
        assert sink._producer is not None and sink._ahead is None
