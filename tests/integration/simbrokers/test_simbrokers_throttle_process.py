"""A throttled catch-up in real simulated broker processes: the follower quota is read from ZooKeeper as
``livectl configs`` / ``reassign --throttle`` write it, and the throttled partition joins the ISR measurably
later than an unthrottled one with the same backlog, in the same processes."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from simbroker_processes import Env, env, registration

from core.events import AlterPartition, LeaderAndIsrResponse
from core.kafka.requests import RequestApi
from sinks.entity_configs import change_broker_configs, write_entity_configs

pytestmark = pytest.mark.integration
__all__ = ["env"]

PRODUCE = 40  # records/s per partition on the leader
RATE = 60 * 1024  # the follower quota: 60 records/s of 1 KiB
BACKLOG = 120  # records on each partition before the follower starts: 3 s of producing


def lisr(leader_port: int) -> dict[str, Any]:
    states = [
        {"partitionIndex": p, "controllerEpoch": 1, "leader": 1, "leaderEpoch": 0, "isr": [1], "partitionEpoch": 0,
         "replicas": [1, 2], "addingReplicas": [], "removingReplicas": [], "isNew": True, "leaderRecoveryState": 0}
        for p in (0, 1)
    ]  # fmt: skip
    return {
        "controllerId": 0, "controllerEpoch": 1, "brokerEpoch": -1, "type": 0,
        "topicStates": [{"topicName": "orders", "topicId": "AAAAAAAAAAAAAAAAAAAAAA", "partitionStates": states}],
        "liveLeaders": [{"brokerId": 1, "hostName": "127.0.0.1", "port": leader_port}],
    }  # fmt: skip


def test_the_throttled_partition_catches_up_measurably_later(env: Env) -> None:
    # the throttle as `reassign --throttle` writes it: broker 2 follows partition 0 under a quota
    write_entity_configs(env.zk, "topics", "orders", {"follower.replication.throttled.replicas": "0:2"})
    change_broker_configs(env.zk, "2", {"follower.replication.throttled.rate": str(RATE)})
    status = env.tmp / "status-1.json"
    env.start("1", "--produce-rate", str(PRODUCE), "--status-file", str(status))
    env.wait_for(lambda: env.zk.exists("/brokers/ids/1"), what="broker 1")
    leader_port = registration(env, 1)[0]["port"]
    env.send(1, RequestApi.LEADER_AND_ISR, lisr(leader_port), batch=1)
    env.wait_events(lambda e: isinstance(e, LeaderAndIsrResponse), count=1)

    def log_ends() -> list[int]:
        if not status.exists():
            return []
        partitions = json.loads(status.read_text())["brokers"]["1"]["partitions"]
        return [partitions.get(f"orders-{p}", {}).get("leo", 0) for p in (0, 1)]

    # a backlog of at least BACKLOG records on each partition, as the leader's status file shows it
    env.wait_for(lambda: min(log_ends() or [0]) >= BACKLOG, timeout=60, what=f"{BACKLOG} records on each partition")
    env.start("2")
    env.wait_for(lambda: env.zk.exists("/brokers/ids/2"), what="broker 2")
    env.send(2, RequestApi.LEADER_AND_ISR, lisr(leader_port), batch=2)
    started = time.monotonic()
    joined: dict[int, float] = {}

    def expansion(e: Any) -> bool:
        if isinstance(e, AlterPartition) and 2 in e.new_isr and e.partition not in joined:
            joined[e.partition] = time.monotonic() - started
            return True
        return False

    env.wait_events(expansion, count=2, timeout=30)
    # unthrottled: one fetch (0.25 s measured here); throttled: the backlog drains at quota - produce rate (6 s)
    assert joined[1] < 2.0, joined
    assert joined[0] >= 1.5 and joined[0] - joined[1] >= 1.2, joined
