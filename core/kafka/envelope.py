"""The envelope of a ``livectl.requests`` message: the one encoder and the one parser.

Each message is keyed by the broker id (decimal text) and its value is::

    {"body": {...}, "api": "LeaderAndIsr" | "UpdateMetadata" | "StopReplica"
                           | "ControlledShutdownResponse" | "AlterPartitionResponse",
     "batchId": <int>, "brokerId": <int>, "controllerEpoch": <int>, ["part": k, "parts": n,] "version": 1}

``body`` is a request of :mod:`core.kafka.requests` in its wire form (:mod:`core.kafka.request_codec`). A
``body`` given as JSON text instead of an object is accepted too (tools that play the controller).
``version`` and ``brokerId`` are checked when present (``brokerId`` must equal the key).

Parsing is strict: a malformed message raises :class:`core.errors.FormatError` naming the field and the
reason; the shell logs it and skips the message.

Deduplication (applied by :class:`simbrokers.broker.SimBroker`): per API, a message whose
``(controllerEpoch, batchId)`` is below the highest one applied is dropped, and so is a repeat of
``(controllerEpoch, batchId, api, digest of body)``. The sink sends one merged message per broker, API and
batch; should a batch ever carry several messages of one API (one per bucket), each still applies once.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core import jsonform as jf
from core.errors import FormatError
from core.kafka.request_codec import parse_body
from core.kafka.requests import RequestApi, RequestBody

REQUESTS_TOPIC = "livectl.requests"
BROKER_EVENTS_TOPIC = "livectl.broker-events"


@dataclass(frozen=True)
class Envelope:
    """One decoded message of ``livectl.requests``."""

    broker_id: int
    api: RequestApi
    controller_epoch: int
    batch_id: int
    body: RequestBody
    #: sha1 of the canonical body JSON: tells apart the messages of one batch
    digest: str

    @property
    def dedupe_key(self) -> tuple[int, int, str, str]:
        return (self.controller_epoch, self.batch_id, self.api.value, self.digest)


def parse_broker_keyed(key: bytes | str | None, value: bytes | str) -> tuple[int, Mapping[str, Any]]:
    """A message keyed by a broker id (decimal text) whose value is a JSON object, as ``livectl.requests`` and
    the simulated brokers' control topic carry them: ``(broker id, object)``; :class:`FormatError` names the
    field (``key`` or ``$``) and the reason."""
    if key is None:
        raise FormatError("key", "is required (the broker id)")
    key_text = key.decode() if isinstance(key, bytes) else key
    try:
        broker_id = int(key_text)
    except ValueError:
        raise FormatError("key", f"must be a broker id, got {key_text!r}") from None
    try:
        raw = json.loads(value)
    except (ValueError, UnicodeDecodeError) as e:
        raise FormatError("$", f"not valid JSON: {e}") from None
    return broker_id, jf.obj(raw, "$")


def parse_request(key: bytes | str | None, value: bytes | str) -> Envelope:
    """Decode one message of ``livectl.requests``; raises :class:`FormatError` naming the field."""
    broker_id, o = parse_broker_keyed(key, value)
    api_text = jf.string(o, "api")
    try:
        api = RequestApi(api_text)
    except ValueError:
        known = ", ".join(a.value for a in RequestApi)
        raise FormatError("api", f"unknown api '{api_text}'; known: {known}") from None
    if o.get("version") is not None and jf.integer(o, "version") != 1:
        raise FormatError("version", f"unsupported version {o.get('version')}; this simbrokers reads version 1")
    if o.get("brokerId") is not None and jf.integer(o, "brokerId") != broker_id:
        raise FormatError("brokerId", f"is {o.get('brokerId')} but the message key says broker {broker_id}")
    controller_epoch = jf.integer(o, "controllerEpoch", minimum=0)
    batch_id = jf.integer(o, "batchId")
    body_raw = jf.req(o, "body")
    if isinstance(body_raw, str):
        try:
            body_raw = json.loads(body_raw)
        except ValueError as e:
            raise FormatError("body", f"not valid JSON: {e}") from None
    body_obj = jf.obj(body_raw, "body")
    digest = hashlib.sha1(json.dumps(body_obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    return Envelope(broker_id, api, controller_epoch, batch_id, parse_body(api, body_obj), digest)


#: ``version`` of the envelope
MESSAGE_VERSION = 1


def encode_envelope(
    broker_id: int,
    api: RequestApi,
    controller_epoch: int,
    batch_id: int,
    body: bytes,
    *,
    part: tuple[int, int] | None = None,
) -> tuple[bytes, bytes]:
    """The (key, value) of one ``livectl.requests`` message: the one encoder of the envelope.

    ``body`` is the request's JSON, already serialised: it is spliced in rather than serialised a second time
    (the bodies of a large batch are tens of MB). ``part`` = ``(k, n)`` marks the k-th of n parts of a request
    split at partition boundaries. The value is ``{"body":…,"api","batchId","brokerId","controllerEpoch",
    ["part","parts",]"version"}``, the envelope's keys sorted."""
    envelope: dict[str, Any] = {
        "version": MESSAGE_VERSION,
        "api": api.value,
        "controllerEpoch": controller_epoch,
        "batchId": batch_id,
        "brokerId": broker_id,
    }
    if part is not None:
        envelope["part"], envelope["parts"] = part
    head = json.dumps(envelope, sort_keys=True, separators=(",", ":")).encode()
    return str(broker_id).encode(), b'{"body":' + body + b"," + head[1:]


def encode_request(
    broker_id: int, api: RequestApi, controller_epoch: int, batch_id: int, body: Mapping[str, Any]
) -> tuple[bytes, bytes]:
    """:func:`encode_envelope` of a body given as a JSON object, for tests and tools that play the controller."""
    body_json = json.dumps(dict(body), sort_keys=True, separators=(",", ":")).encode()
    return encode_envelope(broker_id, api, controller_epoch, batch_id, body_json)
