"""One AlterPartition request of many partitions in one record (:class:`core.events.AlterPartitionRequest`): its
form, and that the controller answers and writes exactly what it would for each partition's record alone."""

from __future__ import annotations

import pytest
from core_support import Cluster

from core.codec.decisions import decision_to_json
from core.codec.events import event_from_json, event_to_json
from core.errors import FormatError
from core.events import AlterPartition, AlterPartitionRequest, IsrProposal
from core.kafka.requests import RequestApi
from core.model import TopicPartition

pytestmark = pytest.mark.unit


def cluster() -> Cluster:
    c = Cluster.start([1, 2, 3])
    c.create_topic("t", ((1, 2, 3), (1, 2, 3), (2, 3, 1)))
    c.create_topic("u", ((1, 2, 3),))
    return c


def proposals(c: Cluster) -> tuple[AlterPartition, ...]:
    """Broker 1's proposals: t-0 and u-0 shrunk (accepted), t-1 at a future leader epoch (NOT_CONTROLLER), t-2 led
    by broker 2 (NOT_LEADER_OR_FOLLOWER), t-9 unknown, and t-0 again (already in that state: answered with it)."""
    epoch = c.ctx.live_brokers[1].epoch

    def one(topic: str, p: int, isr: tuple[int, ...], corr: int, leader_epoch: int = 0) -> AlterPartition:
        return AlterPartition(1, epoch, topic, p, leader_epoch, 0, isr, correlation_id=corr)

    return (
        one("t", 0, (1, 2), 10),
        one("t", 1, (1,), 11, leader_epoch=3),
        one("u", 0, (1, 3), 12),
        one("t", 2, (1, 2), 13),
        one("t", 9, (1,), 14),
        one("t", 0, (1, 2), 15),
    )


def test_a_request_is_decided_as_its_partitions_records_one_by_one() -> None:
    alone, batched = cluster(), cluster()
    each = proposals(alone)
    alone.run(*each)
    batched.run(AlterPartitionRequest.of(each))
    assert [decision_to_json(d) for d in batched.decisions] == [decision_to_json(d) for d in alone.decisions]
    assert batched.state.context.leader_and_isr(TopicPartition("t", 0)) == alone.ctx.leader_and_isr(
        TopicPartition("t", 0)
    )
    answers = [r.body_json() for r in batched.requests(RequestApi.ALTER_PARTITION_RESPONSE)]
    codes = {e["correlationId"]: e["errorCode"] for a in answers for t in a.get("topics", []) for e in t["partitions"]}
    assert codes == {10: 0, 11: 41, 12: 0, 13: 6, 14: 3, 15: 0}


def test_a_stale_senders_request_answers_each_partition_stale() -> None:
    c = cluster()
    stale = tuple(
        AlterPartition(p.broker_id, p.broker_epoch - 1, p.topic, p.partition, 0, 0, p.new_isr, correlation_id=i)
        for i, p in enumerate(proposals(c)[:2])
    )
    c.run(AlterPartitionRequest.of(stale))
    answers = [r.body_json() for r in c.requests(RequestApi.ALTER_PARTITION_RESPONSE)]
    # each names its proposal at the top (the answers of one broker's requests never hide each other)
    assert [(a["errorCode"], a.get("correlationId")) for a in answers] == [(77, 0), (77, 1)]
    assert c.leader_and_isr(TopicPartition("t", 0)).isr == (1, 2, 3)


def test_the_request_record_round_trips_and_names_a_bad_partition_field() -> None:
    req = AlterPartitionRequest(
        1,
        2**40,
        (
            IsrProposal("t", 0, 3, 4, (1, 2), correlation_id=7),
            IsrProposal("u", 5, 0, 0, (1,), 1, 8, "AAAAAAAAAAAAAAAAAAAAAQ"),
        ),
    )
    text = event_to_json(req)
    assert event_from_json(text) == req
    assert req.topics() == ("t", "u")
    assert [p.correlation_id for p in req.proposals()] == [7, 8]
    bad = text.replace('"leader_epoch":0', '"leader_epoch":2147483648')
    with pytest.raises(FormatError) as e:
        event_from_json(bad)
    assert e.value.field == "partitions[1].leader_epoch"


def test_a_request_of_many_partitions_is_written_in_records_of_at_most_a_thousand() -> None:
    proposals = tuple(AlterPartition(1, 5, "t", p, 0, 0, (1,), correlation_id=7) for p in range(2_500))
    records = AlterPartitionRequest.records(proposals)
    assert [len(r.partitions) for r in records] == [1000, 1000, 500]
    assert tuple(p for r in records for p in r.proposals()) == proposals
    with pytest.raises(ValueError, match="per_record"):
        AlterPartitionRequest.records(proposals, per_record=0)
