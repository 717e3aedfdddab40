"""One call on a thread of its own, its outcome a future: the driver's work that can overlap another's."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

_T = TypeVar("_T")


def in_background(call: Callable[[], _T], name: str) -> Future[_T]:
    """Start ``call`` on a daemon thread named ``name``; its result or exception is the future's (an
    exception is raised where the result is taken, in the caller's own thread)."""
    future: Future[_T] = Future()

    def run() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(call())
        except BaseException as e:
            future.set_exception(e)

    threading.Thread(target=run, name=name, daemon=True).start()
    return future
