"""The broker side of ``kafka-configs`` against a real ZooKeeper: what ``livectl configs`` writes (configs +
``/config/changes`` notifications) is what the simulated brokers' watcher reads, and turns into quotas."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

import pytest
from kazoo.client import KazooClient

from core.model import TopicPartition
from simbrokers.dynconfig import DynamicConfigWatcher
from simbrokers.throttle import ThrottleConfig, throttle_config
from sinks.entity_configs import change_broker_configs, write_entity_configs

pytestmark = pytest.mark.integration


def test_watcher_follows_kafkas_notifications(zk_chrooted: KazooClient) -> None:
    zk = zk_chrooted
    write_entity_configs(zk, "topics", "orders", {"leader.replication.throttled.replicas": "0:1"})
    seen: list[ThrottleConfig] = []
    applied = threading.Condition()

    def apply(brokers: Mapping[str, Mapping[str, str]], topics: Mapping[str, Mapping[str, str]]) -> None:
        with applied:
            seen.append(throttle_config(1, brokers, topics))
            applied.notify_all()

    def until(what: str, holds: Callable[[ThrottleConfig], bool]) -> ThrottleConfig:
        """The watcher's next configs until ``holds``: told by its callback, no polling."""
        with applied:
            assert applied.wait_for(lambda: holds(seen[-1]), timeout=10), f"{what}; last applied: {seen[-1]}"
            return seen[-1]

    DynamicConfigWatcher(zk, apply).start()
    assert seen[-1].leader_rate is None and not seen[-1].leader_throttled(TopicPartition("orders", 0), 1)
    change_broker_configs(zk, "<default>", {"leader.replication.throttled.rate": "4096"})
    got = until("the <default> rate", lambda c: c.leader_rate == 4096)
    assert got.leader_throttled(TopicPartition("orders", 0), 1)
    change_broker_configs(zk, "1", {"leader.replication.throttled.rate": "100"})
    write_entity_configs(zk, "topics", "orders", {})
    got = until("broker 1's rate, no throttled replica", lambda c: c.leader_rate == 100 and not c.leader_replicas)
    assert got.leader_rate == 100  # the broker's own entity wins over <default>
    assert not got.leader_throttled(TopicPartition("orders", 0), 1)
