"""The status page's reader of the brokers' log sizes, on the real broker: it reads the recent DescribeLogDirs
reports while a reassignment is in progress, nothing otherwise, and skips what is not a report."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from core.log_dirs import LogDirResult, LogDirsReport, PartitionLogDir, TopicLogDir
from streaming.monitoring.log_dirs_watch import LogDirsWatch

pytestmark = pytest.mark.integration


def test_the_watch_reads_the_recent_reports_while_something_moves(kafka_broker: Any) -> None:
    topic = f"logdirs-{uuid.uuid4().hex[:8]}"
    moving = [False]
    watch = LogDirsWatch(kafka_broker.bootstrap, topic, {}, lambda: moving[0])
    moving[0] = True
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
    producer.close()
    watch.read_once()
    assert watch.reports() == tuple(sent)  # oldest first
    moving[0] = False
    watch.read_once()
    assert watch.reports() == ()
