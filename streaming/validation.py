"""Input validation: a great-expectations suite over each micro-batch, then core's strict decoder.

Every input record (a Kafka record of ``livectl.admin`` or ``livectl.broker-events``) is

1. flattened by :func:`flatten` into one row of plain columns (``type``, ``version``, ``broker_id``,
   ``partitions``, ``replication_factor``, ``duplicate_replicas``, ...);
2. checked by the suite in ``streaming/conf/expectations/livectl-input.json`` (great-expectations on pandas,
   ``result_format="COMPLETE"`` for the failing row indices). A row failing any expectation is rejected
   with the names of the failed expectations and their reasons;
3. decoded by :func:`core.events.decode_event`, whose :class:`core.errors.FormatError` names the field and
   the reason for anything the suite does not cover (a rejected row then carries ``decode:<field>``).

Nothing raises for bad input: :meth:`InputValidator.check` returns, for each record, either the decoded
event or the reasons. great-expectations is imported once per Python worker (~2–6 s) and its progress bars
are off.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.resources.abc import Traversable
from typing import Any

import pandas as pd

from core import events as ev
from core.errors import FormatError
from streaming.resources import INPUT_SUITE, conf_file

#: the shipped suite, ``streaming/conf/expectations/livectl-input.json`` inside the package
SUITE_PATH: Traversable = conf_file(INPUT_SUITE)

#: the driver's reference to a ZooKeeper snapshot written under the checkpoint (see streaming.failover)
FAILOVER_REF_TYPE = "controller_failover_ref"

ADMIN_TYPES = frozenset(ev.ADMIN_TYPES)
#: types a broker-events record may carry: broker events plus the driver's internal ones
BROKER_EVENT_TYPES = frozenset((set(ev.EVENT_TYPES) - ADMIN_TYPES - {ev.ControllerFailover.TYPE}) | {FAILOVER_REF_TYPE})
KNOWN_TYPES = ADMIN_TYPES | BROKER_EVENT_TYPES

_LIST_FIELDS = ("replicas", "new_isr", "isr")


@dataclass(frozen=True)
class Expectation:
    name: str
    type: str
    kwargs: dict[str, Any]
    reason: str


@dataclass(frozen=True)
class Rejection:
    """Why a record was refused: expectation names and human reasons, in suite order."""

    expectations: tuple[str, ...]
    reasons: tuple[str, ...]


def load_suite(path: Traversable = SUITE_PATH) -> tuple[str, tuple[Expectation, ...]]:
    raw = json.loads(path.read_text())
    out = []
    for e in raw["expectations"]:
        kwargs = dict(e["kwargs"])
        if kwargs.get("value_set") == "$KNOWN_TYPES":
            kwargs["value_set"] = sorted(KNOWN_TYPES)
        out.append(Expectation(e["name"], e["type"], kwargs, e["reason"]))
    return raw["name"], tuple(out)


def _lists_in(o: dict[str, Any]) -> list[list[Any]]:
    """Every replica-like list in an event: replicas, new_isr, replica_assignment values, partitions[].replicas."""
    found: list[list[Any]] = []
    for f in _LIST_FIELDS:
        if isinstance(o.get(f), list):
            found.append(o[f])
    ra = o.get("replica_assignment")
    if isinstance(ra, dict):
        found.extend(v for v in ra.values() if isinstance(v, list))
    parts = o.get("partitions")
    if isinstance(parts, list):
        for p in parts:
            if isinstance(p, dict) and isinstance(p.get("replicas"), list):
                found.append(p["replicas"])
    return found


def _int_or_none(v: Any) -> float | None:
    # floats keep NaN for "absent" in pandas; bools are not broker ids
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v)


def flatten(values: Sequence[str | bytes | None], sources: Sequence[str]) -> pd.DataFrame:
    """One row per record with the columns the suite checks. ``sources`` is each record's topic role:
    ``"admin"`` or ``"broker-events"``."""
    rows = []
    for value, source in zip(values, sources, strict=True):
        try:
            o = json.loads(value) if value is not None else None
        except (ValueError, UnicodeDecodeError):
            o = None
        is_obj = isinstance(o, dict)
        d: dict[str, Any] = o if isinstance(o, dict) else {}
        typ = d.get("type") if isinstance(d.get("type"), str) else None
        lists = _lists_in(d)
        ints = [x for lst in lists for x in lst if isinstance(x, int) and not isinstance(x, bool)]
        topic = d.get("topic")
        partitions = d.get("partitions")
        on_wrong_topic = typ is not None and (
            (source == "admin" and typ in BROKER_EVENT_TYPES) or (source != "admin" and typ in ADMIN_TYPES)
        )
        rows.append(
            {
                "is_json_object": is_obj,
                "version": _int_or_none(d.get("version")) if is_obj else None,
                "type": typ,
                "type_on_wrong_topic": on_wrong_topic,
                "admin_without_request_id": typ in ADMIN_TYPES
                and not (isinstance(d.get("request_id"), str) and d["request_id"]),
                "broker_id": _int_or_none(d.get("broker_id")),
                "partitions": _int_or_none(partitions) if not isinstance(partitions, list) else None,
                "total_count": _int_or_none(d.get("total_count")),
                "replication_factor": _int_or_none(d.get("replication_factor")),
                "negative_broker_id_in_list": any(x < 0 for x in ints),
                "duplicate_replicas": any(len(lst) != len({json.dumps(x) for x in lst}) for lst in lists),
                "topic": topic if isinstance(topic, str) else None,
            }
        )
    frame = pd.DataFrame(
        rows,
        columns=[
            "is_json_object",
            "version",
            "type",
            "type_on_wrong_topic",
            "admin_without_request_id",
            "broker_id",
            "partitions",
            "total_count",
            "replication_factor",
            "negative_broker_id_in_list",
            "duplicate_replicas",
            "topic",
        ],
    )
    for col in ("version", "broker_id", "partitions", "total_count", "replication_factor"):
        frame[col] = pd.to_numeric(frame[col], errors="coerce").astype("float64")
    for col in ("type", "topic"):
        frame[col] = frame[col].astype("object")
    return frame


class InputValidator:
    """The suite, bound to an ephemeral great-expectations context (built once, reused per batch)."""

    def __init__(self, suite_path: Traversable = SUITE_PATH) -> None:
        os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")  # no network calls from workers
        import great_expectations as gx
        from great_expectations.data_context.types.base import ProgressBarsConfig
        from great_expectations.expectations.expectation_configuration import ExpectationConfiguration

        self.suite_name, self.expectations = load_suite(suite_path)
        self._context = gx.get_context(mode="ephemeral")
        self._context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
        source = self._context.data_sources.add_pandas("livectl-input")
        asset = source.add_dataframe_asset("records")
        self._batch_definition = asset.add_batch_definition_whole_dataframe("micro-batch")
        suite = gx.ExpectationSuite(name=self.suite_name)
        for e in self.expectations:
            suite.add_expectation_configuration(
                ExpectationConfiguration(type=e.type, kwargs=e.kwargs, meta={"name": e.name})
            )
        self._suite = self._context.suites.add(suite)

    def failed_rows(self, frame: pd.DataFrame) -> dict[int, list[Expectation]]:
        """Row index -> the expectations it failed (suite order)."""
        if frame.empty:
            return {}
        batch = self._batch_definition.get_batch(batch_parameters={"dataframe": frame.reset_index(drop=True)})
        result = batch.validate(self._suite, result_format="COMPLETE")
        by_name = {e.name: e for e in self.expectations}
        failed: dict[int, list[Expectation]] = {}
        for r in result.results:
            if r.success:
                continue
            name = r.expectation_config.meta.get("name") if r.expectation_config is not None else None
            exp = by_name.get(str(name))
            if exp is None:
                continue
            indices = r.result.get("unexpected_index_list") or []
            if r.exception_info and r.exception_info.get("raised_exception"):
                # an expectation that could not be computed fails every row rather than letting them through
                indices = list(range(len(frame)))
            for i in indices:
                failed.setdefault(int(i), []).append(exp)
        order = {e.name: n for n, e in enumerate(self.expectations)}
        for v in failed.values():
            v.sort(key=lambda e: order[e.name])
        return failed

    def check(
        self, values: Sequence[str | bytes | None], sources: Sequence[str]
    ) -> list[ev.Event | dict[str, Any] | Rejection]:
        """For each record: the decoded event, the raw JSON object of an internal failover reference, or
        a :class:`Rejection`."""
        frame = flatten(values, sources)
        failed = self.failed_rows(frame)
        out: list[ev.Event | dict[str, Any] | Rejection] = []
        for i, value in enumerate(values):
            if i in failed:
                exps = failed[i]
                out.append(Rejection(tuple(e.name for e in exps), tuple(e.reason for e in exps)))
                continue
            raw = json.loads(value)  # type: ignore[arg-type]  # the suite proved it is a JSON object
            if raw.get("type") == FAILOVER_REF_TYPE:
                out.append(raw)
                continue
            try:
                out.append(ev.decode_event(raw))
            except FormatError as e:
                out.append(Rejection((f"decode:{e.field}",), (str(e),)))
        return out
