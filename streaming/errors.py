"""The one exception root of ``streaming``."""

from __future__ import annotations


class StreamingError(Exception):
    """Root of every exception raised by ``streaming``."""


def first_line(e: BaseException) -> str:
    """The first line of ``e``'s message (its ``repr`` when it has none): a log line's reason."""
    return str(e).splitlines()[0] if str(e) else repr(e)
