"""Routing to buckets and the great-expectations input suite (no services, no Spark)."""

from __future__ import annotations

import json
import zlib

import pandas as pd
import pytest

from core import events as ev
from core.codec.events import event_from_json, event_to_json
from core.model import ElectionType, Endpoint, PartitionTarget
from streaming.query import routing
from streaming.query.validation import InputValidator, Rejection

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def validator() -> InputValidator:
    return InputValidator()


def test_bucket_is_stable_and_in_range() -> None:
    assert routing.bucket_of("orders", 8) == routing.bucket_of("orders", 8)
    assert {routing.bucket_of(f"t{i}", 8) for i in range(200)} == set(range(8))
    # CRC-32, not Python's salted hash(): the same in every process
    assert routing.bucket_of("orders", 8) == zlib.crc32(b"orders") % 8


def test_topic_scoped_event_goes_to_its_topic_bucket_only() -> None:
    e = ev.CreateTopic("r1", "orders", 3, 2)
    assert routing.route(e, 8) == [(routing.bucket_of("orders", 8), e)]


def test_cluster_scoped_event_is_copied_to_every_bucket() -> None:
    e = ev.BrokerFailure(3, 17)
    assert routing.route(e, 4) == [(b, e) for b in range(4)]
    everything = ev.ElectLeaders("r2", ElectionType.PREFERRED)
    assert [b for b, _ in routing.route(everything, 4)] == [0, 1, 2, 3]


def test_multi_topic_reassignment_is_split_per_topic_keeping_request_id() -> None:
    e = ev.ReassignPartitions(
        "r3",
        (
            PartitionTarget("a", 0, (1, 2)),
            PartitionTarget("b", 0, (2, 3)),
            PartitionTarget("a", 1, (3, 1)),
        ),
    )
    parts = dict(routing.split_by_topic(e))
    assert set(parts) == {"a", "b"}
    a = parts["a"]
    assert isinstance(a, ev.ReassignPartitions) and a.request_id == "r3"
    assert [p.partition for p in a.partitions] == [0, 1]
    routed = routing.route(e, 16)
    assert sorted(b for b, _ in routed) == sorted({routing.bucket_of("a", 16), routing.bucket_of("b", 16)})


def test_suite_rejects_with_expectation_names_and_keeps_good_rows(validator: InputValidator) -> None:
    good = event_to_json(ev.CreateTopic("ok", "orders", 3, 1))
    values = [
        good,
        "{not json",
        json.dumps(
            {
                "version": 1,
                "type": "create_topic",
                "request_id": "x",
                "topic": "t",
                "partitions": 0,
                "replication_factor": 0,
            }
        ),
        json.dumps(
            {
                "version": 1,
                "type": "reassign_partitions",
                "request_id": "y",
                "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 1]}],
            }
        ),
        json.dumps({"version": 1, "type": "broker_startup", "broker_id": -4, "broker_epoch": 1}),
        json.dumps({"version": 1, "type": "no_such_thing"}),
        json.dumps({"version": 2, "type": "delete_topic", "request_id": "z", "topic": "t"}),
        json.dumps({"version": 1, "type": "create_topic", "topic": "t", "partitions": 1, "replication_factor": 1}),
        json.dumps({"version": 1, "type": "broker_failure", "broker_id": 1}),
        json.dumps(
            {
                "version": 1,
                "type": "create_topic",
                "request_id": "w",
                "topic": "bad name!",
                "partitions": 1,
                "replication_factor": 1,
            }
        ),
    ]
    sources = ["admin"] * 4 + ["broker-events"] + ["admin"] * 3 + ["admin", "admin"]
    out = validator.check(values, sources)
    assert out[0] == ev.CreateTopic("ok", "orders", 3, 1)

    def names(i: int) -> tuple[str, ...]:
        r = out[i]
        assert isinstance(r, Rejection), r
        return r.expectations

    assert names(1)[0] == "payload_is_json_object"
    assert set(names(2)) == {"partitions_positive", "replication_factor_positive"}
    assert names(3) == ("no_duplicate_replicas",)
    assert names(4) == ("broker_id_non_negative",)
    assert names(5) == ("type_known",)
    assert names(6) == ("version_supported",)
    assert names(7) == ("request_id_present",)
    assert names(8) == ("type_matches_topic",)
    assert names(9) == ("topic_name_legal",)


def test_decoder_names_the_field_the_suite_cannot_see(validator: InputValidator) -> None:
    bad = json.dumps(
        {
            "version": 1,
            "type": "create_topic",
            "request_id": "a",
            "topic": "t",
            "partitions": "3",
            "replication_factor": 1,
        }
    )
    (r,) = validator.check([bad], ["admin"])
    assert isinstance(r, Rejection)
    assert r.expectations == ("decode:partitions",)
    assert "must be an integer" in r.reasons[0]


def test_prepare_frame_routes_rejects_and_ticks(validator: InputValidator) -> None:
    frame = pd.DataFrame(
        {
            "topic": ["livectl.admin", "livectl.admin", "livectl.broker-events"],
            "partition": [0, 0, 0],
            "offset": [5, 6, 9],
            "timestamp": [pd.Timestamp(1_700_000_000_000, unit="ms")] * 3,
            "value": [
                event_to_json(ev.CreateTopic("c", "orders", 1, 1)),
                "garbage",
                event_to_json(ev.BrokerStartup(1, 100)),
            ],
        }
    )
    out = routing.prepare_frame(frame, 4, "livectl.admin", validator)
    kinds = list(zip(out["bucket"], out["kind"], strict=True))
    assert (routing.bucket_of("orders", 4), "event") in kinds
    assert (routing.REJECTED_BUCKET, "rejected") in kinds
    assert sorted(b for b, k in kinds if k == "event" and b != routing.bucket_of("orders", 4)) == sorted(
        set(range(4)) - {routing.bucket_of("orders", 4)}
    )
    rejected = json.loads(out[out["kind"] == "rejected"]["payload"].tolist()[0])
    assert rejected["source_offset"] == 6 and rejected["payload"] == "garbage"
    assert rejected["expectations"][0] == "payload_is_json_object"
    ticks = routing.tick_rows(1_700_000_000_000, 4)
    assert list(ticks["bucket"]) == [0, 1, 2, 3]


def test_a_broker_modification_is_a_broker_event_for_every_bucket(validator: InputValidator) -> None:
    """A registration rewritten in place changes the broker list every bucket holds."""
    e = ev.BrokerModification(1, 100, "r1", (Endpoint("PLAINTEXT", "h1", 19092),))
    assert routing.route(e, 4) == [(b, e) for b in range(4)]
    text = event_to_json(e)
    ok, wrong_topic = validator.check([text, text], ["broker-events", "admin"])
    assert ok == e
    assert isinstance(wrong_topic, Rejection) and wrong_topic.expectations == ("type_matches_topic",)


def test_a_cluster_scoped_event_is_encoded_once_for_every_bucket() -> None:
    failure = ev.BrokerFailure(3, 100)
    routed = routing.encode_routed(routing.route(failure, 4))
    assert [b for b, _ in routed] == [0, 1, 2, 3]
    first = routed[0][1]
    # one text, shared by every bucket's row, that decodes to the event
    assert all(text is first for _, text in routed)
    assert event_from_json(first) == failure
    # an event split by topic: one text per topic, each decoding to that topic's part
    reassign = ev.ReassignPartitions("r", (PartitionTarget("a", 0, (1, 2)), PartitionTarget("b", 0, (2, 3))))
    parts = routing.encode_routed(routing.route(reassign, 4))
    assert len(parts) == 2 and parts[0][1] != parts[1][1]
    decoded = [event_from_json(text) for _, text in parts]
    assert [e.topics() for e in decoded] == [("a",), ("b",)]
    assert {b for b, _ in parts} == {routing.bucket_of("a", 4), routing.bucket_of("b", 4)}


def test_an_alter_partition_request_goes_to_each_bucket_with_its_topics_partitions_in_order() -> None:
    # topics that share a bucket and topics that do not, interleaved as a leader's proposals are
    topics = [f"t{i}" for i in range(12)]
    items = tuple(
        ev.IsrProposal(t, p, 0, 0, (1,), correlation_id=10 * i + p) for p in range(2) for i, t in enumerate(topics)
    )
    req = ev.AlterPartitionRequest(1, 7, items)
    routed = routing.route(req, 4)
    buckets = [b for b, _ in routed]
    assert sorted(buckets) == sorted({routing.bucket_of(t, 4) for t in topics}) and len(buckets) == len(set(buckets))
    for b, part in routed:
        assert isinstance(part, ev.AlterPartitionRequest) and (part.broker_id, part.broker_epoch) == (1, 7)
        assert part.partitions == tuple(p for p in items if routing.bucket_of(p.topic, 4) == b)
    # one bucket: the request as it is
    assert routing.route(req, 1) == [(0, req)]


def test_an_alter_partition_request_record_passes_the_suite_and_is_routed(validator: InputValidator) -> None:
    req = ev.AlterPartitionRequest(
        1, 7, (ev.IsrProposal("a", 0, 0, 0, (1, 2), correlation_id=1), ev.IsrProposal("b", 3, 0, 0, (1,)))
    )
    frame = pd.DataFrame(
        {
            "topic": ["livectl.broker-events"],
            "partition": [0],
            "offset": [5],
            "timestamp": [pd.Timestamp(0, unit="ms")],
            "value": [event_to_json(req)],
        }
    )
    out = routing.prepare_frame(frame, 4, "livectl.admin", validator)
    events = out[out["kind"] == routing.KIND_EVENT]
    assert sorted(events["bucket"]) == sorted({routing.bucket_of("a", 4), routing.bucket_of("b", 4)})
    got = [event_from_json(t) for t in events["payload"]]
    assert sorted((p.topic, p.partition) for e in got for p in e.partitions) == [("a", 0), ("b", 3)]  # type: ignore[attr-defined]
