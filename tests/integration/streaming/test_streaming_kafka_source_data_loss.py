"""The source's data-loss rule (Spark's ``failOnDataLoss``) against a real broker restart.

The local tansu broker keeps no data: restarted, its topics come back empty and the offsets in a
checkpoint point past the end of the new log — or, once the new log has grown past them, at records the
checkpoint never read (told apart by the mark of the last record read). The reader is the same object Spark drives
(``KafkaStreamReader.read``), called here without Spark.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer

from livectl import local
from sinks.requests import ensure_topics
from streaming.kafka_source import KafkaStreamReader
from streaming.source_options import MARKS, KafkaSourceError, SourceOptions

pytestmark = pytest.mark.integration

TOPIC = "loss.input"


class Broker:
    """A private tansu broker that the test may restart on the same port."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = local.free_port()
        self.svc = local.start_broker(folder, self.port)

    @property
    def bootstrap(self) -> str:
        return self.svc.bootstrap

    def restart(self) -> None:
        local.stop_process(self.svc.pid, self.svc.marker)
        self.svc = local.start_broker(self.folder, self.port)

    def stop(self) -> None:
        local.stop_process(self.svc.pid, self.svc.marker)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(tmp_path / "broker")
    try:
        yield b
    finally:
        b.stop()


def _produce(bootstrap: str, values: list[str]) -> None:
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for v in values:
        p.send(TOPIC, value=v.encode(), partition=0)
    p.flush()
    p.close()


def _reader(bootstrap: str, fail: str) -> KafkaStreamReader:
    opts = {"bootstrap_servers": bootstrap, "topics": TOPIC, "fail_on_data_loss": fail, "poll_timeout_ms": "200"}
    return KafkaStreamReader(SourceOptions.parse(opts))


def _values(rows: Iterator[tuple[Any, ...]]) -> list[tuple[str, int]]:
    return [(r[1], r[4]) for r in rows]


def test_offsets_gone_after_a_broker_restart_fail_by_default_or_restart_from_earliest(
    broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    ensure_topics(broker.bootstrap, [TOPIC])
    _produce(broker.bootstrap, [f"before-{i}" for i in range(5)])
    strict, lenient = _reader(broker.bootstrap, "true"), _reader(broker.bootstrap, "false")
    try:
        rows, end = strict.read(strict.initialOffset())
        assert [v for v, _ in _values(rows)] == [f"before-{i}" for i in range(5)]
        assert end[TOPIC] == {"0": 5} and list(end[MARKS][TOPIC]) == ["0"]
        # nothing new: the checkpoint's offset is the log's end, which is not a loss (even though tansu
        # under-reports the end offset)
        rows, again = strict.read(end)
        assert _values(rows) == [] and again == end

        broker.restart()
        ensure_topics(broker.bootstrap, [TOPIC])
        _produce(broker.bootstrap, ["after-0", "after-1"])

        with pytest.raises(KafkaSourceError) as failed:
            strict.read(end)
        message = str(failed.value)
        assert "data loss on loss.input-0" in message
        assert "reads from offset 5 but the log now ends at offset" in message
        assert "fail_on_data_loss=false" in message

        with caplog.at_level(logging.WARNING, logger="livectl.kafka_source"):
            rows, after = lenient.read(end)
        assert _values(rows) == [("after-0", 0), ("after-1", 1)]
        # tansu creates a topic that a client asks for before it is created again (with 4 partitions):
        # partitions that appear later are read from their beginning
        assert after[TOPIC]["0"] == 2 and all(o == 0 for p, o in after[TOPIC].items() if p != "0")
        assert any("data loss on loss.input-0" in r.getMessage() for r in caplog.records)
        # and it goes on from there: the next record once, nothing twice
        _produce(broker.bootstrap, ["after-2"])
        rows, last = lenient.read(after)
        assert _values(rows) == [("after-2", 2)] and last[TOPIC]["0"] == 3
    finally:
        strict.stop()
        lenient.stop()


def test_a_new_log_grown_past_the_checkpoints_offset_is_told_from_the_old_one(
    broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    """Offsets alone cannot tell the two logs apart (Spark's source has that blind spot); the mark of the
    last record read can."""
    ensure_topics(broker.bootstrap, [TOPIC])
    _produce(broker.bootstrap, [f"before-{i}" for i in range(3)])
    strict, lenient = _reader(broker.bootstrap, "true"), _reader(broker.bootstrap, "false")
    try:
        rows, end = strict.read(strict.initialOffset())
        assert [v for v, _ in _values(rows)] == ["before-0", "before-1", "before-2"] and end[TOPIC]["0"] == 3

        broker.restart()
        ensure_topics(broker.bootstrap, [TOPIC])
        _produce(broker.bootstrap, [f"after-{i}" for i in range(5)])

        with pytest.raises(KafkaSourceError) as failed:
            strict.read(end)
        message = str(failed.value)
        assert "data loss on loss.input-0: the checkpoint reads from offset 3 but the record at offset 2" in message
        assert "is not the one it read there" in message and "fail_on_data_loss=false" in message

        with caplog.at_level(logging.WARNING, logger="livectl.kafka_source"):
            rows, after = lenient.read(end)
        # every record of the new log, from its beginning: none skipped
        assert _values(rows) == [(f"after-{i}", i) for i in range(5)] and after[TOPIC]["0"] == 5
        assert any("data loss on loss.input-0" in r.getMessage() for r in caplog.records)
        # and the new log's own offsets check as the same log afterwards
        rows, again = strict.read(after)
        assert _values(rows) == [] and again == after
    finally:
        strict.stop()
        lenient.stop()


def test_a_planned_batch_re_read_from_a_log_written_again_is_data_loss(broker: Broker) -> None:
    """Re-reading a planned batch (after a restart) finds other records at its offsets: stop by default;
    with ``fail_on_data_loss=false`` that partition's records are left out (the next read takes the new log
    from its beginning)."""
    ensure_topics(broker.bootstrap, [TOPIC])
    _produce(broker.bootstrap, [f"before-{i}" for i in range(3)])
    strict, lenient = _reader(broker.bootstrap, "true"), _reader(broker.bootstrap, "false")
    try:
        start = strict.initialOffset()
        _, end = strict.read(start)
        assert [r[1] for r in strict.readBetweenOffsets(start, end)] == ["before-0", "before-1", "before-2"]

        broker.restart()
        ensure_topics(broker.bootstrap, [TOPIC])
        _produce(broker.bootstrap, [f"after-{i}" for i in range(4)])

        with pytest.raises(
            KafkaSourceError, match="the record at offset 2 is not the one the planned batch ended with"
        ):
            list(strict.readBetweenOffsets(start, end))
        assert [r for r in lenient.readBetweenOffsets(start, end) if r[2] == TOPIC and r[3] == 0] == []
    finally:
        strict.stop()
        lenient.stop()
