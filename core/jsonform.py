"""Small, strict helpers to read fields out of decoded JSON objects.

Every reader names the field and the reason when the value is unfit, through
:class:`core.errors.FormatError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.errors import FormatError

JsonObject = dict[str, Any]


def obj(value: Any, field: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise FormatError(field, f"must be a JSON object, got {type(value).__name__}")
    return value


def req(o: Mapping[str, Any], field: str, prefix: str = "") -> Any:
    if field not in o or o[field] is None:
        raise FormatError(prefix + field, "is required")
    return o[field]


def string(o: Mapping[str, Any], field: str, prefix: str = "", *, nonempty: bool = True) -> str:
    v = req(o, field, prefix)
    if not isinstance(v, str):
        raise FormatError(prefix + field, f"must be a string, got {type(v).__name__}")
    if nonempty and not v:
        raise FormatError(prefix + field, "must not be empty")
    return v


def opt_string(o: Mapping[str, Any], field: str, prefix: str = "") -> str | None:
    if o.get(field) is None:
        return None
    return string(o, field, prefix, nonempty=False)


def integer(o: Mapping[str, Any], field: str, prefix: str = "", *, minimum: int | None = None) -> int:
    v = req(o, field, prefix)
    return _int_value(v, prefix + field, minimum)


def opt_integer(o: Mapping[str, Any], field: str, default: int, prefix: str = "", *, minimum: int | None = None) -> int:
    if o.get(field) is None:
        return default
    return integer(o, field, prefix, minimum=minimum)


def _int_value(v: Any, name: str, minimum: int | None) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise FormatError(name, f"must be an integer, got {type(v).__name__}")
    if minimum is not None and v < minimum:
        raise FormatError(name, f"must be >= {minimum}, got {v}")
    return v


def int_list(
    o: Mapping[str, Any], field: str, prefix: str = "", *, minimum: int | None = None, distinct: bool = False
) -> tuple[int, ...]:
    v = req(o, field, prefix)
    return int_seq(v, prefix + field, minimum=minimum, distinct=distinct)


def int_seq(v: Any, name: str, *, minimum: int | None = None, distinct: bool = False) -> tuple[int, ...]:
    if not isinstance(v, list | tuple):
        raise FormatError(name, f"must be a list of integers, got {type(v).__name__}")
    out = tuple(_int_value(x, f"{name}[{i}]", minimum) for i, x in enumerate(v))
    if distinct and len(set(out)) != len(out):
        raise FormatError(name, f"must not repeat a broker id, got {list(out)}")
    return out


def boolean(o: Mapping[str, Any], field: str, default: bool, prefix: str = "") -> bool:
    v = o.get(field)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise FormatError(prefix + field, f"must be true or false, got {type(v).__name__}")
    return v


def obj_list(o: Mapping[str, Any], field: str, prefix: str = "") -> list[Mapping[str, Any]]:
    v = req(o, field, prefix)
    if not isinstance(v, list):
        raise FormatError(prefix + field, f"must be a list, got {type(v).__name__}")
    return [obj(x, f"{prefix}{field}[{i}]") for i, x in enumerate(v)]


def str_map(o: Mapping[str, Any], field: str, prefix: str = "") -> dict[str, str]:
    v = o.get(field)
    if v is None:
        return {}
    m = obj(v, prefix + field)
    out: dict[str, str] = {}
    for k, x in m.items():
        if not isinstance(x, str):
            raise FormatError(f"{prefix}{field}.{k}", f"must be a string, got {type(x).__name__}")
        out[str(k)] = x
    return out


def version(o: Mapping[str, Any], supported: int) -> None:
    v = integer(o, "version")
    if v != supported:
        raise FormatError("version", f"unsupported version {v}; this livectl reads version {supported}")
