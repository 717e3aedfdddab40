"""The broker side of ``kafka-configs`` against a real ZooKeeper: what ``livectl configs`` writes (configs +
``/config/changes`` notifications) is what the simulated brokers' watcher reads, and turns into quotas."""

from __future__ import annotations

import time
from collections.abc import Mapping

import pytest
from kazoo.client import KazooClient

from admin.configs import change_broker_configs, write_entity_configs
from core.model import TopicPartition
from simbrokers.dynconfig import DynamicConfigWatcher
from simbrokers.throttle import ThrottleConfig, throttle_config

pytestmark = pytest.mark.integration


def test_watcher_follows_kafkas_notifications(zk_chrooted: KazooClient) -> None:
    zk = zk_chrooted
    write_entity_configs(zk, "topics", "orders", {"leader.replication.throttled.replicas": "0:1"})
    seen: list[ThrottleConfig] = []

    def apply(brokers: Mapping[str, Mapping[str, str]], topics: Mapping[str, Mapping[str, str]]) -> None:
        seen.append(throttle_config(1, brokers, topics))

    DynamicConfigWatcher(zk, apply).start()
    assert seen[-1].leader_rate is None and not seen[-1].leader_throttled(TopicPartition("orders", 0), 1)
    change_broker_configs(zk, "<default>", {"leader.replication.throttled.rate": "4096"})
    deadline = time.monotonic() + 10
    while seen[-1].leader_rate != 4096 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert seen[-1].leader_rate == 4096
    assert seen[-1].leader_throttled(TopicPartition("orders", 0), 1)
    change_broker_configs(zk, "1", {"leader.replication.throttled.rate": "100"})
    write_entity_configs(zk, "topics", "orders", {})
    while (seen[-1].leader_rate != 100 or seen[-1].leader_replicas) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert seen[-1].leader_rate == 100  # the broker's own entity wins over <default>
    assert not seen[-1].leader_throttled(TopicPartition("orders", 0), 1)
