"""The JSON form of every event: ``{"version": 1, "type": <TYPE>, ...fields}``.

:func:`encode_event` / :func:`event_to_json` write it and :func:`decode_event` / :func:`event_from_json`
read it. Decoding is strict and raises :class:`core.errors.FormatError` naming the field and the reason;
the decoders live beside this module, one per family of events.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from enum import Enum
from types import MappingProxyType
from typing import Any

from core import jsonform as jf
from core import limits as lim
from core.codec import admin, broker, driver, zk_paths
from core.codec.snapshot import encode_broker
from core.errors import FormatError
from core.events import Event
from core.model import Broker

EVENT_VERSION = 1

_DECODERS: Mapping[str, Callable[[Mapping[str, Any]], Event]] = MappingProxyType(
    {
        **admin.DECODERS,
        **broker.DECODERS,
        **driver.DECODERS,
        **zk_paths.DECODERS,
    }
)
#: every event ``type`` that decodes
EVENT_TYPES = frozenset(_DECODERS)
#: the ``type`` of every admin command (topic ``livectl.admin``)
ADMIN_TYPES = frozenset(admin.DECODERS)


#: fields added after their dataclass's JSON was first written: left out while empty, so that the form written
#: before stays the same bytes (a snapshot's ``cordoned_brokers``, :mod:`core.cordon`; an admin command's
#: ``dry_run``, :mod:`core.controller.dry_run`)
_OMITTED_WHEN_EMPTY = frozenset({"cordoned_brokers", "dry_run"})
#: likewise, left out while ``None`` (0 is a value): a topic change's ``zk_version``
_OMITTED_WHEN_NONE = frozenset({"zk_version"})


def _to_jsonable(v: Any) -> Any:
    if isinstance(v, Enum):
        return v.value
    if isinstance(v, Broker):
        return encode_broker(v)
    if hasattr(v, "__dataclass_fields__"):
        return {
            f.name: _to_jsonable(getattr(v, f.name))
            for f in dataclasses.fields(v)
            if f.name not in _OMITTED_WHEN_EMPTY or getattr(v, f.name)
        }
    if isinstance(v, tuple | list):
        return [_to_jsonable(x) for x in v]
    return v


def encode_event(event: Event) -> dict[str, Any]:
    """The versioned JSON object of ``event``. Config pairs and per-partition assignments become
    JSON objects keyed by name / partition, like Kafka's own JSON."""
    body: dict[str, Any] = {"version": EVENT_VERSION, "type": event.TYPE}
    for name in (f.name for f in dataclasses.fields(event)):  # type: ignore[arg-type]
        value = getattr(event, name)
        if (name in _OMITTED_WHEN_EMPTY and not value) or (name in _OMITTED_WHEN_NONE and value is None):
            continue
        if name == "configs":
            body[name] = dict(value)
        elif name == "replica_assignment":
            body[name] = {str(i): list(r) for i, r in enumerate(value)}
        else:
            body[name] = _to_jsonable(value)
    return body


def event_to_json(event: Event) -> str:
    return json.dumps(encode_event(event), separators=(",", ":"), sort_keys=True)


def event_from_json(text: str | bytes) -> Event:
    try:
        raw = json.loads(text)
    except (ValueError, UnicodeDecodeError) as e:
        raise FormatError("$", f"not valid JSON: {e}") from None
    except RecursionError:
        raise FormatError("$", "not valid JSON: nested too deeply") from None
    return decode_event(raw)


def decode_event(raw: Any) -> Event:
    """Decode and validate one event; raises :class:`FormatError` naming the field and reason."""
    o = jf.obj(raw, "$")
    jf.version(o, EVENT_VERSION)
    t = jf.string(o, "type", max_length=lim.MAX_NAME_LENGTH)
    decoder = _DECODERS.get(t)
    if decoder is None:
        raise FormatError("type", f"unknown event type {lim.show(t)}; known: {', '.join(sorted(EVENT_TYPES))}")
    return decoder(o)
