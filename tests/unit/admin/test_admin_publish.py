"""Publishing a command and following its results: results decoded with the sink's extra fields, the
progress bar, results of an older controller dropped."""

from __future__ import annotations

import io
import json

import pytest

from admin.publish import EpochFilter, Progress
from core.codec.decisions import encode_decision
from core.decisions import AdminResult, AdminStatus
from sinks.requests.messages import read_admin_result

pytestmark = pytest.mark.unit


def test_results_with_the_sinks_extra_fields_decode() -> None:
    result = AdminResult("r1", "create_topic", AdminStatus.OK)
    value = json.dumps(encode_decision(result) | {"batch_id": 3, "controller_epoch": 1}).encode()
    assert read_admin_result(value) == result
    assert read_admin_result(b"not json") is None


def test_progress_bar_uses_the_counts_in_details() -> None:
    out = io.StringIO()
    p = Progress("reassign", out)
    line = p.line(AdminResult("r", "reassign_partitions", AdminStatus.IN_PROGRESS, details={"done": 1, "total": 4}))
    assert "[######..................] 1/4 in_progress" in line
    assert "waiting" in p.line(None)


def test_epoch_filter_drops_results_of_an_older_controller() -> None:
    f = EpochFilter()
    assert [f.admit(e) for e in (2, 3, 2, None, 3, 1, 4)] == [True, True, False, True, True, False, True]
    assert (f.highest, f.dropped) == (4, 2)


def test_results_read_from_the_topic_in_either_details_form() -> None:
    from admin.reassign.answers import partition_outcomes

    details = {"partitions": {"t-0": {"error": "NONE"}, "t-1": {"error": "X", "message": "m"}}, "done": 1, "total": 2}
    result = AdminResult("r", "reassign_partitions", AdminStatus.IN_PROGRESS, details=details)
    new = encode_decision(result) | {"batch_id": 3, "controller_epoch": 1}
    old = new | {"details": json.dumps(details)}  # as a controller before details became objects wrote it
    for value in (new, old):
        got = read_admin_result(json.dumps(value).encode())
        assert got == result
        assert got is not None and partition_outcomes(got) == [("t-0", "NONE", ""), ("t-1", "X", "m")]
        assert "1/2" in Progress("reassign", io.StringIO()).line(got)
    assert read_admin_result(json.dumps(new | {"details": "[1]"}).encode()) is None
