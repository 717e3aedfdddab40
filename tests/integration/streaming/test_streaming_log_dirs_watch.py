"""The status page's reader of the brokers' log sizes, on the real broker: it keeps the DescribeLogDirs reports
of the last window, adds what comes later, and skips what is not a report."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from core.kafka.log_dirs import LogDirResult, LogDirsReport, PartitionLogDir, TopicLogDir
from core.move_progress import RATE_WINDOW_MS
from streaming.monitoring.log_dirs_watch import LogDirsWatch

pytestmark = pytest.mark.integration


def test_the_watch_keeps_the_recent_reports(kafka_broker: Any) -> None:
    topic = f"logdirs-{uuid.uuid4().hex[:8]}"
    watch = LogDirsWatch(kafka_broker.bootstrap, topic, {})
    watch.read_once()
    assert watch.reports() == ()  # no topic yet: no broker reports
    admin = KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap)
    admin.create_topics([NewTopic(topic, 1, 1)])
    admin.close()
    now = int(time.time() * 1000)
    sent = [
        LogDirsReport(b, now - 1000 * i, (LogDirResult("/d", (TopicLogDir("t", (PartitionLogDir(0, 10 * i),)),)),))
        for b, i in ((1, 2), (2, 1))
    ]
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap)
    producer.send(topic, key=b"1", value=sent[0].to_json().encode())
    producer.send(topic, key=b"x", value=b"{}")
    producer.send(topic, key=b"2", value=sent[1].to_json().encode())
    producer.flush()
    deadline = time.monotonic() + 20
    while len(watch.reports()) < 2 and time.monotonic() < deadline:
        watch.read_once()
    assert watch.reports() == tuple(sent)  # oldest first
    # what comes later is added; a report older than the window is dropped
    later = LogDirsReport(3, now, ())
    old = LogDirsReport(4, now - 10 * RATE_WINDOW_MS, ())
    producer.send(topic, key=b"3", value=later.to_json().encode())
    producer.send(topic, key=b"4", value=old.to_json().encode())
    producer.flush()
    producer.close()
    deadline = time.monotonic() + 20
    while len(watch.reports()) < 3 and time.monotonic() < deadline:
        watch.read_once()
    assert sorted(r.broker_id for r in watch.reports()) == [1, 2, 3]
    watch.start().stop()  # its thread reads once more and closes its consumer
