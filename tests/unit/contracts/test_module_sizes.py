"""Modules a reader can hold in mind: none of livectl's over 600 lines, none of the pure library's (``core``)
over 400. A module growing past its bound is split by concern, not trimmed."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[3]
PACKAGES = ("core", "streaming", "sinks", "admin", "livectl", "simbrokers", "channel", "bench")
LIMIT = 600
CORE_LIMIT = 400


def test_no_module_is_over_its_bound() -> None:
    over = []
    for package in PACKAGES:
        limit = CORE_LIMIT if package == "core" else LIMIT
        for path in sorted((REPO / package).rglob("*.py")):
            lines = len(path.read_text().splitlines())
            if lines > limit:
                over.append(f"{path.relative_to(REPO)}: {lines} lines (at most {limit})")
    assert over == []
