"""Input validation: a great-expectations suite over each micro-batch, then core's strict decoder.

Every input record (a Kafka record of ``livectl.admin`` or ``livectl.broker-events``) is

1. flattened by :func:`flatten` into one row of plain columns (``type``, ``version``, ``broker_id``,
   ``partitions``, ``replication_factor``, ``duplicate_replicas``, ...);
2. checked by the suite in ``conf/expectations/livectl-input.json`` (great-expectations on pandas;
   a micro-batch that fails it is checked again with ``result_format="COMPLETE"`` for the failing row
   indices). A row failing any expectation is rejected
   with the names of the failed expectations and their reasons;
3. decoded by :func:`core.codec.events.decode_event`, whose :class:`core.errors.FormatError` names the field and
   the reason for anything the suite does not cover (a rejected row then carries ``decode:<field>``).

The suite and the decoder agree on ranges: the suite's bounds are ``$NAME`` placeholders filled in from
:mod:`core.limits` (and the topic rule from :data:`core.codec.values.TOPIC_NAME_REGEX`). Where a failed
expectation is about one field among many (a duplicate broker in a replica list, a lone surrogate in a
string), the reason names that field and the partition. Each rejection carries the Kafka error name its
admin result gets (``INVALID_TOPIC_EXCEPTION``, ``INVALID_PARTITIONS``, ``INVALID_REPLICATION_FACTOR``,
``INVALID_REPLICA_ASSIGNMENT``; otherwise ``INVALID_REQUEST``).

Nothing raises for bad input, however malformed or large: :meth:`InputValidator.check` returns, for each
record, either the decoded event or the reasons (a record nested too deeply for the JSON parser is "not a
JSON object"; an unexpected exception while decoding one record rejects that record with the exception).
great-expectations is imported once per Python worker daemon, before it forks the workers
(:mod:`streaming.warm.worker_daemon`), and its progress bars are off.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.resources.abc import Traversable
from typing import Any

import pandas as pd

from core import events as ev
from core import jsonform as jf
from core import limits as lim
from core.codec.events import ADMIN_TYPES, EVENT_TYPES, decode_event
from core.codec.values import TOPIC_NAME_REGEX
from core.errors import FormatError
from core.kafka.error_codes import KafkaError as Errors
from streaming.resources import INPUT_SUITE, conf_file

#: the shipped suite, ``conf/expectations/livectl-input.json`` inside the package
SUITE_PATH: Traversable = conf_file(INPUT_SUITE)

#: the driver's reference to a ZooKeeper snapshot written under the checkpoint (see streaming.query.failover)
FAILOVER_REF_TYPE = "controller_failover_ref"

#: types a broker-events record may carry: broker events plus the driver's internal ones
BROKER_EVENT_TYPES = frozenset((set(EVENT_TYPES) - ADMIN_TYPES - {ev.ControllerFailover.TYPE}) | {FAILOVER_REF_TYPE})
KNOWN_TYPES = ADMIN_TYPES | BROKER_EVENT_TYPES

#: replica lists the suite checks (no negative ids, no duplicates). An AlterPartition's ``new_isr`` is not one:
#: Kafka's controller answers any int32 ISR (INVALID_REQUEST, INELIGIBLE_REPLICA, ...), and so does the core
_LIST_FIELDS = ("replicas", "isr")

#: values the suite's ``$NAME`` placeholders stand for (core's limits: one source of truth)
SUITE_CONSTANTS: dict[str, Any] = {
    "$KNOWN_TYPES": sorted(KNOWN_TYPES),
    "$MAX_PARTITIONS": lim.MAX_PARTITIONS,
    "$MAX_REPLICATION_FACTOR": lim.MAX_REPLICATION_FACTOR,
    "$MAX_BROKER_ID": lim.MAX_BROKER_ID,
    "$MAX_REQUEST_ID_LENGTH": lim.MAX_REQUEST_ID_LENGTH,
    "$TOPIC_NAME_REGEX": TOPIC_NAME_REGEX,
}


@dataclass(frozen=True)
class Expectation:
    name: str
    type: str
    kwargs: dict[str, Any]
    reason: str
    #: the Kafka error name of the admin result of a command failing it
    error: str = Errors.INVALID_REQUEST.name


@dataclass(frozen=True)
class Rejection:
    """Why a record was refused: expectation names and human reasons, in suite order, and the Kafka
    error name its admin result carries."""

    expectations: tuple[str, ...]
    reasons: tuple[str, ...]
    error: str = Errors.INVALID_REQUEST.name


def load_suite(path: Traversable = SUITE_PATH) -> tuple[str, tuple[Expectation, ...]]:
    raw = json.loads(path.read_text())
    out = []
    for e in raw["expectations"]:
        kwargs = {k: SUITE_CONSTANTS.get(v, v) if isinstance(v, str) else v for k, v in e["kwargs"].items()}
        reason = str(e["reason"])
        for name, value in SUITE_CONSTANTS.items():
            if isinstance(value, int):
                reason = reason.replace(name, str(value))
        out.append(Expectation(e["name"], e["type"], kwargs, reason, e.get("error", Errors.INVALID_REQUEST.name)))
    return raw["name"], tuple(out)


def _named_lists(o: dict[str, Any]) -> list[tuple[str, str, list[Any]]]:
    """Every replica-like list in an event as (field, the partition it belongs to, list): replicas, isr,
    replica_assignment values, partitions[].replicas."""
    found: list[tuple[str, str, list[Any]]] = []
    topic = o.get("topic") if isinstance(o.get("topic"), str) else "?"
    for f in _LIST_FIELDS:
        if isinstance(o.get(f), list):
            found.append((f, f"{topic}-{o.get('partition', '?')}", o[f]))
    ra = o.get("replica_assignment")
    if isinstance(ra, dict):
        found.extend((f"replica_assignment.{k}", f"{topic}-{k}", v) for k, v in ra.items() if isinstance(v, list))
    parts = o.get("partitions")
    if isinstance(parts, list):
        for i, p in enumerate(parts):
            if isinstance(p, dict) and isinstance(p.get("replicas"), list):
                found.append(
                    (f"partitions[{i}].replicas", f"{p.get('topic', '?')}-{p.get('partition', '?')}", p["replicas"])
                )
    return found


def _lists_in(o: dict[str, Any]) -> list[list[Any]]:
    """Every replica-like list in an event: replicas, isr, replica_assignment values, partitions[].replicas."""
    return [lst for _, _, lst in _named_lists(o)]


def _first_bad_string(v: Any, path: str = "$", depth: int = 0) -> str | None:
    """The path of the first string (key or value) in ``v`` that is not valid UTF-8 (a lone surrogate
    from a ``\\ud800`` escape), or ``None``."""
    if isinstance(v, str):
        return None if v.isascii() or _utf8_ok(v) else path
    if depth > 64:
        return None
    if isinstance(v, dict):
        for k, x in v.items():
            if not (k.isascii() or _utf8_ok(k)):
                return f"{path} (a key)"
            bad = _first_bad_string(x, k if path == "$" else f"{path}.{k}", depth + 1)
            if bad is not None:
                return bad
    elif isinstance(v, list):
        for i, x in enumerate(v):
            bad = _first_bad_string(x, f"{path}[{i}]", depth + 1)
            if bad is not None:
                return bad
    return None


def _utf8_ok(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _parse(value: str | bytes | None) -> tuple[Any, str | None]:
    """The JSON value of one record, or ``None`` with why it is not JSON."""
    if value is None:
        return None, "the record has no value"
    try:
        return json.loads(value), None
    except RecursionError:
        return None, "the record value is JSON nested too deeply to parse"
    except (ValueError, UnicodeDecodeError) as e:
        return None, f"the record value is not JSON: {lim.show(str(e), 200)}"


def _duplicate_detail(o: dict[str, Any]) -> str | None:
    for name, partition, lst in _named_lists(o):
        seen: set[str] = set()
        for x in lst:
            if not isinstance(x, int | str | float | bool) and x is not None:
                continue  # not a broker id at all: the decoder names it
            key = json.dumps(x)
            if key in seen:
                return f"field '{name}' (partition {_plain(partition)}) names broker {lim.show(x, 40)} twice"
            seen.add(key)
    return None


def _plain(text: str) -> str:
    return text if len(text) <= 120 and text.isascii() and text.isprintable() else lim.show(text, 120)


def _negative_detail(o: dict[str, Any]) -> str | None:
    for name, partition, lst in _named_lists(o):
        for i, x in enumerate(lst):
            if isinstance(x, int) and not isinstance(x, bool) and x < 0:
                return f"field '{name}[{i}]' (partition {_plain(partition)}) is {x}"
    return None


def _int_or_none(v: Any) -> float | None:
    # floats keep NaN for "absent" in pandas; bools are not broker ids
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v)


_COLUMNS = [
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
    "request_id_length",
    "invalid_utf8_field",
]


@dataclass(frozen=True)
class Flattened:
    """:func:`flatten` with what the suite cannot say by itself: each record's parsed JSON (parsed once)
    and, per row, the specific field behind a failed expectation (expectation name -> detail)."""

    frame: pd.DataFrame
    parsed: list[Any]
    details: list[dict[str, str]]


def _row(o: Any, problem: str | None, source: str) -> tuple[dict[str, Any], dict[str, str]]:
    is_obj = isinstance(o, dict)
    d: dict[str, Any] = o if isinstance(o, dict) else {}
    details: dict[str, str] = {}
    if problem is not None:
        details["payload_is_json_object"] = problem
    typ = d.get("type") if isinstance(d.get("type"), str) else None
    lists = _lists_in(d)
    ints = [x for lst in lists for x in lst if isinstance(x, int) and not isinstance(x, bool)]
    topic = d.get("topic")
    partitions = d.get("partitions")
    on_wrong_topic = typ is not None and (
        (source == "admin" and typ in BROKER_EVENT_TYPES) or (source != "admin" and typ in ADMIN_TYPES)
    )
    rid = d.get("request_id")
    duplicate = _duplicate_detail(d)
    if duplicate is not None:
        details["no_duplicate_replicas"] = duplicate
    negative = _negative_detail(d) if any(x < 0 for x in ints) else None
    if negative is not None:
        details["replicas_non_negative"] = negative
    bad_string = _first_bad_string(d) if is_obj else None
    if bad_string is not None:
        details["strings_valid_utf8"] = f"field '{bad_string}' holds a lone UTF-16 surrogate"
    if isinstance(topic, str) and len(topic) > lim.MAX_TOPIC_LENGTH:
        details["topic_name_legal"] = f"it is {len(topic)} characters long, at most {lim.MAX_TOPIC_LENGTH} allowed"
    elif isinstance(topic, str):
        details["topic_name_legal"] = f"got {lim.show(topic)}"
    row = {
        "is_json_object": is_obj,
        "version": _int_or_none(d.get("version")) if is_obj else None,
        "type": typ,
        "type_on_wrong_topic": on_wrong_topic,
        "admin_without_request_id": typ in ADMIN_TYPES and not (isinstance(rid, str) and rid),
        "broker_id": _int_or_none(d.get("broker_id")),
        "partitions": _int_or_none(partitions) if not isinstance(partitions, list) else None,
        "total_count": _int_or_none(d.get("total_count")),
        "replication_factor": _int_or_none(d.get("replication_factor")),
        "negative_broker_id_in_list": negative is not None,
        "duplicate_replicas": duplicate is not None,
        "topic": topic if isinstance(topic, str) else None,
        "request_id_length": float(len(rid)) if isinstance(rid, str) else None,
        "invalid_utf8_field": bad_string,
    }
    return row, details


def flatten(values: Sequence[str | bytes | None], sources: Sequence[str]) -> pd.DataFrame:
    """One row per record with the columns the suite checks. ``sources`` is each record's topic role:
    ``"admin"`` or ``"broker-events"``."""
    return flatten_records(values, sources).frame


def flatten_records(values: Sequence[str | bytes | None], sources: Sequence[str]) -> Flattened:
    """:func:`flatten`, keeping each record's parsed JSON and the per-row details of its failures."""
    rows = []
    parsed: list[Any] = []
    details: list[dict[str, str]] = []
    for value, source in zip(values, sources, strict=True):
        o, problem = _parse(value)
        try:
            row, detail = _row(o, problem, source)
        except RecursionError:
            # a JSON value the parser took but that is too deep to walk: handled as not JSON at all
            o = None
            row, detail = _row(None, "the record value is JSON nested too deeply to check", source)
        parsed.append(o)
        rows.append(row)
        details.append(detail)
    frame = pd.DataFrame(rows, columns=_COLUMNS)
    for col in ("version", "broker_id", "partitions", "total_count", "replication_factor", "request_id_length"):
        frame[col] = pd.to_numeric(frame[col], errors="coerce").astype("float64")
    for col in ("type", "topic", "invalid_utf8_field"):
        frame[col] = frame[col].astype("object")
    return Flattened(frame, parsed, details)


def check_failover_ref(raw: dict[str, Any]) -> dict[str, Any]:
    """The fields of the driver's failover reference that the buckets rely on, checked (a forged or
    damaged reference is rejected, naming the field, instead of failing inside a bucket)."""
    jf.integer(raw, "controller_id", minimum=0, maximum=lim.INT32_MAX)
    jf.integer(raw, "controller_epoch", minimum=0, maximum=lim.INT32_MAX)
    jf.opt_integer(raw, "epoch_zk_version", 0, minimum=-1, maximum=lim.INT32_MAX)
    jf.opt_integer(raw, "num_buckets", 1, minimum=1, maximum=lim.INT32_MAX)
    jf.string(raw, "path", max_length=4096)
    return raw


def check_with(
    failed_rows: Callable[[pd.DataFrame], dict[int, list[Expectation]]],
    values: Sequence[str | bytes | None],
    sources: Sequence[str],
) -> list[ev.Event | dict[str, Any] | Rejection]:
    """For each record: the decoded event, the raw JSON object of an internal failover reference, or a
    :class:`Rejection`; ``failed_rows`` judges the flattened rows by the suite."""
    flat = flatten_records(values, sources)
    failed = failed_rows(flat.frame)
    out: list[ev.Event | dict[str, Any] | Rejection] = []
    for i in range(len(values)):
        if i in failed:
            out.append(_rejection(failed[i], flat.details[i]))
            continue
        raw = flat.parsed[i]
        try:
            if raw.get("type") == FAILOVER_REF_TYPE:
                out.append(check_failover_ref(raw))
            else:
                out.append(decode_event(raw))
        except FormatError as e:
            out.append(Rejection((f"decode:{e.field}",), (str(e),), e.error))
        except Exception as e:  # a decoder bug must cost this record only, never the query
            out.append(Rejection(("decode:$",), (f"$: the record could not be decoded: {e!r}"[:2000],)))
    return out


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
        """Row index -> the expectations it failed (suite order).

        The suite runs first with ``result_format="BOOLEAN_ONLY"`` (no unexpected values, counts or indices
        to compute: 0.13 s against 0.27 s for ``COMPLETE`` here, a fixed cost of every micro-batch with
        input, so of every admin command's latency; ``bench/validation_cost.py``); only a micro-batch that
        fails an expectation runs it again in ``COMPLETE`` for the failing rows' indices. Every expectation
        of the suite is a column-map one, so both runs judge each row alone and agree on the verdict."""
        return self._failed_rows(frame, quick_pass=True)

    def failed_rows_one_pass(self, frame: pd.DataFrame) -> dict[int, list[Expectation]]:
        """:meth:`failed_rows` by one ``COMPLETE`` run, whatever the verdict (the way before the quick pass:
        the reference its tests and ``bench/validation_cost.py`` compare it with)."""
        return self._failed_rows(frame, quick_pass=False)

    def _failed_rows(self, frame: pd.DataFrame, *, quick_pass: bool) -> dict[int, list[Expectation]]:
        if frame.empty:
            return {}
        batch = self._batch_definition.get_batch(batch_parameters={"dataframe": frame.reset_index(drop=True)})
        if quick_pass and batch.validate(self._suite, result_format="BOOLEAN_ONLY").success:
            return {}
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
        return check_with(self.failed_rows, values, sources)


def _rejection(exps: list[Expectation], details: dict[str, str]) -> Rejection:
    reasons = tuple(f"{e.reason}: {details[e.name]}" if e.name in details else e.reason for e in exps)
    return Rejection(tuple(e.name for e in exps), reasons, exps[0].error)
