"""The controller's standard error, with a gate that a fenced controller closes.

Spark's JVM, started by ``livectl run``, inherits the process's standard error, and so do the Python
processes the JVM starts (the streaming source's runner among them). When a fenced controller stops, those
processes can still write after the one line that says it was fenced: a runner whose socket the stopping JVM
closed prints its ``EOFError`` traceback. Logging levels cannot reach that output; the file descriptor can.
:class:`StderrGate` puts a pipe under descriptor 2 before the JVM starts and forwards everything through it to
the real standard error until :meth:`StderrGate.close`; :meth:`StderrGate.say` writes past the gate.
"""

from __future__ import annotations

import array
import contextlib
import fcntl
import os
import sys
import termios
import threading
import time

_CHUNK = 65536


class StderrGate:
    """Descriptor 2 replaced by a pipe whose reader forwards to the original standard error while open.

    The reader drains the pipe until every writer is gone (the JVM and its children included), also once
    closed, so that no process ever blocks on a full pipe; it runs in a daemon thread."""

    def __init__(self) -> None:
        sys.stderr.flush()
        self._real = os.dup(2)
        read_end, write_end = os.pipe()
        os.dup2(write_end, 2)
        os.close(write_end)
        self._read_end = read_end
        self._open = True
        self._lock = threading.Lock()
        self._restored = False
        self._reader = threading.Thread(target=self._forward, name="livectl-stderr-gate", daemon=True)
        self._reader.start()

    def _forward(self) -> None:
        while True:
            try:
                data = os.read(self._read_end, _CHUNK)
            except OSError:
                return
            if not data:
                return
            with self._lock:
                if self._open:
                    self._write_real(data)

    def _write_real(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                written = os.write(self._real, view)
            except OSError:
                # the real standard error is gone (a closed terminal): keep draining, forward nothing
                return
            view = view[written:]

    @classmethod
    def install(cls) -> StderrGate | None:
        """A gate over descriptor 2, or ``None`` when there is no descriptor 2 to put it over (a process
        started with standard error closed)."""
        try:
            os.fstat(2)
        except OSError:
            return None
        return cls()

    @property
    def is_open(self) -> bool:
        return self._open

    def close(self, drain_s: float = 0.2) -> None:
        """From now on, what anything writes to standard error is dropped (only :meth:`say` gets through);
        what is already in the pipe is forwarded first (for at most ``drain_s``)."""
        self.drain(drain_s)
        with self._lock:
            self._open = False

    def say(self, line: str) -> None:
        """``line`` on the real standard error, whether the gate is open or not."""
        sys.stderr.flush()
        with self._lock:
            self._write_real((line.rstrip("\n") + "\n").encode("utf-8", "replace"))

    def restore(self, drain_s: float = 0.5) -> None:
        """This process's descriptor 2 back on the real standard error, after forwarding what is in the pipe
        (for at most ``drain_s``); the processes started meanwhile keep the pipe, drained until they exit."""
        if self._restored:
            return
        self._restored = True
        with contextlib.suppress(ValueError, OSError):
            sys.stderr.flush()
        os.dup2(self._real, 2)
        self.drain(drain_s)

    def drain(self, timeout_s: float) -> None:
        """Wait (at most ``timeout_s``) until what was written to the pipe so far has been handled."""
        with contextlib.suppress(ValueError, OSError):
            sys.stderr.flush()
        deadline = time.monotonic() + timeout_s
        quiet_looks = 0
        # two looks apart: a chunk the reader has taken but not yet written is seen by the second
        while quiet_looks < 2 and time.monotonic() < deadline:
            with self._lock:
                quiet_looks = quiet_looks + 1 if self._pending() == 0 else 0
            time.sleep(0.02)

    def _pending(self) -> int:
        count = array.array("i", [0])
        try:
            fcntl.ioctl(self._read_end, termios.FIONREAD, count)
        except OSError:
            return 0
        return count[0]
