"""``livectl run`` stands for election again when Spark could not start a Python worker in time
(:func:`streaming.driver.entry.run_again_after_worker_start_failures`): at most ``python_worker_start_retries``
times in a row, a run that became active resetting the count, any other failure raised at once."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from streaming.driver.entry import run_again_after_worker_start_failures
from streaming.driver.shutdown import ControllerStoppedError, WorkerStartError
from streaming.errors import StreamingError
from streaming.settings import Settings, SettingsError

pytestmark = pytest.mark.unit


class ScriptedApp:
    """A controller run that ends as its script says: ``ok``, ``worker`` (the worker start timed out before
    it became active), ``worker-after-ready`` (after), ``fenced`` or ``failed``."""

    def __init__(self, outcome: str, runs: list[str]) -> None:
        self.outcome = outcome
        self.runs = runs

    def run(self, ready: threading.Event | None = None) -> None:
        self.runs.append(self.outcome)
        if self.outcome == "worker-after-ready" and ready is not None:
            ready.set()
        if self.outcome.startswith("worker"):
            raise WorkerStartError("the controller query failed: Python worker failed to connect back.")
        if self.outcome == "fenced":
            raise ControllerStoppedError("controller 1 (epoch 2) was fenced")
        if self.outcome == "failed":
            raise StreamingError("the controller query failed: livectl-kafka fail_on_data_loss: data loss on t-0")


def run_script(outcomes: list[str], retries: int) -> tuple[list[str], list[str], BaseException | None]:
    runs: list[str] = []
    said: list[str] = []
    script: Iterator[str] = iter(outcomes)
    error: BaseException | None = None
    try:
        run_again_after_worker_start_failures(
            lambda: ScriptedApp(next(script), runs), retries, threading.Event(), said.append, pause_s=0.0
        )
    except StreamingError as e:
        error = e
    return runs, said, error


def test_a_worker_start_failure_runs_again_and_says_so() -> None:
    runs, said, error = run_script(["worker", "worker", "ok"], retries=3)
    assert runs == ["worker", "worker", "ok"] and error is None
    assert said[0] == (
        "the controller query failed: Python worker failed to connect back.: Spark could not start a Python worker "
        "in time; this controller resigned and stands for election again in 0 s "
        "(restart 1 of 3 in a row: python_worker_start_retries)"
    )
    assert "(restart 2 of 3 in a row" in said[1]


def test_retries_in_a_row_are_bounded_and_the_last_failure_is_raised() -> None:
    runs, said, error = run_script(["worker"] * 5, retries=2)
    assert runs == ["worker"] * 3 and len(said) == 2
    assert isinstance(error, WorkerStartError)
    runs, said, error = run_script(["worker"], retries=0)
    assert runs == ["worker"] and said == [] and isinstance(error, WorkerStartError)


def test_a_run_that_became_active_resets_the_count() -> None:
    # one retry allowed: the second failure is allowed only because the run before it had become active
    runs, said, error = run_script(["worker", "worker-after-ready", "ok"], retries=1)
    assert runs == ["worker", "worker-after-ready", "ok"] and error is None
    assert [line.rsplit("(restart ", 1)[1][:6] for line in said] == ["1 of 1", "1 of 1"]
    runs, said, error = run_script(["worker-after-ready", "worker", "worker"], retries=1)
    assert runs == ["worker-after-ready", "worker"] and isinstance(error, WorkerStartError)


@pytest.mark.parametrize("outcome", ["fenced", "failed"])
def test_other_failures_are_raised_at_once(outcome: str) -> None:
    runs, said, error = run_script([outcome, "ok"], retries=3)
    assert runs == [outcome] and said == []
    assert isinstance(error, ControllerStoppedError if outcome == "fenced" else StreamingError)
    assert not isinstance(error, WorkerStartError)


def test_a_stop_asked_during_the_pause_ends_the_run_quietly() -> None:
    stopping = threading.Event()
    runs: list[str] = []

    def say(_line: str) -> None:
        stopping.set()  # SIGTERM while it pauses

    run_again_after_worker_start_failures(lambda: ScriptedApp("worker", runs), 3, stopping, say, pause_s=30.0)
    assert runs == ["worker"]


def test_the_setting_is_checked() -> None:
    assert Settings.load(overrides=["python_worker_start_retries=0"]).python_worker_start_retries == 0
    with pytest.raises(SettingsError) as e:
        Settings.load(overrides=["python_worker_start_retries=-1"])
    assert e.value.key == "python_worker_start_retries" and "at least 0" in e.value.reason


def test_the_callers_ready_is_set_when_a_later_run_becomes_active() -> None:
    ready = threading.Event()
    script = iter(["worker", "worker-after-ready", "ok"])
    runs: list[str] = []
    run_again_after_worker_start_failures(
        lambda: ScriptedApp(next(script), runs), 1, threading.Event(), lambda _: None, pause_s=0.0, ready=ready
    )
    assert ready.is_set() and runs == ["worker", "worker-after-ready", "ok"]
    # a run that never became active leaves it unset
    never = threading.Event()
    with pytest.raises(WorkerStartError):
        run_again_after_worker_start_failures(
            lambda: ScriptedApp("worker", []), 0, threading.Event(), lambda _: None, ready=never
        )
    assert not never.is_set()
