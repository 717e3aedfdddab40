"""``livectl demo --brokers kafka`` end to end: the demo's scenario on three real Apache Kafka 3.9.2 brokers
(ZooKeeper mode) through ``livectl channel``, with a producer (``acks=all``) and a consumer running through
every step.

:func:`livectl.demo.run_demo` runs with the session's ZooKeeper, Kafka bus and SparkSession (a ZooKeeper
chroot and topic names of its own); the demo starts the controller, the channel and the brokers itself. The
test checks, apart from the demo's own checks: every step passed, no acknowledged record was lost, records
flowed in every step, and — read by the test itself while everything still runs — each live broker's
metadata (a MetadataRequest) has the leaders and ISRs livectl wrote in ZooKeeper, and every process the
demo started is gone afterwards.
"""

from __future__ import annotations

import io
import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.metadata.v12.response import MetadataResponse

from channel.wire import BrokerConnection
from livectl import local
from livectl.demo import DemoOptions, DemoReport, run_demo

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.filterwarnings("ignore:toPandas attempted Arrow optimization:UserWarning"),
]


def _metadata(address: str) -> dict[str, tuple[int, int, list[int], list[int]]]:
    host, port = address.rsplit(":", 1)
    with BrokerConnection(host, int(port), timeout_s=10) as conn:
        answer: Any = conn.send(
            MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False),
            MetadataResponse,
        )
    return {
        f"{t.name}-{p.partition_index}": (
            int(p.leader_id),
            int(p.leader_epoch),
            sorted(int(i) for i in p.isr_nodes),
            [int(r) for r in p.replica_nodes],
        )
        for t in answer.topics
        for p in t.partitions
    }


def test_demo_on_kafka_brokers(
    zookeeper: local.Service, kafka_broker: local.Service, spark: Any, tmp_path: Path
) -> None:
    ns = f"e2ek{uuid.uuid4().hex[:8]}"
    run_dir = tmp_path / "demo"
    seen: dict[str, Any] = {}

    def inspect(report: DemoReport) -> None:
        del report
        zk = KazooClient(hosts=f"{zookeeper.connect}/{ns}", timeout=10)
        zk.start(timeout=15)
        try:
            states: dict[str, dict[str, Any]] = {}
            for t in zk.get_children("/brokers/topics"):
                replicas = json.loads(zk.get(f"/brokers/topics/{t}")[0])["partitions"]
                for p, r in replicas.items():
                    st = json.loads(zk.get(f"/brokers/topics/{t}/partitions/{p}/state")[0])
                    states[f"{t}-{p}"] = {**st, "replicas": r}
            seen["states"] = states
            seen["registered"] = sorted(int(b) for b in zk.get_children("/brokers/ids"))
        finally:
            zk.stop()
            zk.close()
        ports = {}
        for b in (1, 2, 3):
            folder = run_dir / "kafka" / f"broker-{b}"
            ports[b] = json.loads((folder / "port.json").read_text())["PLAINTEXT"]
        seen["metadata"] = {b: _metadata(f"127.0.0.1:{port}") for b, port in ports.items() if b in seen["registered"]}

    out = io.StringIO()
    report = run_demo(
        DemoOptions(
            brokers=3,
            kafka=True,
            run_dir=run_dir,
            buckets=4,  # the shared session runs 4 shuffle partitions
            zookeeper=zookeeper.connect,
            bootstrap=kafka_broker.bootstrap,
            namespace=ns,
            step_timeout_s=150,
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
        "controlled shutdown of broker 2",
        "delete topic audit",
    ]
    assert all(s.ok for s in report.steps)
    assert not report.leftovers, report.leftovers
    assert "none left running" in timeline
    assert any("livectl channel" in s for s in report.stopped), report.stopped
    assert sum(s.startswith("Kafka broker") for s in report.stopped) == 2, report.stopped

    # records flowed through every step, and every acknowledged one was consumed
    records = report.facts["records"]
    assert records["acknowledged"] > 0 and records["acknowledged_not_consumed"] == 0, records
    assert records["consumed"] >= records["acknowledged"], records
    for i in range(1, 8):
        line = re.search(rf"data  step {i}: (\d+) produced, (\d+) acknowledged", timeline)
        assert line is not None and int(line.group(2)) > 0, f"step {i}: {line and line.group(0)}"
    assert f"every one of the {records['acknowledged']} acknowledged records was consumed" in timeline

    # the scenario on three brokers: payments RF 2, each partition moved onto the broker it lacked
    targets = report.facts["payments_targets"]
    before = report.facts["payments_before"]
    assert all(len(r) == 2 for r in before.values()) and all(targets[p] != before[p] for p in targets)

    # Kafka's own view, read by the test: each live broker's metadata is what livectl wrote in ZooKeeper
    states: dict[str, dict[str, Any]] = seen["states"]
    assert seen["registered"] == [1, 3]
    assert sorted({n.rsplit("-", 1)[0] for n in states}) == ["orders", "payments"]
    assert {str(p): list(r) for p, r in targets.items()} == {
        n.rsplit("-", 1)[1]: st["replicas"] for n, st in states.items() if n.startswith("payments-")
    }
    for b, cache in seen["metadata"].items():
        assert sorted(cache) == sorted(states), (b, sorted(cache))
        for name, st in states.items():
            assert 2 not in st["isr"], (name, st)
            assert cache[name] == (st["leader"], st["leader_epoch"], sorted(st["isr"]), st["replicas"]), (
                b,
                name,
                cache[name],
                st,
            )
