"""Kafka protocol messages as kio generates them, and as the channel's endpoint reads them off the wire."""

from __future__ import annotations

import importlib
import io
from types import ModuleType
from typing import Any

from kio.serial import entity_reader, entity_writer


def kio_module(api: str, version: int, kind: str) -> ModuleType:
    """kio's module of ``api`` at ``version``: its ``request`` or ``response`` (``kind``)."""
    return importlib.import_module(f"kio.schema.{api}.v{version}.{kind}")


def wire(entity: Any) -> Any:
    """``entity`` as the endpoint reads it: written and read back in Kafka's wire form."""
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    value, _ = entity_reader(type(entity))(buf.getvalue(), 0)
    return value
