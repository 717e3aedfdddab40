"""The brokers' recent DescribeLogDirs reports for the status page: a driver thread that re-reads the last
:data:`core.move_progress.RATE_WINDOW_MS` of ``log_dirs_topic`` every :data:`INTERVAL_S` seconds, while a
reassignment is in progress (:mod:`sinks.log_dirs_read`, the CLI's reader)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from core.log_dirs import LogDirsReport
from core.move_progress import RATE_WINDOW_MS
from sinks.errors import SinkUnavailableError
from sinks.log_dirs_read import recent_log_dirs

log = logging.getLogger(__name__)

#: how often the reports are read again (the status page refreshes every 5 s)
INTERVAL_S = 5.0


class LogDirsWatch:
    """``start()`` runs the reads on a daemon thread; :meth:`reports` is what the last one found (none while
    ``wanted()`` says no reassignment is in progress); ``stop()`` ends it."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        client_config: Mapping[str, Any],
        wanted: Callable[[], bool],
        interval_s: float = INTERVAL_S,
    ) -> None:
        self.bootstrap, self.topic, self.client_config = bootstrap, topic, dict(client_config)
        self.wanted = wanted
        self.interval_s = interval_s
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
        self._thread.join(2)  # a read in progress (Kafka away: up to its timeout) ends on its own, a daemon

    def read_once(self) -> None:
        if not self.wanted():
            self._reports = ()
            return
        since = int(time.time() * 1000) - RATE_WINDOW_MS
        try:
            self._reports = tuple(recent_log_dirs(self.bootstrap, self.topic, since, self.client_config))
            self._warned = False
        except SinkUnavailableError as e:
            if not self._warned:  # once per outage: the status page says "unknown" meanwhile
                log.warning("log sizes for the status page: %s", e)
                self._warned = True
            self._reports = ()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.read_once()
            except Exception:  # the status page must not lose its thread to one bad read
                log.exception("reading %s", self.topic)
            self._stop.wait(self.interval_s)
