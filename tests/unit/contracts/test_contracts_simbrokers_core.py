"""What the simulated brokers may import from ``core`` is an explicit list: the import-linter contract in
``pyproject.toml`` forbids every other core module by name, and this test keeps the two lists covering the
whole of ``core`` — a new core module is forbidden to the simulated brokers until someone says otherwise."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[3]
CONTRACT = "simulated brokers import directly from core only core.kafka, core's values and its JSON readers"
#: packages: the module and everything beneath it
ALLOWED_PACKAGES = ("core.kafka",)
ALLOWED_MODULES = (
    "core.model",
    "core.event_base",
    "core.events",
    "core.isr_events",
    "core.codec.events",
    "core.jsonform",
    "core.errors",
)
#: packages whose ``__init__`` the simulated brokers pass through on the way to an allowed module
PARENTS = ("core", "core.codec")


def _core_modules() -> set[str]:
    out = set()
    for path in (REPO / "core").rglob("*.py"):
        parts = path.relative_to(REPO).with_suffix("").parts
        out.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


def _forbidden_modules() -> list[str]:
    """The contract's ``forbidden_modules`` in pyproject.toml."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    (contract,) = [c for c in config["tool"]["importlinter"]["contracts"] if c["name"] == CONTRACT]
    return [str(m) for m in contract["forbidden_modules"]]


def _under(module: str, packages: tuple[str, ...] | list[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def test_the_allowed_and_forbidden_lists_cover_core_exactly_once() -> None:
    forbidden = _forbidden_modules()
    modules = _core_modules() - set(PARENTS)
    allowed = {m for m in modules if _under(m, ALLOWED_PACKAGES) or m in ALLOWED_MODULES}
    denied = {m for m in modules if _under(m, forbidden)}
    assert allowed & denied == set()
    assert modules - allowed - denied == set(), "classify these core modules in pyproject.toml's contract"
    assert "core.controller" in forbidden and "core.request_batch" in forbidden


def test_the_simulated_brokers_import_only_the_allowed_core_modules() -> None:
    imported: set[str] = set()
    for path in (REPO / "simbrokers").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "core":
                names = [f"{node.module}.{a.name}" for a in node.names]
                imported.update(n if n in _core_modules() else node.module for n in names)
            elif isinstance(node, ast.Import):
                imported.update(a.name for a in node.names if a.name.split(".")[0] == "core")
    assert imported, "the simulated brokers import core's Kafka formats"
    assert {m for m in imported if not (_under(m, ALLOWED_PACKAGES) or m in ALLOWED_MODULES)} == set()
    assert any(_under(m, ALLOWED_PACKAGES) for m in imported)
