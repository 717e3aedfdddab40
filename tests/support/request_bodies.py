"""Small request bodies as the core builds them (a LeaderAndIsr and an UpdateMetadata), for the request
sink's tests, and who a message read off ``livectl.requests`` is for."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.decisions import BrokerRequest
from core.kafka.requests import RequestApi, WireBody


def lisr_request(broker: int, topic: str, parts: list[int]) -> BrokerRequest:
    body = {
        "controllerId": 1000,
        "controllerEpoch": 3,
        "brokerEpoch": 17,
        "type": 0,
        "topicStates": [
            {
                "topicName": topic,
                "partitionStates": [{"partitionIndex": p, "leader": broker, "leaderEpoch": 1} for p in parts],
            }
        ],
        "liveLeaders": [{"brokerId": broker, "hostName": "h", "port": 1}],
    }
    return BrokerRequest(broker, RequestApi.LEADER_AND_ISR, WireBody(body))


def um_request(broker: int, topic: str, live: list[int]) -> BrokerRequest:
    body = {
        "controllerId": 1000,
        "controllerEpoch": 3,
        "topicStates": [{"topicName": topic, "partitionStates": [{"partitionIndex": 0, "leader": 1}]}],
        "liveBrokers": [{"id": b, "endpoints": [{"host": "h", "port": 9000 + b}]} for b in live],
    }
    return BrokerRequest(broker, RequestApi.UPDATE_METADATA, WireBody(body))


def recipients(message: Mapping[str, Any]) -> list[int]:
    """The brokers a ``livectl.requests`` message value is for: a shared one's addressees (an UpdateMetadata
    written once for a set of brokers), or its ``brokerId``."""
    if message.get("addressees"):
        return [int(a["brokerId"]) for a in message["addressees"]]
    return [int(message["brokerId"])]
