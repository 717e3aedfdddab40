"""The JSON form of every decision (:mod:`core.decisions`): ``{"version": 1, "type": <TYPE>, ...fields}``,
as the bucket emits it in its output rows and the dispatcher reads it back. Decoding is strict and raises
:class:`core.errors.FormatError` naming the field and the reason.

A broker request's ``body`` is a JSON *object* in the row: the bytes of
:func:`core.kafka.request_encoding.encode_body`, spliced in, never a string holding JSON. Decoding keeps it as
the parsed object (:class:`core.kafka.requests.WireBody`) unless asked for typed values: the driver hands
it to the request sink as it is. A bucket's output row of a LeaderAndIsr, UpdateMetadata or StopReplica
puts each ``topicStates`` entry on a line of its own (:func:`decision_row_text`), which the driver keeps as
text (:func:`decode_row_text`, :class:`core.kafka.requests.SplicedBody`). This module owns the row's
encoding whole (the entries' sorted-key texts included, :func:`sorted_entries`); the body's wire form is
:mod:`core.kafka.request_encoding`'s, which knows nothing of rows.

An admin result's ``details`` is a JSON object too (in the row and on ``livectl.admin-results``).
:func:`read_details` reads it, and also the JSON text a controller before that change wrote, which can
still sit on the results topic across an upgrade. The decoder reads it the same way, so the admin tool
(which decodes results off the topic) and the audit log (which logs the driver's decoded results) get one
value whichever form was written."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from enum import Enum
from json.encoder import encode_basestring_ascii as _json_string
from types import MappingProxyType
from typing import Any, TypeVar

from core import jsonform as jf
from core.decisions import (
    ANY_VERSION,
    AdminResult,
    AdminStatus,
    BrokerRequest,
    Decision,
    StateChangeFailure,
    ZkOp,
    ZkWrite,
)
from core.errors import FormatError
from core.frozen_json import EMPTY_OBJECT, freeze_object, thaw
from core.kafka.request_encoding import EncodeMemo, encode_addressees, encode_text, ints_text, wire_object
from core.kafka.request_parsing import parse_body, read_addressees
from core.kafka.requests import (
    LeaderAndIsrRequest,
    LisrPartitionState,
    MetadataPartitionState,
    RequestApi,
    RequestBody,
    SplicedBody,
    StopReplicaPartition,
    StopReplicaRequest,
    UpdateMetadataRequest,
    WireBody,
)

_S = TypeVar("_S")

DECISION_VERSION = 1
#: the fields of a ZooKeeper write's JSON form
_ZK_FIELDS = frozenset({"version", "type", "op", "path", "data", "expected_version", "make_parents"})


def encode_decision(d: Decision) -> dict[str, Any]:
    """The decision's JSON form as an object (a broker request's body as its wire object)."""
    body: dict[str, Any] = {"version": DECISION_VERSION, "type": d.TYPE}
    for name in (f.name for f in fields(d)):  # type: ignore[arg-type]
        v = getattr(d, name)
        body[name] = v.value if isinstance(v, Enum) else v
    if isinstance(d, BrokerRequest):
        body["body"] = dict(wire_object(d.body))
        if d.addressees:
            body["addressees"] = encode_addressees(d.addressees)
        else:
            del body["addressees"]
    elif isinstance(d, AdminResult):
        body["details"] = d.details  # frozen JSON: any JSON encoder writes it as it is
    return body


def read_details(raw: Any, field: str = "details") -> Mapping[str, Any]:
    """An admin result's ``details`` as a read-only JSON object, from either form it takes on the wire: a
    JSON object (now) or a string holding one (a controller before details became values). Missing or
    null is the empty object; anything else raises :class:`FormatError` naming ``field`` and the reason."""
    return freeze_object(_details_object(raw, field), field)


def _details_object(raw: Any, field: str) -> Mapping[str, Any]:
    # the decoder hands this to AdminResult, which takes its own read-only copy: freezing here as well
    # would walk a large reassignment's details twice
    if raw is None:
        return EMPTY_OBJECT
    if isinstance(raw, str):
        try:
            raw = json.loads(raw) if raw else {}
        except ValueError as e:
            raise FormatError(field, f"is text but not valid JSON: {e}") from None
    return jf.obj(raw, field)


def decision_to_json(d: Decision, memo: EncodeMemo | None = None) -> str:
    """The decision's JSON form as text, keys sorted. A broker request's typed body is encoded once and
    spliced in (``memo``: see :func:`core.kafka.request_encoding.encode_text`)."""
    if isinstance(d, BrokerRequest):
        if isinstance(d.body, WireBody):
            body = json.dumps(dict(d.body.obj), separators=(",", ":"))
        else:
            body = encode_text(d.body, memo)
        addressees = ""
        if d.addressees:
            addressees = f'"addressees":{json.dumps(encode_addressees(d.addressees), separators=(",", ":"))},'

        return (
            f'{{{addressees}"api":{json.dumps(d.api.value)},"body":{body},"broker_id":{d.broker_id},'
            f'"type":"{d.TYPE}","version":{DECISION_VERSION}}}'
        )
    if type(d) is ZkWrite:
        return _zk_write_text(d)
    return json.dumps(encode_decision(d), separators=(",", ":"), sort_keys=True)


def _zk_write_text(d: ZkWrite) -> str:
    """:func:`decision_to_json` of a ZooKeeper write, the same text written out: a broker failure writes one
    per partition it moves, and ``json.dumps`` of the object (a dict, sorted keys) cost 3.5 times this."""
    data = "null" if d.data is None else _json_string(d.data)
    return (
        f'{{"data":{data},"expected_version":{int(d.expected_version)},'
        f'"make_parents":{"true" if d.make_parents else "false"},"op":{_json_string(d.op.value)},'
        f'"path":{_json_string(d.path)},"type":"{ZkWrite.TYPE}","version":{DECISION_VERSION}}}'
    )


def _json_bool(v: bool) -> str:
    return "true" if v else "false"


#: one ``topicStates`` entry as a row carries it: ``(topicName, partition count, JSON text)``
TextEntry = tuple[str, int, str]


def _lisr_sorted(p: LisrPartitionState, memo: EncodeMemo | None) -> str:
    ints = ints_text if memo is None else memo.ints
    return (
        f'{{"addingReplicas":{ints(p.adding_replicas)},"controllerEpoch":{p.controller_epoch},'
        f'"isNew":{_json_bool(p.is_new)},"isr":{ints(p.isr)},"leader":{p.leader},"leaderEpoch":{p.leader_epoch},'
        f'"leaderRecoveryState":{p.leader_recovery_state},"partitionEpoch":{p.partition_epoch},'
        f'"partitionIndex":{p.partition},"removingReplicas":{ints(p.removing_replicas)},'
        f'"replicas":{ints(p.replicas)}}}'
    )


def _lisr_sorted_once(p: LisrPartitionState, memo: EncodeMemo | None) -> str:
    return _lisr_sorted(p, None) if memo is None else memo.once(_lisr_sorted, p)


def _metadata_sorted(p: MetadataPartitionState, memo: EncodeMemo | None) -> str:
    ints = ints_text if memo is None else memo.ints
    return (
        f'{{"controllerEpoch":{p.controller_epoch},"isr":{ints(p.isr)},"leader":{p.leader},'
        f'"leaderEpoch":{p.leader_epoch},"offlineReplicas":{ints(p.offline_replicas)},'
        f'"partitionIndex":{p.partition},"replicas":{ints(p.replicas)},"zkVersion":{p.zk_version}}}'
    )


def _stop_sorted(p: StopReplicaPartition, memo: EncodeMemo | None) -> str:
    delete = _json_bool(p.delete_partition)
    return f'{{"deletePartition":{delete},"leaderEpoch":{p.leader_epoch},"partitionIndex":{p.partition}}}'


def _plain(v: str) -> bool:
    # text every JSON encoder writes alike (no escapes, no non-ASCII): Kafka's topic names and ids
    return v.isascii() and v.isprintable() and '"' not in v and "\\" not in v


def _entries(
    parts: tuple[Any, ...], state: Callable[[Any, EncodeMemo | None], str], memo: EncodeMemo | None, *, with_id: bool
) -> list[TextEntry] | None:
    out: list[TextEntry] = []
    i, n = 0, len(parts)
    while i < n:
        first = parts[i]
        j = i + 1
        while j < n and parts[j].topic == first.topic and (not with_id or parts[j].topic_id == first.topic_id):
            j += 1
        if not _plain(first.topic) or (with_id and not _plain(first.topic_id)):
            return None
        states = ",".join(state(p, memo) for p in parts[i:j])
        tid = f',"topicId":"{first.topic_id}"' if with_id else ""
        out.append((first.topic, j - i, f'{{"partitionStates":[{states}]{tid},"topicName":"{first.topic}"}}'))
        i = j
    return out


def _lisr_entries(parts: tuple[LisrPartitionState, ...], memo: EncodeMemo | None) -> list[TextEntry] | None:
    return _entries(parts, _lisr_sorted_once, memo, with_id=True)


def _metadata_entries(parts: tuple[MetadataPartitionState, ...], memo: EncodeMemo | None) -> list[TextEntry] | None:
    return _entries(parts, _metadata_sorted, memo, with_id=True)


def _stop_entries(parts: tuple[StopReplicaPartition, ...], memo: EncodeMemo | None) -> list[TextEntry] | None:
    return _entries(parts, _stop_sorted, memo, with_id=False)


def sorted_entries(body: RequestBody, memo: EncodeMemo | None = None) -> list[TextEntry] | None:
    """The ``topicStates`` entries of a LeaderAndIsr, UpdateMetadata or StopReplica body, each as the
    JSON text with its keys sorted and no spaces (what the request sink writes for it, byte for byte:
    ``orjson.dumps(entry, option=OPT_SORT_KEYS)``), with its topic name and partition count; ``None`` for
    another body, or one naming a topic or topic id that is not plain ASCII text. ``memo``: entries of
    a tuple of partition states and LeaderAndIsr states encoded once (see
    :func:`core.kafka.request_encoding.encode_text`).

    The driver keeps these texts unparsed (:class:`~core.kafka.requests.SplicedBody`, whose docstring
    states the form its readers rely on: canonical sorted-key JSON whose partition states are flat — only
    integers, booleans and arrays of integers); a state field of another kind breaks them."""
    if isinstance(body, LeaderAndIsrRequest):
        return _memo_entries(body.partitions, _lisr_entries, memo)
    if isinstance(body, UpdateMetadataRequest):
        return _memo_entries(body.partitions, _metadata_entries, memo)
    if isinstance(body, StopReplicaRequest):
        return _memo_entries(body.partitions, _stop_entries, memo)
    return None


def _memo_entries(
    parts: tuple[_S, ...],
    entries: Callable[[tuple[_S, ...], EncodeMemo | None], list[TextEntry] | None],
    memo: EncodeMemo | None,
) -> list[TextEntry] | None:
    if memo is None or not parts:
        return entries(parts, memo)
    return memo.once(entries, parts)


_WITH_TOPIC_STATES = (LeaderAndIsrRequest, UpdateMetadataRequest, StopReplicaRequest)
#: the field of a row's first line that lists its ``topicStates`` entries (name, partition count)
ENTRIES_FIELD = "topic_entries"


def decision_row_text(d: Decision, memo: EncodeMemo | None = None) -> str:
    """A decision as a bucket's output row carries it. A LeaderAndIsr, UpdateMetadata or StopReplica with
    partition states is several lines (JSON text never holds a raw newline): first the decision with its
    body's ``topicStates`` empty and ``"topic_entries": [[topicName, partitions], …]``, then each
    ``topicStates`` entry's JSON, keys sorted, as the message carries it
    (:func:`sorted_entries`). The driver keeps those entries as text
    (:func:`decode_row_text`); the request sink splices them into its messages. Any other decision is
    :func:`decision_to_json`, one line."""
    if isinstance(d, BrokerRequest) and isinstance(d.body, _WITH_TOPIC_STATES) and d.body.partitions:
        body = d.body
        entries = sorted_entries(body, memo)
        if entries:
            empty: Any = dataclasses.replace(body, partitions=())  # type: ignore[arg-type]
            head = decision_to_json(dataclasses.replace(d, body=empty))
            listed = json.dumps([[name, count] for name, count, _ in entries], separators=(",", ":"))
            lines = [f'{head[:-1]},"{ENTRIES_FIELD}":{listed}}}', *(text for _, _, text in entries)]
            return "\n".join(lines)
    return decision_to_json(d, memo)


def decode_row_text(raw: Any, texts: Sequence[str]) -> Decision:
    """The decision of a row (:func:`decision_row_text`) from its first line, parsed, and the lines after
    it: a broker request whose body is a :class:`~core.kafka.requests.SplicedBody`."""
    o = jf.obj(raw, "$")
    listed = o.get(ENTRIES_FIELD)
    if not isinstance(listed, list) or len(listed) != len(texts):
        raise FormatError(ENTRIES_FIELD, f"must list the row's {len(texts)} topicStates entries")
    names: list[str] = []
    counts: list[int] = []
    for i, e in enumerate(listed):
        if not (isinstance(e, list) and len(e) == 2 and isinstance(e[0], str) and type(e[1]) is int and e[1] >= 0):
            raise FormatError(f"{ENTRIES_FIELD}[{i}]", "must be [topicName, partition count]")
        names.append(e[0])
        counts.append(e[1])
    d = decode_decision({k: v for k, v in o.items() if k != ENTRIES_FIELD})
    if not isinstance(d, BrokerRequest) or not isinstance(d.body, WireBody) or d.body.obj.get("topicStates") != []:
        raise FormatError("body", "a row with topicStates entries must be a broker request with empty topicStates")
    body = SplicedBody(d.body.obj, tuple(names), tuple(counts), tuple(texts))
    return dataclasses.replace(d, body=WireBody(body))


def decode_decision(raw: Any, *, typed: bool = False) -> Decision:
    """A decision from its JSON form. A broker request's body stays its parsed wire object
    (:class:`~core.kafka.requests.WireBody`) unless ``typed``, which parses it into the typed value."""
    if type(raw) is dict and raw.get("type") == ZkWrite.TYPE:
        write = _plain_zk_write(raw)
        if write is not None:
            return write
    o = jf.obj(raw, "$")
    jf.version(o, DECISION_VERSION)
    t = jf.string(o, "type")
    if t == ZkWrite.TYPE:
        try:
            op = ZkOp(jf.string(o, "op"))
        except ValueError:
            raise FormatError("op", f"unknown ZooKeeper op {o.get('op')!r}") from None
        return ZkWrite(
            op,
            jf.string(o, "path"),
            jf.opt_string(o, "data"),
            jf.opt_integer(o, "expected_version", ANY_VERSION),
            jf.boolean(o, "make_parents", False),
        )
    if t == BrokerRequest.TYPE:
        try:
            api = RequestApi(jf.string(o, "api"))
        except ValueError:
            raise FormatError("api", f"unknown request api {o.get('api')!r}") from None
        body = jf.obj(jf.req(o, "body"), "body")
        addressees = read_addressees(o.get("addressees"), "addressees")
        return BrokerRequest(
            jf.integer(o, "broker_id"), api, parse_body(api, body) if typed else WireBody(body), addressees
        )
    if t == AdminResult.TYPE:
        try:
            status = AdminStatus(jf.string(o, "status"))
        except ValueError:
            raise FormatError("status", f"unknown status {o.get('status')!r}") from None
        return AdminResult(
            jf.string(o, "request_id"),
            jf.string(o, "command"),
            status,
            jf.opt_string(o, "error"),
            jf.opt_string(o, "message") or "",
            _details_object(o.get("details"), "details"),
        )
    if t == StateChangeFailure.TYPE:
        return StateChangeFailure(
            jf.string(o, "item"), jf.string(o, "from_state"), jf.string(o, "to_state"), jf.string(o, "reason")
        )
    raise FormatError("type", f"unknown decision type '{t}'")


_ZK_OPS = MappingProxyType({op.value: op for op in ZkOp})
_INT64 = range(-(2**63), 2**63)


def _plain_zk_write(o: dict[str, Any]) -> ZkWrite | None:
    """A ZooKeeper write whose fields are all plainly valid (ASCII text, integers in range), without the
    field-by-field checks of :func:`decode_decision`, which give the same value for these; ``None`` for
    anything else, which the strict decoder then reads (or refuses, naming the field). A broker failure
    at 100k partitions is 30,000 such rows, decoded before ZooKeeper's writes can start."""
    version, op_name, path, data = o.get("version"), o.get("op"), o.get("path"), o.get("data")
    op = _ZK_OPS.get(op_name) if type(op_name) is str else None
    expected, parents = o.get("expected_version"), o.get("make_parents")
    if (
        type(version) is not int
        or version != DECISION_VERSION
        or op is None
        or type(path) is not str
        or not path
        or not path.isascii()
        or not (data is None or (type(data) is str and data.isascii()))
        or not (expected is None or (type(expected) is int and expected in _INT64))
        or not (parents is None or type(parents) is bool)
        or not o.keys() <= _ZK_FIELDS
    ):
        return None
    return ZkWrite(op, path, data, ANY_VERSION if expected is None else expected, bool(parents))


def decision_from_json(text: str | bytes, *, typed: bool = False) -> Decision:
    try:
        raw = json.loads(text)
    except ValueError as e:
        raise FormatError("$", f"not valid JSON: {e}") from None
    return decode_decision(raw, typed=typed)


# --------------------------------------------------------------------------- dry runs

#: the key of a dry run's decisions in its admin result's ``details`` (a list: the answers of several buckets
#: merge by concatenation, :func:`streaming.query.dispatch.merge_admin_results`)
DRY_RUN_DECISIONS = "dry_run"
#: the key of the partitions a dry run would change, each as it would be after the command
DRY_RUN_PARTITIONS = "dry_run_partitions"


@dataclass(frozen=True)
class DryRunPartition:
    """One partition as a dry-run command would leave it: its assignment, state and leadership (``leader``
    -1, ``isr`` empty and ``leader_epoch`` -1 when it would have none: a partition a deletion removes)."""

    topic: str
    partition: int
    state: str
    replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    leader: int = -1
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()


@dataclass(frozen=True)
class DryRun:
    """What an admin command run dry answered: the decisions the controller's step made for it (in the
    step's order, bucket after bucket) and the partitions it would change."""

    decisions: tuple[Decision, ...]
    partitions: tuple[DryRunPartition, ...]


def dry_run_details(decisions: Sequence[Decision], partitions: Sequence[DryRunPartition]) -> dict[str, Any]:
    """The ``details`` entries of a dry run's answer: its decisions in their JSON form
    (:func:`encode_decision`) and its partitions."""
    return {
        DRY_RUN_DECISIONS: [encode_decision(d) for d in decisions],
        DRY_RUN_PARTITIONS: [
            {f.name: list(v) if isinstance(v := getattr(p, f.name), tuple) else v for f in fields(p)}
            for p in partitions
        ],
    }


def read_dry_run(details: Mapping[str, Any]) -> DryRun | None:
    """The dry run an admin result's ``details`` carries, or ``None`` when it is no dry run's answer. Strict:
    a malformed entry raises :class:`FormatError` naming it."""
    raw = details.get(DRY_RUN_DECISIONS)
    if raw is None:
        return None
    if not isinstance(raw, list | tuple):
        raise FormatError(DRY_RUN_DECISIONS, f"must be a list, got {type(raw).__name__}")
    decisions = tuple(decode_decision(thaw(d), typed=True) for d in raw)
    rows = details.get(DRY_RUN_PARTITIONS, ())
    if not isinstance(rows, list | tuple):
        raise FormatError(DRY_RUN_PARTITIONS, f"must be a list, got {type(rows).__name__}")
    parts = []
    for i, row in enumerate(rows):
        pre = f"{DRY_RUN_PARTITIONS}[{i}]."
        o = jf.obj(thaw(row), pre.rstrip("."))
        parts.append(
            DryRunPartition(
                jf.string(o, "topic", pre),
                jf.integer(o, "partition", pre),
                jf.string(o, "state", pre),
                jf.int_list(o, "replicas", pre),
                jf.int_list(o, "adding_replicas", pre),
                jf.int_list(o, "removing_replicas", pre),
                jf.integer(o, "leader", pre),
                jf.integer(o, "leader_epoch", pre),
                jf.int_list(o, "isr", pre),
            )
        )
    return DryRun(decisions, tuple(parts))
