"""The metrics listener's report of a query's end (``streaming.query.listener.MetricsListener.onQueryTerminated``):
a failed query is the app's to report (``streaming.driver.shutdown.raise_outcome``), so the listener says it only at
DEBUG — a fenced controller's one line must stay its only line, whenever Spark's listener bus calls back."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import pytest

from streaming.query.listener import MetricsListener

pytestmark = pytest.mark.unit


@dataclass(frozen=True)
class Terminated:
    id: str
    exception: str | None


def test_a_failed_query_is_logged_at_debug_only(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="livectl.metrics")
    error = "[CONCURRENT_STREAM_LOG_UPDATE] Concurrent update to the log. Multiple streaming jobs detected for 7"
    MetricsListener().onQueryTerminated(Terminated("q1", error))
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.DEBUG, f"query q1 terminated with an error: {error}")
    ]


def test_a_stopped_query_is_logged_at_info(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="livectl.metrics")
    MetricsListener().onQueryTerminated(Terminated("q2", None))
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [(logging.INFO, "query q2 stopped")]
