"""The request sink's messages without a broker: bodies merged per broker and API, large requests split
into complete parts."""

from __future__ import annotations

import json
from typing import Any

import pytest
from request_bodies import lisr_request, um_request

from bench.harness.pairwise_merge import pairwise_merge_bodies
from core import decisions as dc
from core.kafka.requests import RequestApi, WireBody
from sinks.ports import Fence
from sinks.requests.merge import merge_bodies

pytestmark = pytest.mark.unit


def test_merge_bodies_joins_topic_states_and_dedupes_live_brokers() -> None:
    merged = merge_bodies([um_request(1, "a", [1, 2]).body_json(), um_request(1, "b", [2, 3]).body_json()])
    assert [t["topicName"] for t in merged["topicStates"]] == ["a", "b"]
    assert [b["id"] for b in merged["liveBrokers"]] == [1, 2, 3]
    same_topic = merge_bodies([lisr_request(1, "a", [0]).body_json(), lisr_request(1, "a", [1]).body_json()])
    assert [p["partitionIndex"] for p in same_topic["topicStates"][0]["partitionStates"]] == [0, 1]
    assert merge_bodies([{"errorCode": 0}, {"errorCode": 7}, {"errorCode": 0}])["errorCode"] == 7


def test_merge_bodies_in_one_pass_equals_merging_two_at_a_time() -> None:
    """Many bodies of one broker and API (a broker's AlterPartition answers of a large batch: one body per
    partition, topics named again and again) merge in one pass as they did two at a time: same object, same
    order, the bodies themselves unchanged."""
    import copy
    import random

    rng = random.Random(41)

    def body() -> dict[str, Any]:
        b: dict[str, Any] = {"errorCode": rng.choice([0, 0, 0, 77]), "throttleTimeMs": rng.choice([0, 5])}
        b["topics"] = [
            {
                "topicName": f"t{rng.randrange(6)}",
                "partitions": [
                    {"partitionIndex": rng.randrange(4), "errorCode": rng.choice([0, 95]), "isr": [1, rng.randrange(3)]}
                    for _ in range(rng.randrange(3))
                ],
            }
            for _ in range(rng.randrange(3))
        ]
        if rng.random() < 0.5:
            b["liveBrokers"] = [{"id": rng.randrange(4), "rack": None} for _ in range(rng.randrange(3))]
        if rng.random() < 0.3:
            b["nested"] = {"ids": [rng.randrange(3)], "errorCode": rng.choice([0, 9]), "x": rng.choice([None, 1, 2])}
        if rng.random() < 0.2:
            b["odd"] = rng.choice([None, 3, [1, 2], {"a": 1}, "s"])
        return b

    for n in (1, 2, 3, 10, 200):
        for _ in range(20):
            bodies = [body() for _ in range(n)]
            before = copy.deepcopy(bodies)
            want = pairwise_merge_bodies(bodies)
            assert merge_bodies(bodies) == want
            assert json.dumps(merge_bodies(bodies)) == json.dumps(want)  # the order too
            assert bodies == before


def test_large_requests_are_split_into_complete_parts() -> None:
    from sinks.requests import MAX_MESSAGE_BYTES, request_messages
    from sinks.requests.split import split_body

    states = [
        {
            "topicName": f"t{t}",
            "topicId": "x",
            "partitionStates": [
                {"partitionIndex": p, "leader": 1, "leaderEpoch": 3, "isr": [1, 2, 3], "replicas": [1, 2, 3]}
                for p in range(500)
            ],
        }
        for t in range(40)
    ]
    body = {
        "controllerId": 1,
        "controllerEpoch": 2,
        "brokerEpoch": 9,
        "type": 0,
        "topicStates": states,
        "liveLeaders": [{"brokerId": 1, "hostName": "h", "port": 1}],
    }
    parts = split_body(body, 100_000)
    assert len(parts) > 10
    assert all(len(json.dumps(p, separators=(",", ":"), sort_keys=True)) <= 100_000 for p in parts)
    assert all(p["liveLeaders"] == body["liveLeaders"] and p["brokerEpoch"] == 9 for p in parts)
    rebuilt = [
        (ts["topicName"], ps["partitionIndex"])
        for p in parts
        for ts in p["topicStates"]
        for ps in ts["partitionStates"]
    ]
    assert rebuilt == [(f"t{t}", p) for t in range(40) for p in range(500)], "every partition once, in order"
    assert split_body({"errorCode": 0, "remainingPartitions": []}, 10) == [{"errorCode": 0, "remainingPartitions": []}]

    request = dc.BrokerRequest(1, RequestApi.LEADER_AND_ISR, WireBody(body))
    msgs = request_messages("livectl.requests", Fence(2, 1), 7, [request], max_bytes=100_000)
    values = [m.value_json() for m in msgs]
    assert [(v["part"], v["parts"]) for v in values] == [(k, len(parts)) for k in range(1, len(parts) + 1)]
    assert len({m.identity for m in msgs}) == len(msgs)
    # a request that fits stays one message without part numbers
    small = dc.BrokerRequest(1, RequestApi.LEADER_AND_ISR, WireBody({**body, "topicStates": states[:2]}))
    (single,) = request_messages("livectl.requests", Fence(2, 1), 7, [small])
    assert "part" not in single.value_json() and len(single.value) <= MAX_MESSAGE_BYTES
    # at the default limit the 1.5 MB request becomes two messages
    assert len(request_messages("livectl.requests", Fence(2, 1), 7, [request])) == 2


def test_a_stale_alter_partition_answer_leaves_another_requests_results_intact() -> None:
    """Issue 41: two AlterPartition requests of one broker in one micro-batch, one sent under an older broker
    epoch. Kafka answers each request on its own; merged into one message, the stale one's top-level
    ``STALE_BROKER_EPOCH`` won over the other's per-partition result and the broker dropped both. From the
    controller's step through the sink's messages to the simulated broker that proposed them."""
    from dataclasses import replace

    from core_support import Cluster

    from core.events import AlterPartition
    from core.kafka.envelope import parse_request
    from core.kafka.error_codes import KafkaError
    from core.kafka.requests import AlterPartitionResponse
    from core.model import TopicPartition
    from simbrokers.broker import BrokerConfig, SimBroker
    from simbrokers.partition import PendingIsr
    from sinks.requests import request_messages

    c = Cluster.start([1, 2, 3])
    c.create_topic("t", ((1, 2, 3), (1, 3, 2)))
    epoch = c.ctx.live_brokers[1].epoch
    config = BrokerConfig(produce_rate=0.0)
    broker = SimBroker(1, config, broker_epoch=epoch)

    def deliver(batch: int, now_ms: int) -> list[AlterPartitionResponse]:
        """The step's requests as the sink writes them, applied by broker 1; returns its AlterPartition answers."""
        answers = []
        for m in request_messages("livectl.requests", Fence(c.controller_epoch, 1), batch, c.requests()):
            env = parse_request(m.key, m.value)
            broker.handle(env, now_ms)
            if env.broker_id == 1 and isinstance(env.body, AlterPartitionResponse):
                answers.append(env.body)
        return answers

    deliver(1, 0)
    t0, t1 = (broker.partitions[TopicPartition("t", p)] for p in (0, 1))
    for part in (t0, t1):  # broker 1 leads both and drops replica 3 from each ISR
        part.pending = PendingIsr((1, 2))
    stale, fresh = (e for e in broker.tick(0) if isinstance(e, AlterPartition))
    assert (stale.partition, fresh.partition) == (0, 1)
    # the first one was sent under the broker's previous registration
    c.run(replace(stale, broker_epoch=epoch - 1), fresh)
    answers = deliver(2, 100)
    assert t1.pending is None and t1.isr == (1, 2), "the fresh request's result was applied"
    assert t0.pending is not None and t0.pending.correlation_id == stale.correlation_id
    assert t0.pending.send_at_ms == 100 + config.alter_partition_backoff_ms, "the stale one is retried after a backoff"
    # one answer per request: the stale one names its request at the top, the other in its partition entry
    assert sorted(
        (a.error_code, a.correlation_id, [(r.partition, r.correlation_id) for r in a.partitions]) for a in answers
    ) == [
        (0, -1, [(1, fresh.correlation_id)]),
        (KafkaError.STALE_BROKER_EPOCH, stale.correlation_id, []),
    ]


def test_a_large_alter_partition_answer_is_split_into_complete_parts() -> None:
    """After a broker failure at 100k partitions one micro-batch answers 10,000 ISR proposals of one leader:
    one AlterPartitionResponse of over 1 MB, which the producer refused (the long run's takeover). Each
    partition entry answers its own request, so parts at partition boundaries are complete answers."""
    from sinks.requests import MAX_MESSAGE_BYTES, request_messages

    topics: list[dict[str, Any]] = [
        {
            "topicName": f"base-{t:05d}",
            "topicId": "AAAAAAAAAAAAAAAAAAAAAA",
            "partitions": [
                {
                    "partitionIndex": p,
                    "errorCode": 0,
                    "leaderId": 3,
                    "leaderEpoch": 4,
                    "isr": [3, 4],
                    "partitionEpoch": 7,
                    "leaderRecoveryState": 0,
                    "correlationId": t * 100 + p,
                }
                for p in range(100)
            ],
        }
        for t in range(100)
    ]
    body = {"errorCode": 0, "throttleTimeMs": 0, "topics": topics}
    assert len(json.dumps(body, separators=(",", ":"))) > 1_048_576  # kafka-python's max_request_size
    request = dc.BrokerRequest(3, RequestApi.ALTER_PARTITION_RESPONSE, WireBody(body))
    msgs = request_messages("livectl.requests", Fence(2, 1), 7, [request])
    assert len(msgs) > 1
    assert all(len(m.value) <= MAX_MESSAGE_BYTES for m in msgs)
    values = [m.value_json() for m in msgs]
    assert [(v["part"], v["parts"]) for v in values] == [(k, len(msgs)) for k in range(1, len(msgs) + 1)]
    assert all(v["body"]["errorCode"] == 0 for v in values)
    answered = [
        (t["topicName"], p["correlationId"]) for v in values for t in v["body"]["topics"] for p in t["partitions"]
    ]
    assert answered == [(t["topicName"], p["correlationId"]) for t in topics for p in t["partitions"]]
    # an answer that fits is one message, as before
    small = dc.BrokerRequest(3, RequestApi.ALTER_PARTITION_RESPONSE, WireBody({**body, "topics": topics[:2]}))
    assert len(request_messages("livectl.requests", Fence(2, 1), 7, [small])) == 1
