"""The standby's read-ahead keeps to its share of the time (:func:`streaming.warm.failover_warm.pause_after`)."""

from __future__ import annotations

import pytest

from streaming.warm.failover_warm import pause_after

pytestmark = pytest.mark.unit


def test_a_short_round_waits_the_interval() -> None:
    assert pause_after(0.5, 10.0, 0.25) == 10.0


def test_a_long_round_waits_so_that_work_is_at_most_the_share() -> None:
    # 30 s of work at a quarter share: 90 s of waiting, 30 of every 120 s working
    assert pause_after(30.0, 10.0, 0.25) == pytest.approx(90.0)
    work, pause = 30.0, pause_after(30.0, 10.0, 0.25)
    assert work / (work + pause) == pytest.approx(0.25)


def test_a_whole_share_waits_only_the_interval() -> None:
    assert pause_after(30.0, 10.0, 1.0) == 10.0
