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
from core.model import ElectionType, PartitionTarget
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
    p = Pipeline.failed_over(tmp_path, InputValidator(), config=ControllerConfig())
    zk = p.zk
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


# ------------------------------------------------------------------------ gentle leader balance (issue 44, 4)

TOPICS = ("a", "b", "c", "d", "e", "f")


def _catch_up(p: Pipeline, zk: MemoryZooKeeper, topic: str) -> None:
    """Leader 2 adds broker 1 back to ``topic``-0's ISR (an AlterPartition at the znode's epochs)."""
    data, version = zk.get(f"/brokers/topics/{topic}/partitions/0/state")
    state = json.loads(data)
    alter = ev.AlterPartition(2, 102, topic, 0, state["leader_epoch"], version, (2, 1))
    p.run_batch([(EVENTS, event_to_json(alter))])


def _bounced_pipeline(tmp_path: Path, config: ControllerConfig) -> tuple[Pipeline, MemoryZooKeeper]:
    """Broker 1 prefers one partition of each of :data:`TOPICS` (spread over the buckets) and leads none."""
    p = Pipeline.failed_over(tmp_path, InputValidator(), (1, 2), config=config)
    zk = p.zk
    for t in TOPICS:
        p.run_batch([("livectl.admin", event_to_json(ev.CreateTopic(f"c-{t}", t, 1, 2, replica_assignment=((1, 2),))))])
    p.run_batch([(EVENTS, event_to_json(ev.BrokerFailure(1, 101)))])
    p.run_batch([(EVENTS, event_to_json(startup(1, epoch=500)))])
    for t in TOPICS:
        _catch_up(p, zk, t)
    assert [_leader(zk, t, 0) for t in TOPICS] == [2] * len(TOPICS)
    return p, zk


def test_bounded_passes_move_at_most_the_bound_across_buckets(tmp_path: Path) -> None:
    p, zk = _bounced_pipeline(tmp_path, ControllerConfig(leader_imbalance_max_leaders_per_interval=4))
    movable, queued = p.dispatcher.leader_move_reports()
    assert len([b for b, m in movable.items() if m]) >= 2, "the topics are spread over several buckets"
    assert sum(n for m in movable.values() for n in m.values()) == 6 and not any(queued.values())
    producer = RecordingProducer()
    configs = (("leader.imbalance.max.leaders.per.interval", "4"),)
    s = AutoRebalanceScheduler(
        producer, EVENTS, p.dispatcher.imbalance, configs, leader_moves=p.dispatcher.leader_move_reports
    )
    assert s.figures() == (6, 4, 0)
    led = []
    while (tick := s.check()) is not None:
        assert tick.brokers == (1,) and sum(tick.bucket_limits) <= 4
        p.run_batch([(EVENTS, (producer.sent[-1][2] or b"").decode())])
        led.append(sum(_leader(zk, t, 0) == 1 for t in TOPICS))
    assert led == [4, 6], "4 in the first pass, the 2 left in the next"
    assert s.figures() == (0, 4, 2)
    assert p.dispatcher.metrics["PreferredReplicaImbalanceCount"] == 0


def test_elect_leaders_all_under_the_bound_is_drained_by_the_passes(tmp_path: Path) -> None:
    config = ControllerConfig(auto_leader_rebalance_enable=False, leader_imbalance_max_leaders_per_interval=5)
    p, zk = _bounced_pipeline(tmp_path, config)
    woken: list[bool] = []
    p.dispatcher.on_leader_moves_queued = lambda: woken.append(True)
    p.run_batch([("livectl.admin", event_to_json(ev.ElectLeaders("e", ElectionType.PREFERRED, ())))])
    assert woken == [True], "the schedule is woken once, when the election is queued"
    assert [_leader(zk, t, 0) for t in TOPICS] == [2] * len(TOPICS), "nothing moves before a pass"
    producer = RecordingProducer()
    configs = (("auto.leader.rebalance.enable", "false"), ("leader.imbalance.max.leaders.per.interval", "5"))
    s = AutoRebalanceScheduler(
        producer, EVENTS, p.dispatcher.imbalance, configs, leader_moves=p.dispatcher.leader_move_reports
    )
    passes = 0
    while (tick := s.check()) is not None:
        assert tick.brokers == () and sum(tick.bucket_limits) <= 5
        p.run_batch([(EVENTS, (producer.sent[-1][2] or b"").decode())])
        passes += 1
    assert passes == 2 and [_leader(zk, t, 0) for t in TOPICS] == [1] * len(TOPICS)
    assert not any(p.dispatcher.leader_move_reports()[1].values()), "the queue is drained"
    assert woken == [True]


def test_an_early_wake_waits_for_the_rest_of_the_interval() -> None:
    now = [100.0]
    counts = {1: (1, 1)}
    s = AutoRebalanceScheduler(RecordingProducer(), EVENTS, lambda: counts, (), clock=lambda: now[0])
    assert s._delay() == 300
    s._round()
    assert len(s.published) == 1
    now[0] += 10
    s._round()  # a wake 10 s after the pass: held back
    assert len(s.published) == 1 and s._delay() == pytest.approx(290)
    now[0] += 290
    s._round()
    assert len(s.published) == 2 and s._delay() == 300


def test_routing_gives_each_bucket_its_share() -> None:
    from streaming.query.routing import route

    tick = ev.AutoRebalanceTick((1, 2), bucket_limits=(3, 0, 1))
    assert route(tick, 4) == [(b, ev.AutoRebalanceTick((1, 2), n)) for b, n in enumerate((3, 0, 1, 0))]
    plain = ev.AutoRebalanceTick((1,))
    assert route(plain, 2) == [(0, plain), (1, plain)], "unbounded: the same tick everywhere, as before"
