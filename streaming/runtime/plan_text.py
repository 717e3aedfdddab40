"""A DataFrame's plan as text, through PySpark's public ``DataFrame.explain``.

``explain(mode)`` plans the frame on its own query execution (Spark keeps that plan for the frame's later
actions) and prints the text; ``"codegen"`` also generates and compiles the Java of each whole-stage-codegen
subtree. PySpark has no public call that returns the text, so :func:`explain_text` captures what the
calling thread prints, while other threads' output goes on to the real ``sys.stdout``.
"""

from __future__ import annotations

import io
import sys
import threading
from typing import Any, TextIO

#: one capture at a time: each restores the ``sys.stdout`` it found
_CAPTURE = threading.Lock()


class _ThreadRouted(io.TextIOBase):
    """``sys.stdout`` during a capture: ``thread``'s writes go to ``captured``, every other thread's to ``real``."""

    def __init__(self, real: TextIO, captured: io.StringIO, thread: threading.Thread) -> None:
        self._real = real
        self._captured = captured
        self._thread = thread

    def write(self, text: str) -> int:
        out = self._captured if threading.current_thread() is self._thread else self._real
        return out.write(text)

    def flush(self) -> None:
        self._real.flush()


def explain_text(frame: Any, mode: str = "simple") -> str:
    """What ``frame.explain(mode=mode)`` prints (``simple``, ``extended``, ``codegen``, ``cost``,
    ``formatted``), without printing it."""
    captured = io.StringIO()
    with _CAPTURE:
        real = sys.stdout
        sys.stdout = _ThreadRouted(real, captured, threading.current_thread())
        try:
            frame.explain(mode=mode)
        finally:
            sys.stdout = real
    return captured.getvalue()
