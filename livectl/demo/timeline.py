"""The demo's timeline: one line per event, from several threads."""

from __future__ import annotations

import threading
import time
from typing import TextIO


class Timeline:
    """Lines of the form ``[  12.3s] kind   text``, from several threads, never interleaved."""

    def __init__(self, out: TextIO, start: float | None = None) -> None:
        self.out = out
        self.start = time.monotonic() if start is None else start
        self._lock = threading.Lock()

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def line(self, kind: str, text: str) -> None:
        self._write(f"[{self.elapsed():6.1f}s] {kind:<5} {text}")

    def header(self, text: str) -> None:
        self._write("")
        self._write(f"== {text}")

    def plain(self, text: str) -> None:
        self._write(text)

    def _write(self, text: str) -> None:
        with self._lock:
            try:
                self.out.write(text + "\n")
                self.out.flush()
            except (OSError, ValueError):  # the terminal went away: keep stopping things regardless
                pass
