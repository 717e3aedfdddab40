"""Dry runs against the real controller query (real ZooKeeper, broker and Spark; issue 44, item 2): a dry run
of a topic creation and of a reassignment changes nothing in ZooKeeper and sends no request; the real command
that follows writes exactly the znodes and sends exactly the LeaderAndIsr / UpdateMetadata requests the dry
run announced, decision for decision; a drain's dry run cordons and records nothing. The one value that
differs is a created topic's id, derived from the request id (each command has its own): the dry run's is
replaced by the real one before comparing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from controller_harness import Cluster, start_controller

from admin.cli import main
from core.codec.decisions import decode_decision
from core.decisions import AdminResult, BrokerRequest, Decision, ZkOp, ZkWrite
from streaming.query.routing import bucket_of

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


def dry_run(cluster: Cluster, capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    capsys.readouterr()
    assert cli(cluster, *argv, "--dry-run", "--output", "json") == 0
    answer: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert answer["applied"] is False
    return answer


def tree(cluster: Cluster, path: str = "/brokers/topics") -> dict[str, bytes]:
    """Every znode under ``path`` with its data (what a dry run must leave as it is)."""
    out: dict[str, bytes] = {}
    if not cluster.zk.exists(path):
        return out
    data, _ = cluster.zk.get(path)
    out[path] = data
    for child in cluster.zk.get_children(path):
        out.update(tree(cluster, f"{path}/{child}"))
    return out


def decisions(answer: dict[str, Any], replace: dict[str, str]) -> list[Decision]:
    text = json.dumps(answer["decisions"])
    for old, new in replace.items():
        text = text.replace(old, new)
    return [decode_decision(d) for d in json.loads(text)]


def compare(cluster: Cluster, announced: list[Decision], sent: list[dict[str, Any]]) -> None:
    """What the dry run announced is what the real run did: each ZooKeeper write's znode holds its data (or is
    gone), and the requests sent are the announced ones, the same APIs to the same brokers with the same
    bodies, in order."""
    last: dict[str, ZkWrite] = {}
    for d in announced:
        if isinstance(d, ZkWrite):
            last[d.path] = d
    assert last, "a dry run of this command writes ZooKeeper"
    for path, w in last.items():
        if w.op in (ZkOp.DELETE, ZkOp.DELETE_TREE):
            assert not cluster.zk.exists(path), path
        else:
            data, _ = cluster.zk.get(path)
            assert json.loads(data) == json.loads(w.data or "null"), path
    wanted = [
        (d.api.value, d.broker_id, [{"brokerId": a.broker_id, "brokerEpoch": a.broker_epoch} for a in d.addressees],
         d.body_json())
        for d in announced
        if isinstance(d, BrokerRequest)
    ]  # fmt: skip
    got = [(m["api"], m["brokerId"], m.get("addressees", []), m["body"]) for m in sent]
    assert wanted, "a dry run of this command sends requests"
    assert got == wanted


def answer_of(cluster: Cluster, announced: list[Decision], real_command: str) -> tuple[AdminResult, dict[str, Any]]:
    """The dry run's own answer among its decisions, and the real command's answer on the results topic."""
    (dry,) = [d for d in announced if isinstance(d, AdminResult)]
    real = [r for r in cluster.admin_results() if r["command"] == real_command and "dry_run" not in r["details"]]
    return dry, real[-1]


def test_a_dry_run_announces_exactly_what_the_real_command_then_does(
    spark: Any, cluster: Cluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    for b in (1, 2, 3):
        cluster.register_broker(b)
    controller = start_controller(spark, cluster.settings)
    try:
        assert cli(cluster, "topics", "--create", "--topic", "base", "--replica-assignment", "1:2,2:3") == 0

        # --------------------------------------------------------------- a topic creation
        before, sent_before = tree(cluster), len(cluster.requests())
        create = ["topics", "--create", "--topic", "fresh", "--partitions", "3", "--replication-factor", "2"]
        dry = dry_run(cluster, capsys, *create)
        assert dry["would"] == "ok" and dry["error"] is None
        assert tree(cluster) == before  # nothing written: no /brokers/topics/fresh
        assert len(cluster.requests()) == sent_before  # nothing sent
        assert {(p["partition"], p["state"]) for p in dry["partitions"]} == {(i, "OnlinePartition") for i in range(3)}

        assert cli(cluster, *create) == 0
        real_id = (cluster.znode("/brokers/topics/fresh") or {})["topic_id"]
        dry_ids = {w["data"] for w in dry["decisions"] if w.get("path") == "/brokers/topics/fresh"}
        (dry_id,) = {json.loads(d)["topic_id"] for d in dry_ids}
        assert dry_id != real_id  # each request mints its own topic id
        announced = decisions(dry, {dry_id: real_id})
        compare(cluster, announced, cluster.requests()[sent_before:])
        own, real = answer_of(cluster, announced, "create_topic")
        assert (own.status.value, own.error, own.message) == (real["status"], real.get("error"), real["message"])
        for p in dry["partitions"]:  # the leaders and ISRs it announced are those ZooKeeper holds now
            state = cluster.state("fresh", p["partition"]) or {}
            assert (p["leader"], p["isr"], p["leader_epoch"]) == (state["leader"], state["isr"], state["leader_epoch"])

        # --------------------------------------------------------------- a reassignment
        plan = tmp_path / "plan.json"
        plan.write_text(
            json.dumps({"version": 1, "partitions": [{"topic": "base", "partition": 0, "replicas": [3, 1]}]})
        )
        before, sent_before = tree(cluster), len(cluster.requests())
        reassign = ["reassign", "--execute", "--reassignment-json-file", str(plan)]
        dry = dry_run(cluster, capsys, *reassign)
        assert dry["would"] == "in_progress"
        assert tree(cluster) == before
        assert len(cluster.requests()) == sent_before
        (row,) = dry["partitions"]
        assert (row["replicas"], row["adding_replicas"], row["removing_replicas"]) == ([3, 1, 2], [3], [2])

        assert cli(cluster, *reassign) == 0
        announced = decisions(dry, {})
        compare(cluster, announced, cluster.requests()[sent_before:])
        own, real = answer_of(cluster, announced, "reassign_partitions")
        assert (own.status.value, own.error, own.message) == (real["status"], real.get("error"), real["message"])

        # --------------------------------------------------------------- a reassignment over two topics of one bucket
        # orders and payments share bucket 2 of 4: its one answer holds both topics' decisions (a drain's reorder
        # of orders-4 and payments-2 announced payments-2's alone while the bucket got one event per topic)
        assert cluster.settings.num_buckets == 4 and bucket_of("orders", 4) == bucket_of("payments", 4)
        for topic in ("orders", "payments"):
            assert cli(cluster, "topics", "--create", "--topic", topic, "--replica-assignment", "1:2") == 0
        plan.write_text(
            json.dumps(
                {
                    "version": 1,
                    "partitions": [
                        {"topic": "orders", "partition": 0, "replicas": [2, 3]},
                        {"topic": "payments", "partition": 0, "replicas": [3, 1]},
                    ],
                }
            )
        )
        before, sent_before = tree(cluster), len(cluster.requests())
        dry = dry_run(cluster, capsys, *reassign, "--additional")  # base-0 is still moving
        assert tree(cluster) == before and len(cluster.requests()) == sent_before
        assert sorted((p["topic"], p["partition"]) for p in dry["partitions"]) == [("orders", 0), ("payments", 0)]
        assert cli(cluster, *reassign, "--additional") == 0
        announced = decisions(dry, {})
        compare(cluster, announced, cluster.requests()[sent_before:])
        own, real = answer_of(cluster, announced, "reassign_partitions")
        assert (own.status.value, own.error, own.message) == (real["status"], real.get("error"), real["message"])
        assert set(real["details"]["partitions"]) == {"orders-0", "payments-0"}

        # --------------------------------------------------------------- a refusal: its reason, exit 1
        before, sent_before = tree(cluster), len(cluster.requests())
        capsys.readouterr()
        refused = ["topics", "--create", "--topic", "big", "--partitions", "1", "--replication-factor", "5"]
        assert cli(cluster, *refused, "--dry-run") == 1
        out, err = capsys.readouterr()
        assert "INVALID_REPLICATION_FACTOR" in err and "the controller would refuse it" in out
        assert tree(cluster) == before and len(cluster.requests()) == sent_before

        # --------------------------------------------------------------- partitions added: announced, then done
        before, sent_before = tree(cluster), len(cluster.requests())
        grow = ["topics", "--alter", "--topic", "fresh", "--partitions", "4"]
        dry = dry_run(cluster, capsys, *grow)
        assert (dry["would"], [p["partition"] for p in dry["partitions"]]) == ("ok", [3])
        assert tree(cluster) == before and len(cluster.requests()) == sent_before
        assert cli(cluster, *grow) == 0
        compare(cluster, decisions(dry, {}), cluster.requests()[sent_before:])

        # --------------------------------------------------------------- the other commands: answered, nothing done
        before, sent_before = tree(cluster), len(cluster.requests())
        configs = tree(cluster, "/config")
        others = [
            (["topics", "--delete", "--topic", "fresh"], "in_progress"),
            (["configs", "--entity-type", "topics", "--entity-name", "fresh", "--alter", "--add-config",
              "unclean.leader.election.enable=true"], "ok"),
            (["elect-leaders", "--election-type", "PREFERRED", "--all-topic-partitions"], None),
        ]  # fmt: skip
        for argv, would in others:
            capsys.readouterr()
            code = cli(cluster, *argv, "--dry-run", "--output", "json")
            answer = json.loads(capsys.readouterr().out)
            assert answer["applied"] is False
            assert code == (1 if answer["would"] == "error" else 0)
            if would is not None:
                assert answer["would"] == would, (argv, answer)
            assert tree(cluster) == before and tree(cluster, "/config") == configs, argv
            assert len(cluster.requests()) == sent_before, argv

        # --------------------------------------------------------------- a drain: its first round, nothing done
        livectl = tree(cluster, "/livectl")
        assert cli(cluster, "brokers", "--drain", "3", "--dry-run") == 0
        out = capsys.readouterr().out
        assert "Dry run of draining broker 3" in out and "First round: move the leadership" in out
        assert "Nothing was applied." in out
        assert tree(cluster) == before and tree(cluster, "/livectl") == livectl  # not cordoned, no drain record
        assert len(cluster.requests()) == sent_before
    finally:
        controller.stop()
    assert not controller.error
