"""Leader selectors (Kafka's PartitionLeaderElectionAlgorithmsTest) and election results."""

from __future__ import annotations

import pytest

from core.election import (
    controlled_shutdown_leader,
    elect_controlled_shutdown,
    elect_offline,
    elect_preferred,
    elect_reassign,
    initial_leader_and_isr,
    offline_leader,
    preferred_leader,
    reassign_leader,
)
from core.model import LeaderAndIsr

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("assignment", "isr", "live", "unclean", "expected"),
    [
        ((2, 4), (4,), {2, 4}, False, 4),
        ((2, 4), (), {4}, False, None),
        ((2, 4), (), {4}, True, 4),
        ((2, 4), (2, 4), {2, 4}, False, 2),
        ((2, 4), (2,), {4}, True, 4),
        ((2, 4), (2,), set(), True, None),
    ],
)
def test_offline_leader(
    assignment: tuple[int, ...], isr: tuple[int, ...], live: set[int], unclean: bool, expected: int | None
) -> None:
    assert offline_leader(assignment, isr, live, unclean) == expected


@pytest.mark.parametrize(
    ("target", "isr", "live", "expected"),
    [((2, 4), (2, 4), {2, 4}, 2), ((2, 4), (4,), {2, 4}, 4), ((2, 4), (2, 4), {4}, 4), ((2, 4), (3,), {2, 4}, None)],
)
def test_reassign_leader(target: tuple[int, ...], isr: tuple[int, ...], live: set[int], expected: int | None) -> None:
    assert reassign_leader(target, isr, live) == expected


@pytest.mark.parametrize(
    ("assignment", "isr", "live", "expected"),
    [((2, 4), (2, 4), {2, 4}, 2), ((2, 4), (4,), {2, 4}, None), ((2, 4), (2, 4), {4}, None), ((), (), set(), None)],
)
def test_preferred_leader(
    assignment: tuple[int, ...], isr: tuple[int, ...], live: set[int], expected: int | None
) -> None:
    assert preferred_leader(assignment, isr, live) == expected


@pytest.mark.parametrize(
    ("assignment", "isr", "live", "shutting", "expected"),
    [
        ((2, 4), (2, 4), {2, 4}, set(), 2),
        ((2, 4), (2, 4), {2, 4}, {2}, 4),
        ((2, 4), (2, 4), {2, 4}, {2, 4}, None),
        ((2, 4), (2,), {2, 4}, {2}, None),
    ],
)
def test_controlled_shutdown_leader(
    assignment: tuple[int, ...], isr: tuple[int, ...], live: set[int], shutting: set[int], expected: int | None
) -> None:
    assert controlled_shutdown_leader(assignment, isr, live, shutting) == expected


def test_election_results() -> None:
    cur = LeaderAndIsr(1, (1, 2, 3), 4, 9)
    r = elect_offline((1, 2, 3), cur, {2, 3}, False)
    assert r.leader_and_isr == LeaderAndIsr(2, (2, 3), 5, 9) and r.recipients == (2, 3) and not r.unclean
    r = elect_offline((1, 2, 3), LeaderAndIsr(1, (1,), 4), {3}, True)
    assert r.leader_and_isr == LeaderAndIsr(3, (3,), 5, 0, 1) and r.unclean
    assert elect_offline((1, 2), LeaderAndIsr(1, (1,)), {2}, False).leader_and_isr is None
    r = elect_reassign((3, 2), cur, {1, 2, 3})
    assert r.leader_and_isr == LeaderAndIsr(3, (1, 2, 3), 5, 9) and r.recipients == (3, 2)
    assert elect_reassign((5,), cur, {5}).leader_and_isr is None
    r = elect_preferred((2, 1), cur, {1, 2})
    assert r.leader_and_isr == LeaderAndIsr(2, (1, 2, 3), 5, 9) and r.recipients == (2, 1)
    assert elect_preferred((5, 1), cur, {1}).leader_and_isr is None
    r = elect_controlled_shutdown((1, 2, 3), cur, {1, 2, 3}, {1})
    assert r.leader_and_isr == LeaderAndIsr(2, (2, 3), 5, 9) and r.recipients == (1, 2, 3)
    assert elect_controlled_shutdown((1,), LeaderAndIsr(1, (1,)), {1}, {1}).leader_and_isr is None
    assert initial_leader_and_isr((3, 1, 2), {1, 2}) == LeaderAndIsr(1, (1, 2), 0, 0)
    assert initial_leader_and_isr((3,), set()) is None
