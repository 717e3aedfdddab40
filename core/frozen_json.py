"""Read-only JSON values: what a decision carries when its content is a JSON object (an admin result's
``details``) rather than a typed value.

:func:`freeze` copies a parsed JSON value into a form nobody can change afterwards — objects become
:class:`types.MappingProxyType` views over a private ``dict``, arrays become tuples — so a value built by a
handler and later changed by it (a dict of per-partition outcomes filled in over a step) cannot change an
answer already given. :func:`thaw` gives the plain ``dict``/``list`` form back for an encoder or a test.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from core.errors import FormatError

#: the empty JSON object, frozen
EMPTY_OBJECT: Mapping[str, Any] = MappingProxyType({})


def freeze(value: Any) -> Any:
    """``value`` (JSON: objects, arrays, strings, numbers, booleans, null) as a read-only copy."""
    if isinstance(value, Mapping):
        return MappingProxyType({str(k): freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)
    return value


def freeze_object(value: Any, field: str) -> Mapping[str, Any]:
    """A JSON object as a read-only copy; anything else raises :class:`FormatError` naming ``field``."""
    if not isinstance(value, Mapping):
        raise FormatError(field, f"must be a JSON object, got {type(value).__name__}")
    if not value:
        return EMPTY_OBJECT
    frozen: Mapping[str, Any] = freeze(value)
    return frozen


def thaw(value: Any) -> Any:
    """A frozen JSON value (or a plain one) as plain ``dict``/``list`` values, ready for any JSON encoder."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [thaw(v) for v in value]
    return value
