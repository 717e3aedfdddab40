"""An admin result's ``details`` is a read-only JSON object: frozen when the result is built, a JSON object
in the bucket's row (never a string holding JSON), and read back from either form a results topic can hold
across an upgrade (:func:`core.codec.decisions.read_details`)."""

from __future__ import annotations

import json
import pickle

import pytest

from core.codec.decisions import decision_from_json, decision_to_json, encode_decision, read_details
from core.decisions import AdminResult, AdminStatus
from core.errors import FormatError
from core.frozen_json import freeze

pytestmark = pytest.mark.unit

DETAILS = {"partitions": {"t-0": {"error": "NONE"}, "t-1": {"error": "ELECTION_NOT_NEEDED"}}, "done": 1, "ids": [3, 1]}


def test_the_row_carries_details_as_an_object_and_decodes_to_an_equal_result() -> None:
    result = AdminResult("r", "elect_leaders", AdminStatus.OK, None, "done", DETAILS)
    row = decision_to_json(result)
    raw = json.loads(row)
    assert raw["details"] == DETAILS  # an object inside the row, not text
    assert '"details":{' in row
    back = decision_from_json(row)
    assert back == result and hash(back) == hash(result)
    assert back.details_json() == DETAILS
    assert json.loads(json.dumps(encode_decision(back)))["details"] == DETAILS  # encoders write it as it is


def test_a_row_an_older_controller_wrote_with_details_as_text_decodes_the_same() -> None:
    result = AdminResult("r", "elect_leaders", AdminStatus.OK, None, "done", DETAILS)
    old = encode_decision(result) | {"details": json.dumps(DETAILS)}
    assert decision_from_json(json.dumps(old)) == result
    without = {k: v for k, v in encode_decision(result).items() if k != "details"}
    decoded = decision_from_json(json.dumps(without))
    assert isinstance(decoded, AdminResult) and decoded.details_json() == {}


def test_read_details_accepts_an_object_and_the_old_text_form() -> None:
    assert read_details(DETAILS) == read_details(json.dumps(DETAILS)) == DETAILS | {"ids": (3, 1)}
    assert read_details(None) == {} and read_details("") == {} and read_details("{}") == {}


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("{not json", "is text but not valid JSON"),
        ("[1, 2]", "must be a JSON object, got list"),
        (7, "must be a JSON object, got int"),
        ([], "must be a JSON object, got list"),
    ],
)
def test_read_details_names_the_field_and_the_reason(raw: object, reason: str) -> None:
    with pytest.raises(FormatError) as e:
        read_details(raw)
    assert e.value.field == "details" and reason in str(e.value)


def test_a_row_with_details_that_are_no_object_is_refused_naming_the_field() -> None:
    bad = encode_decision(AdminResult("r", "c", AdminStatus.OK)) | {"details": [1]}
    with pytest.raises(FormatError) as e:
        decision_from_json(json.dumps(bad))
    assert e.value.field == "details"


def test_details_are_a_copy_nobody_can_change() -> None:
    parts: dict[str, object] = {"t-0": {"error": "NONE"}}
    ids = [1, 2]
    given = {"partitions": parts, "ids": ids}
    result = AdminResult("r", "reassign_partitions", AdminStatus.IN_PROGRESS, details=given)
    parts["t-1"] = {"error": "NONE"}  # the handler goes on filling its dict
    ids.append(3)
    assert result.details_json() == {"partitions": {"t-0": {"error": "NONE"}}, "ids": [1, 2]}
    with pytest.raises(TypeError):
        result.details["x"] = 1  # type: ignore[index]
    with pytest.raises(TypeError):
        result.details["partitions"]["t-0"]["error"] = "X"
    for change in ("clear", "popitem"):
        with pytest.raises(TypeError):
            getattr(result.details["partitions"], change)()
    for change in ("pop", "setdefault", "update", "__delitem__", "__ior__"):
        with pytest.raises(TypeError):
            getattr(result.details, change)({"partitions": 1})
    assert pickle.loads(pickle.dumps(result)) == result
    assert isinstance(result.details["ids"], tuple)
    thawed = result.details_json()
    thawed["partitions"]["t-0"]["error"] = "X"  # a new plain object: the result is untouched
    assert result.details["partitions"]["t-0"]["error"] == "NONE"


def test_details_that_are_not_an_object_are_refused_when_built() -> None:
    with pytest.raises(FormatError) as e:
        AdminResult("r", "c", AdminStatus.OK, details='{"a":1}')  # type: ignore[arg-type]
    assert e.value.field == "details" and "got str" in str(e.value)


def test_freeze_reuses_what_is_already_frozen_and_keeps_scalars() -> None:
    first = AdminResult("r", "c", AdminStatus.OK, details={"partitions": {"t-0": {"error": "NONE"}}})
    again = AdminResult("r", "c", AdminStatus.OK, details={"partitions": first.details["partitions"], "n": 1})
    assert again.details["partitions"] is first.details["partitions"]  # a merged part is not copied again
    assert freeze(first.details) is first.details
    assert [freeze(v) for v in ("a", 1, 1.5, True, None)] == ["a", 1, 1.5, True, None]
    assert freeze({1: [2, 3]}) == {"1": (2, 3)}  # JSON's keys are strings, as an encoder would write them
