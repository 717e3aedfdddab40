"""The demo scenario end to end: real ZooKeeper, real Apache Kafka (KRaft), five simulated broker *processes*,
the controller query on Spark local, and the scripted scenario of ``livectl demo``.

``test_demo_scenario`` runs :func:`livectl.demo.run_demo` with the session's services and SparkSession
(ZooKeeper chroot and topic names of its own) and checks, independently of the demo's own checks:

* the ZooKeeper tree in Kafka's layout, read while everything still runs;
* the requests the brokers received on the requests topic;
* the brokers' own view (their ``--status-file`` documents) against ZooKeeper.

``tests/e2e/test_demo_ctrl_c.py`` presses Ctrl-C in ``livectl demo`` as a user runs it.
"""

from __future__ import annotations

import io
import json
import re
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, TopicPartition
from kazoo.client import KazooClient
from request_bodies import recipients

from livectl import local
from livectl.demo import DemoOptions, DemoReport, run_demo

pytestmark = [
    pytest.mark.e2e,
    # the controller's query is stopped in the middle of a micro-batch at teardown; PySpark warns about it
    pytest.mark.filterwarnings("ignore:toPandas attempted Arrow optimization:UserWarning"),
]


def zk_tree(zk: KazooClient, path: str = "/") -> dict[str, str]:
    """Every znode under ``path`` (chroot-relative) with its data as text."""
    out: dict[str, str] = {}
    for child in zk.get_children(path):
        full = f"{path.rstrip('/')}/{child}"
        if full == "/zookeeper":
            continue
        data, _ = zk.get(full)
        out[full] = (data or b"").decode()
        out.update(zk_tree(zk, full))
    return out


def read_topic(bootstrap: str, topic: str) -> list[dict[str, Any]]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
    try:
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        out: list[dict[str, Any]] = []
        deadline = time.monotonic() + 20
        while any(consumer.position(tp) < ends[tp] for tp in tps) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=300).values():
                out.extend(json.loads(r.value) for r in records)
        return out
    finally:
        consumer.close()


def partition_entries(messages: list[dict[str, Any]], api: str, broker: int) -> dict[str, list[dict[str, Any]]]:
    """``"<topic>-<partition>" -> [partition state, …]`` of every ``api`` message sent to ``broker``."""
    out: dict[str, list[dict[str, Any]]] = {}
    for m in messages:
        if m["api"] != api or broker not in recipients(m):
            continue
        for ts in m["body"].get("topicStates") or ():
            for ps in ts["partitionStates"]:
                out.setdefault(f"{ts['topicName']}-{ps['partitionIndex']}", []).append(ps)
    return out


def test_demo_scenario(zookeeper: local.Service, kafka_broker: local.Service, spark: Any, tmp_path: Path) -> None:
    ns = f"e2e{uuid.uuid4().hex[:8]}"
    run_dir = tmp_path / "demo"
    seen: dict[str, Any] = {}

    def inspect(report: DemoReport) -> None:
        # everything still runs here: read ZooKeeper and the brokers' own view directly
        zk = KazooClient(hosts=f"{zookeeper.connect}/{ns}", timeout=10)
        zk.start(timeout=15)
        try:
            seen["tree"] = zk_tree(zk)
            seen["delete_children"] = (
                zk.get_children("/admin/delete_topics") if zk.exists("/admin/delete_topics") else []
            )
        finally:
            zk.stop()
            zk.close()
        seen["status"] = {
            int(bid): st
            for path in sorted((run_dir / "brokers").glob("broker-*.json"))
            for bid, st in json.loads(path.read_text())["brokers"].items()
        }

    out = io.StringIO()
    report = run_demo(
        DemoOptions(
            brokers=5,
            run_dir=run_dir,
            buckets=4,  # the shared session runs 4 shuffle partitions
            zookeeper=zookeeper.connect,
            bootstrap=kafka_broker.bootstrap,
            namespace=ns,
            step_timeout_s=120,
        ),
        out=out,
        spark=spark,
        inspect=inspect,
    )
    timeline = out.getvalue()
    print(timeline)  # shown by pytest when the test fails
    assert report.ok, f"{report.error}; steps: {report.steps}"
    assert [s.name for s in report.steps] == [
        "create topics",
        "hard-kill broker 3",
        "restart broker 3",
        "reassign payments onto other brokers",
        "preferred-leader election",
        "controlled shutdown of broker 5",
        "delete topic audit",
    ]
    assert not report.leftovers
    assert "none left running" in timeline

    # ------------------------------------------------------------------ ZooKeeper, Kafka's layout
    tree: dict[str, str] = seen["tree"]
    topics = sorted(p.rsplit("/", 1)[1] for p in tree if re.fullmatch(r"/brokers/topics/[^/]+", p))
    assert topics == ["orders", "payments"]
    assert not any(p.startswith("/brokers/topics/audit") for p in tree)
    assert not any(p.startswith("/config/topics/audit") for p in tree)
    assert seen["delete_children"] == []
    assert "/admin/reassign_partitions" not in tree
    assert sorted(int(p.rsplit("/", 1)[1]) for p in tree if re.fullmatch(r"/brokers/ids/\d+", p)) == [1, 2, 3, 4]
    assert json.loads(tree["/controller"])["brokerid"] == 1000
    controller_epoch = int(tree["/controller_epoch"])

    assignments: dict[str, dict[str, list[int]]] = {}
    for t in topics:
        znode = json.loads(tree[f"/brokers/topics/{t}"])
        assert znode.get("adding_replicas", {}) == {} and znode.get("removing_replicas", {}) == {}
        assignments[t] = znode["partitions"]
    assert sorted(assignments["orders"], key=int) == [str(p) for p in range(6)]
    assert all(len(set(r)) == 3 for r in assignments["orders"].values())
    targets = {str(p): list(r) for p, r in report.facts["payments_targets"].items()}
    before = {str(p): list(r) for p, r in report.facts["payments_before"].items()}
    assert assignments["payments"] == targets
    assert all(targets[p] != before[p] for p in targets), "every payments partition moved"

    states: dict[str, dict[str, Any]] = {}
    for t, parts in assignments.items():
        for p, replicas in parts.items():
            state = json.loads(tree[f"/brokers/topics/{t}/partitions/{p}/state"])
            assert set(state) >= {"version", "leader", "leader_epoch", "isr", "controller_epoch"}
            assert state["version"] == 1 and state["controller_epoch"] <= controller_epoch
            assert state["leader"] in state["isr"] and set(state["isr"]) <= set(replicas)
            assert 5 not in state["isr"], f"{t}-{p}: the shut-down broker left every ISR"
            # the preferred replica leads, unless it is the broker that was shut down
            if replicas[0] != 5:
                assert state["leader"] == replicas[0], f"{t}-{p} led by {state['leader']}, preferred {replicas[0]}"
            states[f"{t}-{p}"] = {**state, "replicas": replicas}

    # ------------------------------------------------------------------ requests the brokers received
    settings_prefix = f"{ns}."
    requests = read_topic(kafka_broker.bootstrap, f"{settings_prefix}requests")
    for b in range(1, 6):
        lisr = partition_entries(requests, "LeaderAndIsr", b)
        hosted_at_creation = {n for n, entries in lisr.items() if any(e["isNew"] for e in entries)}
        assert hosted_at_creation, f"broker {b} got no LeaderAndIsr for new partitions"
    for b in (1, 2):  # audit lived on brokers 1 and 2 and was deleted
        stops = partition_entries(requests, "StopReplica", b)
        for name in ("audit-0", "audit-1"):
            assert any(e["deletePartition"] for e in stops.get(name, [])), f"broker {b}: StopReplica(delete) {name}"
    for p, old in before.items():
        for b in set(old) - set(targets[p]):
            stops = partition_entries(requests, "StopReplica", b)
            assert any(e["deletePartition"] for e in stops.get(f"payments-{p}", [])), f"broker {b}: payments-{p}"
    shutdown_answers = [m for m in requests if m["api"] == "ControlledShutdownResponse" and m["brokerId"] == 5]
    assert any(m["body"]["errorCode"] == 0 and not m["body"]["remainingPartitions"] for m in shutdown_answers), (
        shutdown_answers
    )
    # after its restart broker 3 is addressed with its new broker epoch
    lisr3 = [m for m in requests if m["api"] == "LeaderAndIsr" and m["brokerId"] == 3]
    assert len({m["body"]["brokerEpoch"] for m in lisr3}) == 2

    # ------------------------------------------------------------------ the brokers' own view
    status: dict[int, dict[str, Any]] = seen["status"]
    assert sorted(status) == [1, 2, 3, 4]
    for name, st in states.items():
        for r in st["replicas"]:
            if r == 5:
                continue
            mine = status[r]["partitions"].get(name)
            assert mine is not None, f"broker {r} does not host {name}"
            assert mine["leader_epoch"] == st["leader_epoch"], (name, r, mine, st)
            if r == st["leader"]:
                assert mine["role"] == "leader", (name, r, mine)
            else:
                assert mine["role"] == "follower" and mine["leader"] == st["leader"], (name, r, mine)
    for b, doc in status.items():
        for name in doc["partitions"]:
            assert name in states and b in states[name]["replicas"], f"broker {b} still hosts {name}"
