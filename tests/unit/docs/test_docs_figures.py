"""Figures the docs quote from the code agree with it: the start-up checks' timeouts in the one-line errors
they print, and no line that quotes such a timeout says the stop comes "at once"."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable

import pytest
from docs_pages import ROOT, pages

from streaming.driver.preflight import check_kafka, check_zookeeper

pytestmark = pytest.mark.unit

#: the one-line errors of ``livectl run``'s start-up checks, with the seconds they quote
_QUOTED = re.compile(r"(no broker answered|no session) within (\d+(?:\.\d+)?) s")


def _default_timeout(check: Callable[..., None]) -> float:
    default = inspect.signature(check).parameters["timeout_s"].default
    assert isinstance(default, float)
    return default


def test_quoted_start_up_timeouts_are_the_codes() -> None:
    timeouts = {"no broker answered": _default_timeout(check_kafka), "no session": _default_timeout(check_zookeeper)}
    quoted: list[tuple[str, str, float]] = []
    for page in pages():
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
            where = f"{page.relative_to(ROOT)}:{number}"
            for what, seconds in _QUOTED.findall(line):
                quoted.append((where, what, float(seconds)))
            if _QUOTED.search(line):
                assert "at once" not in line, f"{where}: quotes a start-up timeout and says 'at once'"
    assert quoted, "the docs quote the start-up checks' errors"
    assert [(w, what, s) for w, what, s in quoted if s != timeouts[what]] == []
