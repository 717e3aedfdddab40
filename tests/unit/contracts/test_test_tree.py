"""The test tree mirrors the source tree: ``tests/<tier>/<package>[/<subpackage>]/test_<package>[_<subpackage>]_….py``.

A reader finds the tests of ``sinks/zookeeper.py`` under ``tests/*/sinks/``; a test file's folder names its
tier, and its marker (what ``scripts/test -m <tier>`` selects) agrees with that folder. pytest imports test
files by their bare names, so the names are unique across the tree."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

TESTS = Path(__file__).resolve().parents[2]
REPO = TESTS.parent
TIERS = ("unit", "integration", "spark", "e2e", "cluster")
#: tiers whose tests exercise the whole system, not one package: flat folders
FLAT_TIERS = ("e2e", "cluster")
#: folders of tests that span packages (contracts between them), check the deployment files or the docs
CROSS_CUTTING = ("contracts", "deploy", "docs")


def _test_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("test_*.py") if "__pycache__" not in p.parts)


def _markers(path: Path) -> set[str]:
    """The ``pytest.mark.X`` names a module's ``pytestmark`` assigns."""
    tree = ast.parse(path.read_text(), str(path))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets):
            return {
                n.attr
                for n in ast.walk(node.value)
                if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Attribute) and n.value.attr == "mark"
            }
    return set()


def test_every_test_file_is_in_a_tier_and_carries_its_marker() -> None:
    files = _test_files()
    assert len(files) > 50, files
    for path in files:
        rel = path.relative_to(TESTS)
        assert rel.parts[0] in TIERS, f"{rel}: tests live under tests/<tier>/ (one of {', '.join(TIERS)})"
        assert rel.parts[0] in _markers(path), f"{rel}: pytestmark must include pytest.mark.{rel.parts[0]}"


def test_test_file_names_are_unique() -> None:
    names = Counter(p.name for p in _test_files())
    assert [n for n, count in names.items() if count > 1] == []


def test_folders_mirror_the_source_packages() -> None:
    for path in _test_files():
        rel = path.relative_to(TESTS)
        tier, folders = rel.parts[0], rel.parts[1:-1]
        if tier in FLAT_TIERS:
            assert not folders, f"{rel}: {tier} tests are whole-system tests, kept flat"
            continue
        assert folders, f"{rel}: put it under tests/{tier}/<package>/ (the package it tests)"
        if folders[0] in CROSS_CUTTING:
            continue
        source = REPO.joinpath(*folders)
        assert (source / "__init__.py").is_file(), f"{rel}: {'/'.join(folders)}/ is not a package of the source tree"
        prefix = "test_" + "_".join(folders)
        assert path.name.startswith(prefix), f"{rel}: name it {prefix}_<module>.py"


def test_a_package_folder_of_the_tests_does_not_shadow_the_package() -> None:
    """The root conftest imports every product package first (see its comment): ``streaming`` is the
    package, not the test folder of the same name; ``bench`` (not imported there) is the checkout's, a
    regular package, which no test folder named ``bench`` can shadow."""
    import importlib

    for name in ("admin", "core", "livectl", "simbrokers", "sinks", "streaming", "bench"):
        module = importlib.import_module(name)
        assert module.__file__ is not None, f"{name} resolved to a namespace package: {list(module.__path__)}"
        assert Path(module.__file__).resolve() == REPO / name / "__init__.py", name
