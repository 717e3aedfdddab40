"""The controller's endpoint without a broker: the brokers' requests as livectl's events, livectl's answers as
Kafka's responses at the request's version, the controller advertised in UpdateMetadata, and the producer-id
blocks in Kafka's znode format. (That a real broker takes them: tests/integration/channel.)"""

from __future__ import annotations

import base64
import io
import uuid
from typing import Any

import pytest
from kio.serial import entity_reader, entity_writer

from channel.answers import (
    ALTER_PARTITION,
    SERVED,
    UNKNOWN_TOPIC_ID,
    UNSUPPORTED_VERSION,
    alter_partition_events,
    alter_partition_response,
    api_versions_response,
    controlled_shutdown_response,
    request_type,
)
from channel.convert import advertise_controller
from channel.producer_ids import BLOCK_SIZE, ProducerIdBlock, ProducerIdsExhaustedError
from core.events import AlterPartition
from core.kafka.requests import (
    AlterPartitionResult,
    MetadataBroker,
    MetadataEndpoint,
    UpdateMetadataRequest,
)
from core.model import TopicPartition

pytestmark = pytest.mark.unit

TID = base64.urlsafe_b64encode(uuid.UUID(int=7).bytes).decode().rstrip("=")


def _round_trip(entity: Any) -> Any:
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    value, _ = entity_reader(type(entity))(buf.getvalue(), 0)
    return value


def _alter_request(version: int) -> Any:
    m = __import__(f"kio.schema.alter_partition.v{version}.request", fromlist=["x"])
    isr: dict[str, Any] = (
        {"new_isr_with_epochs": tuple(m.BrokerState(broker_id=b, broker_epoch=5) for b in (1, 3))}
        if version >= 3
        else {"new_isr": (1, 3)}
    )
    extra: dict[str, Any] = {"leader_recovery_state": 0} if version >= 1 else {}
    parts = tuple(m.PartitionData(partition_index=p, leader_epoch=4, partition_epoch=9, **isr, **extra) for p in (0, 2))
    topic: dict[str, Any] = {"topic_id": uuid.UUID(int=7)} if version >= 2 else {"topic_name": "t"}
    unknown: dict[str, Any] = {"topic_id": uuid.UUID(int=8)} if version >= 2 else {"topic_name": "u"}
    return m.AlterPartitionRequest(
        broker_id=1,
        broker_epoch=42,
        topics=(m.TopicData(**topic, partitions=parts), m.TopicData(**unknown, partitions=parts[:1])),
    )


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_an_alter_partition_request_is_one_event_per_partition_and_one_answer(version: int) -> None:
    assert request_type(ALTER_PARTITION, version).__name__ == "AlterPartitionRequest"
    request = _round_trip(_alter_request(version))
    events, asked = alter_partition_events(1, version, request, {TID: "t"}.get, 77)
    by_id = TID if version >= 2 else None
    expected = [AlterPartition(1, 42, "t", p, 4, 9, (1, 3), 0, 77, by_id) for p in (0, 2)]
    if version < 2:  # by name: the channel cannot tell an unknown name, the controller answers it
        expected.append(AlterPartition(1, 42, "u", 0, 4, 9, (1, 3), 0, 77, None))
    assert events == expected
    answers = {
        TopicPartition(e.topic, e.partition): AlterPartitionResult(e.topic, e.partition, 0, 1, 4, (1, 3), 10, 0, 77)
        for e in events
    }
    response = _round_trip(alter_partition_response(asked, 0, answers))
    assert int(response.error_code.value) == 0
    first = response.topics[0]
    assert (first.topic_id == uuid.UUID(int=7)) if version >= 2 else (first.topic_name == "t")
    entries = [
        (int(p.partition_index), int(p.error_code.value), tuple(p.isr), int(p.partition_epoch))
        for p in first.partitions
    ]
    assert entries == [(0, 0, (1, 3), 10), (2, 0, (1, 3), 10)]
    (second,) = response.topics[1].partitions
    # a topic id no topic has is answered by the channel itself, as Kafka's controller answers it
    assert int(second.error_code.value) == (UNKNOWN_TOPIC_ID if version >= 2 else 0)
    # a top-level error answers the whole request and nothing else
    refused = _round_trip(alter_partition_response(asked, 77, {}))
    assert (int(refused.error_code.value), refused.topics) == (77, ())


def test_controlled_shutdown_answers_at_each_version() -> None:
    for version in SERVED[7]:
        answer = _round_trip(controlled_shutdown_response(version, 0, [TopicPartition("t", 3)]))
        assert [(p.topic_name, int(p.partition_index)) for p in answer.remaining_partitions] == [("t", 3)]


def test_api_versions_lists_what_is_served_and_answers_a_newer_version_at_v0() -> None:
    answer = api_versions_response(4)
    assert {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in answer.api_keys} == {
        k: (r.start, r.stop - 1) for k, r in SERVED.items()
    }
    newer = api_versions_response(9)
    assert type(newer).__module__.endswith("v0.response")
    assert int(newer.error_code.value) == UNSUPPORTED_VERSION


def test_update_metadata_lists_the_controller_at_the_channel_only() -> None:
    endpoints = (MetadataEndpoint(9000, "ctl", "CONTROL_PLANE", 0), MetadataEndpoint(9000, "ctl", "INTERNAL", 0))
    broker = MetadataBroker(1, (MetadataEndpoint(9092, "b1", "PLAINTEXT", 0),))
    um = UpdateMetadataRequest(1001, 3, -1, (), (broker,))
    assert advertise_controller(um, endpoints).live_brokers == (broker, MetadataBroker(1001, endpoints))
    assert advertise_controller(um, ()) is um
    # a live broker with the controller's id: the brokers talk to it, nothing is added
    same = UpdateMetadataRequest(1, 3, -1, (), (broker,))
    assert advertise_controller(same, endpoints) is same


def test_producer_id_blocks_follow_kafka_s_znode() -> None:
    block = ProducerIdBlock(2, 0, BLOCK_SIZE)
    assert block.encode() == b'{"version": 1, "broker": 2, "block_start": "0", "block_end": "999"}'
    assert ProducerIdBlock.decode(block.encode()) == block
    assert ProducerIdBlock.decode(b'{"version":1,"broker":3,"block_start":"1000","block_end":"1999"}').next_for(
        1
    ) == ProducerIdBlock(1, 2000, BLOCK_SIZE)
    with pytest.raises(ValueError, match="block_start"):
        ProducerIdBlock.decode(b'{"broker":3,"block_start":"x","block_end":"1"}')
    with pytest.raises(ProducerIdsExhaustedError):
        ProducerIdBlock(1, 2**63 - 1000, BLOCK_SIZE).next_for(1)
