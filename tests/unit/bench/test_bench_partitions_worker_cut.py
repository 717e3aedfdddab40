"""The worker-cut fault's own checks (``bench/partitions/worker_cut.py``) on outputs made here: each finds
what it must (a request written twice, a partition missing from a request, a second answer, a znode
rewritten) and nothing in outputs that are right; the micro-batch holding a command is found from the
checkpoint's offset log as Spark writes it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.partitions.worker_cut import BatchOutputs, batch_holding, once_problems

pytestmark = pytest.mark.unit

TOPIC = "ledger"
ASSIGNMENT: dict[int, tuple[int, ...]] = {0: (1, 2), 1: (2, 3)}
LIVE = {1, 2, 3}


def _request(api: str, partitions: list[int], *, broker: int = -1, addressees: tuple[int, ...] = ()) -> dict[str, Any]:
    states = [{"topicName": TOPIC, "partitionStates": [{"partitionIndex": p} for p in partitions]}]
    message: dict[str, Any] = {
        "version": 1,
        "api": api,
        "controllerEpoch": 1,
        "batchId": 7,
        "brokerId": broker,
        "body": {"topicStates": states},
    }
    if addressees:
        message["addressees"] = [{"brokerId": b, "brokerEpoch": 10 + b} for b in addressees]
    return message


def _outputs(
    requests: list[dict[str, Any]], results: list[dict[str, Any]], versions: tuple[int, ...] = (0, 0, 0)
) -> BatchOutputs:
    paths = [f"/brokers/topics/{TOPIC}"] + [f"/brokers/topics/{TOPIC}/partitions/{p}/state" for p in ASSIGNMENT]
    return BatchOutputs(
        7,
        1,
        tuple(sorted(json.dumps(m, sort_keys=True) for m in requests)),
        tuple(sorted(json.dumps(r, sort_keys=True) for r in results)),
        tuple((path, v, 100 + i) for i, (path, v) in enumerate(zip(paths, versions, strict=True))),
    )


def _right() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    requests = [
        _request("LeaderAndIsr", [0], broker=1),
        _request("LeaderAndIsr", [0, 1], broker=2),
        _request("LeaderAndIsr", [1], broker=3),
        _request("UpdateMetadata", [0, 1], addressees=(1, 2, 3)),
    ]
    results = [
        {"request_id": "r", "status": "in_progress", "batch_id": 7},
        {"request_id": "r", "status": "ok", "batch_id": 7},
    ]
    return requests, results


def test_outputs_written_once_have_no_problem() -> None:
    requests, results = _right()
    assert once_problems(_outputs(requests, results), TOPIC, ASSIGNMENT, LIVE) == []


def test_a_request_written_twice_is_found() -> None:
    requests, results = _right()
    problems = once_problems(_outputs([*requests, requests[1]], results), TOPIC, ASSIGNMENT, LIVE)
    assert any("request written 2 times" in p for p in problems), problems
    assert any(
        p.startswith("LeaderAndIsr of batch 7: (broker, partition) counts other than once {(2, 0): 2, (2, 1): 2}")
        for p in problems
    )


def test_the_same_partition_in_two_parts_of_an_update_metadata_is_found() -> None:
    requests, results = _right()
    split = [
        _request("UpdateMetadata", [0], addressees=(1, 2, 3)),
        _request("UpdateMetadata", [0, 1], addressees=(1, 2, 3)),
    ]
    problems = once_problems(_outputs([*requests[:3], *split], results), TOPIC, ASSIGNMENT, LIVE)
    assert problems == [
        "UpdateMetadata of batch 7: (broker, partition) counts other than once "
        "{(1, 0): 2, (2, 0): 2, (3, 0): 2}, missing []"
    ]


def test_a_replica_left_without_its_leader_and_isr_is_found() -> None:
    requests, results = _right()
    problems = once_problems(_outputs(requests[1:], results), TOPIC, ASSIGNMENT, LIVE)
    assert problems == ["LeaderAndIsr of batch 7: (broker, partition) counts other than once {}, missing [(1, 0)]"]


def test_a_second_answer_or_an_answer_of_another_batch_is_found() -> None:
    requests, results = _right()
    twice = once_problems(_outputs(requests, [*results, {**results[1], "batch_id": 8}]), TOPIC, ASSIGNMENT, LIVE)
    assert len(twice) == 1 and twice[0].startswith("admin results [") and "want one ok" in twice[0]
    late = once_problems(_outputs(requests, [{**results[1], "batch_id": 8}]), TOPIC, ASSIGNMENT, LIVE)
    assert late == ["answered in batch 8, not 7"]


def test_a_znode_written_again_or_missing_is_found() -> None:
    requests, results = _right()
    problems = once_problems(_outputs(requests, results, (0, 1, -1)), TOPIC, ASSIGNMENT, LIVE)
    assert problems == [
        f"/brokers/topics/{TOPIC}/partitions/0/state: version 1",
        f"/brokers/topics/{TOPIC}/partitions/1/state: version -1",
    ]


def test_the_batch_holding_a_record_is_found_in_the_offset_log(tmp_path: Path) -> None:
    offsets = tmp_path / "offsets"
    offsets.mkdir()
    meta = '{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}'
    for n, end in ((4, 10), (5, 12), (6, 15)):
        (offsets / str(n)).write_text(f'v1\n{meta}\n{{"adm":{{"0":{end}}},"events":{{"0":3}}}}')
    assert batch_holding(tmp_path, "adm", 0, 11, since=4) == 5
    assert batch_holding(tmp_path, "adm", 0, 12, since=4) == 6
    assert batch_holding(tmp_path, "adm", 0, 9, since=4) is None  # in batch 4, planned before ``since``
    assert batch_holding(tmp_path, "adm", 0, 15, since=4) is None  # not planned yet
    (offsets / "7").write_text("v1\n")  # being written
    assert batch_holding(tmp_path, "adm", 0, 15, since=4) is None
