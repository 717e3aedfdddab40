"""livectl's own boolean Spark properties (``spark.livectl.*``): ``true`` or ``false``, any case and spacing;
anything else is refused at start, naming the property."""

from __future__ import annotations

from typing import Any


def flag_value(name: str, value: str) -> bool:
    """``value`` of the property ``name`` as a boolean; a ``ValueError`` naming it for anything else."""
    text = value.strip().lower()
    if text not in ("true", "false"):
        raise ValueError(f"{name}: must be true or false, got {value.strip()!r}")
    return text == "true"


def spark_flag(spark: Any, name: str, default: bool = True) -> bool:
    """The session's property ``name`` (``default`` when unset), read by :func:`flag_value`."""
    return flag_value(name, str(spark.conf.get(name, "true" if default else "false")))
