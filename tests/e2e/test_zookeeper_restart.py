"""ZooKeeper restarted under a running controller: it recovers, and no command is lost or applied twice.

Real processes: a ZooKeeper of this test's own (so that it can be restarted on the same port and data
folder), the session's broker, five simulated brokers and one ``livectl run`` (the crash
matrix's harness, :mod:`bench.harness`). A command is sent while ZooKeeper is down: the micro-batch's ZooKeeper writes
fail, are retried (``sink_retry_timeout_ms``) and land once ZooKeeper is back; the controller keeps its
session, its lease and its epoch; every command is answered exactly once.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition
from waiting import wait_until

from bench import harness as cm
from livectl import local

pytestmark = pytest.mark.e2e


def test_zookeeper_restarted_under_the_controller(kafka_broker: local.Service, tmp_path: Path) -> None:
    port = local.free_port()
    zk_dir = tmp_path / "zookeeper"
    svc = local.start_zookeeper(zk_dir, port)
    # a session long enough to outlive a restart of ZooKeeper's JVM on a loaded machine
    m = cm.Matrix(svc.connect, kafka_broker.bootstrap, tmp_path / "cluster", session_timeout_ms=20000)
    try:
        m.open()
        assert m.zk is not None
        a = m.start_controller()
        m.wait_loaded(a)
        before = {0: (1, 2, 3), 1: (2, 3, 4)}
        during = {0: (3, 4, 5), 1: (4, 5, 1)}
        cm.create_topic(m, "zk-before", f"{m.name}-before", before)
        cm.wait_until("the first topic answered", lambda: m.results("zk-before"), 180)
        epoch = m.zk.get("/controller_epoch")[0]

        local.stop_process(svc.pid, svc.marker)
        cm.create_topic(m, "zk-during", f"{m.name}-during", during)
        # the controller reads the command and meets an unreachable ZooKeeper: the micro-batch that carries it
        # is planned (Spark's offset log reaches the command) and cannot commit while ZooKeeper is down
        ends = _end_offsets(kafka_broker.bootstrap, m.topics["admin"])
        planned = wait_until(
            "a micro-batch planned with the command sent while ZooKeeper is down",
            lambda: _planned_through(m.checkpoint, m.topics["admin"], ends),
            120,
            interval=0.5,
            detail=lambda: a.text()[-3000:],
        )
        assert not (m.checkpoint / "commits" / planned.name).exists(), "committed without ZooKeeper"
        svc = local.start_zookeeper(zk_dir, port)

        cm.wait_until("the command sent while ZooKeeper was down answered", lambda: m.results("zk-during"), 240)
        expect = cm.Expect({f"{m.name}-before": before, f"{m.name}-during": during})
        cm.wait_until("both topics online in ZooKeeper and in the brokers' views", lambda: not m.problems(expect), 120)
        assert a.alive(), a.text()[-3000:]
        assert m.zk.get("/controller_epoch")[0] == epoch, "no failover was needed"
        for rid in ("zk-before", "zk-during"):
            final = [r["status"] for r in m.results(rid) if r["status"] != "in_progress"]
            assert final == ["ok"], (rid, final)
    finally:
        m.close()
        local.stop_process(svc.pid, svc.marker)


def _end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        return {tp.partition: int(end) for tp, end in consumer.end_offsets(tps).items()}
    finally:
        consumer.close()


def _planned_through(checkpoint: Path, topic: str, ends: dict[int, int]) -> Path | None:
    """The first micro-batch in Spark's offset log (its file) whose end reaches ``ends`` on every partition of
    ``topic`` (a file's third line is the source's offset: topic -> partition -> next offset)."""
    for f in sorted((checkpoint / "offsets").glob("[0-9]*"), key=lambda f: int(f.name)):
        lines = f.read_text().splitlines()
        if len(lines) < 3:
            continue
        planned = json.loads(lines[2]).get(topic, {})
        if all(int(planned.get(str(p), 0)) >= end for p, end in ends.items()):
            return f
    return None
