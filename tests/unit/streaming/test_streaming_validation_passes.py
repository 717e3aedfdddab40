"""The input suite's two passes (``InputValidator.failed_rows``): a quick verdict for the whole micro-batch,
then the failing rows' indices only when something failed. Both must judge exactly as one ``COMPLETE``
run over the batch would."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import great_expectations as gx
import pytest
from great_expectations.datasource.fluent.interfaces import Batch
from great_expectations.expectations.expectation import ColumnMapExpectation

from core import limits as lim
from streaming.query.validation import Expectation, InputValidator, flatten

pytestmark = pytest.mark.unit


def _create(**kw: Any) -> str:
    return json.dumps({"version": 1, "type": "create_topic", "request_id": "r", "topic": "t", **kw})


VALID = [
    _create(partitions=3, replication_factor=1),
    json.dumps({"version": 1, "type": "broker_failure", "broker_id": 4}),
    json.dumps({"version": 1, "type": "delete_topic", "request_id": "r2", "topic": "orders"}),
]
INVALID = [
    _create(partitions=0, replication_factor=1),
    json.dumps({"version": 1, "type": "broker_failure", "broker_id": lim.MAX_BROKER_ID + 1}),
    json.dumps({"version": 1, "type": "delete_topic", "request_id": "r", "topic": ".."}),
    json.dumps({"version": 1, "type": "no_such_command"}),
    "not json at all",
]


def _sources(values: list[str]) -> list[str]:
    return ["broker-events" if "broker_failure" in v else "admin" for v in values]


@pytest.fixture
def formats(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The ``result_format`` of every suite run, in order."""
    seen: list[str] = []
    validate = Batch.validate

    def recording(self: Batch, expect: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(str(kwargs.get("result_format")))
        return validate(self, expect, *args, **kwargs)

    monkeypatch.setattr(Batch, "validate", recording)
    yield seen


def _complete_only(validator: InputValidator, values: list[str]) -> dict[int, list[str]]:
    """The reference: one ``COMPLETE`` run over the batch."""
    return _names(validator.failed_rows_one_pass(flatten(values, _sources(values))))


def _names(failed: dict[int, list[Expectation]]) -> dict[int, list[str]]:
    return {i: [e.name for e in exps] for i, exps in failed.items()}


def test_every_expectation_of_the_suite_judges_each_row_alone(validator: InputValidator) -> None:
    # what lets a whole-batch verdict stand for every row's: no aggregate (mean, uniqueness, row count)
    assert validator.expectations
    for e in validator.expectations:
        cls = gx.expectations.registry.get_expectation_impl(e.type)
        assert issubclass(cls, ColumnMapExpectation), f"{e.name}: {e.type} is not a column-map expectation"


def test_a_passing_batch_runs_the_quick_pass_only(validator: InputValidator, formats: list[str]) -> None:
    assert validator.failed_rows(flatten(VALID, _sources(VALID))) == {}
    assert formats == ["BOOLEAN_ONLY"]


@pytest.mark.parametrize("bad", range(len(INVALID)))
def test_a_failing_batch_gets_the_rows_a_complete_run_finds(
    validator: InputValidator, formats: list[str], bad: int
) -> None:
    values = [VALID[0], INVALID[bad], VALID[1], VALID[2]]
    expected = _complete_only(validator, values)
    formats.clear()
    failed = _names(validator.failed_rows(flatten(values, _sources(values))))
    assert formats == ["BOOLEAN_ONLY", "COMPLETE"]
    assert failed == expected
    assert set(failed) == {1}, failed
    assert failed[1], "the bad row names the expectations it failed"


def test_every_bad_row_of_a_mixed_batch_is_named(validator: InputValidator) -> None:
    values = [*VALID, *INVALID, *VALID]
    failed = _names(validator.failed_rows(flatten(values, _sources(values))))
    assert failed == _complete_only(validator, values)
    assert set(failed) == set(range(len(VALID), len(VALID) + len(INVALID)))
