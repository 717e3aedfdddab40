"""The source's failover barrier and explicit starting offsets, against the real tansu broker (no Spark:
the reader is driven as Spark drives it, ``initialOffset`` / ``read`` / ``readBetweenOffsets``)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from kafka import KafkaProducer

from sinks.requests import ensure_topics
from streaming.kafka_source import KafkaStreamReader
from streaming.source_options import MARKS, SourceOptions

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
    }
    reader = KafkaStreamReader(SourceOptions.parse(opts))
    try:
        # an older epoch's reference and another checkpoint's do not open it: nothing is handed out
        rows, end = reader.read(start)
        assert list(rows) == [] and end == start
        rows, end = reader.read(start)
        assert list(rows) == [] and end == start
        _send(kafka_broker.bootstrap, events, ["waiting-5", _ref(7, "/cp/failover/epoch-7"), "after-7"])
        # the barrier batch: the reference's partition up to and including it (over max_records_per_batch),
        # nothing from the other topic yet
        rows, end = reader.read(start)
        got = [(r[2], r[3], r[4], r[1]) for r in rows]
        assert [(t, o) for t, _, o, _ in got] == [(events, o) for o in range(2, 7)]
        assert got[-1][3] == _ref(7, "/cp/failover/epoch-7")
        assert {t: o for t, o in end.items() if t != MARKS} == {admin: {"0": 0}, events: {"0": 7}}
        # the mark of the record before each position past a log's first (the reference, here)
        assert list(end[MARKS]) == [events] and list(end[MARKS][events]) == ["0"]
        # open from now on; a replay of the barrier batch reads exactly the same records
        rows, _ = reader.read(end)
        assert [r[1] for r in rows] in (["command-0"], ["after-7"])
        again = KafkaStreamReader(SourceOptions.parse(opts))
        try:
            assert [(r[2], r[4]) for r in again.readBetweenOffsets(start, end)] == [(events, o) for o in range(2, 7)]
        finally:
            again.stop()
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
