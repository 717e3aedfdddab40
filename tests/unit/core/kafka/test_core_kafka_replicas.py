"""Kafka's replica-list rule, stated once (:func:`core.kafka.replicas.read_replica_list`), and the three
inputs that carry a replica list refusing alike through it."""

from __future__ import annotations

from typing import Any

import pytest

from core import limits as lim
from core.codec.events import decode_event
from core.errors import FormatError
from core.kafka.replicas import read_replica_list

pytestmark = pytest.mark.unit


def test_a_valid_list_keeps_assignment_order() -> None:
    assert read_replica_list([3, 1, 2], "replicas", what="partition t-0") == (3, 1, 2)


@pytest.mark.parametrize(
    ("value", "field", "reason"),
    [
        ([], "r", "partition t-0 must list at least one broker"),
        ([1, 2, 1], "r", "the replica list of partition t-0 names broker 1 twice"),
        ([1, -1], "r[1]", "must be >= 0, got -1"),
        ([1, lim.MAX_BROKER_ID + 1], "r[1]", f"must be <= {lim.MAX_BROKER_ID}"),
        ([1, "2"], "r[1]", "must be an integer, got str"),
        ([True], "r[0]", "must be an integer, got bool"),
        ("1,2", "r", "must be a list of integers, got str"),
        (list(range(lim.MAX_REPLICATION_FACTOR + 1)), "r", f"must list at most {lim.MAX_REPLICATION_FACTOR} entries"),
    ],
)
def test_every_refusal_names_the_field_with_kafkas_error(value: Any, field: str, reason: str) -> None:
    with pytest.raises(FormatError) as e:
        read_replica_list(value, "r", what="partition t-0")
    assert e.value.field == field
    assert reason in e.value.reason
    assert e.value.error == "INVALID_REPLICA_ASSIGNMENT"


def test_the_hint_follows_the_empty_list_reason() -> None:
    with pytest.raises(FormatError) as e:
        read_replica_list([], "r", what="partition t-0", hint="use cancel to cancel")
    assert e.value.reason == "partition t-0 must list at least one broker (use cancel to cancel)"


@pytest.mark.parametrize(
    ("body", "field", "what"),
    [
        (
            {"type": "create_topic", "request_id": "r", "topic": "t", "replica_assignment": {"0": [1, 1]}},
            "replica_assignment.0",
            "partition 0",
        ),
        (
            {
                "type": "reassign_partitions",
                "request_id": "r",
                "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 1]}],
            },
            "partitions[0].replicas",
            "partition t-0",
        ),
        (
            {"type": "zk_topic_change", "controller_epoch": 1, "topic": "t", "partitions": [[0, [1, 1]]]},
            "partitions[0][1]",
            "partition t-0",
        ),
    ],
)
def test_the_three_inputs_refuse_a_repeated_broker_alike(body: dict[str, Any], field: str, what: str) -> None:
    with pytest.raises(FormatError) as e:
        decode_event({"version": 1, **body})
    assert e.value.field == field
    assert e.value.reason == f"must not repeat a broker id, got [1, 1]: the replica list of {what} names broker 1 twice"
    assert e.value.error == "INVALID_REPLICA_ASSIGNMENT"
