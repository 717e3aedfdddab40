"""The reassignment tool's pure parts, as Kafka's ``kafka-reassign-partitions.sh``: progress display, throttle
lists."""

from __future__ import annotations

import pytest

from admin.reassign.progress import PartitionProgress, progress_bar, progress_lines
from admin.reassign.throttles import throttled_replicas
from core.events import TopicPartition

pytestmark = pytest.mark.unit

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def test_progress_bar_for_a_terminal() -> None:
    bar = progress_bar([PartitionProgress(T0, True, ()), PartitionProgress(T1, False, (4, 5))], 3.0, width=10)
    assert bar == "reassign [#####.....] 1/2   3.0s waiting: t-1(+4,5)"
    assert progress_bar([PartitionProgress(T0, True, ())], 1.0, width=4).startswith("reassign [####] 1/1")


def test_progress_lines_for_a_log() -> None:
    lines = progress_lines([PartitionProgress(T0, False, (), started=False), PartitionProgress(T1, False, ())])
    assert lines == [
        "0/2 partitions done",
        "  t-0: not started yet",
        "  t-1: adding replicas not yet in the ISR: none (finishing)",
    ]


def test_throttle_lists_and_progress_lines_are_kafkas() -> None:
    t0, t1 = TopicPartition("t", 0), TopicPartition("t", 10)
    leader, follower, brokers = throttled_replicas({t0: (4, 5), t1: (1, 2)}, {t0: (1, 2), t1: (1, 3)}, {})
    assert leader == {"t": "0:1,0:2,10:1,10:3"}  # sorted as text, like Kafka's TreeSet
    assert follower == {"t": "0:4,0:5,10:2"}
    assert brokers == {1, 2, 3, 4, 5}
    lines = progress_lines([PartitionProgress(t0, True, ()), PartitionProgress(t1, False, (2,))])
    assert lines == ["1/2 partitions done", "  t-10: adding replicas not yet in the ISR: 2"]


def test_progress_lines_name_a_target_broker_that_is_not_alive() -> None:
    # a move onto 4 whose target keeps 3, which died: 4 is in the ISR, 3 is not and will not be until it is back
    dead = PartitionProgress(T0, False, (), target_waiting=(3,), not_alive=(3,))
    lagging = PartitionProgress(T1, False, (4,), target_waiting=(4, 2))
    assert progress_lines([dead, lagging]) == [
        "0/2 partitions done",
        "  t-0: adding replicas not yet in the ISR: none; waiting for broker 3, which is not alive",
        "  t-1: adding replicas not yet in the ISR: 4; waiting for brokers 4, 2 to join the ISR",
    ]
