"""The status file's loss audit (:class:`simbrokers.fabric.LossTracker`) reports what
:func:`~simbrokers.fabric.acknowledged_lost` reports, after every step of random clean and unclean
elections, stalled followers and leaders that die and come back; and while only the leader acknowledges
more, it adds those records to what it counted instead of checking every record again."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from simbrokers_support import TP, MiniController, cluster, part, run

from simbrokers.broker import Faults
from simbrokers.fabric import LossTracker, acknowledged_lost

pytestmark = pytest.mark.unit


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([1, 2, 3]), st.booleans(), st.integers(50, 800), st.sampled_from(["", "clean", "unclean"])
        ),
        min_size=1,
        max_size=8,
    )
)
def test_the_tracker_reports_what_the_full_audit_does(schedule: list[tuple[int, bool, int, str]]) -> None:
    brokers, fabric = cluster(replica_lag_time_max_ms=300, produce_rate=50.0)
    ctl = MiniController(brokers, [1, 2, 3])
    ctl.elect(1, [1, 2, 3])
    tracker = LossTracker()
    now = 0
    for broker, stuck, dt, election in schedule:
        if broker != ctl.leader:
            brokers[broker].inject(Faults(stuck=stuck))
        run(brokers, fabric, ctl, now, now + dt)
        now += dt
        assert tracker.report(brokers.values(), TP) == acknowledged_lost(brokers.values(), TP)
        old = ctl.leader
        survivors = [r for r in ctl.replicas if r != old]
        in_isr = [r for r in survivors if r in ctl.isr]
        new = in_isr[0] if election == "clean" and in_isr else survivors[0] if election == "unclean" else None
        if new is None:
            continue
        brokers[old].partitions[TP].stop()
        brokers[new].inject(Faults())
        ctl.elect(new, [r for r in ctl.isr if r != old] if new in ctl.isr else [new], alive=survivors, now=now)
        assert tracker.report(brokers.values(), TP) == acknowledged_lost(brokers.values(), TP)
        run(brokers, fabric, ctl, now, now + 100)
        now += 100
        ctl.elect(ctl.leader, sorted({*ctl.isr, old}), now=now)  # the old leader comes back and follows
        run(brokers, fabric, ctl, now, now + 200)
        now += 200
        assert tracker.report(brokers.values(), TP) == acknowledged_lost(brokers.values(), TP)


def test_more_records_acknowledged_by_the_same_leader_are_added_not_checked_again() -> None:
    brokers, fabric = cluster(produce_rate=100.0)
    ctl = MiniController(brokers, [1, 2, 3])
    ctl.elect(1, [1, 2, 3])
    run(brokers, fabric, ctl, 0, 500)
    tracker = LossTracker()
    first = tracker.report(brokers.values(), TP)
    counted = tracker._checked[TP].acked
    run(brokers, fabric, ctl, 500, 1000)
    second = tracker.report(brokers.values(), TP)
    assert second == acknowledged_lost(brokers.values(), TP)
    assert second.acknowledged > first.acknowledged > 0
    assert tracker._checked[TP].acked is counted  # the same set, grown
    part(brokers[2]).log.truncate_to(0)  # anything else is a full check
    ctl.elect(2, [2, 3], alive=[2, 3])
    assert tracker.report(brokers.values(), TP) == acknowledged_lost(brokers.values(), TP)
    assert tracker._checked[TP].acked is not counted
    tracker.forget([])
    assert not tracker._checked
