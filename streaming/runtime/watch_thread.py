"""The life of a driver thread that follows something outside the query: rounds on a thread of its own, one
whenever it is woken (a ZooKeeper watch fired) or its interval has passed, and a stop that ends it and waits.

The liveness bridge, the admin-path watcher and the auto leader rebalance task each hold one
(:class:`WatchThread`) and give it their round; what a round reads and publishes stays theirs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class WatchThread:
    """Runs ``round_`` on a daemon thread named ``name``: first after ``first_delay_s`` (default: the interval),
    then whenever :meth:`wake` is called or ``interval_s`` has passed (seconds, or a function read before each
    wait, for an interval that can change), until :meth:`stop`. A round handles the errors it expects; one that
    escapes ends the thread (``threading.excepthook`` reports it). A wake during a round runs one more round."""

    def __init__(
        self,
        name: str,
        round_: Callable[[], object],
        interval_s: float | Callable[[], float],
        *,
        first_delay_s: float | None = None,
    ) -> None:
        self.name = name
        self._round = round_
        self._interval = interval_s
        self._first_delay = first_delay_s
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the thread; a second start is refused (one thread per holder)."""
        if self._thread is not None:
            raise RuntimeError(f"{self.name}: already started")
        self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
        self._thread.start()

    def wake(self) -> None:
        """Run a round now (or right after the one in progress)."""
        self._wake.set()

    @property
    def stopping(self) -> bool:
        """:meth:`stop` was called: a callback (a kazoo watch) can end itself, a long round can end early."""
        return self._stopping.is_set()

    def stop(self, timeout: float = 10.0) -> None:
        """End the thread: no round starts after this; a round in progress is waited for up to ``timeout``
        seconds. Safe before :meth:`start`, twice, and from the thread itself (it then does not wait)."""
        self._stopping.set()
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def is_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _delay(self) -> float:
        return self._interval() if callable(self._interval) else self._interval

    def _loop(self) -> None:
        delay = self._delay() if self._first_delay is None else self._first_delay
        while not self._stopping.is_set():
            self._wake.wait(delay)
            self._wake.clear()
            if self._stopping.is_set():
                return
            self._round()
            delay = self._delay()
