"""A Kafka broker away under the source's reader, against a real Apache Kafka of this test's own (stopped and started
again on its ports, with its data; no Spark: the reader is driven as Spark drives it).

While the broker is away a read returns nothing and the offsets it was given, for up to
``unreachable_timeout_ms``; past that it fails naming the option. Once the broker is back the reads go on from
where they stood: nothing skipped, nothing twice. (CI once saw the controller's query fail this way during a
Kafka restart: a consumer made again while the broker was down gave up bootstrapping and the read raised.)
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kafka import KafkaProducer

from livectl import local
from sinks.requests import ensure_topics
from streaming.source.kafka_source import KafkaStreamReader
from streaming.source.options import KafkaSourceError, SourceOptions, split_offset

pytestmark = pytest.mark.integration

TOPIC = "outage-events"


def _send(bootstrap: str, values: list[str]) -> None:
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    for v in values:
        p.send(TOPIC, value=v.encode(), partition=int(v[-1]) % 2)
    p.flush()
    p.close()


def test_reads_ride_out_a_broker_away_then_fail_naming_the_option_and_go_on_once_it_is_back(tmp_path: Path) -> None:
    broker = local.start_kafka(tmp_path / "kafka")
    try:
        ensure_topics(broker.bootstrap, [TOPIC], partitions=2)
        _send(broker.bootstrap, [f"before-{i}" for i in range(6)])
        options = {
            "bootstrap_servers": broker.bootstrap,
            "topics": TOPIC,
            # a client request (a bootstrap, a metadata refresh) gives up quickly, so the test does not wait 30 s
            "request_timeout_ms": "1000",
            "unreachable_timeout_ms": "6000",
            "first_read_wait_ms": "0",
        }
        reader = KafkaStreamReader(SourceOptions.parse(options))
        rows, start = reader.read(reader.initialOffset())
        assert sorted(r[1] for r in rows) == sorted(f"before-{i}" for i in range(6))

        local.stop_kafka(broker)
        began = time.monotonic()
        rows, end = reader.read(start)
        assert list(rows) == []
        assert split_offset(end)[0] == split_offset(start)[0], "a read while the broker is away moves no offset"
        with pytest.raises(KafkaSourceError) as failed:
            while time.monotonic() - began < 60:
                rows, end = reader.read(start)
                assert list(rows) == [] and split_offset(end)[0] == split_offset(start)[0]
        assert failed.value.option == "unreachable_timeout_ms", failed.value
        assert f"Kafka at {broker.bootstrap} did not answer for" in failed.value.reason, failed.value
        assert time.monotonic() - began >= 6

        broker = local.restart_kafka(broker)
        _send(broker.bootstrap, [f"after-{i}" for i in range(4)])
        got: list[str] = []
        deadline = time.monotonic() + 60
        while len(got) < 4 and time.monotonic() < deadline:
            rows, start = reader.read(start)
            got += [r[1] for r in rows]
        assert sorted(got) == sorted(f"after-{i}" for i in range(4)), "nothing skipped, nothing twice"
        reader.stop()
    finally:
        local.stop_kafka(broker)
