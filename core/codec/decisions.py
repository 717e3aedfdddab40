"""The JSON form of every decision (:mod:`core.decisions`): ``{"version": 1, "type": <TYPE>, ...fields}``,
as the bucket emits it in its output rows and the dispatcher reads it back. Decoding is strict and raises
:class:`core.errors.FormatError` naming the field and the reason.

A broker request's ``body`` is a JSON *object* in the row: the bytes of
:func:`core.kafka.request_encoding.encode_body`, spliced in, never a string holding JSON. Decoding keeps it as
the parsed object (:class:`core.kafka.requests.WireBody`) unless asked for typed values: the driver hands
it to the request sink as it is. How a bucket's output row carries a request's ``topicStates`` entries is
written in :mod:`core.codec.decision_rows`; how a dry run's decisions sit in an admin result's ``details``,
in :mod:`core.codec.dry_run_details`.

An admin result's ``details`` is a JSON object too (in the row and on ``livectl.admin-results``).
:func:`read_details` reads it, and also the JSON text a controller before that change wrote, which can
still sit on the results topic across an upgrade. The decoder reads it the same way, so the admin tool
(which decodes results off the topic) and the audit log (which logs the driver's decoded results) get one
value whichever form was written."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import fields
from enum import Enum
from json.encoder import encode_basestring_ascii as _json_string
from types import MappingProxyType
from typing import Any

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
from core.frozen_json import EMPTY_OBJECT, freeze_object
from core.kafka.request_encoding import EncodeMemo, encode_addressees, encode_text, wire_object
from core.kafka.request_parsing import parse_body, read_addressees
from core.kafka.requests import RequestApi, WireBody

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
