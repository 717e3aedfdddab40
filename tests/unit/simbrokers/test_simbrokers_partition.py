"""Simulated brokers, pure: replication as Kafka's ``Partition`` and ``ReplicaManager`` do it — high watermark,
ISR shrink and expand, one ISR change in flight, min.insync.replicas, truncation to the leader's epoch
boundary, acknowledged records kept by clean elections and lost (counted) by unclean ones.

The tests play the controller with :class:`simbrokers_support.MiniController`."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from simbrokers_support import TP, MiniController, cluster, part, run

from core.events import (
    AlterPartition,
)
from simbrokers.broker import Faults
from simbrokers.fabric import acknowledged_lost
from simbrokers.log import Record, ReplicaLog

pytestmark = pytest.mark.unit


def test_high_watermark_is_the_smallest_leo_in_the_isr_and_acks_follow_it() -> None:
    brokers, fabric = cluster()
    ctl = MiniController(brokers, [1, 2, 3])
    ctl.elect(1, [1, 2, 3])
    leader = part(brokers[1])
    leader.append(5)
    assert leader.log.high_watermark == 0 and not leader.acked  # followers have not fetched
    brokers[3].inject(Faults(stuck=True))
    run(brokers, fabric, ctl, 0, 100)
    assert part(brokers[2]).log.log_end_offset == 5
    assert leader.log.high_watermark == 0  # broker 3 is in the ISR and has nothing
    brokers[3].inject(Faults())
    run(brokers, fabric, ctl, 100, 200)
    assert leader.log.high_watermark == 5
    assert sorted(leader.acked) == [0, 1, 2, 3, 4]
    assert part(brokers[3]).log.high_watermark == 5


def test_stuck_follower_leaves_the_isr_after_lag_time_and_rejoins_when_caught_up() -> None:
    brokers, fabric = cluster(replica_lag_time_max_ms=1000, produce_rate=100.0)
    ctl = MiniController(brokers, [1, 2, 3])
    ctl.elect(1, [1, 2, 3])
    run(brokers, fabric, ctl, 0, 500)
    brokers[3].inject(Faults(stuck=True))
    events = run(brokers, fabric, ctl, 500, 2000)
    shrinks = [e for e in events if isinstance(e, AlterPartition)]
    assert shrinks and shrinks[0].new_isr == (1, 2)
    assert shrinks[0].broker_id == 1 and shrinks[0].broker_epoch == 101
    assert shrinks[0].leader_epoch == 0 and shrinks[0].partition_epoch == 1
    assert part(brokers[1]).isr == (1, 2) and ctl.isr == [1, 2]
    leader = part(brokers[1])
    assert leader.log.high_watermark >= leader.log.log_end_offset - 5  # no longer held back by broker 3
    brokers[3].inject(Faults())
    events = run(brokers, fabric, ctl, 2000, 3000)
    expands = [e for e in events if isinstance(e, AlterPartition)]
    assert expands and expands[0].new_isr == (1, 2, 3)
    assert part(brokers[1]).isr == (1, 2, 3)


def test_slow_follower_that_never_catches_up_leaves_the_isr() -> None:
    brokers, fabric = cluster(replica_lag_time_max_ms=1000, produce_rate=200.0)
    ctl = MiniController(brokers, [1, 2, 3])
    ctl.elect(1, [1, 2, 3])
    brokers[2].inject(Faults(slow_fetch_interval_ms=50, slow_fetch_max_records=1))
    run(brokers, fabric, ctl, 0, 3000)
    assert ctl.isr == [1, 3]


def test_one_isr_change_in_flight_and_fenced_answer_waits_for_leader_and_isr() -> None:
    brokers, _ = cluster(replica_lag_time_max_ms=100)
    ctl = MiniController(brokers, [1, 2, 3])
    ctl.elect(1, [1, 2, 3])
    [ev] = brokers[1].tick(500)
    assert isinstance(ev, AlterPartition) and ev.new_isr == (1,)
    assert brokers[1].tick(600) == []  # in flight
    assert brokers[1].tick(500 + 60_000) == []  # unanswered, it waits: never timed out
    ctl.alter_partition(ev, accept=False)
    assert part(brokers[1]).pending is None and part(brokers[1]).isr == (1, 2, 3)
    assert brokers[1].tick(20_000) == []
    ctl.elect(1, [1, 2, 3])
    assert [type(e) for e in brokers[1].tick(30_000)] == [AlterPartition]


def test_answer_overtaken_by_leader_and_isr_is_ignored() -> None:
    """The controller fences a shrink proposal because it has just elected anew; its LeaderAndIsr reaches the
    leader first. The late FENCED answer belongs to the old proposal: the leader must not stop proposing."""
    brokers, fabric = cluster(replica_lag_time_max_ms=100)
    ctl = MiniController(brokers, [1, 2, 3])
    ctl.elect(1, [1, 2, 3])
    [old] = brokers[1].tick(500)
    assert isinstance(old, AlterPartition) and old.new_isr == (1,)
    ctl.elect(1, [1, 2], alive=[1, 2])  # broker 3 failed: a new leader epoch, ISR shrunk by the controller
    assert part(brokers[1]).pending is None
    [new] = brokers[1].tick(1000)  # broker 2 still does not fetch: a new proposal
    assert isinstance(new, AlterPartition) and new.new_isr == (1,) and new.correlation_id != old.correlation_id
    ctl.alter_partition(old, accept=False)  # the stale answer arrives now
    assert part(brokers[1]).pending is not None and not part(brokers[1]).await_leader_and_isr
    ctl.alter_partition(new)
    assert part(brokers[1]).isr == (1,) and ctl.isr == [1]
    # a duplicate answer to a settled proposal changes nothing either
    ctl.alter_partition(old, accept=False)
    assert not part(brokers[1]).await_leader_and_isr
    run(brokers, fabric, ctl, 1000, 1500)  # broker 2 catches up and is proposed back
    assert part(brokers[1]).isr == (1, 2) and ctl.isr == [1, 2]


def test_min_insync_replicas_refuses_produce() -> None:
    brokers, _ = cluster(1, min_insync_replicas=2, produce_rate=1000.0)
    MiniController(brokers, [1]).elect(1, [1])
    brokers[1].tick(0)
    brokers[1].tick(1000)
    assert part(brokers[1]).log.log_end_offset == 0


def test_new_follower_truncates_to_the_leaders_epoch_boundary() -> None:
    brokers, fabric = cluster(2)
    ctl = MiniController(brokers, [1, 2])
    ctl.elect(1, [1, 2])
    part(brokers[1]).append(3)
    run(brokers, fabric, ctl, 0, 100)
    brokers[2].inject(Faults(stuck=True))
    part(brokers[1]).append(4)  # offsets 3..6 only on broker 1, not acknowledged
    assert part(brokers[1]).log.high_watermark == 3
    ctl.elect(2, [2], alive=[2])  # broker 1 "failed"; 2 was in the ISR: a clean election
    brokers[2].inject(Faults())
    part(brokers[2]).append(2)  # epoch 1 writes offsets 3, 4
    ctl.elect(2, [2, 1])  # broker 1 comes back as follower
    run(brokers, fabric, ctl, 100, 300)
    log1 = part(brokers[1]).log
    assert log1.records == part(brokers[2]).log.records
    assert log1.records[3] == Record(1, 3)
    assert brokers[1].truncated_records == 4
    assert acknowledged_lost(brokers.values(), TP).lost == ()


def test_no_acknowledged_record_is_lost_by_clean_elections() -> None:
    brokers, fabric = cluster(replica_lag_time_max_ms=500, produce_rate=100.0)
    ctl = MiniController(brokers, [1, 2, 3])
    ctl.elect(1, [1, 2, 3])
    now = 0
    for round_ in range(6):
        if round_ % 2:
            brokers[3].inject(Faults(stuck=True))
        else:
            brokers[3].inject(Faults())
        run(brokers, fabric, ctl, now, now + 1500)
        now += 1500
        # the leader "fails": the controller picks the first other live replica in the ISR (clean)
        old = ctl.leader
        new = next(r for r in ctl.replicas if r != old and r in ctl.isr)
        ctl.elect(new, [r for r in ctl.isr if r != old], alive=[r for r in ctl.replicas if r != old], now=now)
        run(brokers, fabric, ctl, now, now + 200)
        now += 200
        ctl.elect(new, ctl.isr, now=now)  # old leader restarts as follower
        report = acknowledged_lost(brokers.values(), TP)
        assert report.lost == (), f"round {round_}: lost {report.lost[:5]}"
    assert acknowledged_lost(brokers.values(), TP).acknowledged > 100


def test_unclean_election_loses_acknowledged_records_and_they_are_counted() -> None:
    brokers, fabric = cluster(2, replica_lag_time_max_ms=200, produce_rate=100.0)
    ctl = MiniController(brokers, [1, 2])
    ctl.elect(1, [1, 2])
    run(brokers, fabric, ctl, 0, 300)
    synced = part(brokers[2]).log.log_end_offset
    brokers[2].inject(Faults(stuck=True))
    run(brokers, fabric, ctl, 300, 1300)  # ISR shrinks to [1]; 1 acknowledges alone
    assert ctl.isr == [1]
    acked_alone = [o for o in part(brokers[1]).acked if o >= synced]
    assert acked_alone
    brokers[1].partitions[TP].stop()  # broker 1 dies
    brokers[2].inject(Faults())
    ctl.elect(2, [2], alive=[2])  # unclean: 2 was not in the ISR
    part(brokers[2]).append(3)
    ctl.elect(2, [2, 1])  # broker 1 returns and follows
    run(brokers, fabric, ctl, 1300, 1600)
    report = acknowledged_lost(brokers.values(), TP)
    assert report.leader == 2
    assert len(report.lost) >= len(acked_alone) - 1 > 0
    assert part(brokers[1]).log.records == part(brokers[2]).log.records


def test_epoch_cache_end_offsets_follow_kafka() -> None:
    log = ReplicaLog()
    for e, n in ((0, 3), (2, 2), (5, 1)):
        for _ in range(n):
            log.append(Record(e, log.log_end_offset))
    assert log.epochs == [(0, 0), (2, 3), (5, 5)]
    assert (log.end_offset_for_epoch(5).epoch, log.end_offset_for_epoch(5).end_offset) == (5, 6)
    assert (log.end_offset_for_epoch(3).epoch, log.end_offset_for_epoch(3).end_offset) == (2, 5)
    assert (log.end_offset_for_epoch(0).epoch, log.end_offset_for_epoch(0).end_offset) == (0, 3)
    assert log.end_offset_for_epoch(9).end_offset == -1
    log.truncate_to(4)
    assert log.epochs == [(0, 0), (2, 3)]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from([1, 2, 3]), st.booleans(), st.integers(50, 1500), st.booleans()),
        min_size=1,
        max_size=8,
    )
)
def test_property_clean_elections_never_lose_acknowledged_records(schedule: list[tuple[int, bool, int, bool]]) -> None:
    """Followers stall and recover at random; the leader dies at random and the controller elects a live
    in-ISR replica (clean); the dead leader returns as a follower. No acknowledged record is ever lost."""
    brokers, fabric = cluster(replica_lag_time_max_ms=300, produce_rate=50.0)
    ctl = MiniController(brokers, [1, 2, 3])
    ctl.elect(1, [1, 2, 3])
    now = 0
    for broker, stuck, dt, leader_dies in schedule:
        if broker != ctl.leader:
            brokers[broker].inject(Faults(stuck=stuck))
        run(brokers, fabric, ctl, now, now + dt)
        now += dt
        candidates = [r for r in ctl.replicas if r != ctl.leader and r in ctl.isr]
        if leader_dies and candidates:
            old = ctl.leader
            brokers[old].partitions[TP].stop()
            survivors = [r for r in ctl.replicas if r != old]
            ctl.elect(candidates[0], [r for r in ctl.isr if r != old], alive=survivors, now=now)
            run(brokers, fabric, ctl, now, now + 100)
            now += 100
            ctl.elect(ctl.leader, ctl.isr, now=now)
        report = acknowledged_lost(brokers.values(), TP)
        assert report.lost == (), report.lost[:5]
