"""core.kafka.log_dirs and core.move_progress: the brokers' DescribeLogDirs reports in Kafka's shape, and the bytes to
move, moved, rate and time left of a reassignment computed from them."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.errors import FormatError
from core.kafka.log_dirs import (
    LogDirResult,
    LogDirsReport,
    PartitionLogDir,
    TopicLogDir,
    chunked,
    parse_log_dirs_report,
)
from core.model import NO_LEADER
from core.move_progress import MovingPartition, move_progress, waiting, waiting_text

pytestmark = pytest.mark.unit

KIB = 1024
#: every broker of these tests is alive unless a test says otherwise
LIVE = frozenset(range(10))


def report(broker: int, time_ms: int, sizes: dict[tuple[str, int], int], *, error: int = 0) -> LogDirsReport:
    topics: dict[str, list[PartitionLogDir]] = {}
    for (t, p), size in sorted(sizes.items()):
        topics.setdefault(t, []).append(PartitionLogDir(p, size))
    tl = tuple(TopicLogDir(t, tuple(ps)) for t, ps in topics.items())
    return LogDirsReport(broker, time_ms, (LogDirResult(f"/data/{broker}", tl, error),))


def test_a_report_is_kafkas_describe_log_dirs_shape_and_round_trips() -> None:
    r = LogDirsReport(
        2,
        1_000,
        (LogDirResult("/d", (TopicLogDir("orders", (PartitionLogDir(0, 4096, 3), PartitionLogDir(1, 0, 0, True))),)),),
    )
    doc = json.loads(r.to_json())
    assert doc == {
        "version": 1, "brokerId": 2, "timeMs": 1000, "errorCode": 0,
        "results": [{"errorCode": 0, "logDir": "/d", "totalBytes": -1, "usableBytes": -1, "topics": [
            {"name": "orders", "partitions": [
                {"partitionIndex": 0, "partitionSize": 4096, "offsetLag": 3, "isFutureKey": False},
                {"partitionIndex": 1, "partitionSize": 0, "offsetLag": 0, "isFutureKey": True},
            ]},
        ]}],
    }  # fmt: skip
    assert parse_log_dirs_report(r.to_json()) == r
    # a future replica (moving between the broker's own directories) is not the current replica's size
    assert [(str(tp), n) for tp, n in r.replica_sizes()] == [("orders-0", 4096)]


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ("nope", "report"),
        ({"version": 2}, "version"),
        ({"version": 1, "brokerId": "1", "timeMs": 0, "results": []}, "brokerId"),
        ({"version": 1, "brokerId": 1, "timeMs": 0, "results": {}}, "results"),
        ({"version": 1, "brokerId": 1, "timeMs": 0, "results": [{"logDir": 3, "topics": []}]}, "results[0].logDir"),
        (
            {"version": 1, "brokerId": 1, "timeMs": 0, "results": [
                {"logDir": "/d", "topics": [{"name": "t", "partitions": [{"partitionIndex": 0}]}]}]},
            "results[0].topics[0].partitions[0].partitionSize",
        ),
        (
            {"version": 1, "brokerId": 1, "timeMs": 0, "results": [
                {"logDir": "/d", "topics": [{"name": "t", "partitions": [
                    {"partitionIndex": 0, "partitionSize": 1, "isFutureKey": "no"}]}]}]},
            "results[0].topics[0].partitions[0].isFutureKey",
        ),
    ],
)  # fmt: skip
def test_a_malformed_report_names_its_field(doc: object, field: str) -> None:
    text = doc if isinstance(doc, str) else json.dumps(doc)
    with pytest.raises(FormatError) as e:
        parse_log_dirs_report(text)
    assert e.value.field == field


def test_chunks_hold_every_partition_once_under_the_limit() -> None:
    r = report(1, 5, {("a", p): p for p in range(7)} | {("b", p): p for p in range(4)})
    parts = list(chunked(r, 3))
    assert all(sum(len(t.partitions) for x in c.results for t in x.topics) <= 3 for c in parts)
    assert sorted(tp for c in parts for tp in c.replica_sizes()) == sorted(r.replica_sizes())
    assert {(c.broker_id, c.time_ms) for c in parts} == {(1, 5)}
    assert list(chunked(report(1, 5, {}), 3)) == [report(1, 5, {})]


def test_one_partition_to_move_moved_rate_and_time_left() -> None:
    # orders-0 led by 1, moving onto 4: the leader holds 100 KiB; broker 4 went from 10 to 40 KiB in 3 s
    moving = [MovingPartition("orders", 0, 1, (4,), (4, 1), (1,))]
    reports = [
        report(1, 1_000, {("orders", 0): 100 * KIB}),
        report(4, 1_000, {("orders", 0): 10 * KIB}),
        report(4, 2_000, {("orders", 0): 25 * KIB}),
        report(4, 4_000, {("orders", 0): 40 * KIB}),
    ]
    (p,), total = move_progress(moving, reports, now_ms=4_500, live=LIVE)
    assert (p.topic, p.partition, p.bytes_to_move, p.bytes_moved) == ("orders", 0, 100 * KIB, 40 * KIB)
    # averaged over the window: (40 - 10) KiB in 3 s, whatever the steps between
    assert p.bytes_per_second == pytest.approx(10 * KIB)
    assert p.seconds_left == pytest.approx(6.0)
    assert p.text() == "moved 40.0 KiB of 100.0 KiB (40%), 10.0 KiB/s, about 6 s left"
    expected: tuple[object, ...] = (100 * KIB, 40 * KIB, pytest.approx(6.0), 0)  # approx: not a float to mypy
    assert (total.bytes_to_move, total.bytes_moved, total.seconds_left, total.unknown) == expected
    assert p.to_dict() == {"bytes_to_move": 102400, "bytes_moved": 40960, "bytes_per_second": 10240.0,
                           "seconds_left": 6.0, "percent": 40, "waiting_for": [4], "not_alive": []}  # fmt: skip


def test_unknown_until_reported_and_zero_when_done() -> None:
    moving = [MovingPartition("t", 0, 1, (4, 5), (1, 4, 5), (1,)), MovingPartition("t", 1, NO_LEADER, (4,), (4,), ())]
    # one report of each: sizes, but no rate yet; the leaderless partition's size to move is unknown
    reports = [report(1, 1_000, {("t", 0): 50}), report(4, 1_000, {("t", 0): 20, ("t", 1): 7})]
    (a, b), total = move_progress(moving, reports, now_ms=1_000, live=LIVE)
    # two adding replicas: twice the leader's log; broker 5 has reported nothing of it: 0 moved
    assert (a.bytes_to_move, a.bytes_moved, a.bytes_per_second, a.seconds_left) == (100, 20, None, None)
    assert "rate unknown, time left unknown" in a.text()
    assert (b.bytes_to_move, b.bytes_moved, b.seconds_left) == (None, 7, None)
    assert b.text().startswith("moved 7 B of unknown")
    assert (total.bytes_to_move, total.bytes_moved, total.unknown) == (100, 20, 1)
    assert total.text().endswith("(1 partition(s) not reported yet)")
    # caught up (a replica past the leader counts up to the leader's size): nothing left, 0 s, rate or not
    done = [report(1, 2_000, {("t", 0): 50}), report(4, 2_000, {("t", 0): 60}), report(5, 2_000, {("t", 0): 50})]
    (a, _), total = move_progress(moving, done, now_ms=2_000, live=LIVE)
    assert (a.bytes_moved, a.seconds_left) == (100, 0.0)
    # nothing moving: nothing to move
    assert move_progress([], reports, now_ms=1_000, live=LIVE)[1].to_dict() == {
        "bytes_to_move": 0, "bytes_moved": 0, "bytes_per_second": None, "seconds_left": 0.0, "percent": 100,
        "waiting_for": [], "not_alive": [], "partitions_unknown": 0, "partitions_waiting": 0,
        "partitions_waiting_for_not_alive": 0,
    }  # fmt: skip


def test_old_future_and_failed_directory_reports_are_left_out() -> None:
    moving = [MovingPartition("t", 0, 1, (2,), (1, 2), (1,))]
    reports = [
        report(1, 0, {("t", 0): 999}),  # older than the window
        report(1, 40_000, {("t", 0): 100}),
        report(2, 40_000, {("t", 0): 10}),
        report(2, 41_000, {("t", 0): 90}, error=56),  # KAFKA_STORAGE_ERROR: its sizes are not used
        report(2, 99_000, {("t", 0): 100}),  # after now
    ]
    (p,), _ = move_progress(moving, reports, now_ms=45_000, live=LIVE)
    assert (p.bytes_to_move, p.bytes_moved, p.bytes_per_second) == (100, 10, None)
    with pytest.raises(ValueError, match="window_ms"):
        move_progress(moving, reports, now_ms=0, window_ms=0, live=LIVE)


def test_a_shrinking_replica_is_a_rate_of_zero_not_negative() -> None:
    moving = [MovingPartition("t", 0, 1, (2,), (1, 2), (1,))]
    reports = [report(1, 0, {("t", 0): 100}), report(2, 0, {("t", 0): 50}), report(2, 1_000, {("t", 0): 20})]
    (p,), _ = move_progress(moving, reports, now_ms=1_000, live=LIVE)
    assert (p.bytes_per_second, p.seconds_left) == (0.0, None)


@given(
    leader=st.lists(st.integers(0, 10**9), min_size=1, max_size=4),
    follower=st.lists(st.integers(0, 10**9), min_size=1, max_size=6),
)
def test_figures_hold_together(leader: list[int], follower: list[int]) -> None:
    moving = [MovingPartition("t", 0, 1, (2,), (1, 2), (1,))]
    reports = [report(1, 1_000 * i, {("t", 0): n}) for i, n in enumerate(leader)]
    reports += [report(2, 1_000 * i, {("t", 0): n}) for i, n in enumerate(follower)]
    now = 1_000 * max(len(leader), len(follower))
    (p,), total = move_progress(moving, reports, now_ms=now, live=LIVE)
    assert p.bytes_to_move == leader[-1]
    assert 0 <= p.bytes_moved <= p.bytes_to_move
    assert p.bytes_moved == min(follower[-1], leader[-1])
    assert (p.bytes_per_second is None) == (len(follower) < 2)
    assert p.bytes_per_second is None or p.bytes_per_second >= 0
    left = p.bytes_to_move - p.bytes_moved
    if left == 0:
        assert p.seconds_left == 0.0
    elif p.bytes_per_second:
        assert p.seconds_left == pytest.approx(left / p.bytes_per_second)
    else:
        assert p.seconds_left is None
    assert (total.bytes_to_move, total.bytes_moved, total.seconds_left) == (
        p.bytes_to_move, p.bytes_moved, p.seconds_left,
    )  # fmt: skip


def test_all_bytes_copied_is_not_done_while_a_target_replica_is_out_of_the_isr() -> None:
    # a drain's move of orders-0 off broker 5 onto 4, target [4, 1, 3]: broker 4 has copied every byte, but
    # broker 3 (a replica before the move, still one after) is dead and out of the ISR. Kafka completes the
    # move only when 4, 1 and 3 are all in the ISR: it waits for broker 3, whatever the bytes say.
    moving = [MovingPartition("orders", 0, 1, (4,), (4, 1, 3), (1, 4))]
    reports = [report(1, 0, {("orders", 0): 400 * KIB}), report(4, 0, {("orders", 0): 100 * KIB}),
               report(1, 2_000, {("orders", 0): 400 * KIB}), report(4, 2_000, {("orders", 0): 400 * KIB})]  # fmt: skip
    (p,), total = move_progress(moving, reports, now_ms=2_000, live={1, 2, 4, 5})
    assert (p.bytes_to_move, p.bytes_moved) == (400 * KIB, 400 * KIB)
    assert (p.waiting_for, p.not_alive, p.percent, p.seconds_left) == ((3,), (3,), 99, None)
    assert p.text() == (
        "moved 400.0 KiB of 400.0 KiB (99%), 150.0 KiB/s, time left unknown; waiting for broker 3, which is not alive"
    )
    doc = p.to_dict()
    assert (doc["percent"], doc["seconds_left"], doc["waiting_for"], doc["not_alive"]) == (99, None, [3], [3])
    assert (total.percent, total.seconds_left, total.not_alive, total.partitions_not_alive) == (99, None, (3,), 1)
    assert total.text().endswith("time left unknown; 1 partition(s) waiting for broker 3, which is not alive")
    assert total.to_dict()["partitions_waiting_for_not_alive"] == 1
    # broker 3 back and catching up: the move waits for it to join the ISR, and says so once the bytes are in
    (p,), total = move_progress(moving, reports, now_ms=2_000, live={1, 2, 3, 4, 5})
    assert (p.waiting_for, p.not_alive, p.percent, p.seconds_left) == ((3,), (), 99, 0.0)
    assert p.text().endswith("about 0 s left; waiting for broker 3 to join the ISR")
    assert "waiting" not in total.text() and total.percent == 99
    # every target replica in the ISR: the move can complete, and only then is it 100%
    (p,), total = move_progress([MovingPartition("orders", 0, 1, (4,), (4, 1, 3), (1, 3, 4))], reports,
                                now_ms=2_000, live={1, 3, 4})  # fmt: skip
    assert (p.percent, total.percent, p.waiting_for) == (100, 100, ())
    assert p.text() == "moved 400.0 KiB of 400.0 KiB (100%), 150.0 KiB/s, about 0 s left"


def test_a_dead_adding_replica_is_named_and_its_time_left_unknown() -> None:
    moving = [MovingPartition("t", 0, 1, (6,), (6, 1), (1,))]
    reports = [report(1, 0, {("t", 0): 100}), report(6, 0, {("t", 0): 10}), report(6, 1_000, {("t", 0): 60})]
    (p,), _ = move_progress(moving, reports, now_ms=1_000, live={1})
    assert (p.percent, p.seconds_left, p.not_alive) == (60, None, (6,))
    assert p.text() == "moved 60 B of 100 B (60%), 50 B/s, time left unknown; waiting for broker 6, which is not alive"


def test_the_percentage_rounds_down() -> None:
    moving = [MovingPartition("t", 0, 1, (2,), (2,), (1, 2))]  # the target in the ISR: nothing caps it
    (p,), _ = move_progress(moving, [report(1, 0, {("t", 0): 1000}), report(2, 0, {("t", 0): 999})], 0, live=LIVE)
    assert p.percent == 99, "99.9% is not done"


def test_what_a_move_waits_for_in_words() -> None:
    assert waiting((4, 1, 3), (1,), {1, 4}) == ((4, 3), (3,))
    assert waiting_text((4, 3), (3,)) == "waiting for broker 3, which is not alive, and for broker 4 to join the ISR"
    assert waiting_text((3, 5), (3, 5)) == "waiting for brokers 3, 5, which are not alive"
    assert waiting_text((), ()) == ""
