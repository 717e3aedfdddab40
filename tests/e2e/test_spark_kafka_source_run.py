"""``livectl run --set query_source=kafka``: the controller reads its topics with Spark's own Kafka source.

Real processes: the session's ZooKeeper and Apache Kafka, five simulated brokers and ``livectl run`` processes
(the crash matrix's harness, :mod:`bench.harness`). ``livectl run`` puts the connector's jars that ``scripts/setup``
resolved (``.cache/jvm/spark-kafka``) on ``spark.jars`` itself and says in one line which source runs; a
command is answered, and after a clean stop the next controller on the same checkpoint (its failover reference
published before Spark's source starts: ``streaming.driver.app``) answers the next command, and nothing twice.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench import harness as cm
from livectl import local
from streaming.source.query_source import connector_jars

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not connector_jars(""), reason="Spark's Kafka connector not resolved: run scripts/setup"),
]


def _answered(m: Any, request_id: str) -> list[dict[str, Any]]:
    return [r for r in m.results(request_id) if r["status"] != "in_progress"]


def test_livectl_run_reads_with_spark_s_kafka_source(
    zookeeper: local.Service, kafka_broker: local.Service, tmp_path: Path
) -> None:
    m = cm.Matrix(zookeeper.connect, kafka_broker.bootstrap, tmp_path / "cluster", session_timeout_ms=6000)
    try:
        m.open()
        a = m.start_controller({"query_source": "kafka"})
        m.wait_loaded(a)
        assert "query source: Spark's Kafka source (format kafka): query_source=kafka, spark.jars has " in a.text()
        cm.create_topic(m, "sk-1", f"{m.name}-one", {0: (1, 2, 3)})
        first = cm.wait_until("the first command answered", lambda: _answered(m, "sk-1"), 180)
        a.stop()
        assert a.proc.returncode == 0, a.text()[-3000:]

        b = m.start_controller({"query_source": "kafka"})
        m.wait_loaded(b)
        assert "query source: Spark's Kafka source" in b.text()
        cm.create_topic(m, "sk-2", f"{m.name}-two", {0: (2, 3, 4)})
        second = cm.wait_until("the second command answered", lambda: _answered(m, "sk-2"), 180)
        assert [r["status"] for r in first] == ["ok"] and [r["status"] for r in second] == ["ok"]
        # answered once each, the first not again by the restarted controller
        assert len(_answered(m, "sk-1")) == 1 and len(_answered(m, "sk-2")) == 1
        for topic in (f"{m.name}-one", f"{m.name}-two"):
            assert m.znode(f"/brokers/topics/{topic}/partitions/0/state")[0] is not None
    finally:
        m.close()
