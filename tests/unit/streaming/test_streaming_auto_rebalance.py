"""The driver's side of auto leader rebalance and of the controller configs (issue 14, item 2), on fakes:
the buckets' imbalance counts reach the dispatcher, the schedule publishes Kafka's tick, and a bucket runs
with the configs it was started with from its failover on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from core_support import startup
from shell_pipeline import BUCKETS, EVENTS, Pipeline, epoch_znode, snapshot_of

from core import events as ev
from core.codec.events import event_from_json, event_to_json
from core.controller import ControllerConfig
from core.model import PartitionTarget
from sinks.memory import MemoryZooKeeper
from sinks.ports import Fence
from streaming.driver.auto_rebalance import AutoRebalanceScheduler
from streaming.query import stateful
from streaming.query.validation import InputValidator

pytestmark = pytest.mark.unit


class RecordingProducer:
    """What the scheduler needs of a producer, keeping what it was given."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes | None, bytes | None]] = []
        self.flushes = 0

    def send(self, topic: str, value: bytes | None = None, key: bytes | None = None) -> Any:
        self.sent.append((topic, key, value))
        return None

    def flush(self, timeout: float | None = None) -> None:
        self.flushes += 1


def test_schedule_publishes_the_brokers_above_the_threshold() -> None:
    counts = {1: (1, 4), 2: (0, 3)}
    producer = RecordingProducer()
    s = AutoRebalanceScheduler(producer, "events", lambda: counts, ())
    assert s.interval_s == 300, "Kafka's default leader.imbalance.check.interval.seconds"
    assert s.check() == ev.AutoRebalanceTick((1,))
    [(topic, key, value)] = producer.sent
    assert topic == "events" and key == b"controller" and producer.flushes == 1
    assert event_from_json(value or b"") == ev.AutoRebalanceTick((1,))
    s.update((("leader.imbalance.per.broker.percentage", "25"),))
    assert s.check() is None, "25 % is not above 25 % (Kafka compares strictly)"
    s.update((("auto.leader.rebalance.enable", "false"), ("leader.imbalance.check.interval.seconds", "7")))
    assert s.check() is None and s.interval_s == 7
    assert len(producer.sent) == 1


def _leader(zk: MemoryZooKeeper, topic: str, partition: int) -> int:
    data, _ = zk.get(f"/brokers/topics/{topic}/partitions/{partition}/state")
    return int(json.loads(data)["leader"])


def test_a_tick_while_a_partition_is_being_reassigned(tmp_path: Path) -> None:
    """Kafka 3.9 runs the check whatever is being reassigned (releases before 3.4 skipped a run while any
    partition was): with m-0 waiting for broker 3 to catch up, the schedule still publishes the tick and
    the buckets elect broker 1, t-0's preferred replica since t-0 was reordered to [1, 2]."""
    zk = MemoryZooKeeper()
    epoch_znode(zk)
    p = Pipeline(tmp_path, zk, Fence(1, 0), InputValidator(), ControllerConfig())
    p.run_batch([(EVENTS, p.failover_ref(snapshot_of((1, 2, 3))))])
    p.run_batch([("livectl.admin", event_to_json(ev.CreateTopic("c1", "t", 1, 2, replica_assignment=((2, 1),))))])
    p.run_batch([("livectl.admin", event_to_json(ev.CreateTopic("c2", "m", 1, 1, replica_assignment=((2,),))))])
    targets = (PartitionTarget("t", 0, (1, 2)), PartitionTarget("m", 0, (2, 3)))
    p.run_batch([("livectl.admin", event_to_json(ev.ReassignPartitions("r", targets)))])
    # t-0's reorder completed at once (its target is in the ISR) and kept leader 2; m-0 waits for 3
    assert _leader(zk, "t", 0) == 2
    assert p.dispatcher.metrics["ReassigningPartitions"] == 1
    producer = RecordingProducer()
    s = AutoRebalanceScheduler(producer, EVENTS, p.dispatcher.imbalance, ())
    assert s.check() == ev.AutoRebalanceTick((1,)), "a run during a reassignment publishes its tick"
    [(_, _, value)] = producer.sent
    p.run_batch([(EVENTS, (value or b"").decode())])
    assert _leader(zk, "t", 0) == 1
    assert _leader(zk, "m", 0) == 2
    assert p.dispatcher.metrics["ReassigningPartitions"] == 1, "m-0 is still being reassigned"
    assert p.dispatcher.imbalance()[1] == (0, 1)


def test_buckets_report_imbalance_and_run_with_the_started_configs(tmp_path: Path) -> None:
    zk = MemoryZooKeeper()
    epoch_znode(zk)
    config = ControllerConfig(delete_topic_enable=False, leader_imbalance_check_interval_seconds=9)
    p = Pipeline(tmp_path, zk, Fence(1, 0), InputValidator(), config)
    p.run_batch([(EVENTS, p.failover_ref(snapshot_of((1, 2))))])
    p.run_batch([("livectl.admin", event_to_json(ev.CreateTopic("c", "t", 2, 2, replica_assignment=((1, 2), (2, 1)))))])
    states = [stateful.load_state(*p.states[b].get) for b in range(BUCKETS)]
    assert all(s.config == config for s in states), "the configs the query started with, from the failover on"
    assert p.dispatcher.imbalance() == {1: (0, 1), 2: (0, 1)}
    p.run_batch([(EVENTS, event_to_json(ev.BrokerFailure(1, 101)))])
    assert p.dispatcher.imbalance() == {1: (1, 1), 2: (0, 1)}
    assert p.dispatcher.metrics["GlobalPartitionCount"] == 2
    assert p.dispatcher.metrics["ReassigningPartitions"] == 0
    p.run_batch([(EVENTS, event_to_json(startup(3)))])
    # t-0 moves from [1, 2] to [2, 3] and waits for 3 to join its ISR
    p.run_batch([("livectl.admin", event_to_json(ev.ReassignPartitions("r", (PartitionTarget("t", 0, (2, 3)),))))])
    assert p.dispatcher.metrics["ReassigningPartitions"] == 1
