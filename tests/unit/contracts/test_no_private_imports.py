"""No private name is used outside its module (issue 45): livectl's packages import no ``_name`` from another
module, their own or a dependency's (``kazoo``'s, PySpark's, CPython's). Found in the syntax tree; a public name
imported under a private alias (``import x as _x``) is fine."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[3]
PACKAGES = ("admin", "bench", "channel", "checkpoints", "core", "livectl", "simbrokers", "sinks", "streaming")


def private_imports(source: str, filename: str = "<source>") -> list[str]:
    """``module._name`` for each private name ``source`` imports from another module."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            found += [
                f"{node.module}.{a.name}" for a in node.names if a.name.startswith("_") and not a.name.startswith("__")
            ]
    return found


def test_the_check_finds_a_private_import() -> None:
    found = private_imports("from kazoo.protocol.paths import _prefix_root, join")
    assert found == ["kazoo.protocol.paths._prefix_root"]
    assert private_imports("from json.encoder import encode_basestring_ascii as _s\nimport os as _os") == []


def test_no_package_imports_a_private_name() -> None:
    found = {
        str(path.relative_to(REPO)): names
        for package in PACKAGES
        if (REPO / package).is_dir()
        for path in sorted((REPO / package).rglob("*.py"))
        if (names := private_imports(path.read_text(), str(path)))
    }
    assert found == {}
