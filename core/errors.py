"""The one exception root of ``core``.

Only malformed *input* (an event or decision that cannot be decoded) raises. Controller
operations never raise per item: an invalid transition or an impossible command comes back as a
per-item failure or an admin result with a Kafka error name.
"""

from __future__ import annotations

from core.kafka.error_codes import KafkaError


class CoreError(Exception):
    """Root of every exception raised by ``core``."""


class DecodeStoppedError(CoreError):
    """A decode given a ``stop`` callable was stopped by it before the end (nothing decoded is returned)."""


class FormatError(CoreError, ValueError):
    """A JSON form could not be decoded.

    ``field`` names the offending field (dotted for nested ones) and ``reason`` says what is wrong,
    so that a rejected admin command can carry both to ``livectl.rejected``. ``error`` is the Kafka
    error name the command's result carries (``INVALID_TOPIC_EXCEPTION`` for an illegal topic name,
    ``INVALID_PARTITIONS``, ``INVALID_REPLICATION_FACTOR``, ``INVALID_REPLICA_ASSIGNMENT``; by default
    ``INVALID_REQUEST``).
    """

    def __init__(self, field: str, reason: str, error: str = KafkaError.INVALID_REQUEST.name) -> None:
        self.field = field
        self.reason = reason
        self.error = error
        super().__init__(f"{field}: {reason}")
