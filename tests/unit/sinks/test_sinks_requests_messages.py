"""The request sink's messages without a broker: bodies merged per broker and API, large requests split
into complete parts."""

from __future__ import annotations

import json

import pytest
from request_bodies import lisr_request, um_request

from core import decisions as dc
from core.kafka.requests import RequestApi, WireBody
from sinks.ports import Fence
from sinks.requests import merge_bodies

pytestmark = pytest.mark.unit


def test_merge_bodies_joins_topic_states_and_dedupes_live_brokers() -> None:
    merged = merge_bodies([um_request(1, "a", [1, 2]).body_json(), um_request(1, "b", [2, 3]).body_json()])
    assert [t["topicName"] for t in merged["topicStates"]] == ["a", "b"]
    assert [b["id"] for b in merged["liveBrokers"]] == [1, 2, 3]
    same_topic = merge_bodies([lisr_request(1, "a", [0]).body_json(), lisr_request(1, "a", [1]).body_json()])
    assert [p["partitionIndex"] for p in same_topic["topicStates"][0]["partitionStates"]] == [0, 1]
    assert merge_bodies([{"errorCode": 0}, {"errorCode": 7}, {"errorCode": 0}])["errorCode"] == 7


def test_large_requests_are_split_into_complete_parts() -> None:
    from sinks.requests import MAX_MESSAGE_BYTES, request_messages, split_body

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
