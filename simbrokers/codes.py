"""Kafka's protocol error codes used by the simulated brokers (``org.apache.kafka.common.protocol.Errors``)."""

from __future__ import annotations

NONE = 0
OFFSET_OUT_OF_RANGE = 1
UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7
STALE_CONTROLLER_EPOCH = 11
NOT_ENOUGH_REPLICAS = 19
NOT_CONTROLLER = 41
INVALID_REQUEST = 42
OPERATION_NOT_ATTEMPTED = 55
KAFKA_STORAGE_ERROR = 56
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
STALE_BROKER_EPOCH = 77
INELIGIBLE_REPLICA = 107
INVALID_UPDATE_VERSION = 108
NEW_LEADER_ELECTED = 109

NAMES: dict[int, str] = {
    v: k for k, v in globals().items() if k.isupper() and isinstance(v, int) and not k.startswith("_")
}


def name(code: int) -> str:
    """Kafka's name for ``code`` (``UNKNOWN_SERVER_ERROR(<n>)`` style for codes we do not list)."""
    return NAMES.get(code, f"ERROR_{code}")
