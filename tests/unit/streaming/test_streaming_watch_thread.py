"""The watcher threads' one life cycle (``streaming.runtime.watch_thread.WatchThread``): rounds on wake and on
the interval, a stop that ends the thread, and what it refuses."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from streaming.runtime.watch_thread import WatchThread

pytestmark = pytest.mark.unit

#: long enough that a round seen within it came from a wake, not from the interval
NEVER_S = 3600.0
#: how long a test waits for a thread to do what it was told before it fails
DEADLINE_S = 10.0


class Rounds:
    """Counts rounds; each round sets ``ran`` and, once ``n`` rounds ran, ``reached[n]``."""

    def __init__(self, then: Callable[[int], None] | None = None) -> None:
        self.count = 0
        self.lock = threading.Lock()
        self.reached: dict[int, threading.Event] = {n: threading.Event() for n in range(1, 6)}
        self.then = then

    def __call__(self) -> None:
        with self.lock:
            self.count += 1
            n = self.count
        if self.then is not None:
            self.then(n)
        if n in self.reached:
            self.reached[n].set()


def test_a_wake_runs_a_round_before_the_interval_and_stop_ends_the_thread() -> None:
    rounds = Rounds()
    t = WatchThread("test-watch", rounds, NEVER_S)
    t.start()
    assert not rounds.reached[1].is_set()
    t.wake()
    assert rounds.reached[1].wait(DEADLINE_S)
    t.wake()
    assert rounds.reached[2].wait(DEADLINE_S)
    t.stop(timeout=DEADLINE_S)
    assert not t.is_alive()
    assert t.stopping
    assert rounds.count == 2


def test_the_interval_runs_rounds_and_is_read_before_each_wait() -> None:
    asked: list[int] = []

    def interval() -> float:
        asked.append(1)
        return 0.0 if len(asked) <= 3 else NEVER_S

    rounds = Rounds()
    t = WatchThread("test-interval", rounds, interval)
    t.start()
    # three zero waits, then a wait no test outlives: exactly three rounds, the fourth wait in progress
    assert rounds.reached[3].wait(DEADLINE_S)
    t.stop(timeout=DEADLINE_S)
    assert not t.is_alive()
    assert rounds.count == 3
    assert len(asked) == 4


def test_first_delay_zero_runs_the_first_round_at_once() -> None:
    rounds = Rounds()
    t = WatchThread("test-first", rounds, NEVER_S, first_delay_s=0.0)
    t.start()
    assert rounds.reached[1].wait(DEADLINE_S)
    t.stop(timeout=DEADLINE_S)
    assert rounds.count == 1


def test_stop_wakes_a_thread_waiting_on_a_long_interval_and_no_round_follows() -> None:
    rounds = Rounds()
    t = WatchThread("test-stop", rounds, NEVER_S)
    t.start()
    t.stop(timeout=DEADLINE_S)
    assert not t.is_alive()
    assert rounds.count == 0


def test_stop_waits_for_the_round_in_progress() -> None:
    in_round = threading.Event()
    release = threading.Event()
    done = threading.Event()

    def slow(n: int) -> None:
        in_round.set()
        assert release.wait(DEADLINE_S)
        done.set()

    t = WatchThread("test-slow", Rounds(then=slow), NEVER_S, first_delay_s=0.0)
    t.start()
    assert in_round.wait(DEADLINE_S)
    stopper = threading.Thread(target=t.stop, kwargs={"timeout": DEADLINE_S})
    stopper.start()
    assert stopper.is_alive()  # it waits for the round: the round cannot end before release is set
    release.set()
    stopper.join(DEADLINE_S)
    assert not stopper.is_alive()
    assert done.is_set()
    assert not t.is_alive()


def test_a_round_can_stop_its_own_thread() -> None:
    holder: list[WatchThread] = []
    rounds = Rounds(then=lambda n: holder[0].stop())
    t = WatchThread("test-self-stop", rounds, NEVER_S, first_delay_s=0.0)
    holder.append(t)
    t.start()
    assert rounds.reached[1].wait(DEADLINE_S)
    t.stop(timeout=DEADLINE_S)
    assert not t.is_alive()
    assert rounds.count == 1


def test_stop_before_start_and_twice_is_harmless_and_a_second_start_is_refused() -> None:
    WatchThread("never-started", Rounds(), NEVER_S).stop()
    t = WatchThread("test-twice", Rounds(), NEVER_S)
    t.start()
    with pytest.raises(RuntimeError, match="test-twice: already started"):
        t.start()
    t.stop(timeout=DEADLINE_S)
    t.stop(timeout=DEADLINE_S)
    assert not t.is_alive()
