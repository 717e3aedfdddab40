"""The source's failover barrier and explicit starting offsets, against real Apache Kafka (no Spark:
the reader is driven as Spark drives it, ``initialOffset`` / ``read`` / ``readBetweenOffsets``)."""

from __future__ import annotations

import json
import threading
import time
import uuid
from typing import Any

import pytest
from kafka import KafkaProducer

from sinks.requests import ensure_topics
from streaming.source.kafka_source import KafkaStreamReader
from streaming.source.options import AHEAD, MARKS, SourceOptions

pytestmark = pytest.mark.integration


def _send(bootstrap: str, topic: str, values: list[str]) -> None:
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    for v in values:
        p.send(topic, key=b"k", value=v.encode())
    p.flush()
    p.close()


def _ref(epoch: int, path: str) -> str:
    return json.dumps({"version": 1, "type": "controller_failover_ref", "controller_epoch": epoch, "path": path})


def test_the_barrier_holds_records_until_the_new_epochs_reference(kafka_broker: Any) -> None:
    events, admin = f"bar-e-{uuid.uuid4().hex[:8]}", f"bar-a-{uuid.uuid4().hex[:8]}"
    ensure_topics(kafka_broker.bootstrap, [events, admin])
    _send(kafka_broker.bootstrap, events, ["before-0", "before-1"])
    # the checkpoint ends here (both topics at 2 / 0); then records arrive while the controller takes over
    start = {admin: {"0": 0}, events: {"0": 2}}
    _send(
        kafka_broker.bootstrap,
        events,
        ["waiting-2", _ref(4, "/cp/failover/epoch-4"), _ref(7, "/other/failover/epoch-7")],
    )
    _send(kafka_broker.bootstrap, admin, ["command-0"])
    opts = {
        "bootstrap_servers": kafka_broker.bootstrap,
        "topics": f"{events},{admin}",
        "barrier_topic": events,
        "barrier_epoch": "7",
        "barrier_path": "/cp/failover",
        "max_records_per_batch": "1",
        "first_read_wait_ms": "300",
    }
    reader = KafkaStreamReader(SourceOptions.parse(opts))
    try:
        # an older epoch's reference and another checkpoint's do not open it: nothing is handed out (the
        # first read once its wait for the reference is over)
        rows, end = reader.read(start)
        assert list(rows) == [] and end == start
        rows, end = reader.read(start)
        assert list(rows) == [] and end == start
        _send(kafka_broker.bootstrap, events, ["waiting-5", _ref(7, "/cp/failover/epoch-7"), "after-7"])
        # the barrier batch: the reference alone, handed out ahead of the records that waited before it
        rows, end = reader.read(start)
        got = [(r[2], r[4], r[1]) for r in rows]
        assert got == [(events, 6, _ref(7, "/cp/failover/epoch-7"))]
        assert {t: o for t, o in end.items() if not t.startswith("@")} == start
        assert end[AHEAD]["offset"] == 6 and (end[AHEAD]["topic"], end[AHEAD]["partition"]) == (events, 0)
        batches = [(start, end, [(events, 6)])]
        # open from now on: the records that waited follow, max_records_per_batch (1) at a time, the
        # reference skipped; the offset names it until the reads pass it
        while True:
            begun = end
            rows, end = reader.read(begun)
            read = [(r[2], r[4]) for r in rows]
            if not read:
                break
            assert len(read) == 1
            passed = end.get(events, {}).get("0", 0) > 6
            assert (AHEAD in end) is not passed, end
            batches.append((begun, end, read))
        delivered = [o for _, _, read in batches[1:] for t, o in read if t == events]
        assert delivered == [2, 3, 4, 5, 7]
        assert [o for _, _, read in batches for t, o in read if t == admin] == [0]
        # a replay of each planned batch reads exactly the same records, the barrier's included
        again = KafkaStreamReader(SourceOptions.parse(opts))
        try:
            for begun, ended, read in batches:
                assert [(r[2], r[4]) for r in again.readBetweenOffsets(begun, ended)] == read
        finally:
            again.stop()
    finally:
        reader.stop()


def test_a_barrier_reference_with_nothing_before_it_moves_the_position_past_it(kafka_broker: Any) -> None:
    events = f"bar-n-{uuid.uuid4().hex[:8]}"
    ensure_topics(kafka_broker.bootstrap, [events])
    _send(kafka_broker.bootstrap, events, ["before-0", _ref(3, "/cp/failover/epoch-3"), "after-2"])
    opts = {
        "bootstrap_servers": kafka_broker.bootstrap,
        "topics": events,
        "barrier_topic": events,
        "barrier_epoch": "3",
        "first_read_wait_ms": "300",
    }
    reader = KafkaStreamReader(SourceOptions.parse(opts))
    try:
        start = {events: {"0": 1}}
        rows, end = reader.read(start)
        assert [r[4] for r in rows] == [1] and AHEAD not in end
        assert end[events] == {"0": 2} and list(end[MARKS][events]) == ["0"]
        rows, _ = reader.read(end)
        assert [r[1] for r in rows] == ["after-2"]
    finally:
        reader.stop()


def _first_reads(
    bootstrap: str, opts: dict[str, str], topic: str, values: list[str]
) -> tuple[KafkaStreamReader, dict[str, Any], list[Any], float]:
    """A reader whose first read returns at once (``first_read_wait_ms`` 0) finds nothing; another's first
    read, from the same start, waits for ``values`` sent to ``topic`` 1.5 s after it began: that reader (to be
    stopped), its end offset, the rows and the seconds it waited."""
    waiting = KafkaStreamReader(SourceOptions.parse({**opts, "first_read_wait_ms": "20000"}))
    at_once = KafkaStreamReader(SourceOptions.parse({**opts, "first_read_wait_ms": "0"}))
    try:
        start = waiting.initialOffset()
        began = time.monotonic()
        rows, end = at_once.read(start)
        assert list(rows) == [] and end == start and time.monotonic() - began < 5.0
    finally:
        at_once.stop()
    publisher = threading.Timer(1.5, _send, (bootstrap, topic, values))
    publisher.start()
    try:
        began = time.monotonic()
        rows, end = waiting.read(start)
        waited = time.monotonic() - began
    except BaseException:
        waiting.stop()
        raise
    finally:
        publisher.join()
    return waiting, end, list(rows), waited


def test_the_first_read_behind_the_barrier_waits_for_the_reference(kafka_broker: Any) -> None:
    """A new checkpoint's query runs micro-batch 0 with what its first read returns: the reference published
    while that read waits makes batch 0 the failover batch, not an empty one before it."""
    events = f"bar-w-{uuid.uuid4().hex[:8]}"
    ensure_topics(kafka_broker.bootstrap, [events])
    _send(kafka_broker.bootstrap, events, ["before-0"])
    opts = {
        "bootstrap_servers": kafka_broker.bootstrap,
        "topics": events,
        "barrier_topic": events,
        "barrier_epoch": "2",
    }
    reader, end, rows, waited = _first_reads(kafka_broker.bootstrap, opts, events, ["waiting-1", _ref(2, "/cp/f/2")])
    try:
        # the reference alone, then the records that waited before it
        assert [r[1] for r in rows] == [_ref(2, "/cp/f/2")]
        assert end[events] == {"0": 0} and end[AHEAD]["offset"] == 2
        assert 1.0 <= waited < 15.0, waited
        rows_after, end = reader.read(end)
        assert [r[1] for r in rows_after] == ["before-0", "waiting-1"]
        assert end[events] == {"0": 3} and AHEAD not in end
    finally:
        reader.stop()


def test_a_first_read_waits_for_the_first_record(kafka_broker: Any) -> None:
    """Without a barrier too: a new checkpoint's batch 0 is not an empty batch run before the first record."""
    topic = f"first-{uuid.uuid4().hex[:8]}"
    ensure_topics(kafka_broker.bootstrap, [topic])
    opts = {"bootstrap_servers": kafka_broker.bootstrap, "topics": topic}
    reader, end, rows, waited = _first_reads(kafka_broker.bootstrap, opts, topic, ["first"])
    try:
        assert [r[1] for r in rows] == ["first"] and 1.0 <= waited < 15.0, waited
        # later reads wait poll_timeout_ms (500 ms) as before
        began = time.monotonic()
        rows_after, again = reader.read(end)
        assert list(rows_after) == [] and again == end and time.monotonic() - began < 5.0
    finally:
        reader.stop()


def test_explicit_starting_offsets(kafka_broker: Any) -> None:
    topic = f"bar-s-{uuid.uuid4().hex[:8]}"
    ensure_topics(kafka_broker.bootstrap, [topic])
    _send(kafka_broker.bootstrap, topic, ["a", "b", "c"])
    opts = {
        "bootstrap_servers": kafka_broker.bootstrap,
        "topics": topic,
        "starting_offsets": json.dumps({topic: {"0": 2}}),
    }
    reader = KafkaStreamReader(SourceOptions.parse(opts))
    try:
        start = reader.initialOffset()
        assert start == {topic: {"0": 2}}
        rows, _ = reader.read(start)
        assert [r[1] for r in rows] == ["c"]
    finally:
        reader.stop()
