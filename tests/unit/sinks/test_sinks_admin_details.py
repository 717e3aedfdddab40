"""``livectl.admin-results`` carries ``details`` as a JSON object, and one too large for a message is
replaced by the object ``{"truncated": true, "original_bytes": N}`` within the message limit."""

from __future__ import annotations

import json
from typing import Any

import pytest

from core.codec.decisions import decode_decision, read_details
from core.decisions import AdminResult, AdminStatus
from sinks.ports import Fence
from sinks.requests import admin_result_messages
from sinks.requests.messages import fit_admin_value

pytestmark = pytest.mark.unit


def test_details_are_an_object_on_the_results_topic() -> None:
    details = {"partitions": {"t-0": {"error": "NONE"}}, "total": 2}
    result = AdminResult("r", "elect_leaders", AdminStatus.OK, None, "m", details)
    (m,) = admin_result_messages("res", Fence(3, 0), 4, [result])
    v = json.loads(m.value)
    assert v["details"] == details and "truncated" not in v
    assert decode_decision({k: x for k, x in v.items() if k not in ("batch_id", "controller_epoch")}) == result


def test_truncated_details_are_an_object_and_the_value_fits() -> None:
    details = {"partitions": {f"t-{i}": {"error": "NONE"} for i in range(5_000)}}
    value: dict[str, Any] = {"type": "admin_result", "request_id": "r", "status": "ok", "error": None, "message": "m"}
    value["details"] = details
    whole = len(json.dumps(value, separators=(",", ":")))
    fitted = fit_admin_value(value, 20_000)
    assert len(fitted) <= 20_000 < whole
    v = json.loads(fitted)
    original = len(json.dumps(details, separators=(",", ":"), sort_keys=True).encode())
    assert v["details"] == {"truncated": True, "original_bytes": original}
    assert read_details(v["details"])["truncated"] is True
    assert v["truncated"]["fields"] == ["details"] and v["status"] == "ok" and v["message"] == "m"
    # a message too long as well is cut after the details, the status kept
    value["message"] = "x" * 50_000
    v = json.loads(fit_admin_value(value, 20_000))
    assert v["details"]["truncated"] is True and v["truncated"]["fields"] == ["details", "message"]
    assert v["status"] == "ok" and len(v["message"]) < 50_000
