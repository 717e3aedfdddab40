"""channel.log_dirs, pure: DescribeLogDirs requests naming the partitions asked about, and answers of each version
in livectl's report shape (the real broker's answers: ``tests/integration/channel/test_channel_wire.py``)."""

from __future__ import annotations

import datetime

import pytest
from kio.schema.describe_log_dirs.v1 import response as v1
from kio.schema.describe_log_dirs.v4 import response as v4
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import i32, i32Timedelta, i64

from channel.log_dirs import describe_log_dirs, to_report
from core.kafka.log_dirs import LogDirResult, LogDirsReport, PartitionLogDir, TopicLogDir
from core.model import TopicPartition

pytestmark = pytest.mark.unit


def test_the_request_names_each_partition_once_by_topic() -> None:
    request, response_type = describe_log_dirs(
        4, [TopicPartition("b", 0), TopicPartition("a", 2), TopicPartition("a", 1)]
    )
    assert [(t.topic, list(t.partitions)) for t in request.topics] == [("a", [1, 2]), ("b", [0])]
    assert response_type is v4.DescribeLogDirsResponse
    with pytest.raises(ValueError, match="version"):
        describe_log_dirs(0, [])


def test_answers_of_v1_and_v4_become_reports() -> None:
    part = v1.DescribeLogDirsPartition(
        partition_index=i32(3), partition_size=i64(2048), offset_lag=i64(1), is_future_key=False
    )
    old = v1.DescribeLogDirsResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
        results=(
            v1.DescribeLogDirsResult(
                error_code=ErrorCode.none,
                log_dir="/var/kafka",
                topics=(v1.DescribeLogDirsTopic(name=TopicName("t"), partitions=(part,)),),
            ),
        ),
    )
    expected = LogDirResult("/var/kafka", (TopicLogDir("t", (PartitionLogDir(3, 2048, 1),)),))
    assert to_report(7, 99, old) == LogDirsReport(7, 99, (expected,))
    new = v4.DescribeLogDirsResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
        error_code=ErrorCode.none,
        results=(
            v4.DescribeLogDirsResult(
                error_code=ErrorCode.kafka_storage_error,
                log_dir="/var/kafka",
                topics=(),
                total_bytes=i64(100),
                usable_bytes=i64(40),
            ),
        ),
    )
    assert to_report(7, 99, new) == LogDirsReport(7, 99, (LogDirResult("/var/kafka", (), 56, 100, 40),))
