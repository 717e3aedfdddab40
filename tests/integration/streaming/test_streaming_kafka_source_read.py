"""How a micro-batch's read ends, against real Apache Kafka (no Spark: the reader is driven as Spark
drives it). Records the broker already holds all come in the read, across partitions and produce
batches — the read goes to the log's real end, not the one ListOffsets reports (tansu, the local broker
before Apache Kafka, under-reported it) —
and the read does not wait out its poll timeout once they have come (that wait was most of every
micro-batch's ``latestOffset``)."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from kafka import KafkaProducer

from sinks.requests import ensure_topics
from streaming.source.kafka_source import KafkaStreamReader
from streaming.source.options import MARKS, SourceOptions

pytestmark = pytest.mark.integration

#: far above what a read of records the broker holds takes on loopback, so waiting it out shows
POLL_TIMEOUT_MS = 3000


def _send_batches(bootstrap: str, topic: str, batches: list[list[tuple[int, str]]]) -> None:
    """Each inner list as one produce batch (flushed apart): (partition, value)."""
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=50)
    for batch in batches:
        for partition, value in batch:
            p.send(topic, value=value.encode(), partition=partition)
        p.flush()
    p.close()


def test_a_read_takes_every_record_the_broker_holds_without_waiting_its_poll_timeout(kafka_broker: Any) -> None:
    events, admin = f"rd-e-{uuid.uuid4().hex[:8]}", f"rd-a-{uuid.uuid4().hex[:8]}"
    ensure_topics(kafka_broker.bootstrap, [events], partitions=3)
    ensure_topics(kafka_broker.bootstrap, [admin])
    opts = {
        "bootstrap_servers": kafka_broker.bootstrap,
        "topics": f"{events},{admin}",
        "poll_timeout_ms": str(POLL_TIMEOUT_MS),
    }
    reader = KafkaStreamReader(SourceOptions.parse(opts))
    try:
        start = reader.initialOffset()
        # several records per produce batch, several batches per partition: on tansu the log's real end was
        # past what its ListOffsets reported
        batches = [[(p, f"{p}-{b}-{i}") for p in (0, 2) for i in range(3)] for b in range(3)]
        _send_batches(kafka_broker.bootstrap, events, batches)
        _send_batches(kafka_broker.bootstrap, admin, [[(0, "command-0"), (0, "command-1")]])

        began = time.monotonic()
        rows, end = reader.read(start)
        took = time.monotonic() - began
        got = list(rows)
        assert sorted(r[1] for r in got if r[2] == events) == sorted(v for b in batches for _, v in b)
        assert [r[1] for r in got if r[2] == admin] == ["command-0", "command-1"]
        assert {t: o for t, o in end.items() if t != MARKS} == {admin: {"0": 2}, events: {"0": 9, "1": 0, "2": 9}}
        assert {t: sorted(m) for t, m in end[MARKS].items()} == {admin: ["0"], events: ["0", "2"]}
        # not one poll timeout waited for nothing after the records came
        assert took < POLL_TIMEOUT_MS / 1000, f"the read took {took:.2f} s"

        # nothing new: an empty read, the same offsets (this read does wait its poll timeout)
        rows, again = reader.read(end)
        assert list(rows) == [] and again == end

        # records that arrive later are the next read's, from where the last one ended
        _send_batches(kafka_broker.bootstrap, events, [[(1, "late-0"), (1, "late-1")]])
        rows, last = reader.read(end)
        assert [r[1] for r in rows] == ["late-0", "late-1"]
        assert {t: o for t, o in last.items() if t != MARKS} == {admin: {"0": 2}, events: {"0": 9, "1": 2, "2": 9}}
        assert last[MARKS][admin] == end[MARKS][admin] and sorted(last[MARKS][events]) == ["0", "1", "2"]
    finally:
        reader.stop()
