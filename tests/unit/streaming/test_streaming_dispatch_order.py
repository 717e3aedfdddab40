"""The driver's order within a micro-batch: ZooKeeper's writes are decoded and written before the other
rows are decoded, and a ZooKeeper write's plain fast decode gives what the strict decoder gives."""

from __future__ import annotations

import gc
from collections.abc import Sequence
from typing import Any

import orjson
import pandas as pd
import pytest

from core import decisions as dc
from core.codec.decisions import decision_to_json, decode_decision
from core.errors import FormatError
from sinks.memory import MemoryRequestSink
from sinks.ports import Fence, ZkBatchResult
from streaming.query.dispatch import Dispatcher
from streaming.query.stateful import KIND_REQUEST, KIND_ZK, METRIC_COLUMNS, OUTPUT_COLUMNS

pytestmark = pytest.mark.unit


class RecordingZkSink:
    def __init__(self) -> None:
        self.batches: list[list[dc.ZkWrite]] = []
        self.gc_enabled: list[bool] = []

    def write_batch(self, batch_id: int, writes: Sequence[dc.ZkWrite]) -> ZkBatchResult:
        self.batches.append(list(writes))
        self.gc_enabled.append(gc.isenabled())
        return ZkBatchResult(batch_id, len(writes), 0, (), 1)

    def check_fence(self) -> None:
        return None


def _frame(rows: list[tuple[int, int, str, str]]) -> pd.DataFrame:
    return pd.DataFrame([[*r, *(0,) * len(METRIC_COLUMNS)] for r in rows], columns=OUTPUT_COLUMNS)


def test_zookeeper_writes_are_made_before_the_other_rows_are_decoded() -> None:
    w1 = dc.ZkWrite(dc.ZkOp.SET, "/brokers/topics/a/partitions/0/state", '{"leader":1}', 3)
    w2 = dc.ZkWrite(dc.ZkOp.CREATE, "/admin/x", None, make_parents=True)
    # a request row that cannot be decoded comes before the second write: the writes are made first
    frame = _frame(
        [
            (0, 0, KIND_ZK, decision_to_json(w1)),
            (0, 1, KIND_REQUEST, "{not json"),
            (1, 0, KIND_ZK, decision_to_json(w2)),
        ]
    )
    zk = RecordingZkSink()
    d = Dispatcher(zk, MemoryRequestSink(Fence(1, 0)))
    was_enabled = gc.isenabled()
    with pytest.raises(FormatError, match="not valid JSON"):
        d.dispatch(frame, 4)
    assert zk.batches == [[w1, w2]]
    # the collector is off while the batch is carried out, and as it was afterwards
    assert zk.gc_enabled == [False]
    assert gc.isenabled() == was_enabled


@pytest.mark.parametrize(
    "write",
    [
        dc.ZkWrite(dc.ZkOp.SET, "/brokers/topics/t/partitions/0/state", '{"leader":2,"isr":[2,3]}', 7),
        dc.ZkWrite(dc.ZkOp.CREATE, "/brokers/topics/t", '{"version":3}', make_parents=True),
        dc.ZkWrite(dc.ZkOp.DELETE, "/admin/delete_topics/t"),
        dc.ZkWrite(dc.ZkOp.UPSERT, "/config/topics/t", "{}"),
        dc.ZkWrite(dc.ZkOp.SET, "/x", "caf\u00e9", 2**62),
    ],
)
def test_a_plain_zookeeper_write_decodes_as_the_strict_decoder_reads_it(write: dc.ZkWrite) -> None:
    raw = orjson.loads(decision_to_json(write))
    assert decode_decision(raw) == write
    assert decode_decision(dict(raw)) == decode_decision({**raw, "extra": 1})


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"version": 2}, "version"),
        ({"version": True}, "version"),
        ({"op": "rename"}, "op"),
        ({"path": ""}, "path"),
        ({"path": 5}, "path"),
        ({"path": "/a\ud800"}, "path"),
        ({"data": 5}, "data"),
        ({"expected_version": 2**63}, "expected_version"),
        ({"expected_version": 1.5}, "expected_version"),
        ({"expected_version": False}, "expected_version"),
        ({"make_parents": 1}, "make_parents"),
    ],
)
def test_a_bad_zookeeper_write_is_refused_naming_the_field(change: dict[str, Any], field: str) -> None:
    raw = orjson.loads(decision_to_json(dc.ZkWrite(dc.ZkOp.SET, "/a", "{}", 1)))
    with pytest.raises(FormatError) as e:
        decode_decision({**raw, **change})
    assert e.value.args[0] == field or field in str(e.value)
