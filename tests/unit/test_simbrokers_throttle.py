"""Replication quotas in the simulated brokers: a throttled catch-up (a reassignment's adding replica) is
measurably slower, in-sync replicas are never throttled, and the configs are read as Kafka's."""

from __future__ import annotations

import pytest
from test_simbrokers import TP, MiniController, cluster, part, run

from core.model import TopicPartition
from simbrokers.broker import SimBroker
from simbrokers.throttle import Quota, ThrottleConfig, throttle_config

pytestmark = pytest.mark.unit

RATE = 20 * 1024  # 20 records/s at 1024 bytes a record


def catch_up_ms(throttled: bool, *, follower_side: bool = False, records: int = 300) -> int:
    """Broker 3 is added to partition 0 (led by 1, ISR 1,2) holding ``records`` records; how long until the
    controller has it in the ISR."""
    brokers, fabric = cluster(3)
    ctl = MiniController(brokers, [1, 2])
    ctl.elect(1, [1, 2], alive=[1, 2])
    part(brokers[1]).append(records)
    run(brokers, fabric, ctl, 0, 500)
    assert part(brokers[2]).log.log_end_offset == records
    if throttled:
        topics = {TP.topic: {"leader.replication.throttled.replicas": "0:1,0:2",
                             "follower.replication.throttled.replicas": "0:3"}}  # fmt: skip
        rates = {"leader.replication.throttled.rate": str(RATE), "follower.replication.throttled.rate": str(RATE)}
        side = {"3": rates} if follower_side else {"1": rates}
        for b in brokers.values():
            b.set_throttle(throttle_config(b.broker_id, side, topics))
    ctl.replicas = [1, 2, 3]
    ctl.elect(1, [1, 2], now=500)
    now = 500
    while 3 not in ctl.isr:
        run(brokers, fabric, ctl, now, now + 100)
        now += 100
        assert now < 120_000, "never caught up"
    return now - 500


def test_a_throttled_reassignment_is_measurably_slower() -> None:
    free = catch_up_ms(False)
    leader_throttled = catch_up_ms(True)
    follower_throttled = catch_up_ms(True, follower_side=True)
    assert free <= 500
    # 300 records of 1 KiB at 20 KiB/s, one second of burst: about 14 s either side
    for took in (leader_throttled, follower_throttled):
        assert 12_000 <= took <= 16_000, took
        assert took > 20 * free


def test_in_sync_followers_are_not_throttled() -> None:
    brokers, fabric = cluster(2)
    ctl = MiniController(brokers, [1, 2])
    ctl.elect(1, [1, 2])
    topics = {TP.topic: {"leader.replication.throttled.replicas": "*"}}
    brokers[1].set_throttle(throttle_config(1, {"<default>": {"leader.replication.throttled.rate": "1024"}}, topics))
    part(brokers[1]).append(500)
    run(brokers, fabric, ctl, 0, 200)
    assert part(brokers[2]).log.log_end_offset == 500


def test_throttle_config_reads_kafkas_names() -> None:
    cfg = throttle_config(
        2,
        {"<default>": {"leader.replication.throttled.rate": "100"}, "2": {"follower.replication.throttled.rate": "7"}},
        {"t": {"leader.replication.throttled.replicas": "0:2,1:3", "follower.replication.throttled.replicas": "*"}},
    )
    assert (cfg.leader_rate, cfg.follower_rate) == (100, 7)
    assert cfg.leader_throttled(TopicPartition("t", 0), 2) and not cfg.leader_throttled(TopicPartition("t", 1), 2)
    assert cfg.follower_throttled(TopicPartition("t", 5), 2)
    assert not ThrottleConfig().leader_throttled(TP, 1)


def test_quota_is_a_token_bucket() -> None:
    q = Quota(2048)
    assert q.grant(0, 10, 1024) == 2  # one second of burst
    assert q.grant(0, 10, 1024) == 0
    assert q.grant(500, 10, 1024) == 1
    assert Quota(10).grant(0, 5, 1024) == 1  # a rate below one record still moves one record at a time


def test_set_throttle_clears() -> None:
    b = SimBroker(1)
    b.set_throttle(ThrottleConfig(leader_rate=5))
    b.set_throttle(ThrottleConfig())
    assert b.throttle == ThrottleConfig()
