"""The project's Markdown pages as the docs tests read them: fenced blocks, links and heading anchors."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_FENCE = re.compile(r"^\s*(```|~~~)")
_LINK = re.compile(r"(?<!\!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|\!\[[^\]]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_CODE_SPAN = re.compile(r"`[^`]*`")


@dataclass(frozen=True)
class Block:
    """One fenced code block: its page, the line of its opening fence, its info string and its lines."""

    page: Path
    line: int
    info: str
    lines: tuple[str, ...]


@dataclass(frozen=True)
class Link:
    """One Markdown link or image outside code: its page, line and target as written."""

    page: Path
    line: int
    target: str


def pages() -> list[Path]:
    """README.md, bench/README.md and every Markdown file under docs/, sorted."""
    found = [ROOT / "README.md", ROOT / "bench" / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [p for p in found if p.is_file()]


def blocks(page: Path) -> list[Block]:
    """The fenced code blocks of ``page``, in order."""
    out: list[Block] = []
    opened: tuple[int, str, str] | None = None
    body: list[str] = []
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
        fence = _FENCE.match(line)
        if opened is None:
            if fence:
                opened = (number, fence.group(1), line.strip()[3:].strip())
                body = []
        elif fence and fence.group(1) == opened[1] and line.strip() == opened[1]:
            out.append(Block(page, opened[0], opened[2], tuple(body)))
            opened = None
        else:
            body.append(line)
    return out


def links(page: Path) -> list[Link]:
    """The links and images of ``page`` outside fenced blocks and code spans."""
    out: list[Link] = []
    in_fence = False
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        for match in _LINK.finditer(_CODE_SPAN.sub("", line)):
            out.append(Link(page, number, match.group(1) or match.group(2)))
    return out


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: its text lowercased, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading keeps its text
    text = text.replace("`", "").strip().lower()
    kept = []
    for ch in text:
        if ch in " -_" or unicodedata.category(ch)[0] in "LNM":
            kept.append(ch)
    return "".join(kept).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The heading anchors of ``page`` (a repeated heading gets ``-1``, ``-2``… as on GitHub)."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    in_fence = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        heading = None if in_fence else _HEADING.match(line)
        if heading:
            base = slug(heading.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            out.add(base if count == 0 else f"{base}-{count}")
    return out
