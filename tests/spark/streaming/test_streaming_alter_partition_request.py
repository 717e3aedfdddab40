"""One AlterPartition request of many partitions in one broker-events record (``alter_partition_request``,
as the simulated brokers write them) through the live query: split between the buckets, each partition
written and answered once, on real ZooKeeper, the real broker and Spark in local mode."""

from __future__ import annotations

from typing import Any

import pytest
from controller_harness import Cluster, start_controller
from waiting import wait_until

from core import events as ev
from streaming.query.routing import bucket_of

pytestmark = pytest.mark.spark


def test_a_request_of_partitions_in_two_buckets_is_answered_once_per_partition(spark: Any, cluster: Cluster) -> None:
    epochs = {b: cluster.register_broker(b) for b in (1, 2, 3)}
    # two topics in different buckets of two (local[2]'s), so that the request is split
    first = "apr-a"
    second = next(t for t in (f"apr-{i}" for i in range(100)) if bucket_of(t, 2) != bucket_of(first, 2))
    controller = start_controller(spark, cluster.settings)
    try:
        for n, topic in enumerate((first, second)):
            cluster.send_admin(ev.CreateTopic(f"c{n}", topic, 1, 3, replica_assignment=((1, 2, 3),)))
        wait_until("both online", lambda: cluster.state(first, 0) and cluster.state(second, 0), timeout=180)

        def proposal(topic: str, isr: tuple[int, ...], corr: int) -> ev.IsrProposal:
            state = cluster.state(topic, 0)
            _, stat = cluster.zk.get(f"/brokers/topics/{topic}/partitions/0/state")
            assert state is not None
            return ev.IsrProposal(topic, 0, state["leader_epoch"], stat.version, isr, correlation_id=corr)

        cluster.send_broker_event(
            ev.AlterPartitionRequest(1, epochs[1], (proposal(first, (1, 2), 1), proposal(second, (1, 3), 2)))
        )
        cluster.send_broker_event(ev.AlterPartitionRequest(1, epochs[1] - 1, (proposal(first, (1,), 3),)))

        def answers() -> list[tuple[int, int]]:
            out = []
            for m in cluster.requests("AlterPartitionResponse"):
                body = m["body"]
                if body.get("errorCode"):
                    out.append((body.get("correlationId", -1), body["errorCode"]))
                out.extend((p["correlationId"], p["errorCode"]) for t in body["topics"] for p in t["partitions"])
            return out if len(out) >= 3 else []

        got = wait_until("the three proposals answered", answers, timeout=120)
        assert sorted(got) == [(1, 0), (2, 0), (3, 77)]  # each once; the stale request's at its top
        a, b = cluster.state(first, 0), cluster.state(second, 0)
        assert a is not None and b is not None and (a["isr"], b["isr"]) == ([1, 2], [1, 3])
    finally:
        controller.stop()
    assert not controller.error
