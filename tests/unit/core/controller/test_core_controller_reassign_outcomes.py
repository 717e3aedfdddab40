"""Reassignment outcomes are honest: a superseded or cancelled reassignment is never answered "completed",
across steps and through the state's serialisation."""

from __future__ import annotations

import pytest
from core_support import Cluster

import core.events as ev
from core.controller import ControllerState
from core.decisions import AdminResult, AdminStatus
from core.model import PartitionTarget, TopicPartition

pytestmark = pytest.mark.unit


def results(c: Cluster, rid: str) -> list[AdminResult]:
    return [d for d in c.decisions if isinstance(d, AdminResult) and d.request_id == rid]


def test_cancelled_in_a_later_step_is_reported_cancelled_not_completed() -> None:
    c = Cluster.start([1, 2, 3, 4, 5, 6])
    c.run(ev.CreateTopic("c", "t", 2, 3, ((1, 2, 3), (1, 2, 3))))
    c.run(ev.ReassignPartitions("move", (PartitionTarget("t", 0, (4, 5, 6)), PartitionTarget("t", 1, (4, 5, 6)))))
    assert results(c, "move")[0].status is AdminStatus.IN_PROGRESS
    # the state goes through its bytes between steps, as in the stateful operator
    c.state = ControllerState.from_bytes(c.state.to_bytes())
    c.run(ev.CancelReassignment("cancel", (TopicPartition("t", 0),)))
    assert results(c, "cancel")[0].status in (AdminStatus.IN_PROGRESS, AdminStatus.OK)
    assert results(c, "move") == []  # t-1 is still moving
    c.state = ControllerState.from_bytes(c.state.to_bytes())
    c.catch_up(TopicPartition("t", 1))
    (final,) = results(c, "move")
    assert (final.status, final.error) == (AdminStatus.ERROR, "REASSIGNMENT_CANCELLED")
    assert "completed" not in final.message
    assert final.details_json()["partitions"] == {
        "t-0": {"error": "REASSIGNMENT_CANCELLED", "message": "The reassignment of t-0 was cancelled."}
    }


def test_superseded_is_reported_superseded() -> None:
    c = Cluster.start([1, 2, 3, 4, 5, 6])
    c.run(ev.CreateTopic("c", "t", 1, 3, ((1, 2, 3),)))
    c.run(ev.ReassignPartitions("first", (PartitionTarget("t", 0, (4, 5, 6)),)))
    c.run(ev.ReassignPartitions("second", (PartitionTarget("t", 0, (1, 2, 4)),)))
    (final,) = results(c, "first")
    assert (final.status, final.error) == (AdminStatus.ERROR, "REASSIGNMENT_SUPERSEDED")
    assert final.message == "The reassignment of t-0 was superseded by a newer reassignment."
    assert c.state.interrupted_reassignments == {}  # answered, forgotten


def test_cancel_with_a_partition_not_reassigning_lists_it_per_partition() -> None:
    c = Cluster.start([1, 2, 3, 4, 5, 6])
    c.run(ev.CreateTopic("c", "t", 2, 3, ((1, 2, 3), (1, 2, 3))))
    c.run(ev.ReassignPartitions("move", (PartitionTarget("t", 0, (4, 5, 6)),)))
    c.run(ev.CancelReassignment("cancel", (TopicPartition("t", 0), TopicPartition("t", 1))))
    (res,) = results(c, "cancel")
    parts = res.details_json()["partitions"]
    assert parts["t-0"] == {"error": "NONE"}
    assert parts["t-1"]["error"] == "NO_REASSIGNMENT_IN_PROGRESS"


def test_old_state_without_the_new_field_still_loads() -> None:
    c = Cluster.start([1])
    d = c.state.to_dict()
    del d["interrupted_reassignments"]
    assert ControllerState.from_dict(d).interrupted_reassignments == {}
