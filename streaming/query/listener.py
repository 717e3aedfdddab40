"""Logging the controller's metrics from every micro-batch's progress (a ``StreamingQueryListener``).

The metrics are observed on the decision rows (``observe("livectl", …)``, see :mod:`streaming.query.pipeline`),
so they appear in ``query.lastProgress["observedMetrics"]["livectl"]``, in this listener, and, through
:func:`describe_batch`, in the Spark UI's job descriptions.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from pyspark.sql.streaming.listener import StreamingQueryListener

from streaming.query.pipeline import OBSERVATION_NAME
from streaming.query.stateful import METRIC_COLUMNS

log = logging.getLogger("livectl.metrics")

#: in log lines: Kafka's ActiveControllerCount first, then the per-bucket sums
METRIC_ORDER = ("ActiveControllerCount", *METRIC_COLUMNS)


def observed(progress: Any) -> dict[str, int]:
    """The controller metrics of one progress object (``StreamingQueryProgress`` or its dict)."""
    if isinstance(progress, dict):
        row = (progress.get("observedMetrics") or {}).get(OBSERVATION_NAME)
    else:
        row = (progress.observedMetrics or {}).get(OBSERVATION_NAME)
    if row is None:
        return {}
    values = row if isinstance(row, dict) else row.asDict()
    return {k: int(v) for k, v in values.items() if v is not None}


def format_metrics(metrics: dict[str, int]) -> str:
    return " ".join(f"{k}={metrics[k]}" for k in METRIC_ORDER if k in metrics)


class MetricsListener(StreamingQueryListener):
    """Logs one line per micro-batch; ``on_metrics`` (optional) receives the same figures."""

    def __init__(self, on_metrics: Callable[[int, dict[str, int]], None] | None = None) -> None:
        super().__init__()
        self._on_metrics = on_metrics

    def onQueryStarted(self, event: Any) -> None:
        log.info("query %s started (id %s, run %s)", event.name, event.id, event.runId)

    def onQueryProgress(self, event: Any) -> None:
        p = event.progress
        metrics = observed(p)
        log.info(
            "batch %s: %d input rows, %.0f ms; %s",
            p.batchId,
            p.numInputRows,
            float((p.durationMs or {}).get("triggerExecution", 0)),
            format_metrics(metrics),
        )
        if self._on_metrics is not None and metrics:
            self._on_metrics(int(p.batchId), metrics)

    def onQueryIdle(self, event: Any) -> None:
        return None

    def onQueryTerminated(self, event: Any) -> None:
        if event.exception:
            # not at ERROR: the controller says itself what the failure means once it knows
            # (streaming.driver.shutdown.raise_outcome: the query's own failure at ERROR with its stack trace and
            # exit 1, or — when another controller replaced this one, e.g. Spark's
            # CONCURRENT_STREAM_LOG_UPDATE after a paused process resumed — fenced, exit 3 and one line)
            log.debug("query %s terminated with an error: %s", event.id, event.exception)
        else:
            log.info("query %s stopped", event.id)
