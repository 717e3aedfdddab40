"""Metadata as the controller's node answers it where it forwards nothing (:mod:`channel.metadata`), from a view of
ZooKeeper built by hand: every version kio has round-trips, and the answer is Kafka 3.9's (leaders, offline
replicas, unknown and refused topics, authorized operations). (Against a real broker: tests/integration/channel.)"""

from __future__ import annotations

import base64
import importlib
import io
import uuid
from typing import Any

import pytest
from kio.serial import entity_reader, entity_writer

from channel.acls import Operation, Resource, allow_all
from channel.answers import METADATA_VERSIONS, SERVED
from channel.metadata import NOT_ASKED, MetadataView, OwnNode, TopicView, metadata_response, topics_to_read
from core.kafka.requests import ZERO_UUID
from core.model import Broker, Endpoint
from core.snapshot import PartitionStateZnode

pytestmark = pytest.mark.unit

TID = base64.urlsafe_b64encode(uuid.UUID(int=7).bytes).decode().rstrip("=")
OTHER = base64.urlsafe_b64encode(uuid.UUID(int=8).bytes).decode().rstrip("=")
VIEW = MetadataView(
    brokers=(
        Broker(1, 10, "r1", (Endpoint("SASL", "h1", 9001, "SASL_PLAINTEXT"), Endpoint("PLAIN", "h1", 9000))),
        Broker(3, 11, None, (Endpoint("PLAIN", "h3", 9000),)),
    ),
    cluster_id="cid",
    controller_id=1000,
    topics={
        "t": TopicView(
            "t",
            TID,
            (
                (0, (1, 2), PartitionStateZnode(1, 4, (1, 2), 1, 0)),
                (1, (2, 1), PartitionStateZnode(2, 5, (2,), 1, 0)),
                (2, (3, 1), PartitionStateZnode(3, 6, (3, 1), 1, 0)),
            ),
        ),
        "hidden": TopicView("hidden", OTHER, ((0, (1,), PartitionStateZnode(1, 0, (1,), 1, 0)),)),
    },
)
OWN = OwnNode(1000, "ctl", 7000)


def request(version: int, names: list[str] | None, **extra: Any) -> Any:
    m = importlib.import_module(f"kio.schema.metadata.v{version}.request")
    fields = set(m.MetadataRequest.__dataclass_fields__)
    topics = None
    if names is not None:
        topic_fields = set(m.MetadataRequestTopic.__dataclass_fields__)
        topics = tuple(
            m.MetadataRequestTopic(**{k: v for k, v in {"name": n, "topic_id": None}.items() if k in topic_fields})
            for n in names
        )
    values = {"topics": topics, "include_topic_authorized_operations": False, **extra}
    if "include_cluster_authorized_operations" in fields:
        values.setdefault("include_cluster_authorized_operations", False)
    return m.MetadataRequest(**{k: v for k, v in values.items() if k in fields})


def round_trip(response: Any) -> Any:
    buf = io.BytesIO()
    entity_writer(type(response))(buf, response)
    back, _ = entity_reader(type(response))(buf.getvalue(), 0)
    return back


def answer(version: int, names: list[str] | None, allowed: Any = allow_all, **extra: Any) -> Any:
    body = request(version, names, **extra)
    return round_trip(metadata_response(version, body, VIEW, listener="SASL", own=OWN, allowed=allowed))


def test_every_version_is_served_and_encodes() -> None:
    assert SERVED[3] == METADATA_VERSIONS == range(13)
    for version in METADATA_VERSIONS:
        r = answer(version, [] if version == 0 else None)
        assert [(int(b.node_id), b.host, int(b.port)) for b in r.brokers] == [(1, "h1", 9001), (1000, "ctl", 7000)]
        assert sorted(str(t.name) for t in r.topics) == ["hidden", "t"]
        t = next(t for t in r.topics if t.name == "t")
        p0, p1, p2 = t.partitions
        shown = (1, 2) if version else (1,)  # v0: only the replicas with an endpoint of the listener
        assert (int(p0.leader_id), tuple(p0.replica_nodes), tuple(p0.isr_nodes)) == (1, shown, shown)
        assert int(p0.error_code) == (0 if version else 9)
        # leader 2 not registered; leader 3 registered without a SASL endpoint
        assert (int(p1.error_code), int(p1.leader_id)) == (5, -1)
        assert (int(p2.error_code), int(p2.leader_id)) == (72 if version >= 6 else 5, -1)
        if version >= 5:
            assert tuple(p0.offline_replicas) == (2,)
        if version >= 7:
            assert [int(p.leader_epoch) for p in t.partitions] == [4, 5, 6]
        if version >= 10:
            assert t.topic_id == uuid.UUID(int=7)
        if version >= 2:
            assert r.cluster_id == "cid"
        if version >= 1:
            assert int(r.controller_id) == 1000


def test_version_0_leaves_out_replicas_without_the_listener() -> None:
    p0 = next(t for t in answer(0, ["t"]).topics if t.name == "t").partitions[0]
    assert (int(p0.error_code), tuple(p0.replica_nodes), tuple(p0.isr_nodes)) == (9, (1,), (1,))


def test_named_unknown_and_invalid_topics_are_not_created() -> None:
    r = answer(12, ["t", "nosuch", "bad/name"], allow_auto_topic_creation=True)
    assert {str(t.name): int(t.error_code) for t in r.topics} == {"t": 0, "nosuch": 3, "bad/name": 17}
    assert next(t for t in r.topics if t.name == "nosuch").topic_id is None
    assert topics_to_read(12, request(12, ["t", "nosuch"])) == ["t", "nosuch"]
    assert topics_to_read(12, request(12, None)) is None
    assert answer(12, []).topics == ()


def test_topics_asked_by_id() -> None:
    m = importlib.import_module("kio.schema.metadata.v12.request")
    body = m.MetadataRequest(
        topics=(
            m.MetadataRequestTopic(topic_id=uuid.UUID(int=7), name=None),
            m.MetadataRequestTopic(topic_id=uuid.UUID(int=9), name=None),
        ),
        include_topic_authorized_operations=False,
    )
    assert topics_to_read(12, body) is None
    r = round_trip(metadata_response(12, body, VIEW, listener="SASL", own=OWN, allowed=allow_all))
    assert {(t.name, t.topic_id, int(t.error_code)) for t in r.topics} == {
        ("t", uuid.UUID(int=7), 0),
        (None, uuid.UUID(int=9), 100),
    }


def test_a_topic_not_described_is_left_out_or_refused() -> None:
    def allowed(op: Operation, resource: Resource, name: str) -> bool:
        return resource is Resource.TOPIC and name != "hidden" and op in (Operation.READ, Operation.DESCRIBE)

    assert [t.name for t in answer(12, None, allowed).topics] == ["t"]
    r = answer(10, ["t", "hidden"], allowed, include_topic_authorized_operations=True)
    by_name = {t.name: t for t in r.topics}
    assert int(by_name["hidden"].error_code) == 29 and by_name["hidden"].topic_id is None
    assert int(by_name["hidden"].topic_authorized_operations) == NOT_ASKED
    assert int(by_name["t"].topic_authorized_operations) == (1 << 3) | (1 << 8)
    # the cluster's operations (v8-10): none when DESCRIBE on the Cluster is refused; all without an authorizer
    assert int(answer(10, None, allowed, include_cluster_authorized_operations=True).cluster_authorized_operations) == 0
    every = answer(9, None, include_cluster_authorized_operations=True).cluster_authorized_operations
    assert int(every) == sum(1 << c for c in (5, 7, 8, 9, 10, 11, 12))
    assert int(answer(9, None).cluster_authorized_operations) == NOT_ASKED
    assert ZERO_UUID  # the zero id's text is what a refused topic's id stands for
