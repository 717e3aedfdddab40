"""The one exception root of ``streaming``."""

from __future__ import annotations


class StreamingError(Exception):
    """Root of every exception raised by ``streaming``."""
