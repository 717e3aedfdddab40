"""The reassignment tool's pure parts, as Kafka's ``kafka-reassign-partitions.sh``: progress display, throttle
lists."""

from __future__ import annotations

import pytest

from admin.reassign.progress import (
    PartitionProgress,
    blocked_by_not_alive,
    not_alive_message,
    progress_bar,
    progress_lines,
)
from admin.reassign.throttles import throttled_replicas
from core.events import CancelReassignment, ReassignPartitions
from core.model import TopicPartition

pytestmark = pytest.mark.unit

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def test_progress_bar_for_a_terminal() -> None:
    bar = progress_bar([PartitionProgress(T0, True, ()), PartitionProgress(T1, False, (4, 5))], 3.0, width=10)
    assert bar == "reassign [#####.....] 1/2   3.0s waiting: t-1(+4,5)"
    assert progress_bar([PartitionProgress(T0, True, ())], 1.0, width=4).startswith("reassign [####] 1/1")


def test_progress_bar_is_full_only_when_every_partition_is_done() -> None:
    # 49 of 50 done on 24 columns is 23.5: rounded to the nearest it drew a full bar with a partition still moving
    progress = [PartitionProgress(TopicPartition("t", i), i > 0, ()) for i in range(50)]
    assert progress_bar(progress, 1.0).startswith("reassign [" + "#" * 23 + "." + "] 49/50")


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


DEAD_3 = PartitionProgress(T0, False, (3,), target_waiting=(3,), not_alive=(3,))  # adding 3, which died
LAGGING = PartitionProgress(T1, False, (4,), target_waiting=(4,))  # adding 4, alive, copying


def test_the_wait_goes_on_while_any_partition_in_flight_can_complete() -> None:
    assert blocked_by_not_alive([DEAD_3, LAGGING]) == ()
    # nor while a partition has not started yet (the controller has not written it): it may still
    assert blocked_by_not_alive([DEAD_3, PartitionProgress(T1, False, (), started=False)]) == ()
    # finishing: every target replica in the ISR, the controller ends the move next
    assert blocked_by_not_alive([DEAD_3, PartitionProgress(T1, False, ())]) == ()
    # nothing in flight: nothing blocked (the wait ends on the controller's answer)
    assert blocked_by_not_alive([PartitionProgress(T0, True, ())]) == ()
    assert blocked_by_not_alive([]) == ()


def test_the_wait_ends_when_every_partition_in_flight_waits_for_a_broker_that_is_not_alive() -> None:
    done = PartitionProgress(T1, True, ())
    assert blocked_by_not_alive([DEAD_3, done]) == (DEAD_3,)
    # one that also waits for a live broker cannot complete either while 2 is gone
    both = PartitionProgress(TopicPartition("t", 2), False, (4,), target_waiting=(4, 2), not_alive=(2,))
    assert blocked_by_not_alive([DEAD_3, both, done]) == (DEAD_3, both)


def test_the_message_names_the_partitions_the_brokers_and_what_to_do() -> None:
    command = ReassignPartitions("r-1", ())
    text = not_alive_message(command, [DEAD_3], "plan.json")
    assert text == (
        "the reassignment cannot complete: 1 partition(s) wait for brokers that are not alive: t-0 (broker 3); "
        "a move completes only when every target replica is in the ISR, and nothing else is in flight, so the tool "
        "stops waiting (request r-1). It stays in place (in ZooKeeper) and completes once it is back: start broker "
        "3, then follow it with `livectl reassign --verify --reassignment-json-file plan.json`; or cancel it with "
        "`livectl reassign --cancel --reassignment-json-file plan.json`."
    )
    # broker 2 is a kept replica (not one being added): going back to the replicas before the move waits for it too
    kept = PartitionProgress(T1, False, (), target_waiting=(2,), not_alive=(2,))
    text = not_alive_message(command, [DEAD_3, kept], "plan.json")
    assert "2 partition(s) wait for brokers that are not alive: t-0 (broker 3), t-1 (broker 2);" in text
    assert "completes once they are back: start brokers 2, 3, then follow it with" in text
    assert text.endswith(
        "`livectl reassign --cancel --reassignment-json-file plan.json` (a cancellation waits for broker 2 too, a "
        "replica before the move: to go on without it, reassign to replicas without it with "
        "`livectl reassign --execute --additional`)."
    )
    many = [
        PartitionProgress(TopicPartition("t", i), False, (3,), target_waiting=(3,), not_alive=(3,)) for i in range(12)
    ]
    assert "t-9 (broker 3), and 2 more;" in not_alive_message(command, many, "plan.json")


def test_a_cancellation_waiting_for_a_broker_that_is_not_alive_says_what_to_do() -> None:
    # going back to 1,2 (the move onto 4 cancelled): 2 died, so the cancellation waits for it
    back = PartitionProgress(T1, False, (), target_waiting=(2,), not_alive=(2,))
    text = not_alive_message(CancelReassignment("r-2", (T1,)), [back], "p.json")
    assert text.startswith("the cancellation cannot complete: 1 partition(s) wait for brokers that are not alive: t-1")
    assert text.endswith(
        "completes once it is back: start broker 2 (follow it with `livectl reassign --list`), or reassign those "
        "partitions without it (`livectl reassign --execute --additional`)."
    )
