"""The channel's mapping between livectl's requests and Kafka's RPCs, without a broker: which versions Kafka
3.9's controller sends for an ``inter.broker.protocol.version``, what is refused, and how answers become
livectl's events. (That the encodings are right is the broker's to say: tests/integration/channel.)"""

from __future__ import annotations

import uuid

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.leader_and_isr.v4.response import LeaderAndIsrPartitionError as ErrorV4
from kio.schema.leader_and_isr.v4.response import LeaderAndIsrResponse as ResponseV4
from kio.schema.leader_and_isr.v7.response import (
    LeaderAndIsrPartitionError,
    LeaderAndIsrResponse,
    LeaderAndIsrTopicError,
)
from kio.schema.stop_replica.v4.response import StopReplicaPartitionError, StopReplicaResponse
from kio.schema.types import TopicName
from kio.static.primitive import i32

from channel.cli import register
from channel.convert import (
    LEADER_AND_ISR,
    STOP_REPLICA,
    UPDATE_METADATA,
    UnsupportedVersionError,
    ibp_cap,
    to_events,
    to_kafka,
)
from core.events import LeaderAndIsrResponse as LisrEvent
from core.events import PartitionError
from core.events import StopReplicaResponse as StopEvent
from core.kafka.requests import (
    ControlledShutdownResponse,
    LeaderAndIsrRequest,
    LisrPartitionState,
    StopReplicaPartition,
    StopReplicaRequest,
)

pytestmark = pytest.mark.unit

TOPIC_ID = uuid.UUID("ab465bcb-167d-49bc-8c97-93ef514b7336")
TOPIC_ID_TEXT = "q0ZbyxZ9SbyMl5PvUUtzNg"


def _lisr() -> LeaderAndIsrRequest:
    states = tuple(
        LisrPartitionState("t", p, 3, 1, 5, (1, 2), 0, (1, 2), (), (), False, 0, TOPIC_ID_TEXT) for p in (0, 1)
    )
    return LeaderAndIsrRequest(1000, 3, 77, 0, states, ())


def test_versions_follow_kafka_39s_controller() -> None:
    lisr = [ibp_cap(LEADER_AND_ISR, v) for v in ("3.9", "3.4", "3.3", "3.2", "2.8-IV1", "2.8-IV0", "2.4", "2.2", "2.1")]
    assert lisr == [7, 7, 6, 6, 5, 4, 4, 2, -1]
    assert [ibp_cap(UPDATE_METADATA, v) for v in ("3.9", "3.3", "2.8-IV1", "2.5", "2.2", "2.1")] == [8, 7, 7, 6, 5, -1]
    assert [ibp_cap(STOP_REPLICA, v) for v in ("3.9", "3.3", "2.6", "2.5")] == [4, 3, 3, -1]


def test_a_version_not_built_is_refused_by_name() -> None:
    with pytest.raises(UnsupportedVersionError, match="LeaderAndIsrRequest v1 is not built here"):
        to_kafka(_lisr(), 1, broker_epoch=77)
    with pytest.raises(UnsupportedVersionError, match="not a request the controller channel sends"):
        to_kafka(ControlledShutdownResponse(0, ()), 3, broker_epoch=77)


def test_the_request_carries_the_epochs_and_the_topic_id() -> None:
    call = to_kafka(_lisr(), 7, broker_epoch=77)
    assert (call.request.controller_id, call.request.controller_epoch, call.request.broker_epoch) == (1000, 3, 77)
    (topic,) = call.request.topic_states
    assert (topic.topic_name, topic.topic_id) == ("t", TOPIC_ID)
    assert [s.partition_index for s in topic.partition_states] == [0, 1]
    assert call.request.is_k_raft_controller is False


def test_lisr_answers_by_topic_id_become_errors_by_name() -> None:
    answer = LeaderAndIsrResponse(
        error_code=ErrorCode.none,
        topics=(
            LeaderAndIsrTopicError(
                topic_id=TOPIC_ID,
                partition_errors=(
                    LeaderAndIsrPartitionError(partition_index=i32(0), error_code=ErrorCode.none),
                    LeaderAndIsrPartitionError(partition_index=i32(1), error_code=ErrorCode.stale_controller_epoch),
                ),
            ),
        ),
    )
    assert to_events(2, _lisr(), answer) == [LisrEvent(2, (PartitionError("t", 0, 0), PartitionError("t", 1, 11)), 0)]


def test_a_top_level_error_is_every_partitions_error() -> None:
    answer = ResponseV4(error_code=ErrorCode.stale_broker_epoch, partition_errors=())
    assert to_events(2, _lisr(), answer) == [LisrEvent(2, (PartitionError("t", 0, 77), PartitionError("t", 1, 77)), 77)]
    named = ResponseV4(
        error_code=ErrorCode.none,
        partition_errors=(
            ErrorV4(topic_name=TopicName("t"), partition_index=i32(1), error_code=ErrorCode.kafka_storage_error),
        ),
    )
    event = to_events(2, _lisr(), named)[0]
    assert isinstance(event, LisrEvent)
    assert event.partitions[1] == PartitionError("t", 1, 56)


def test_stop_replica_answers_only_for_deleted_partitions() -> None:
    stop = StopReplicaRequest(
        1000, 3, 77, (StopReplicaPartition("t", 0, -2, True), StopReplicaPartition("t", 1, 5, False))
    )
    answer = StopReplicaResponse(
        error_code=ErrorCode.none,
        partition_errors=(
            StopReplicaPartitionError(topic_name=TopicName("t"), partition_index=i32(0), error_code=ErrorCode.none),
            StopReplicaPartitionError(topic_name=TopicName("t"), partition_index=i32(1), error_code=ErrorCode.none),
        ),
    )
    assert to_events(2, stop, answer) == [StopEvent(2, (PartitionError("t", 0, 0),), 0)]
    keep = StopReplicaRequest(1000, 3, 77, (StopReplicaPartition("t", 1, 5, False),))
    assert to_events(2, keep, answer) == []


def test_the_command_refuses_bad_options_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="livectl")
    register(parser.add_subparsers())
    args = parser.parse_args(["channel", "--retry-s", "0"])
    assert args.func(args) == 2
    assert capsys.readouterr().err == "livectl channel: --retry-s: must be > 0\n"
    with pytest.raises(SystemExit) as e:
        parser.parse_args(["channel", "--inter-broker-protocol", "three"])
    assert e.value.code == 2
    assert "expected a Kafka version such as 3.9 or 2.8-IV1, got 'three'" in capsys.readouterr().err
