"""The JSON examples in the docs parse: a ``json`` block is one JSON document or one per line."""

from __future__ import annotations

import json

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
