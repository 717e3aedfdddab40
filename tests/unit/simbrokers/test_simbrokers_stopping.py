"""The bounded stop's pieces: :func:`simbrokers.stopping.bounded` and :class:`simbrokers.stopping.Watchdog`."""

from __future__ import annotations

import threading
import time

import pytest

from simbrokers.stopping import Watchdog, bounded

pytestmark = pytest.mark.unit


def test_bounded_returns_true_when_the_action_ends_in_time(capsys: pytest.CaptureFixture[str]) -> None:
    done: list[int] = []
    assert bounded("closing x", lambda: done.append(1), 1.0)
    assert done == [1] and capsys.readouterr().err == ""


def test_bounded_gives_up_on_a_stuck_action_and_names_it(capsys: pytest.CaptureFixture[str]) -> None:
    release = threading.Event()
    started = time.monotonic()
    try:
        assert not bounded("closing the stuck client", lambda: release.wait(30), 0.3)
    finally:
        release.set()
    assert time.monotonic() - started < 2
    assert capsys.readouterr().err == (
        "simbrokers: could not finish closing the stuck client within 0.3 s: stopping anyway\n"
    )


def test_bounded_reports_a_failed_action(capsys: pytest.CaptureFixture[str]) -> None:
    def fail() -> None:
        raise OSError("connection refused")

    assert not bounded("closing y", fail, 1.0)
    assert capsys.readouterr().err == "simbrokers: could not finish closing y: connection refused\n"


def test_watchdog_exits_with_1_naming_the_step(capsys: pytest.CaptureFixture[str]) -> None:
    codes: list[int] = []
    exited = threading.Event()

    def fake_exit(code: int) -> None:
        codes.append(code)
        exited.set()

    dog = Watchdog(0.2, exit=fake_exit).start()
    dog.step = "closing the Kafka consumer"
    assert exited.wait(5)
    assert codes == [1]
    assert "(stuck closing the Kafka consumer): exiting now" in capsys.readouterr().err


def test_a_cancelled_watchdog_does_nothing() -> None:
    codes: list[int] = []
    dog = Watchdog(0.2, exit=codes.append).start()
    dog.cancel()
    # the marker: a watchdog started after it with the same limit fires, so the cancelled one would have by then
    fired = threading.Event()
    Watchdog(0.2, exit=lambda code: fired.set()).start()
    assert fired.wait(10)
    assert codes == []
