"""Every codec of ``request_compression`` through real Apache Kafka: the request sink writes a batch in one
transaction, as the controller does, and a ``read_committed`` consumer (as the simulated brokers read) gets
the same messages back."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kafka import KafkaConsumer, TopicPartition
from request_bodies import lisr_request, um_request

from core.decisions import BrokerRequest
from sinks.compression import COMPRESSIONS
from sinks.ports import Fence
from sinks.requests import RequestSink, ensure_topics, request_messages

pytestmark = pytest.mark.integration

FENCE = Fence(controller_epoch=3, epoch_zk_version=2)


def _batch() -> list[BrokerRequest]:
    # enough partitions that every codec has something to shrink: repetitive JSON, as the real requests are
    topics = [f"topic-{i}" for i in range(40)]
    out: list[BrokerRequest] = []
    for broker in (1, 2, 3):
        for t in topics:
            out.append(lisr_request(broker, t, list(range(10))))
            out.append(um_request(broker, t, [1, 2, 3]))
    return out


def _read_committed(bootstrap: str, topic: str, expected: int) -> list[Any]:
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, isolation_level="read_committed")
    try:
        tps = [TopicPartition(topic, p) for p in sorted(c.partitions_for_topic(topic))]
        c.assign(tps)
        for tp in tps:
            c.seek(tp, 0)
        out: list[Any] = []
        for _ in range(40):
            for records in c.poll(timeout_ms=250, max_records=1000).values():
                out.extend(records)
            if len(out) >= expected:
                break
        return out
    finally:
        c.close()


@pytest.mark.parametrize("codec", COMPRESSIONS)
def test_each_codec_is_written_and_read_back_unchanged(kafka_broker: Any, codec: str) -> None:
    topic = f"req-{codec}-{uuid.uuid4().hex[:8]}"
    ensure_topics(kafka_broker.bootstrap, [topic], partitions=3)
    batch = _batch()
    expected = request_messages(topic, FENCE, 9, batch)
    tid = f"livectl-test-{uuid.uuid4().hex[:8]}"
    with RequestSink(
        kafka_broker.bootstrap, FENCE, requests_topic=topic, transactional_id=tid, compression=codec
    ) as sink:
        result = sink.write_requests(9, batch)
        # what the producer reports for the topic's record batches: compressed size over raw size
        metrics = sink._producer.metrics() if sink._producer is not None else {}
        rate = metrics[f"producer-topic-metrics.{topic}"]["compression-rate"]
    assert (result.written, result.skipped) == (len(expected), 0)
    if codec == "none":
        assert rate == pytest.approx(1.0)
    else:
        assert rate < 0.5, f"{codec}: compression rate {rate}"
    got = _read_committed(kafka_broker.bootstrap, topic, len(expected))
    by_key: dict[bytes, list[tuple[bytes, list[tuple[str, bytes]]]]] = {}
    for r in sorted(got, key=lambda r: (r.partition, r.offset)):
        by_key.setdefault(r.key, []).append((r.value, list(r.headers)))
    sent: dict[bytes, list[tuple[bytes, list[tuple[str, bytes]]]]] = {}
    for m in expected:
        sent.setdefault(m.key, []).append((m.value, list(m.headers)))
    # every broker's messages, byte for byte and in the order sent (one key, one partition)
    assert by_key == sent
