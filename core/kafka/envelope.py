"""The envelope of a ``livectl.requests`` message: the one encoder and the one parser.

A message to one broker is keyed by the broker id (decimal text) and its value is::

    {"body": {...}, "api": "LeaderAndIsr" | "UpdateMetadata" | "StopReplica"
                           | "ControlledShutdownResponse" | "AlterPartitionResponse",
     "batchId": <int>, "brokerId": <int>, "controllerEpoch": <int>, ["part": k, "parts": n,] "version": 1}

A **shared** message (version 2: one UpdateMetadata of a micro-batch for a set of brokers, where Kafka
sends the same request to each broker one by one) is keyed ``-1`` and names its addressees, each with
the broker epoch its own copy carries (the body's ``brokerEpoch`` is -1)::

    {"body": {...}, "addressees": [{"brokerId": <int>, "brokerEpoch": <int>}, ...], "api": "UpdateMetadata",
     "batchId", "brokerId": -1, "controllerEpoch", ["part", "parts",] "version": 2}

The request sink writes a shared message once into each partition of the topic that holds an addressee's
own messages (the partition its key hashes to), naming the addressees of that partition: a broker reads
it in its own partition, in Kafka's order among its own messages. A reader applies it for each of its
brokers among the addressees (:meth:`Envelope.for_broker`) and ignores it otherwise.

``body`` is a request of :mod:`core.kafka.requests` in its wire form (:mod:`core.kafka.request_encoding`). A
``body`` given as JSON text instead of an object is accepted too (tools that play the controller).
``version`` and ``brokerId`` are checked when present (``brokerId`` must equal the key; version 2 must
name its addressees and version 1 must not).

Parsing is strict: a malformed message raises :class:`core.errors.FormatError` naming the field and the
reason; the shell logs it and skips the message.

Deduplication (applied by :class:`simbrokers.broker.SimBroker`): per API, a message whose
``(controllerEpoch, batchId)`` is below the highest one applied is dropped, and so is a repeat of
``(controllerEpoch, batchId, api, digest of body)``. The sink sends one merged message per broker (or
addressee set), API and batch, except for AlterPartitionResponse, whose answers with a top-level error go
one per request (:mod:`sinks.requests`); each message of a batch still applies once.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from core import jsonform as jf
from core.errors import FormatError
from core.kafka.request_encoding import encode_addressees, with_broker_epoch
from core.kafka.request_parsing import parse_body, read_addressees
from core.kafka.requests import SHARED_BROKER_ID, Addressee, RequestApi, RequestBody, WireBody, recipients

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
    #: a shared message's addressees (``broker_id`` is then -1); empty for a message to one broker
    addressees: tuple[Addressee, ...] = ()

    @property
    def shared(self) -> bool:
        return bool(self.addressees)

    def recipients(self) -> tuple[int, ...]:
        """The brokers this message is for: its addressees, or ``broker_id``."""
        return recipients(self.broker_id, self.addressees)

    def for_broker(self, broker_id: int) -> Envelope | None:
        """This message as ``broker_id`` applies it: a message to it as it is; a shared one naming it as a
        message to it alone, the body carrying its broker epoch (same digest: one request of one batch);
        ``None`` when the message is not for it."""
        if not self.addressees:
            return self if self.broker_id == broker_id else None
        for a in self.addressees:
            if a.broker_id == broker_id:
                body = with_broker_epoch(self.body, a.broker_epoch)
                assert not isinstance(body, WireBody)
                return replace(self, broker_id=broker_id, body=body, addressees=())
        return None

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
    version = jf.integer(o, "version") if o.get("version") is not None else MESSAGE_VERSION
    if version not in (MESSAGE_VERSION, SHARED_MESSAGE_VERSION):
        raise FormatError(
            "version",
            f"unsupported version {version}; this reader reads {MESSAGE_VERSION} and {SHARED_MESSAGE_VERSION}",
        )
    if o.get("brokerId") is not None and jf.integer(o, "brokerId") != broker_id:
        raise FormatError("brokerId", f"is {o.get('brokerId')} but the message key says broker {broker_id}")
    addressees = read_addressees(o.get("addressees"), "addressees")
    if version == SHARED_MESSAGE_VERSION and not addressees:
        raise FormatError("addressees", f"a version {SHARED_MESSAGE_VERSION} message must name its addressees")
    if version == MESSAGE_VERSION and addressees:
        raise FormatError("addressees", f"only a version {SHARED_MESSAGE_VERSION} message names addressees")
    if addressees and broker_id != SHARED_BROKER_ID:
        raise FormatError("key", f"a message with addressees is keyed {SHARED_BROKER_ID}, got {broker_id}")
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
    return Envelope(broker_id, api, controller_epoch, batch_id, parse_body(api, body_obj), digest, addressees)


#: ``version`` of the envelope of a message to one broker
MESSAGE_VERSION = 1
#: ``version`` of the envelope of a shared message (one with ``addressees``)
SHARED_MESSAGE_VERSION = 2


def encode_envelope(
    broker_id: int,
    api: RequestApi,
    controller_epoch: int,
    batch_id: int,
    body: bytes,
    *,
    part: tuple[int, int] | None = None,
    addressees: tuple[Addressee, ...] = (),
) -> tuple[bytes, bytes]:
    """The (key, value) of one ``livectl.requests`` message: the one encoder of the envelope.

    ``body`` is the request's JSON, already serialised: it is spliced in rather than serialised a second time
    (the bodies of a large batch are tens of MB). ``part`` = ``(k, n)`` marks the k-th of n parts of a request
    split at partition boundaries. ``addressees`` (with ``broker_id`` -1) makes it a shared message (version
    2). The value is ``{"body":…,["addressees",]"api","batchId","brokerId","controllerEpoch",["part","parts",]
    "version"}``, the envelope's keys sorted."""
    envelope: dict[str, Any] = {
        "version": SHARED_MESSAGE_VERSION if addressees else MESSAGE_VERSION,
        "api": api.value,
        "controllerEpoch": controller_epoch,
        "batchId": batch_id,
        "brokerId": broker_id,
    }
    if part is not None:
        envelope["part"], envelope["parts"] = part
    if addressees:
        if broker_id != SHARED_BROKER_ID:
            raise ValueError(f"a message with addressees goes to broker {SHARED_BROKER_ID}, not {broker_id}")
        envelope["addressees"] = encode_addressees(addressees)
    head = json.dumps(envelope, sort_keys=True, separators=(",", ":")).encode()
    return str(broker_id).encode(), b'{"body":' + body + b"," + head[1:]


def encode_request(
    broker_id: int, api: RequestApi, controller_epoch: int, batch_id: int, body: Mapping[str, Any]
) -> tuple[bytes, bytes]:
    """:func:`encode_envelope` of a body given as a JSON object, for tests and tools that play the controller."""
    body_json = json.dumps(dict(body), sort_keys=True, separators=(",", ":")).encode()
    return encode_envelope(broker_id, api, controller_epoch, batch_id, body_json)
