"""The Kafka-style tools against the real controller query (real ZooKeeper, broker and Spark): a refusal
awaited by default (exit 1 with the reason), config validation on both sides, config notifications,
throttles, and a cancel whose partial failure is exit 1."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from controller_harness import Cluster, start_controller
from waiting import wait_until

from admin.cli import main
from core import events as ev

pytestmark = pytest.mark.spark


def cli(cluster: Cluster, *argv: str) -> int:
    s = cluster.settings
    return main(
        [
            *argv,
            "--zookeeper", cluster.zk_connect, "--bootstrap-server", cluster.bootstrap,
            "--admin-topic", s.admin_topic, "--admin-results-topic", s.admin_results_topic, "--timeout", "120",
        ]
    )  # fmt: skip


def test_tools_against_the_real_controller(
    spark: Any, cluster: Cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for b in (1, 2, 3, 4):
        cluster.register_broker(b)
    controller = start_controller(spark, cluster.settings)
    try:
        create = ["topics", "--create", "--topic", "orders", "--partitions", "2", "--replication-factor", "3"]
        assert cli(cluster, *create, "--wait") == 0
        assert capsys.readouterr().out == "Created topic orders.\n"
        # a command the controller refuses, with no option: the tool waits for the answer by default, as
        # kafka-topics does, and exits 1 with the controller's reason in one line
        wide = ["topics", "--create", "--topic", "wide", "--partitions", "1", "--replication-factor", "5"]
        assert cli(cluster, *wide) == 1
        out, err = capsys.readouterr()
        assert out == "" and err.splitlines()[-1] == (
            "livectl topics: error: INVALID_REPLICATION_FACTOR: Replication factor: 5 larger than available brokers: 4."
        ), err
        assert not cluster.zk.exists("/brokers/topics/wide")
        # the controller refuses what the tool would have refused (a command sent without the tool)
        cluster.send_admin(ev.AlterTopicConfig("raw", "orders", (("foo", "bar"),)))
        raw = wait_until(
            "the raw command answered", lambda: [r for r in cluster.admin_results() if r["request_id"] == "raw"]
        )
        assert (raw[0]["status"], raw[0]["error"], raw[0]["message"]) == (
            "error", "INVALID_CONFIG", "Unknown topic config name: foo",
        )  # fmt: skip
        assert cli(cluster, "configs", "--entity-type", "topics", "--entity-name", "orders", "--alter",
                   "--add-config", "retention.ms=") == 2  # fmt: skip
        argv = ["configs", "--entity-type", "topics", "--entity-name", "orders", "--alter"]
        assert cli(cluster, *argv, "--add-config", "retention.ms=1000,min.insync.replicas=2") == 0
        assert cluster.znode("/config/topics/orders") == {
            "version": 1, "config": {"min.insync.replicas": "2", "retention.ms": "1000"},
        }  # fmt: skip
        assert cli(cluster, *argv, "--delete-config", "retention.ms") == 0
        assert cluster.znode("/config/topics/orders") == {"version": 1, "config": {"min.insync.replicas": "2"}}
        paths = [cluster.znode(f"/config/changes/{c}") for c in sorted(cluster.zk.get_children("/config/changes"))]
        assert paths == [{"version": 2, "entity_path": "topics/orders"}] * 2

        # add broker 4 to partition 0 with a throttle; nobody catches up here, so it stays in progress
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "orders", "partition": 0, "replicas": [1, 2, 3, 4]}]}))  # fmt: skip
        assert cli(cluster, "reassign", "--execute", "--reassignment-json-file", str(plan), "--throttle", "1000") == 0
        cfg = wait_until("throttled replicas", lambda: (cluster.znode("/config/topics/orders") or {}).get("config"))
        assert cfg["leader.replication.throttled.replicas"] == "0:1,0:2,0:3"
        assert cfg["follower.replication.throttled.replicas"] == "0:4"
        assert cluster.znode("/config/brokers/4") == {
            "version": 1,
            "config": {"follower.replication.throttled.rate": "1000", "leader.replication.throttled.rate": "1000"},
        }
        capsys.readouterr()
        assert cli(cluster, "topics", "--describe", "--topic", "orders") == 0
        line0 = capsys.readouterr().out.splitlines()[1]
        assert "Adding Replicas: 4" in line0
        # a cancel of partitions 0 and 1: 1 is not being reassigned
        both = tmp_path / "both.json"
        both.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "orders", "partition": 0, "replicas": [1, 2, 3, 4]},
            {"topic": "orders", "partition": 1, "replicas": [1, 2, 3]}]}))  # fmt: skip
        assert cli(cluster, "reassign", "--cancel", "--reassignment-json-file", str(both)) == 1
        out, err = capsys.readouterr()
        assert "Successfully cancelled partition reassignments for: orders-0" in out
        assert "orders-1: NO_REASSIGNMENT_IN_PROGRESS" in err
        # the cancelled reassignment's own request is answered "cancelled", never "completed"
        results = wait_until(
            "the reassignment's final answer",
            lambda: [
                r for r in cluster.admin_results() if r["command"] == "reassign_partitions" and r["status"] == "error"
            ],
        )
        assert results[0]["error"] == "REASSIGNMENT_CANCELLED"
        # --verify: not at the plan's target (exit 1), nothing moving, so the throttles go
        assert cli(cluster, "reassign", "--verify", "--reassignment-json-file", str(plan)) == 1
        assert "Clearing broker-level throttles on brokers 1,2,3,4" in capsys.readouterr().out
        assert cluster.znode("/config/topics/orders") == {"version": 1, "config": {"min.insync.replicas": "2"}}
        assert cluster.znode("/config/brokers/4") == {"version": 1, "config": {}}
    finally:
        controller.stop()
    assert not controller.error
