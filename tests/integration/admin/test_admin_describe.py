"""``topics --describe/--list`` as kafka-topics reports them, and ``--output json`` on the read commands."""

from __future__ import annotations

import json

import pytest
from admin_env import Env, env, write_tree

from admin.cli import main

pytestmark = pytest.mark.integration
__all__ = ["env"]


def reassigning_tree(env: Env) -> None:
    """orders (RF 2) plus topic moving: RF 3, partition 0 moving from 1,2,3 to 3,4,5 (broker 5 is dead)."""
    write_tree(env.zk)
    env.zk.create("/brokers/ids/4", env.zk.get("/brokers/ids/1")[0])
    env.zk.create(
        "/brokers/topics/moving",
        json.dumps(
            {
                "version": 3,
                "partitions": {"0": [3, 4, 5, 1, 2], "1": [2, 3, 4]},
                "adding_replicas": {"0": [4, 5]},
                "removing_replicas": {"0": [1, 2]},
            }
        ).encode(),
    )
    for p, isr in ((0, [1, 2, 3]), (1, [2, 3])):
        state = {"version": 1, "leader": isr[0], "leader_epoch": 1, "controller_epoch": 1, "isr": isr}
        env.zk.create(f"/brokers/topics/moving/partitions/{p}/state", json.dumps(state).encode(), makepath=True)
    env.zk.create("/config/topics/moving", b'{"version":1,"config":{"min.insync.replicas":"3"}}', makepath=True)
    env.zk.create("/config/brokers/<default>", b'{"version":1,"config":{"min.insync.replicas":"2"}}', makepath=True)


def describe(env: Env, capsys: pytest.CaptureFixture[str], *options: str) -> list[str]:
    assert main(env.args("topics", "--describe", *options, write=False)) == 0
    return capsys.readouterr().out.splitlines()


def test_replication_factor_is_the_target_during_a_reassignment(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    reassigning_tree(env)
    lines = describe(env, capsys, "--topic", "moving")
    assert (
        lines[0]
        == "Topic: moving\tTopicId: none\tPartitionCount: 2\tReplicationFactor: 3\tConfigs: min.insync.replicas=3"
    )
    assert lines[1] == (
        "\tTopic: moving\tPartition: 0\tLeader: 1\tReplicas: 3,4,5,1,2\tIsr: 1,2,3\tAdding Replicas: 4,5"
        "\tRemoving Replicas: 1,2\tOffline: 5"
    )


def test_min_isr_filters_and_overrides(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    reassigning_tree(env)
    # moving: min ISR 3 (its override); orders: 2 (the cluster default in /config/brokers/<default>)
    under = describe(env, capsys, "--under-min-isr-partitions")
    # old is marked for deletion: it counts in no figure (core.figures); orders-2 has no live leader
    assert [(ln.split("\t")[1], ln.split("\t")[2]) for ln in under] == [
        ("Topic: moving", "Partition: 1"),
        ("Topic: orders", "Partition: 1"),
        ("Topic: orders", "Partition: 2"),
    ]
    at = describe(env, capsys, "--at-min-isr-partitions")
    assert [(ln.split("\t")[1], ln.split("\t")[2]) for ln in at] == [
        ("Topic: moving", "Partition: 0"),
        ("Topic: orders", "Partition: 0"),
    ]
    overrides = describe(env, capsys, "--topics-with-overrides")
    assert [ln.split("\t")[0] for ln in overrides] == ["Topic: moving", "Topic: orders"]
    # under-replicated compares the ISR with the replication factor, as kafka-topics does: the replicas minus
    # the adding ones during a reassignment (3 for moving-0)
    under_rep = describe(env, capsys, "--topic", "moving", "--under-replicated-partitions")
    assert [ln.split("\t")[2] for ln in under_rep] == ["Partition: 1"]


def test_output_json_on_every_read_command(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    reassigning_tree(env)
    doc = json.loads("\n".join(describe(env, capsys, "--topic", "moving", "--output", "json")))
    [topic] = doc["topics"]
    assert (topic["name"], topic["replication_factor"], topic["min_insync_replicas"]) == ("moving", 3, 3)
    assert topic["partitions"][0] == {
        "partition": 0,
        "leader": 1,
        "replicas": [3, 4, 5, 1, 2],
        "isr": [1, 2, 3],
        "adding_replicas": [4, 5],
        "removing_replicas": [1, 2],
        "offline_replicas": [5],
    }
    assert main(env.args("topics", "--list", "--output", "json", write=False)) == 0
    assert json.loads(capsys.readouterr().out) == {
        "topics": [
            {"name": "moving", "marked_for_deletion": False},
            {"name": "old", "marked_for_deletion": True},
            {"name": "orders", "marked_for_deletion": False},
        ]
    }
    assert main(env.args("brokers", "list", "--output", "json", write=False)) == 0
    assert sorted(json.loads(capsys.readouterr().out)) == ["1", "2", "3", "4"]
    assert main(env.args("controller", "status", "--output", "json", write=False)) == 0
    assert json.loads(capsys.readouterr().out)["broker_id"] == 7
