"""The Kafka broker restarted under a running controller, without its data (the local tansu broker keeps
none): the input offsets in the checkpoint now point past the end of the new logs.

Real processes: ZooKeeper of the session, a broker of this test's own (restarted on the same port), five
simulated brokers and ``livectl run`` processes (the harness of ``bench/crash_matrix.py``). By default
(``fail_on_data_loss=true``) the controller stops with one clear line and exit code 1, and applies
nothing it cannot account for; the next controller, started on the same checkpoint with
``fail_on_data_loss=false``, takes the lease, logs the loss, reads the new logs from their beginning and
applies and answers the commands sent after the restart exactly once — and nothing from before them again —
even when the new log has grown past the checkpoint's offset (the source tells the logs apart by the mark of
the last record read: ``streaming.kafka_source``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from livectl import local
from sinks.requests import ensure_topics

pytestmark = pytest.mark.e2e

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _crash_matrix() -> Any:
    sys.path.insert(0, str(BENCH))
    try:
        import crash_matrix
    finally:
        sys.path.remove(str(BENCH))
    return crash_matrix


def test_broker_restarted_without_its_data(zookeeper: local.Service, tmp_path: Path) -> None:
    cm = _crash_matrix()
    port = local.free_port()
    broker = local.start_broker(tmp_path / "broker", port)
    m = cm.Matrix(zookeeper.connect, broker.bootstrap, tmp_path / "cluster", session_timeout_ms=6000)
    try:
        m.open()
        assert m.zk is not None and m.producer is not None
        a = m.start_controller()
        m.wait_loaded(a)
        first = {0: (1, 2, 3), 1: (2, 3, 4)}
        cm._create(m, "kb-before", f"{m.name}-before", first)
        cm.wait_until("the first command answered", lambda: m.results("kb-before"), 180)
        before_version = m.znode(f"/brokers/topics/{m.name}-before")[1]

        local.stop_process(broker.pid, broker.marker)
        broker = local.start_broker(tmp_path / "broker", port)
        ensure_topics(broker.bootstrap, list(m.topics.values()))
        m.producer.close()
        m.producer = cm.KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=0)
        after = {0: (3, 4, 5)}
        cm._create(m, "kb-after", f"{m.name}-after", after)
        # the new log grows past the checkpoint's admin offset (1): offsets alone cannot tell it from the old
        # one, and a read from offset 1 would skip kb-after
        cm._create(m, "kb-after-2", f"{m.name}-after-2", after)

        # the default: stop, with the reason on one line
        rc = a.proc.wait(240)
        log = a.text()
        assert rc == 1, log[-3000:]
        [line] = [x for x in log.splitlines() if x.startswith("livectl run:")]
        assert "data loss on" in line and "fail_on_data_loss=false" in line, line
        assert m.zk.exists(f"/brokers/topics/{m.name}-after") is None, "nothing applied past the loss"

        # the operator accepts the loss: the next controller goes on from the earliest offsets
        b = m.start_controller({"fail_on_data_loss": "false"})
        m.wait_loaded(b)
        for rid in ("kb-after", "kb-after-2"):
            final = cm.wait_until(
                f"the command {rid} sent after the restart answered",
                lambda rid=rid: [r for r in m.results(rid) if r["status"] != "in_progress"],
                420,
            )
            assert [r["status"] for r in final] == ["ok"], final
        assert "data loss on" in b.text()
        assert m.znode(f"/brokers/topics/{m.name}-before")[1] == before_version, "nothing from before applied again"
        assert m.results("kb-before") == [], "the lost log's answers are not written again"
        b.stop()
    finally:
        m.close()
        local.stop_process(broker.pid, broker.marker)
