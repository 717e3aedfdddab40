"""The state-API benchmark's pure parts (``bench/state_api.py``), without Spark: which partitions a batch
changes, the change itself (the same on the blob side's state and the map side's entries), the bytes it
reads from a checkpoint's state folder, and the medians and ratios it prints. Nothing here is timed."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from bench import state_api
from bench.harness.workloads import build_state
from core.context_codec import context_to_dict
from core.model import LeaderAndIsr, TopicPartition

pytestmark = pytest.mark.unit


def test_partitions_are_named_as_the_workload_builds_them() -> None:
    state = build_state(10, 300, 3, state_api.PER_TOPIC)
    names = {state_api.topic_partition(i) for i in range(300)}
    assert names == {(tp.topic, tp.partition) for tp in state.context.partition_assignments}


def test_the_aged_state_has_the_same_partitions_with_a_history() -> None:
    young, aged = build_state(10, 300, 3, state_api.PER_TOPIC), state_api.aged_state(300)
    assert aged.context.partition_assignments == young.context.partition_assignments
    held = list(aged.context.partition_leadership.values())
    assert len(held) == 300
    assert all(h.leader_and_isr.leader in h.leader_and_isr.isr for h in held)
    assert all(h.leader_and_isr.partition_epoch >= h.leader_and_isr.leader_epoch >= 1 for h in held)
    assert len({h.leader_and_isr.leader_epoch for h in held}) > 100
    assert state_api.aged_state(300) == aged  # the same history every time


def test_a_batch_changes_its_fraction_the_same_partitions_every_time() -> None:
    one = state_api.changed_partitions(100_000, 0.01, 3)
    assert len(one) == len(set(one)) == 1000
    assert one == sorted(one) and one[0] >= 0 and one[-1] < 100_000
    assert state_api.changed_partitions(100_000, 0.01, 3) == one
    assert state_api.changed_partitions(100_000, 0.01, 4) != one
    assert len(state_api.changed_partitions(50, 0.001, 1)) == 1  # at least one


def test_the_leader_moves_along_the_isr_and_both_epochs_go_up() -> None:
    assert state_api.next_leadership(1, [1, 2, 3], 4, 7) == (2, 5, 8)
    assert state_api.next_leadership(3, [1, 2, 3], 0, 0) == (1, 1, 1)
    assert state_api.next_leadership(5, [5], 0, 0) == (5, 1, 1)
    assert state_api.next_leadership(9, [1, 2], 0, 0) == (1, 1, 1)  # a leader out of the ISR


def test_the_map_side_changes_an_entry_as_the_blob_side_changes_the_state() -> None:
    # the map side's new entry is the partition's part of the blob side's new state, encoded the same way
    state = build_state(10, 200, 3, state_api.PER_TOPIC)
    topic, p = state_api.topic_partition(137)
    before = context_to_dict(state.context)["topics"][topic][str(p)]
    ctx = state.context.copy()
    held = ctx.partition_leadership[TopicPartition(topic, p)]
    li = held.leader_and_isr
    leader, le, pe = state_api.next_leadership(li.leader, li.isr, li.leader_epoch, li.partition_epoch)
    ctx.put_leadership(
        TopicPartition(topic, p), LeaderAndIsr(leader, li.isr, le, pe, li.leader_recovery_state), held.controller_epoch
    )
    after = context_to_dict(ctx)["topics"][topic][str(p)]
    stored = orjson.loads(orjson.dumps(before))
    assert state_api.bumped_entry(stored) == orjson.loads(orjson.dumps(after))
    assert stored == orjson.loads(orjson.dumps(before))  # the input is left as it was


def test_changelog_and_folder_bytes_read_the_state_folder(tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert state_api.changelog_bytes(state, 1) == 0
    assert state_api.folder_bytes(state) == 0
    for part in ("0/0", "1/0"):
        (state / part).mkdir(parents=True)
        (state / part / "3.changelog").write_bytes(b"x" * 10)
        (state / part / ".3.changelog.crc").write_bytes(b"c" * 4)
        (state / part / "13.changelog").write_bytes(b"y" * 7)
    (state / "0" / "0" / "3.zip").write_bytes(b"z" * 5)
    assert state_api.changelog_bytes(state, 3) == 20
    assert state_api.changelog_bytes(state, 13) == 14
    assert state_api.folder_bytes(state) == 20 + 14 + 5


def test_operator_metrics_are_summed_over_the_operators() -> None:
    ops = [
        {"commitTimeMs": 5, "customMetrics": {"rocksdbTotalBytesWritten": 100}},
        {"commitTimeMs": 7, "customMetrics": {}},
    ]
    assert state_api.operator_sum(ops, "commitTimeMs") == 12
    assert state_api.operator_sum(ops, "rocksdbTotalBytesWritten") == 100
    assert state_api.operator_sum([], "commitTimeMs") == 0


def _run(side: str, batch: int, trigger: float, op: str = state_api.OP_CHANGE) -> dict[str, float | int | str]:
    figures = dict.fromkeys(
        ("wall_s", "read_s", "apply_s", "write_s", "changelog_kb", "rocksdb_written_kb", "commit_ms", "worker_rss_mb"),
        1.0,
    )
    return {"side": side, "batch": batch, "op": op, "trigger_s": trigger, "worker_s": trigger / 2, **figures}


def test_summary_leaves_out_the_load_and_the_warm_up_and_gives_map_over_blob() -> None:
    runs = [_run(state_api.BLOB, 0, 99.0, state_api.OP_LOAD), _run(state_api.MAP, 0, 99.0, state_api.OP_LOAD)]
    runs += [_run(state_api.BLOB, 1, 50.0), _run(state_api.MAP, 1, 50.0)]  # warm-up
    for b, (blob, mapped) in enumerate([(2.0, 1.0), (4.0, 1.0), (3.0, 2.0)], start=2):
        runs += [_run(state_api.BLOB, b, blob), _run(state_api.MAP, b, mapped)]
    summary = state_api.summarize(runs, warmup=1)
    assert summary["medians"]["blob"]["trigger_s"] == 3.0
    assert summary["medians"]["map"]["trigger_s"] == 1.0
    assert summary["medians"]["blob"]["batches"] == summary["medians"]["map"]["batches"] == 3
    assert summary["trigger_s_map_to_blob"] == pytest.approx(1 / 3, abs=1e-3)
    assert summary["changelog_kb_map_to_blob"] == 1.0
