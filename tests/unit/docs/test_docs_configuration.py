"""docs/configuration.md cannot drift from the code: its settings table lists exactly the fields of
:class:`streaming.settings.Settings` with the shipped defaults, and its table of Spark properties lists
exactly the ``spark.livectl.*`` properties the product reads."""

from __future__ import annotations

import ast
import json
import re
from dataclasses import fields

import pytest
from docs_pages import ROOT

from streaming.settings import DEFAULTS_PATH, Settings

pytestmark = pytest.mark.unit

PAGE = ROOT / "docs" / "configuration.md"
#: the product's packages: where a ``spark.livectl.*`` property can be read
PRODUCT = ("core", "streaming", "sinks", "admin", "livectl", "simbrokers")
_PROPERTY = re.compile(r"spark\.livectl\.[A-Za-z0-9_.]*[A-Za-z0-9]")


def _table(section: str) -> dict[str, str]:
    """The first column (one backticked key) → the second column, of the first table under ``## section``."""
    text = PAGE.read_text(encoding="utf-8")
    start = text.index(f"\n## {section}\n")
    end = text.find("\n## ", start + 1)
    rows: dict[str, str] = {}
    for line in text[start : end if end > 0 else None].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) < 3 or set(cells[0]) <= {"-", " "}:
            continue
        key = re.fullmatch(r"`([^`]+)`", cells[0])
        if key:
            rows[key.group(1)] = cells[1]
    return rows


def _shown(value: object) -> str:
    """A default as the page writes it: ``true``/``false``, numbers and text in backticks, ``""`` for empty."""
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return '`""`' if value == "" else f"`{value}`"


def _properties_read_by_the_product() -> set[str]:
    found: set[str] = set()
    for package in PRODUCT:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    found.update(m.group(0) for m in _PROPERTY.finditer(node.value) if m.group(0) == node.value)
    return found


def test_the_settings_table_lists_every_setting_with_its_shipped_default() -> None:
    documented = _table("Settings")
    assert sorted(documented) == sorted(f.name for f in fields(Settings))
    shipped = json.loads(DEFAULTS_PATH.read_text(encoding="utf-8"))
    assert {key: documented[key] for key in shipped} == {key: _shown(value) for key, value in shipped.items()}


def test_the_spark_properties_table_lists_what_the_product_reads() -> None:
    read = _properties_read_by_the_product()
    assert read, "no spark.livectl.* property found in the product: the scan is broken"
    assert sorted(_table("Spark properties of livectl's own")) == sorted(read)


def test_the_table_reader_reads_the_page() -> None:
    assert _table("Settings")["zookeeper_connect"] == "`127.0.0.1:2181`"
    assert _shown(False) == "`false`" and _shown("") == '`""`' and _shown(18000) == "`18000`"
