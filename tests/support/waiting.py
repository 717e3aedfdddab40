"""Waiting in tests: for a condition with a deadline, never for a while.

:func:`wait_until` polls a check (a service, a process, another thread's state) until it holds and fails
naming what it waited for and the last value seen; :func:`poll_until` is the same without the failure, for
a wait that escalates when it runs out (SIGTERM, then SIGKILL): the pause between looks lives here, not in
each test. :class:`WatchedText` lets a thread wait for what another writes to a stream
(the admin tool's progress on stderr) instead of guessing how long that takes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Literal, TextIO, TypeVar

T = TypeVar("T")

#: the first look comes at once, then the pause between looks doubles up to the caller's ``interval``: a
#: condition that holds soon is seen soon, one that takes seconds is not asked about hundreds of times
FIRST_PAUSE_S = 0.01


def poll_until(check: Callable[[], T], timeout: float, interval: float = 0.1) -> T:
    """Call ``check`` until it returns something truthy or ``timeout`` seconds have passed; its last value."""
    deadline = time.monotonic() + timeout
    pause = min(FIRST_PAUSE_S, interval)
    while True:
        last = check()
        left = deadline - time.monotonic()
        if last or left <= 0:
            return last
        time.sleep(min(pause, left))
        pause = min(pause * 2, interval)


def wait_until(
    what: str,
    check: Callable[[], T | Literal[False] | None],
    timeout: float = 60.0,
    interval: float = 0.3,
    detail: Callable[[], str] | None = None,
) -> T:
    """Poll ``check`` until it returns something truthy and return that; after ``timeout`` seconds fail
    naming ``what``, the last value ``check`` returned and ``detail()`` (a log's tail, say). ``interval``:
    the longest pause between two looks. A check that returns ``None`` or ``False`` for "not yet" (``x and
    y``, ``re.search``) types its result without them: what is returned is never either."""
    last = poll_until(check, timeout, interval)
    if last:
        return last
    more = f"\n{detail()}" if detail is not None else ""
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what} (last: {last!r}){more}")


class WatchedText:
    """A text stream that passes everything on to ``target`` and keeps it, so that another thread can wait
    for a piece of it (:meth:`wait_for`). Not a terminal: output meant for one is not drawn."""

    def __init__(self, target: TextIO) -> None:
        self.target = target
        self._text = ""
        self._changed = threading.Condition()

    def write(self, s: str) -> int:
        with self._changed:
            self._text += s
            self.target.write(s)
            self._changed.notify_all()
        return len(s)

    def flush(self) -> None:
        self.target.flush()

    def isatty(self) -> bool:
        return False

    @property
    def text(self) -> str:
        with self._changed:
            return self._text

    def wait_for(self, piece: str, timeout: float = 20.0, after: int = 0) -> int:
        """Block until ``piece`` has been written (at or past offset ``after``); the offset just past it."""
        with self._changed:
            if not self._changed.wait_for(lambda: piece in self._text[after:], timeout):
                raise AssertionError(f"{piece!r} not written within {timeout:g} s; written: {self._text[-2000:]!r}")
            return self._text.index(piece, after) + len(piece)
