"""A bounded stop for the simulated brokers' process: what SIGTERM may take, and what it could not finish.

SIGTERM starts a controlled shutdown of every broker of the process; the process then exits within
``--shutdown-timeout-s`` + :data:`CLOSE_TIMEOUT_S` seconds whatever is unreachable (ZooKeeper, Kafka, the
controller), and prints one line (``simbrokers: ...``) for each thing it could not finish:

* a controlled shutdown the controller did not acknowledge in time (or that ran out of retries);
* a client it could not close within its share of the closing time (a ZooKeeper session, the producer's
  unsent events, the consumer).

A :class:`Watchdog` backs the bound: if the orderly stop is itself stuck somewhere, the process exits
with code 1 one second after the bound, naming the step it was in.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO

#: the time the clients get to close once the brokers are done (shared by all of them)
CLOSE_TIMEOUT_S = 5.0
#: how long one producer send may wait for Kafka's metadata (Kafka's ``max.block.ms``; its default of 60 s
#: made each event sent with Kafka away a minute of a stop)
SEND_MAX_BLOCK_MS = 2_000


def say(line: str, stream: TextIO | None = None) -> None:
    """One line on stderr, prefixed like the process's other messages."""
    print(f"simbrokers: {line}", file=stream or sys.stderr, flush=True)


def bounded(what: str, action: Callable[[], object], timeout_s: float) -> bool:
    """Run ``action`` in a daemon thread for at most ``timeout_s``; False (and one line naming ``what``) when
    it did not end or failed. A thread left running dies with the process."""
    failure: list[BaseException] = []

    def target() -> None:
        try:
            action()
        except BaseException as e:  # reported below, as what could not be finished
            failure.append(e)

    thread = threading.Thread(target=target, name=f"stop: {what}", daemon=True)
    thread.start()
    thread.join(max(0.0, timeout_s))
    if thread.is_alive():
        say(f"could not finish {what} within {timeout_s:.1f} s: stopping anyway")
        return False
    if failure:
        say(f"could not finish {what}: {failure[0]}")
        return False
    return True


class Watchdog:
    """Exits the process (code 1) ``limit_s`` after :meth:`start` unless :meth:`cancel` came first, naming
    the step the stop was in (:attr:`step`)."""

    def __init__(self, limit_s: float, exit: Callable[[int], object] = os._exit) -> None:
        self.limit_s = limit_s
        self.step = "starting"
        self._exit = exit
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="stop watchdog", daemon=True)

    def start(self) -> Watchdog:
        self._thread.start()
        return self

    def cancel(self) -> None:
        self._done.set()

    def _watch(self) -> None:
        started = time.monotonic()
        if self._done.wait(self.limit_s):
            return
        say(f"stop did not finish within {time.monotonic() - started:.0f} s (stuck {self.step}): exiting now")
        self._exit(1)
