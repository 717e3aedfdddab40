"""Kafka's protocol error codes (``org.apache.kafka.common.protocol.Errors``): the one table for livectl.

The core (answers to brokers, admin results), the sinks and the simulated brokers all take their codes
and names from here, so that a code the controller sends is the code a broker reads. Only the errors
livectl or its simulated brokers use are listed; values and names are Kafka's.
"""

from __future__ import annotations

from enum import IntEnum, StrEnum


class KafkaError(IntEnum):
    """Kafka's error codes by Kafka's names."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    UNKNOWN_TOPIC_OR_PARTITION = 3
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    STALE_CONTROLLER_EPOCH = 11
    INVALID_TOPIC_EXCEPTION = 17
    NOT_ENOUGH_REPLICAS = 19
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    REASSIGNMENT_IN_PROGRESS = 60
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    STALE_BROKER_EPOCH = 77
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    INVALID_UPDATE_VERSION = 95
    UNKNOWN_TOPIC_ID = 100
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108


class ReassignmentOutcome(StrEnum):
    """livectl's own error names, not Kafka's (they carry no protocol code): the answer to a reassignment
    request some of whose partitions a later cancellation or reassignment replaced before they reached
    the target (Kafka's ``AlterPartitionReassignments`` answers at once and reports no such outcome)."""

    CANCELLED = "REASSIGNMENT_CANCELLED"
    SUPERSEDED = "REASSIGNMENT_SUPERSEDED"


def error_name(code: int) -> str:
    """Kafka's name for ``code`` (``ERROR_<code>`` for a code not in :class:`KafkaError`)."""
    try:
        return KafkaError(code).name
    except ValueError:
        return f"ERROR_{code}"
