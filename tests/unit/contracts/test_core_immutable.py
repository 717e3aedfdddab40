"""``core`` keeps no mutable module-level state: every table a module holds is read-only (a
``MappingProxyType``, a tuple, a frozenset, a frozen JSON object), so nothing that imports core — a test, a
Spark task that steps many buckets in one Python worker — can change what another sees."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import core
from core.frozen_json import FrozenObject

pytestmark = pytest.mark.unit

_MUTABLE = (dict, list, set, bytearray)


def test_no_module_of_core_holds_a_mutable_container() -> None:
    found = []
    for info in pkgutil.walk_packages(core.__path__, "core."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if name == "__all__" or (name.startswith("__") and name.endswith("__")):
                continue  # the module's own machinery (__all__ is read by import *, never changed)
            if isinstance(value, _MUTABLE) and not isinstance(value, FrozenObject):  # a dict that refuses changes
                found.append(f"{info.name}.{name} ({type(value).__name__})")
    assert found == [], f"mutable module-level containers in core: {found}"
