"""The controller's endpoint as a node for Kafka's clients, without a broker: its ApiVersions table (its own
APIs and the forward target's), which requests get no answer (Produce with acks 0), ListPartitionReassignments
answered from topic znodes as Kafka 3.9's ZooKeeper controller answers it, the empty answers of a node hosting
no group, transaction or log directory, and UpdateMetadata advertising the endpoint on plaintext listeners only.
(Forwarding to a real broker: tests/integration/channel/test_channel_forward_to_a_broker.py.)"""

from __future__ import annotations

import datetime
import io
import struct
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from channel.answers import (
    ALTER_PARTITION,
    API_VERSIONS,
    CONTROLLED_SHUTDOWN,
    DESCRIBE_LOG_DIRS,
    KAFKA_STORAGE_ERROR,
    LIST_GROUPS,
    LIST_PARTITION_REASSIGNMENTS,
    LIST_TRANSACTIONS,
    NO_LOG_DIR,
    NOT_FORWARDED,
    SERVED,
    api_versions_response,
    list_partition_reassignments_response,
    node_versions,
    nothing_hosted_response,
    request_type,
    wanted_partitions,
)
from channel.convert import advertise_controller, unadvertised
from channel.forward import answered, produce_acks
from core.kafka.requests import MetadataBroker, MetadataEndpoint, UpdateMetadataRequest
from core.snapshot import TopicZnode

pytestmark = pytest.mark.unit

METADATA, DESCRIBE_CLUSTER, CREATE_TOPICS, LEADER_AND_ISR = 3, 60, 19, 4
#: DescribeLogDirs v0-2 have no top-level error code
_NO_ERROR = ErrorCode(0)


def _round_trip(entity: Any) -> Any:
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    value, _ = entity_reader(type(entity))(buf.getvalue(), 0)
    return value


def _frame(request: Any, correlation_id: int = 5, client_id: str | None = "client") -> bytes:
    """``request`` as a client frames it (header and body, without the size)."""
    header_type = request.__header_schema__
    header = header_type(
        request_api_key=request.__api_key__,
        request_api_version=request.__version__,
        correlation_id=i32(correlation_id),
        client_id=client_id,
    )
    buf = io.BytesIO()
    entity_writer(header_type)(buf, header)
    entity_writer(type(request))(buf, request)
    return buf.getvalue()


def _produce(version: int, acks: int, transactional_id: str | None = None) -> Any:
    m = __import__(f"kio.schema.produce.v{version}.request", fromlist=["x"])
    fields: dict[str, Any] = {"acks": i16(acks), "timeout": datetime.timedelta(seconds=30), "topic_data": ()}
    if version >= 3:
        fields["transactional_id"] = transactional_id
    return m.ProduceRequest(**fields)


@pytest.mark.parametrize("version", range(12))
@pytest.mark.parametrize("acks", [0, 1, -1])
def test_a_produce_request_s_acks_are_read_past_header_and_transactional_id(version: int, acks: int) -> None:
    for tid in (None, "tx-é") if version >= 3 else (None,):
        for client_id in ("producer-1", None):
            frame = _frame(_produce(version, acks, tid), client_id=client_id)
            assert produce_acks(frame) == acks, (version, tid, client_id)
            assert answered(0, frame) == (acks != 0)


def test_a_flexible_produce_header_s_tagged_fields_are_skipped() -> None:
    frame = _frame(_produce(9, 0, "t"), client_id="c")
    # the header's tagged fields follow the client id (2 + 1 bytes): one field, tag 3, of 4 bytes
    cut = 8 + 2 + 1
    assert frame[cut] == 0
    tagged = frame[:cut] + bytes([1, 3, 4]) + b"abcd" + frame[cut + 1 :]
    assert produce_acks(tagged) == 0
    assert answered(0, tagged) is False


def test_only_produce_can_go_unanswered_and_a_short_produce_is_refused() -> None:
    assert answered(METADATA, struct.pack(">hhi", METADATA, 12, 1))
    with pytest.raises(ValueError, match="too short"):
        produce_acks(struct.pack(">hhih", 0, 2, 1, -1) + b"\x00")
    with pytest.raises(ValueError, match="past the end"):
        produce_acks(struct.pack(">hhih", 0, 9, 1, -1) + b"\x80")
    with pytest.raises(ValueError, match="not Produce"):
        produce_acks(struct.pack(">hhih", METADATA, 9, 1, -1) + b"\x00\x00\x00\x01")


def test_api_versions_lists_the_served_apis_at_the_broker_s_versions_and_what_is_forwarded() -> None:
    # a 3.9 broker's answer, in part: Metadata 0-12, ListGroups 0-5, ControlledShutdown 0-3, AlterPartition
    # 0-3, LeaderAndIsr 0-7, CreateTopics 2-7, ApiVersions 0-3 (an older one), DescribeCluster 0-1
    theirs = {
        METADATA: (0, 12),
        LIST_GROUPS: (0, 5),
        CONTROLLED_SHUTDOWN: (0, 3),
        ALTER_PARTITION: (0, 3),
        LEADER_AND_ISR: (0, 7),
        CREATE_TOPICS: (2, 7),
        API_VERSIONS: (0, 3),
        DESCRIBE_CLUSTER: (0, 1),
        LIST_TRANSACTIONS: (0, 0),
    }
    table = node_versions(theirs)
    assert table[METADATA] == (0, 12) and table[DESCRIBE_CLUSTER] == (0, 1)  # forwarded at the broker's versions
    assert table[API_VERSIONS] == (0, 3)  # ours and the broker's
    assert table[LIST_TRANSACTIONS] == (0, 0)
    assert table[LIST_PARTITION_REASSIGNMENTS] == (0, 0)  # ours, which the broker does not list
    assert table[DESCRIBE_LOG_DIRS] == (0, 4)
    # the controller's requests to brokers are not listed; the active controller's own are answered here
    # (channel.admin_apis), narrowed to the broker's versions
    assert LEADER_AND_ISR not in table
    assert table[CREATE_TOPICS] == (2, 7)
    assert list(table) == sorted(table)
    # no broker to forward to: what the endpoint answers itself, at its own versions
    assert node_versions({}) == {k: (r.start, r.stop - 1) for k, r in SERVED.items()}
    answer = api_versions_response(3, table)
    assert {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in answer.api_keys} == table
    assert not set(SERVED) - {API_VERSIONS} & (NOT_FORWARDED - set(SERVED))


@pytest.mark.parametrize("api_key", [LIST_GROUPS, LIST_TRANSACTIONS])
def test_a_node_hosting_nothing_lists_no_group_and_no_transaction_at_each_version(api_key: int) -> None:
    for version in SERVED[api_key]:
        assert request_type(api_key, version).__name__.endswith("Request")
        answer = _round_trip(nothing_hosted_response(api_key, version))
        assert int(answer.error_code.value) == 0
        lists = [getattr(answer, f) for f in ("groups", "transaction_states") if hasattr(answer, f)]
        assert lists == [()], (api_key, version, answer)


def test_a_node_hosting_no_replica_lists_one_offline_empty_log_dir_at_each_version() -> None:
    # no directory at all would read as CLUSTER_AUTHORIZATION_FAILED to Kafka's Admin client
    for version in SERVED[DESCRIBE_LOG_DIRS]:
        answer = _round_trip(nothing_hosted_response(DESCRIBE_LOG_DIRS, version))
        (result,) = answer.results
        assert (int(result.error_code.value), result.log_dir, result.topics) == (KAFKA_STORAGE_ERROR, NO_LOG_DIR, ())
        assert int(getattr(answer, "error_code", _NO_ERROR).value) == 0


def _znodes() -> list[TopicZnode]:
    return [
        # "b" moves partition 0 from [1, 2] to [2, 3]: the full set [2, 3, 1], adding 3, removing 1
        TopicZnode("b", ((0, (2, 3, 1)), (1, (1, 2))), ((0, (3,)),), ((0, (1,)),)),
        # "a" adds a replica to partition 2 only; an adding entry for a partition it lacks is not Kafka's
        TopicZnode("a", ((0, (1,)), (2, (1, 2))), ((2, (2,)), (7, (3,))), ()),
        TopicZnode("still", ((0, (1, 2)),)),
    ]


def _listed(answer: Any) -> dict[str, list[tuple[int, tuple[int, ...], tuple[int, ...], tuple[int, ...]]]]:
    answer = _round_trip(answer)
    assert int(answer.error_code.value) == 0 and answer.error_message is None
    return {
        str(t.name): [
            (int(p.partition_index), tuple(p.replicas), tuple(p.adding_replicas), tuple(p.removing_replicas))
            for p in t.partitions
        ]
        for t in answer.topics
    }


def test_list_partition_reassignments_answers_every_partition_being_reassigned() -> None:
    everything = _listed(list_partition_reassignments_response(_znodes(), None))
    assert everything == {"a": [(2, (1, 2), (2,), ())], "b": [(0, (2, 3, 1), (3,), (1,))]}
    assert list(everything) == ["a", "b"]


def test_list_partition_reassignments_answers_only_the_partitions_asked_for() -> None:
    asked = {"b": (0, 1, 9), "a": (0,), "gone": (0,), "still": (0,)}
    # a partition not being reassigned, or that does not exist, is left out; so is a topic left with none
    assert _listed(list_partition_reassignments_response(_znodes(), asked)) == {"b": [(0, (2, 3, 1), (3,), (1,))]}
    assert _listed(list_partition_reassignments_response(_znodes(), {})) == {}


def test_list_partition_reassignments_reads_the_request_and_says_when_zookeeper_failed() -> None:
    m = __import__("kio.schema.list_partition_reassignments.v0.request", fromlist=["x"])
    assert request_type(LIST_PARTITION_REASSIGNMENTS, 0) is m.ListPartitionReassignmentsRequest
    every = _round_trip(m.ListPartitionReassignmentsRequest(topics=None))
    assert wanted_partitions(every) is None
    some = m.ListPartitionReassignmentsRequest(
        topics=(
            m.ListPartitionReassignmentsTopics(name="b", partition_indexes=(i32(0), i32(1))),
            m.ListPartitionReassignmentsTopics(name="b", partition_indexes=(i32(4),)),
        )
    )
    assert wanted_partitions(_round_trip(some)) == {"b": (0, 1, 4)}
    failed = _round_trip(list_partition_reassignments_response(_znodes(), None, "cannot read ZooKeeper: lost"))
    assert (int(failed.error_code.value), failed.error_message, failed.topics) == (
        -1,
        "cannot read ZooKeeper: lost",
        (),
    )


def test_update_metadata_advertises_the_endpoint_on_plaintext_listeners_only() -> None:
    mine = tuple(MetadataEndpoint(9000 + i, "ctl", n, 0) for i, n in enumerate(("INTERNAL", "PLAINTEXT", "SECURE")))
    # the brokers' client listener SECURE is SASL_SSL (3): a plaintext endpoint there would fail every client
    b1 = MetadataBroker(
        1,
        (
            MetadataEndpoint(9092, "b1", "PLAINTEXT", 0),
            MetadataEndpoint(9093, "b1", "INTERNAL", 0),
            MetadataEndpoint(9094, "b1", "SECURE", 3),
        ),
    )
    um = UpdateMetadataRequest(1001, 3, -1, (), (b1,))
    assert unadvertised(um, mine) == {"SECURE": 3}
    assert advertise_controller(um, mine).live_brokers == (b1, MetadataBroker(1001, mine[:2]))
    # a name no broker has is advertised (the brokers ignore it until one has it)
    other = (MetadataEndpoint(9005, "ctl", "OTHER", 0),)
    assert advertise_controller(um, other).live_brokers[-1] == MetadataBroker(1001, other)
    # nothing left to advertise: unchanged
    assert advertise_controller(um, mine[2:]) is um
