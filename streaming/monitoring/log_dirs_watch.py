"""The brokers' recent DescribeLogDirs reports for the status page: a driver thread that follows
``log_dirs_topic`` every :data:`INTERVAL_S` and keeps the last :data:`core.move_progress.RATE_WINDOW_MS` of it
(:class:`sinks.log_dirs_read.LogDirsTail`; the CLI reads the same window with
:func:`sinks.log_dirs_read.recent_log_dirs`)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from core.kafka.log_dirs import LogDirsReport
from core.move_progress import RATE_WINDOW_MS
from sinks.errors import SinkUnavailableError
from sinks.log_dirs_read import LogDirsTail

log = logging.getLogger(__name__)

#: how often the topic is read (reports come every second; the status page refreshes every 5 s)
INTERVAL_S = 1.0


class LogDirsWatch:
    """``start()`` follows the topic on a daemon thread; :meth:`reports` is what it holds now; ``stop()`` ends
    it."""

    def __init__(
        self, bootstrap: str, topic: str, client_config: Mapping[str, Any], interval_s: float = INTERVAL_S
    ) -> None:
        self.topic = topic
        self.interval_s = interval_s
        self._tail = LogDirsTail(bootstrap, topic, RATE_WINDOW_MS, client_config)
        self._reports: tuple[LogDirsReport, ...] = ()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="livectl-log-dirs", daemon=True)
        self._warned = False

    def reports(self) -> tuple[LogDirsReport, ...]:
        return self._reports

    def start(self) -> LogDirsWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def read_once(self) -> None:
        try:
            self._reports = self._tail.read(int(time.time() * 1000))
            self._warned = False
        except SinkUnavailableError as e:
            if not self._warned:  # once per outage: the status page says "unknown" meanwhile
                log.warning("log sizes for the status page: %s", e)
                self._warned = True
            self._reports = ()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                try:
                    self.read_once()
                except Exception:  # the status page must not lose its thread to one bad read
                    log.exception("reading %s", self.topic)
                self._stop.wait(self.interval_s)
        finally:
            self._tail.close()
