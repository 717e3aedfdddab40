"""Every relative link in README.md, bench/README.md and docs/ reaches a file of the repository, and an
``#anchor`` a heading of that page; every decision record is in the index."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote

import pytest
from docs_pages import ROOT, anchors, links, pages

pytestmark = pytest.mark.unit


def _broken(page_list: list[Path], root: Path = ROOT) -> list[str]:
    broken: list[str] = []
    for link in (link for page in page_list for link in links(page)):
        where = f"{link.page.relative_to(root)}:{link.line}: {link.target}"
        if "://" in link.target or link.target.startswith("mailto:"):
            continue
        path_part, _, anchor = link.target.partition("#")
        target = (link.page.parent / unquote(path_part)).resolve() if path_part else link.page
        if root not in target.parents and target != root:
            broken.append(f"{where}: leaves the repository")
            continue
        rel = target.relative_to(root).as_posix()
        if not target.exists():
            broken.append(f"{where}: no such file")
            continue
        if anchor and target.suffix == ".md" and anchor not in anchors(target):
            broken.append(f"{where}: no heading #{anchor} in {rel}")
    return broken


def test_relative_links_reach_a_file_and_a_heading() -> None:
    assert len(pages()) > 5
    assert _broken(pages()) == []


def test_every_decision_record_is_in_the_index() -> None:
    index = ROOT / "docs" / "design" / "decisions.md"
    listed = {(index.parent / link.target).resolve() for link in links(index)}
    records = [p for p in sorted((ROOT / "docs" / "decisions").glob("*.md")) if p.name != "README.md"]
    assert len(records) >= 10
    assert [p.name for p in records if p not in listed] == []


def test_a_broken_link_is_reported(tmp_path: Path) -> None:
    root = tmp_path.resolve()
    (root / "docs").mkdir()
    (root / "docs" / "b.md").write_text("# B page\n\n## Some `code` heading, with commas\n")
    page = root / "docs" / "a.md"
    page.write_text(
        "# A\n\n[ok](b.md#some-code-heading-with-commas) [self](#a) [web](https://example.com/x)\n"
        "```\n[in code](nowhere.md)\n```\n"
        "[gone](missing.md) [bad anchor](b.md#nope) `[span](nowhere.md)` [out](../../x.md)\n"
    )
    assert _broken([page], root) == [
        "docs/a.md:7: missing.md: no such file",
        "docs/a.md:7: b.md#nope: no heading #nope in docs/b.md",
        "docs/a.md:7: ../../x.md: leaves the repository",
    ]
