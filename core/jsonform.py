"""Small, strict helpers to read fields out of decoded JSON objects.

Every reader names the field and the reason when the value is unfit, through
:class:`core.errors.FormatError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.errors import FormatError
from core.kafka.error_codes import KafkaError
from core.limits import INT64_MAX, INT64_MIN, show

JsonObject = dict[str, Any]


def obj(value: Any, field: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise FormatError(field, f"must be a JSON object, got {type(value).__name__}")
    return value


def req(o: Mapping[str, Any], field: str, prefix: str = "") -> Any:
    if field not in o or o[field] is None:
        raise FormatError(prefix + field, "is required")
    return o[field]


def string(
    o: Mapping[str, Any], field: str, prefix: str = "", *, nonempty: bool = True, max_length: int | None = None
) -> str:
    v = req(o, field, prefix)
    return text(v, prefix + field, nonempty=nonempty, max_length=max_length)


def text(v: Any, name: str, *, nonempty: bool = True, max_length: int | None = None) -> str:
    """``v`` as a string that encodes to UTF-8 (JSON's ``\\ud800`` escapes can smuggle in a lone
    surrogate, which no Kafka producer, Arrow column or ZooKeeper znode can carry), at most
    ``max_length`` characters long."""
    if not isinstance(v, str):
        raise FormatError(name, f"must be a string, got {type(v).__name__}")
    if nonempty and not v:
        raise FormatError(name, "must not be empty")
    if max_length is not None and len(v) > max_length:
        raise FormatError(name, f"must be at most {max_length} characters, got {len(v)}")
    if not v.isascii():
        try:
            v.encode("utf-8")
        except UnicodeEncodeError as e:
            raise FormatError(
                name, f"is not valid UTF-8: a lone surrogate {show(v[e.start : e.end])} at index {e.start}"
            ) from None
    return v


def opt_string(o: Mapping[str, Any], field: str, prefix: str = "", *, max_length: int | None = None) -> str | None:
    if o.get(field) is None:
        return None
    return string(o, field, prefix, nonempty=False, max_length=max_length)


def integer(
    o: Mapping[str, Any],
    field: str,
    prefix: str = "",
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    error: str = KafkaError.INVALID_REQUEST.name,
) -> int:
    v = req(o, field, prefix)
    return _int_value(v, prefix + field, minimum, maximum, error)


def opt_integer(
    o: Mapping[str, Any],
    field: str,
    default: int,
    prefix: str = "",
    *,
    minimum: int | None = None,
    maximum: int | None = None,
) -> int:
    if o.get(field) is None:
        return default
    return integer(o, field, prefix, minimum=minimum, maximum=maximum)


def _int_value(
    v: Any, name: str, minimum: int | None, maximum: int | None = None, error: str = KafkaError.INVALID_REQUEST.name
) -> int:
    """An integer within ``[minimum, maximum]`` and always within Kafka's widest type, int64 (nothing
    downstream — Arrow, orjson, Kafka's schemas — can carry more)."""
    if isinstance(v, bool) or not isinstance(v, int):
        raise FormatError(name, f"must be an integer, got {type(v).__name__}", error)
    if minimum is not None and v < minimum:
        raise FormatError(name, f"must be >= {minimum}, got {show(v, 40)}", error)
    if maximum is not None and v > maximum:
        raise FormatError(name, f"must be <= {maximum}, got {show(v, 40)}", error)
    if not INT64_MIN <= v <= INT64_MAX:
        raise FormatError(name, f"must fit in 64 bits, got {show(v, 40)}", error)
    return v


def int_list(
    o: Mapping[str, Any],
    field: str,
    prefix: str = "",
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    distinct: bool = False,
    what: str = "",
    max_items: int | None = None,
) -> tuple[int, ...]:
    v = req(o, field, prefix)
    return int_seq(
        v, prefix + field, minimum=minimum, maximum=maximum, distinct=distinct, what=what, max_items=max_items
    )


def _plain_ints(v: list[Any] | tuple[Any, ...], minimum: int | None, maximum: int | None) -> bool:
    """Whether every item is an ``int`` (not a ``bool``) that :func:`_int_value` accepts."""
    if not all(type(x) is int for x in v):
        return False
    if not v:
        return True
    lo, hi = min(v), max(v)
    return (
        lo >= INT64_MIN
        and hi <= INT64_MAX
        and (minimum is None or lo >= minimum)
        and (maximum is None or hi <= maximum)
    )


def int_seq(
    v: Any,
    name: str,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    distinct: bool = False,
    what: str = "",
    max_items: int | None = None,
) -> tuple[int, ...]:
    """A list of integers; ``distinct`` refuses a repeated broker id, naming the field and ``what`` (the
    partition the list belongs to, e.g. ``"partition orders-3"``)."""
    if type(v) is list and not distinct and max_items is None:
        # the common case (a decoded JSON list of plain integers in range), checked in one loop; anything
        # else takes the checks below, which name the fault
        lo = INT64_MIN if minimum is None else max(minimum, INT64_MIN)
        hi = INT64_MAX if maximum is None else min(maximum, INT64_MAX)
        for x in v:
            if type(x) is not int or not lo <= x <= hi:
                break
        else:
            return tuple(v)
    if not isinstance(v, list | tuple):
        raise FormatError(name, f"must be a list of integers, got {type(v).__name__}")
    if max_items is not None and len(v) > max_items:
        raise FormatError(name, f"must list at most {max_items} entries, got {len(v)}")
    if _plain_ints(v, minimum, maximum):  # the common case, checked without naming each element
        out = tuple(v)
    else:
        out = tuple(_int_value(x, f"{name}[{i}]", minimum, maximum) for i, x in enumerate(v))
    if distinct and len(set(out)) != len(out):
        seen: set[int] = set()
        dup = out[0]
        for x in out:
            if x in seen:
                dup = x
                break
            seen.add(x)
        of = f" of {what}" if what else ""
        raise FormatError(
            name, f"must not repeat a broker id, got {show(list(out))}: the replica list{of} names broker {dup} twice"
        )
    return out


def boolean(o: Mapping[str, Any], field: str, default: bool, prefix: str = "") -> bool:
    v = o.get(field)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise FormatError(prefix + field, f"must be true or false, got {type(v).__name__}")
    return v


def obj_list(
    o: Mapping[str, Any], field: str, prefix: str = "", *, max_items: int | None = None
) -> list[Mapping[str, Any]]:
    v = req(o, field, prefix)
    if not isinstance(v, list):
        raise FormatError(prefix + field, f"must be a list, got {type(v).__name__}")
    if max_items is not None and len(v) > max_items:
        raise FormatError(prefix + field, f"must list at most {max_items} entries, got {len(v)}")
    return [obj(x, f"{prefix}{field}[{i}]") for i, x in enumerate(v)]


def str_map(
    o: Mapping[str, Any],
    field: str,
    prefix: str = "",
    *,
    max_key_length: int | None = None,
    max_value_length: int | None = None,
) -> dict[str, str]:
    v = o.get(field)
    if v is None:
        return {}
    m = obj(v, prefix + field)
    out: dict[str, str] = {}
    for i, (k, x) in enumerate(m.items()):
        key = text(k, f"{prefix}{field}[{i}] (a key)", max_length=max_key_length)
        out[key] = text(x, f"{prefix}{field}.{key}", nonempty=False, max_length=max_value_length)
    return out


def version(o: Mapping[str, Any], supported: int) -> None:
    v = integer(o, "version")
    if v != supported:
        raise FormatError("version", f"unsupported version {v}; this livectl reads version {supported}")
