"""The pure parts of the Kafka-style tools: progress display, shutdown answers, config parsing."""

from __future__ import annotations

import pytest

from admin.configs import parse_add_config
from admin.reassign_cmd import PartitionProgress, progress_bar, progress_lines
from core.kafka.envelope import encode_request
from core.kafka.requests import RequestApi
from core.kafka.zkdata import config_change_sequence, decode_config_change, encode_config_change
from core.model import TopicPartition
from simbrokers.shutdown_watch import ShutdownAnswers

pytestmark = pytest.mark.unit

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def test_progress_bar_for_a_terminal() -> None:
    bar = progress_bar([PartitionProgress(T0, True, ()), PartitionProgress(T1, False, (4, 5))], 3.0, width=10)
    assert bar == "reassign [#####.....] 1/2   3.0s waiting: t-1(+4,5)"
    assert progress_bar([PartitionProgress(T0, True, ())], 1.0, width=4).startswith("reassign [####] 1/1")


def test_progress_lines_for_a_log() -> None:
    lines = progress_lines([PartitionProgress(T0, False, (), started=False), PartitionProgress(T1, False, ())])
    assert lines == [
        "0/2 partitions done",
        "  t-0: not started yet",
        "  t-1: adding replicas not yet in the ISR: none (finishing)",
    ]


def answer(broker: int, batch: int, error: int, remaining: list[tuple[str, int]]) -> tuple[bytes, bytes]:
    body = {"errorCode": error, "remainingPartitions": [{"topicName": t, "partitionIndex": p} for t, p in remaining]}
    return encode_request(broker, RequestApi.CONTROLLED_SHUTDOWN_RESPONSE, 1, batch, body)


def test_shutdown_answers_merge_per_batch_and_ignore_others() -> None:
    a = ShutdownAnswers(2)
    assert a.last() is None
    a.add(*answer(2, 5, 0, [("t", 0)]))
    a.add(*answer(2, 5, 0, [("u", 1)]))
    a.add(*answer(3, 6, 0, []))  # another broker's
    a.add(b"2", b"not json")  # not a request: skipped
    assert a.last() == (0, ["t-0", "u-1"])
    a.add(*answer(2, 6, 41, []))
    assert a.last() == (41, [])


def test_add_config_and_notifications() -> None:
    assert parse_add_config("a=1,b=[x,y]") == {"a": "1", "b": "x,y"}
    assert encode_config_change("brokers", "<default>") == b'{"version":2,"entity_path":"brokers/<default>"}'
    # what the tool writes is what the simulated brokers read
    assert decode_config_change(encode_config_change("topics", "orders")) == ("topics", "orders")
    assert decode_config_change(b'{"version":1,"entity_path":"topics/x"}') is None
    assert decode_config_change(b"nope") is None
    assert config_change_sequence("config_change_0000000042") == 42
    assert config_change_sequence("config_change_x") is None and config_change_sequence("other") is None
