"""The one exception root of ``sinks``: :class:`SinkError`.

Only two things raise out of a sink: fencing (:class:`ControllerFencedError`, another controller took
over: stop the query) and an unavailable service (:class:`SinkUnavailableError`, the outcome of the
batch is unknown: fail the micro-batch so that Spark replays it; the sinks' replay is idempotent).
Per-write failures such as a compare-and-set mismatch are *returned*, never raised.
"""

from __future__ import annotations


class SinkError(Exception):
    """Root of every exception raised by ``sinks``."""


class ControllerFencedError(SinkError):
    """The ``check(/controller_epoch, epoch_zk_version)`` of a transaction failed: another controller
    was elected since this one's lease was granted. Nothing of the failed transaction was written."""

    def __init__(self, path: str, expected_version: int, reason: str) -> None:
        self.path = path
        self.expected_version = expected_version
        self.reason = reason
        super().__init__(f"fenced: {path} is no longer at version {expected_version} ({reason})")


class SinkUnavailableError(SinkError):
    """ZooKeeper or Kafka could not be reached, or did not confirm a write; the batch may be partly
    written. Replaying the same batch id completes it exactly once."""


class SinkStateError(SinkError):
    """The sink's own bookkeeping is inconsistent (e.g. its progress znode was changed by someone
    else, or holds malformed JSON). ``path`` names the znode or topic, ``reason`` what is wrong."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")
