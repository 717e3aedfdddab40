"""Kafka's protocol error codes as the simulated brokers use them: the names of
:class:`core.kafka.error_codes.KafkaError` (the one table shared with the controller), as plain ints."""

from __future__ import annotations

from core.kafka.error_codes import KafkaError, error_name

UNKNOWN_SERVER_ERROR = int(KafkaError.UNKNOWN_SERVER_ERROR)
NONE = int(KafkaError.NONE)
OFFSET_OUT_OF_RANGE = int(KafkaError.OFFSET_OUT_OF_RANGE)
UNKNOWN_TOPIC_OR_PARTITION = int(KafkaError.UNKNOWN_TOPIC_OR_PARTITION)
NOT_LEADER_OR_FOLLOWER = int(KafkaError.NOT_LEADER_OR_FOLLOWER)
REQUEST_TIMED_OUT = int(KafkaError.REQUEST_TIMED_OUT)
STALE_CONTROLLER_EPOCH = int(KafkaError.STALE_CONTROLLER_EPOCH)
NOT_ENOUGH_REPLICAS = int(KafkaError.NOT_ENOUGH_REPLICAS)
NOT_CONTROLLER = int(KafkaError.NOT_CONTROLLER)
INVALID_REQUEST = int(KafkaError.INVALID_REQUEST)
OPERATION_NOT_ATTEMPTED = int(KafkaError.OPERATION_NOT_ATTEMPTED)
KAFKA_STORAGE_ERROR = int(KafkaError.KAFKA_STORAGE_ERROR)
FENCED_LEADER_EPOCH = int(KafkaError.FENCED_LEADER_EPOCH)
UNKNOWN_LEADER_EPOCH = int(KafkaError.UNKNOWN_LEADER_EPOCH)
STALE_BROKER_EPOCH = int(KafkaError.STALE_BROKER_EPOCH)
INVALID_UPDATE_VERSION = int(KafkaError.INVALID_UPDATE_VERSION)
UNKNOWN_TOPIC_ID = int(KafkaError.UNKNOWN_TOPIC_ID)
INELIGIBLE_REPLICA = int(KafkaError.INELIGIBLE_REPLICA)
NEW_LEADER_ELECTED = int(KafkaError.NEW_LEADER_ELECTED)


def name(code: int) -> str:
    """Kafka's name for ``code`` (``ERROR_<n>`` for a code not in the table)."""
    return error_name(code)
