"""Records the controller never read, gone from Apache Kafka: the data-loss setting decides, end to end.

Real processes as in ``test_broker_restart.py`` (the session's ZooKeeper and Kafka, five simulated brokers,
``livectl run`` processes on one checkpoint). In order, on one cluster:

1. retention deletes admin commands the controller has not read (it is stopped; the admin topic gets a tiny
   ``retention.bytes`` and ``segment.ms``, and the broker checks retention every second): the next
   controller, with the default ``fail_on_data_loss=true``, stops with one clear line and exit code 1 and
   applies nothing; the one after, with ``fail_on_data_loss=false``, logs the loss and goes on from the log's
   beginning — the command that survived is answered once, the deleted ones never. The strict controller's
   first Python source process is made to start slower than Spark's fixed 10 s (a wrapper interpreter that
   sleeps once): its query fails with Spark's ``Python worker failed to connect back``, and ``livectl run``
   resigns and runs again (``python_worker_start_retries``) before it meets the loss;
2. the admin topic deleted and created again under that running controller: it reads the new log from its
   beginning and answers the commands sent to it once; nothing from before is applied again.
"""

from __future__ import annotations

import functools
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType

from bench import harness as cm
from livectl import local
from sinks.requests import ensure_topics

pytestmark = pytest.mark.e2e

#: the broker's own setting: how often it applies retention (Kafka's default: every 5 minutes)
RETENTION_CHECK = {"log.retention.check.interval.ms": "1000"}


def _answers(m: Any, rid: str) -> list[str]:
    return [r["status"] for r in m.results(rid) if r["status"] != "in_progress"]


def _topic_configs(bootstrap: str, topic: str, configs: dict[str, str]) -> None:
    """Replace ``topic``'s own configs (AlterConfigs: every one not named goes back to the broker's)."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs=configs)])
    finally:
        admin.close()


def _log_start(bootstrap: str, topic: str) -> int:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, 0)
        return int(consumer.beginning_offsets([tp])[tp])
    finally:
        consumer.close()


def _recreate(bootstrap: str, topic: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.delete_topics([topic])
        cm.wait_until(f"{topic} gone from the broker's listing", lambda: topic not in admin.list_topics(), 30, 0.2)
    finally:
        admin.close()
    ensure_topics(bootstrap, [topic])


def _slow_first_source_worker(work: Path) -> str:
    """An interpreter for Spark's Python processes whose first streaming-source process starts in 12 s (a
    machine too loaded for Spark's 10 s): the rest start as they would."""
    wrapper = work / "python-slow-first-source"
    wrapper.write_text(
        "#!/bin/sh\n"
        'case " $* " in *python_streaming_source_runner*)\n'
        f'    if mkdir "{work / "slowed-once"}" 2>/dev/null; then sleep 12; fi;;\n'
        "esac\n"
        f'exec "{sys.executable}" "$@"\n'
    )
    wrapper.chmod(0o755)
    return str(wrapper)


def test_records_lost_unread_stop_or_skip_as_the_setting_says(zookeeper: local.Service, tmp_path: Path) -> None:
    bus = local.start_kafka(tmp_path / "kafka", settings=local.KafkaSettings(properties=RETENTION_CHECK))
    m = cm.Matrix(zookeeper.connect, bus.bootstrap, tmp_path / "cluster", session_timeout_ms=6000)
    admin_topic = m.topics["admin"]

    def create(rid: str) -> None:
        cm.create_topic(m, rid, f"{m.name}-{rid}", {0: (1, 2, 3)})

    try:
        m.open()
        assert m.zk is not None
        a = m.start_controller()
        m.wait_loaded(a)
        create("kb-before")
        cm.wait_until("kb-before answered", lambda: _answers(m, "kb-before"), 300)
        before_version = m.znode(f"/brokers/topics/{m.name}-kb-before")[1]
        a.stop()  # its checkpoint has read the admin topic to offset 1

        # 1. retention deletes kb-gone (offset 1) unread: every segment but the active one goes
        create("kb-gone")
        _topic_configs(bus.bootstrap, admin_topic, {"segment.ms": "100", "retention.bytes": "1"})
        time.sleep(1)
        create("kb-kept")  # older than segment.ms: this append rolls a new segment
        cm.wait_until("retention deleted the old segment", lambda: _log_start(bus.bootstrap, admin_topic) == 2, 60)
        _topic_configs(bus.bootstrap, admin_topic, {})

        strict = m.start_controller(env_extra={"PYSPARK_PYTHON": _slow_first_source_worker(tmp_path)})
        rc = strict.proc.wait(300)
        log = strict.text()
        assert rc == 1, log[-3000:]
        restarted, line = [x for x in log.splitlines() if x.startswith("livectl run:")]
        assert "Python worker failed to connect back" in restarted, restarted
        assert "stands for election again in 5 s (restart 1 of 3 in a row" in restarted, restarted
        assert f"data loss on {admin_topic}-0" in line and "fail_on_data_loss=false" in line, line
        assert m.znode(f"/brokers/topics/{m.name}-kb-kept")[0] is None, "nothing applied past the loss"

        lenient = m.start_controller({"fail_on_data_loss": "false"})
        m.wait_loaded(lenient)
        cm.wait_until("kb-kept answered", lambda: _answers(m, "kb-kept"), 300)
        assert _answers(m, "kb-kept") == ["ok"]
        assert f"data loss on {admin_topic}-0" in lenient.text()
        assert _answers(m, "kb-gone") == [] and m.znode(f"/brokers/topics/{m.name}-kb-gone")[0] is None

        # 2. the admin topic deleted and created again under the running controller
        _recreate(bus.bootstrap, admin_topic)
        for rid in ("kb-new-1", "kb-new-2"):
            create(rid)
        for rid in ("kb-new-1", "kb-new-2"):
            cm.wait_until(f"{rid} answered", functools.partial(_answers, m, rid), 300)
            assert _answers(m, rid) == ["ok"], rid
        assert lenient.alive(), lenient.text()[-3000:]
        # nothing from before again: each earlier command answered once, its topic written once
        assert _answers(m, "kb-before") == ["ok"] and _answers(m, "kb-kept") == ["ok"]
        assert m.znode(f"/brokers/topics/{m.name}-kb-before")[1] == before_version
        lenient.stop()
    finally:
        m.close()
        local.stop_kafka(bus)
