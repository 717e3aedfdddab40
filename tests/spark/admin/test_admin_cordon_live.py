"""Cordoned brokers against the real controller query (real ZooKeeper, broker and Spark; issue 44, item 1): a
broker cordoned before the controller starts (read with its snapshot, as a standby that takes over reads it)
and one cordoned while it runs (the admin-path watcher) get no replica of a topic created after; uncordoned,
they take replicas again."""

from __future__ import annotations

import json
from typing import Any

import pytest
from controller_harness import Cluster, start_controller
from waiting import wait_until

from admin.cli import main

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


def zk_cli(cluster: Cluster, *argv: str) -> int:
    return main([*argv, "--zookeeper", cluster.zk_connect])


def _replicas(cluster: Cluster, topic: str) -> dict[str, list[int]]:
    znode = cluster.znode(f"/brokers/topics/{topic}")
    assert znode is not None
    parts: dict[str, list[int]] = znode["partitions"]
    return parts


def test_no_new_replica_lands_on_a_cordoned_broker(
    spark: Any, cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    for b in (1, 2, 3, 4, 5):
        cluster.register_broker(b)
    assert zk_cli(cluster, "brokers", "--cordon", "5") == 0  # before the controller: its snapshot has it
    controller = start_controller(spark, cluster.settings)
    try:
        create = ["topics", "--create", "--partitions", "8", "--replication-factor", "3", "--wait"]
        assert cli(cluster, *create, "--topic", "first") == 0
        assert all(5 not in r for r in _replicas(cluster, "first").values())
        # while it runs: the watcher publishes the change, the buckets place nothing on 4 from then on
        assert zk_cli(cluster, "brokers", "--cordon", "4") == 0
        wait_until(
            "the controller read the cordon",
            lambda: any(json.loads(r.value).get("type") == "brokers_cordoned" for r in _events(cluster)),
            60,
        )
        assert cli(cluster, *create, "--topic", "second") == 0
        second = _replicas(cluster, "second")
        assert all(not {4, 5} & set(r) for r in second.values()), second
        assert sorted({b for r in second.values() for b in r}) == [1, 2, 3]
        # partition addition skips them too; the replicas already placed stay
        assert cli(cluster, "topics", "--alter", "--topic", "first", "--partitions", "12", "--wait") == 0
        first = _replicas(cluster, "first")
        assert len(first) == 12 and all(not {4, 5} & set(r) for p, r in first.items() if int(p) >= 8)
        capsys.readouterr()
        assert zk_cli(cluster, "brokers", "list", "--json") == 0
        listing = json.loads(capsys.readouterr().out)
        assert {b for b, r in listing.items() if r["cordoned"]} == {"4", "5"}
        # uncordoned, broker 5 takes replicas again
        assert zk_cli(cluster, "brokers", "--uncordon", "5") == 0
        wait_until(
            "the controller read the uncordon",
            lambda: sum(json.loads(r.value).get("type") == "brokers_cordoned" for r in _events(cluster)) >= 2,
            60,
        )
        assert cli(cluster, *create, "--topic", "third") == 0
        third = _replicas(cluster, "third")
        assert 5 in {b for r in third.values() for b in r} and all(4 not in r for r in third.values())
    finally:
        controller.stop()
    assert not controller.error


def _events(cluster: Cluster) -> list[Any]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, enable_auto_commit=False)
    tps = [TopicPartition(cluster.settings.broker_events_topic, p) for p in range(8)]
    tps = [tp for tp in tps if tp.partition in (consumer.partitions_for_topic(tp.topic) or set())]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    ends = consumer.end_offsets(tps)
    out: list[Any] = []
    while any(consumer.position(tp) < ends[tp] for tp in tps):
        for records in consumer.poll(timeout_ms=200).values():
            out.extend(records)
    consumer.close()
    return out
