"""A command naming several topics that share a bucket is answered for every partition it names.

Routing sends each bucket one event per record: the partitions of all the command's topics that live in
that bucket. Split per topic instead, a bucket got two events with one request id and answered each; the
driver keeps a bucket's last answer to a request (its successive answers, ``in_progress`` then ``ok``), so
the first topic's partitions were missing from the answer, and a dry run showed only the last topic's
decisions (found by draining a broker that led ``orders-4`` and ``payments-2``: both in bucket 2 of 4)."""

from __future__ import annotations

import pytest
from core_support import Cluster

from core import events as ev
from core.decisions import AdminResult, AdminStatus, ZkWrite
from core.model import ElectionType, PartitionTarget, TopicPartition
from streaming.query import routing
from streaming.query.batch_rows import merge_admin_results

pytestmark = pytest.mark.unit

BUCKETS = 4


def _step(c: Cluster, bucket: int, routed: list[tuple[int, ev.Event]]) -> AdminResult:
    """Run ``bucket``'s routed events in one step, as a micro-batch does; the driver's merged answer."""
    mine = [e for b, e in routed if b == bucket]
    c.run(*mine)
    results = [d for d in c.decisions if isinstance(d, AdminResult)]
    (answer,) = merge_admin_results(results, [bucket] * len(results))
    return answer


def test_topics_of_one_bucket_get_one_event_and_one_answer_naming_every_partition() -> None:
    assert routing.bucket_of("orders", BUCKETS) == routing.bucket_of("payments", BUCKETS) == 2
    c = Cluster.start([1, 2, 3, 4])
    c.create_topic("orders", ((1, 2),))
    c.create_topic("payments", ((2, 3),))
    command = ev.ReassignPartitions("r", (PartitionTarget("orders", 0, (3, 4)), PartitionTarget("payments", 0, (4, 1))))
    routed = routing.route(command, BUCKETS)
    assert [b for b, _ in routed] == [2]
    answer = _step(c, 2, routed)
    assert answer.status is AdminStatus.IN_PROGRESS
    assert set(answer.details["partitions"]) == {"orders-0", "payments-0"}
    # the request is done once both partitions are: not when the last topic's alone is
    c.catch_up(TopicPartition("payments", 0))
    assert not [d for d in c.decisions if isinstance(d, AdminResult)]
    c.catch_up(TopicPartition("orders", 0))
    (done,) = [d for d in c.decisions if isinstance(d, AdminResult)]
    assert (done.request_id, done.status) == ("r", AdminStatus.OK)


def test_a_dry_run_over_topics_of_one_bucket_shows_every_topic_decisions() -> None:
    c = Cluster.start([1, 2, 3, 4])
    c.create_topic("orders", ((1, 2),))
    c.create_topic("payments", ((2, 3),))
    command = ev.ReassignPartitions(
        "d", (PartitionTarget("orders", 0, (2, 1)), PartitionTarget("payments", 0, (3, 2))), dry_run=True
    )
    answer = _step(c, 2, routing.route(command, BUCKETS))
    written = {d["path"] for d in answer.details["dry_run"] if d["type"] == ZkWrite.TYPE}
    assert {"/brokers/topics/orders", "/brokers/topics/payments"} <= written
    assert {(p["topic"], p["partition"]) for p in answer.details["dry_run_partitions"]} == {
        ("orders", 0),
        ("payments", 0),
    }


def test_topics_of_different_buckets_still_go_each_to_its_own() -> None:
    # "a" is in bucket 3, "b" in bucket 1, "c" in bucket 3: two events, bucket 3's holding a's and c's partitions
    # in the command's order
    command = ev.ElectLeaders(
        "e",
        ElectionType.PREFERRED,
        (TopicPartition("a", 0), TopicPartition("b", 0), TopicPartition("c", 1), TopicPartition("a", 2)),
    )
    routed = routing.route(command, BUCKETS)
    assert [(b, [str(tp) for tp in e.partitions]) for b, e in routed if isinstance(e, ev.ElectLeaders)] == [
        (3, ["a-0", "c-1", "a-2"]),
        (1, ["b-0"]),
    ]
    assert all(e.request_id == "e" for _, e in routed if isinstance(e, ev.ElectLeaders))
