"""Moving to a new checkpoint (a new bucket count): where the new one starts reading, and every refusal."""

from __future__ import annotations

import json

import pytest

from streaming.driver.rebucket import ResumeError, offsets_of, resume_offsets
from streaming.runtime.checkpoint_fs import MemoryCheckpointStore

pytestmark = pytest.mark.unit

META = '{"batchWatermarkMs":0,"batchTimestampMs":1795511590146,"conf":{"spark.sql.shuffle.partitions":"8"}}'


def _entry(offsets: dict[str, dict[str, int]]) -> str:
    return f"v1\n{META}\n{json.dumps(offsets)}"


def _old(committed: int, planned: int) -> MemoryCheckpointStore:
    old = MemoryCheckpointStore("memory:/old")
    for b in range(planned + 1):
        old.write_text(
            f"{old.root}/offsets/{b}",
            _entry({"livectl.admin": {"0": 10 * b}, "livectl.broker-events": {"0": b, "1": 2 * b}}),
        )
    for b in range(committed + 1):
        old.write_text(f"{old.root}/commits/{b}", 'v1\n{"nextBatchWatermarkMs":0}')
    return old


def test_the_new_checkpoint_reads_from_where_the_last_committed_batch_ended() -> None:
    got = resume_offsets(_old(3, 3), MemoryCheckpointStore("memory:/new"))
    assert json.loads(got) == {"livectl.admin": {"0": 30}, "livectl.broker-events": {"0": 3, "1": 6}}


def test_an_old_checkpoint_with_a_batch_in_flight_is_refused() -> None:
    with pytest.raises(ResumeError, match="micro-batch 4 planned but not committed; start the controller on that"):
        resume_offsets(_old(3, 4), MemoryCheckpointStore("memory:/new"))


@pytest.mark.parametrize(
    ("old", "new", "reason"),
    [
        (MemoryCheckpointStore("memory:/old"), MemoryCheckpointStore("memory:/new"), "has no committed micro-batch"),
        (_old(1, 1), MemoryCheckpointStore("memory:/old/"), "is the checkpoint itself"),
        (_old(1, 1), _old(1, 1), "is the checkpoint itself"),
    ],
)
def test_refusals(old: MemoryCheckpointStore, new: MemoryCheckpointStore, reason: str) -> None:
    with pytest.raises(ResumeError, match=reason):
        resume_offsets(old, new)


def test_a_used_new_checkpoint_is_refused() -> None:
    new = MemoryCheckpointStore("memory:/new")
    new.write_text(f"{new.root}/offsets/0", _entry({"livectl.admin": {"0": 0}}))
    with pytest.raises(ResumeError, match="already holds micro-batches; it resumes from its own offsets"):
        resume_offsets(_old(1, 1), new)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("v1\n{}", "not the offset log entry of a one-source query"),
        (f"v1\n{META}\n[1]", "are not {topic: {partition: offset}}"),
        (f"v1\n{META}\n" + '{"t": {"0": "x"}}', "are not {topic: {partition: offset}}"),
    ],
)
def test_a_damaged_offset_log_entry_is_named(text: str, reason: str) -> None:
    with pytest.raises(ResumeError, match=reason) as e:
        offsets_of(text, "memory:/old/offsets/3")
    assert str(e.value).startswith("memory:/old/offsets/3: ")


def test_the_marks_of_the_last_records_go_with_the_offsets() -> None:
    """The new checkpoint's first read can then tell a log written again from the one the old one read."""
    offsets = {"livectl.admin": {"0": 4}, "@last": {"livectl.admin": {"0": "1795511590146-0a1b2c3d"}}}
    got = json.loads(offsets_of(f"v1\n{META}\n{json.dumps(offsets)}", "memory:/old/offsets/3"))
    assert got == offsets
