"""The poison pills of issue 17 against the live query (real ZooKeeper, the real broker, Spark local):
each is rejected with a reason naming the field, commands among them are answered, and the query stays
up and answers the next command. The bulk of the input fuzzing runs without Spark
(``tests/unit/streaming/test_streaming_fuzz_input.py``)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from controller_harness import Cluster, start_controller
from waiting import wait_until

from core import events as ev
from core.codec.decisions import read_details
from core.limits import MAX_MESSAGE_BYTES

pytestmark = pytest.mark.spark


def _admin(rid: str, **fields: Any) -> str:
    return json.dumps({"version": 1, "request_id": rid, **fields})


def test_poison_pills_are_rejected_and_the_query_lives_on(spark: Any, cluster: Cluster) -> None:
    for b in (1, 2, 3):
        cluster.register_broker(b)
    controller = start_controller(spark, cluster.settings)
    try:
        # the pills come after a good command and before another; the controller takes them in order
        cluster.send_admin(ev.CreateTopic("before", "orders", 1, 1))
        pills = [
            '{"version":1,"type":"delete_topic","request_id":"\\ud800","topic":"orders"}',
            '{"version":1,"type":"no_such_type","request_id":"\\ud800"}',
            '"' * 600_000,  # not JSON; its escaped copy on the rejected topic would be 1.2 MB
            "[" * 100_000,
            json.dumps({"version": 1, "type": "delete_topic", "request_id": "r" * 600_000, "topic": "orders"}),
            _admin("big", type="create_topic", topic="big", partitions=120_000, replication_factor=1),
            _admin("huge", type="create_topic", topic="huge", partitions=2_147_483_648, replication_factor=1),
            _admin("newline", type="create_topic", topic="probe-d\n", partitions=1, replication_factor=1),
        ]
        for pill in pills:
            cluster.send_admin(pill)
        forged = {
            "version": 1,
            "type": "controller_failover_ref",
            "controller_id": 7,
            "controller_epoch": "not a number",
            "path": "/nowhere",
        }
        producer = cluster._producer()
        producer.send(cluster.settings.broker_events_topic, value=json.dumps(forged).encode()).get(timeout=10)
        cluster.send_admin(ev.CreateTopic("after", "later", 2, 2))

        results = wait_until(
            "the command after the pills answered",
            lambda: (rs := {r["request_id"]: r for r in cluster.admin_results()}) and "after" in rs and rs,
            timeout=240,
        )
        assert results["before"]["status"] == "ok" and results["after"]["status"] == "ok"
        assert controller.app.query.isActive and not controller.error
        assert cluster.znode("/brokers/topics/later") is not None
        assert cluster.znode("/brokers/topics/orders") is not None  # the surrogate delete was not applied

        rejected = wait_until(
            "every pill on the rejected topic", lambda: len(r := cluster.rejected()) >= 9 and r, timeout=120
        )
        assert len(rejected) == 9
        by_offset = {(m["source"]["topic"], m["source"]["offset"]): m for m in rejected}
        admin_pills = sorted(o for t, o in by_offset if t == cluster.settings.admin_topic)
        assert len(admin_pills) == 8

        def reasons(i: int) -> str:
            return " | ".join(by_offset[(cluster.settings.admin_topic, admin_pills[i])]["reasons"])

        assert "'request_id'" in reasons(0) and "surrogate" in reasons(0)
        assert "'request_id'" in reasons(1) and "type_known" in reasons(1)
        big_copy = by_offset[(cluster.settings.admin_topic, admin_pills[2])]
        assert big_copy["payload_truncated"] is True and big_copy["payload_chars"] == 600_000
        assert "not JSON" in reasons(2)
        assert "nested too deeply" in reasons(3)
        assert "request_id" in reasons(4)
        assert "jute.maxbuffer" in reasons(5) and reasons(5).startswith("decode:partitions")
        assert "'partitions'" in reasons(6)
        assert "'topic'" in reasons(7) and "probe-d\\n" in reasons(7)
        ref = next(m for (t, _), m in by_offset.items() if t == cluster.settings.broker_events_topic)
        assert ref["reasons"] == ["decode:controller_epoch: controller_epoch: must be an integer, got str"]

        for rid, kafka_error in (
            ("big", "INVALID_PARTITIONS"),
            ("huge", "INVALID_PARTITIONS"),
            ("newline", "INVALID_TOPIC_EXCEPTION"),
        ):
            r = results[rid]
            assert (r["status"], r["error"]) == ("error", "INVALID_REQUEST")
            assert read_details(r["details"])["kafka_error"] == kafka_error and r["message"].startswith(kafka_error)
        # the escaped copy of the 0.6 MB record was cut to fit the producer's limit
        assert len(json.dumps(big_copy["payload"])) < MAX_MESSAGE_BYTES
    finally:
        controller.stop()
