"""The JSON examples in the docs parse: a ``json`` block is one JSON document or one per line."""

from __future__ import annotations

import json
import re

import pytest
from docs_pages import ROOT, blocks, pages

pytestmark = pytest.mark.unit


def test_json_blocks_parse() -> None:
    bad: list[str] = []
    checked = 0
    for page in pages():
        for block in (b for b in blocks(page) if b.info == "json"):
            checked += 1
            text = "\n".join(block.lines)
            try:
                json.loads(text)
            except json.JSONDecodeError:
                for offset, line in enumerate(block.lines, start=1):
                    try:
                        json.loads(line)
                    except json.JSONDecodeError as e:
                        bad.append(f"{page.relative_to(ROOT)}:{block.line + offset}: {e}")
    assert checked > 0
    assert bad == []


def test_every_table_row_belongs_to_a_table() -> None:
    """A ``|`` row outside code follows another row or is a header (a ``|---|`` line under it): a paragraph
    between two rows ends the table, and the rows after it show as text (operations.md's ``kafka-topics``
    filters lost their ``--topics-with-overrides`` row so)."""
    separator = re.compile(r"^\|[\s:|-]+\|\s*$")
    stray: list[str] = []
    for page in pages():
        lines = page.read_text(encoding="utf-8").splitlines()
        fenced = False
        for i, line in enumerate(lines):
            if line.lstrip().startswith(("```", "~~~")):
                fenced = not fenced
                continue
            if fenced or not line.startswith("|") or (i and lines[i - 1].startswith("|")):
                continue
            if i + 1 < len(lines) and separator.match(lines[i + 1]):
                continue
            stray.append(f"{page.relative_to(ROOT)}:{i + 1}: {line[:60]}")
    assert stray == []


def test_simulated_brokers_started_together_have_racks_all_or_none() -> None:
    """Kafka (and livectl) refuse a rack-aware placement when only some brokers have a rack
    (``INVALID_REPLICA_ASSIGNMENT: Not all brokers have rack information``): a block that starts several
    simulated brokers gives every process ``--rack`` or none. Followed as written, operations.md's example
    (brokers 1-3 without a rack, broker 4 with one) made ``topics --create`` fail."""
    mixed: list[str] = []
    for page in pages():
        for block in blocks(page):
            starts = [ln for ln in block.lines if "-m simbrokers" in ln and "--help" not in ln]
            if len({"--rack" in ln for ln in starts}) > 1:
                mixed.append(f"{page.relative_to(ROOT)}:{block.line}")
    assert mixed == []
