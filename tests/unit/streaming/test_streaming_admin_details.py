"""Admin details on the driver: each bucket's row decoded once, the parts of one command merged as JSON
objects (arrays joined, objects united, counts summed), refusals answered with an object, and the audit
log reading the same value."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from core import decisions as dc
from core.codec.decisions import decision_to_json, encode_decision
from streaming.monitoring.audit_rows import AuditBatch, audit_rows
from streaming.query.batch_rows import decode_row, merge_admin_results, rejected_result

pytestmark = pytest.mark.unit


def _row(bucket_details: dict[str, object], status: dc.AdminStatus = dc.AdminStatus.OK) -> dc.AdminResult:
    row = decision_to_json(dc.AdminResult("r", "elect_leaders", status, None, "", bucket_details))
    d = decode_row(row)
    assert isinstance(d, dc.AdminResult)
    return d


def test_parts_decoded_from_rows_merge_as_objects() -> None:
    a = _row({"partitions": {"a-0": {"error": "NONE"}}, "topics": ["a"], "done": 1, "total": 2})
    b = _row({"partitions": {"b-0": {"error": "NONE"}}, "topics": ["b"], "done": 0, "total": 2, "note": "x"})
    # a part from a row a controller before this change wrote: details as text
    old = encode_decision(dc.AdminResult("r", "elect_leaders", dc.AdminStatus.IN_PROGRESS)) | {
        "details": json.dumps({"partitions": {"c-0": {"error": "ELECTION_NOT_NEEDED"}}, "done": 1})
    }
    c = decode_row(json.dumps(old))
    assert isinstance(c, dc.AdminResult)
    (merged,) = merge_admin_results([a, b, c])
    assert merged.status is dc.AdminStatus.IN_PROGRESS
    assert merged.details_json() == {
        "partitions": {"a-0": {"error": "NONE"}, "b-0": {"error": "NONE"}, "c-0": {"error": "ELECTION_NOT_NEEDED"}},
        "topics": ["a", "b"],
        "done": 2,
        "total": 4,
        "note": "x",
    }
    # the merged result goes to the results topic as an object, keys sorted
    assert json.loads(decision_to_json(merged))["details"] == merged.details_json()


def test_a_refused_command_is_answered_with_an_object() -> None:
    payload = json.dumps({"version": 1, "type": "create_topic", "request_id": "q", "topic": "t"})
    row = {"payload": payload, "error": "INVALID_PARTITIONS", "expectations": ["limits"]}
    result = rejected_result("q", row, ["partitions: too many"])
    assert result.error == "INVALID_REQUEST" and result.details_json() == {"kafka_error": "INVALID_PARTITIONS"}
    assert json.loads(decision_to_json(result))["details"] == {"kafka_error": "INVALID_PARTITIONS"}


def test_the_audit_row_names_the_topic_and_carries_the_details_object() -> None:
    one = _row({"topics": ["orders"], "partitions": {"orders-0": {"error": "NONE"}}})
    two = dc.AdminResult("s", "delete_topic", dc.AdminStatus.OK, details={"topics": ["a", "b"]})
    rows = audit_rows(AuditBatch(3, admin_results=[one, two]), 1, 1, dt.datetime(2026, 11, 24, tzinfo=dt.UTC))
    got = rows.to_pylist()
    assert [r["topic"] for r in got] == ["orders", None]
    assert json.loads(got[0]["detail"]) == {"message": "", "details": one.details_json()}
