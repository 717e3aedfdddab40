"""The ``--help`` pages are docs too: plain text (no reST markup from docstrings) and every option and
argument described, for every command of ``livectl``, ``livectl-simbrokers`` and ``python -m simbrokers``.

The pages are read as a user reads them (the text ``--help`` prints), sub-commands found in that text."""

from __future__ import annotations

import argparse
import contextlib
import io
import re
from collections.abc import Callable

import pytest

import simbrokers.__main__ as simbrokers_main
from livectl.cli import build_parser as livectl_parser
from simbrokers.ctl import build_parser as simbrokers_ctl_parser

pytestmark = pytest.mark.unit

_MARKUP = re.compile(r"``|:(?:mod|class|func|meth|attr|data|exc):`|\*\*")
#: a sub-command in a page's "positional arguments": four spaces, its name, at least two spaces, its help
_SUBCOMMAND = re.compile(r"^    ([a-z][a-z-]*)(?: {2,}\S|$)")
_ENTRY = re.compile(r"^  \S")


def _help(build: Callable[[], argparse.ArgumentParser], words: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as done:
        build().parse_args([*words, "--help"])
    assert done.value.code == 0
    return out.getvalue()


def _sections(page: str) -> dict[str, list[str]]:
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in page.splitlines():
        if line.endswith(":") and not line.startswith(" "):
            current = sections.setdefault(line[:-1], [])
        elif not line.strip():
            current = None
        elif current is not None:
            current.append(line)
    return sections


def _pages() -> dict[str, str]:
    """Every command's help page by its command line, sub-commands included."""
    pages: dict[str, str] = {}
    roots: list[tuple[str, Callable[[], argparse.ArgumentParser]]] = [
        ("livectl", livectl_parser),
        ("livectl-simbrokers", simbrokers_ctl_parser),
        ("python -m simbrokers", simbrokers_main.build_parser),
    ]
    for name, build in roots:
        todo: list[list[str]] = [[]]
        while todo:
            words = todo.pop()
            page = _help(build, words)
            pages[" ".join([name, *words])] = page
            for line in _sections(page).get("positional arguments", []):
                match = _SUBCOMMAND.match(line)
                if match:
                    todo.append([*words, match.group(1)])
    return pages


def _undescribed(page: str) -> list[str]:
    """The options and arguments of a page that have no help text: those under "options" and "positional
    arguments", and the options of every argument group (a section whose entries start with ``-``)."""
    missing: list[str] = []
    for title, lines in _sections(page).items():
        whole = title in ("options", "positional arguments")
        for i, line in enumerate(lines):
            if not _ENTRY.match(line) or re.search(r"\S {2,}\S", line.strip()):
                continue
            if not whole and not line.startswith("  -"):
                continue
            following = lines[i + 1] if i + 1 < len(lines) else ""
            described = following.startswith("   ") and not _SUBCOMMAND.match(following)
            lists_subcommands = bool(_SUBCOMMAND.match(following))
            if not described and not lists_subcommands:
                missing.append(line.strip())
    return missing


def test_every_command_is_read() -> None:
    pages = _pages()
    assert {"livectl topics", "livectl local up", "livectl conf path", "livectl-simbrokers fault"} <= set(pages)
    assert len(pages) > 20


def test_help_pages_show_no_rest_markup() -> None:
    assert [name for name, page in _pages().items() if _MARKUP.search(page)] == []


def test_every_option_and_argument_is_described() -> None:
    missing = {name: found for name, page in _pages().items() if (found := _undescribed(page))}
    assert missing == {}


def test_an_undescribed_option_is_found() -> None:
    parser = argparse.ArgumentParser(prog="x")
    parser.add_argument("--described", help="it says what it does")
    parser.add_argument("--bare")
    parser.add_argument("--long-described-option-name-here", help="on the next line")
    parser.add_argument("thing")
    group = parser.add_argument_group("connection")
    group.add_argument("--grouped", help="described in its group")
    group.add_argument("--grouped-bare")
    assert _undescribed(parser.format_help()) == ["thing", "--bare BARE", "--grouped-bare GROUPED_BARE"]
