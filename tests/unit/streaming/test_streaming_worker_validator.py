"""A worker's validator (streaming.worker_validator): the plain rules until great-expectations is built, the
import in idle time, waiting at each module while a task runs, and never holding a module another thread
waits for."""

from __future__ import annotations

import importlib
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from streaming import routing
from streaming.validation import SuiteRules
from streaming.worker_validator import WorkerValidator, during_task, in_spark_task

pytestmark = pytest.mark.unit


class Builds:
    """A validator's build, counted; ``run`` is what building does (by default nothing)."""

    def __init__(self, run: Any = None) -> None:
        self.value: object | None = None
        self.count = 0
        self.run = run

    def built(self) -> bool:
        return self.value is not None

    def build(self) -> object:
        if self.value is None:
            self.count += 1
            if self.run is not None:
                self.run()
            self.value = object()
        return self.value


def _until(condition: Any, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return bool(condition())


@pytest.fixture
def package(tmp_path: Path) -> Iterator[str]:
    """A fresh package whose ``__init__`` imports its sub-module (so importing it holds its lock while the
    sub-module is imported)."""
    name = f"livectl_test_pkg_{time.monotonic_ns()}"
    (tmp_path / name).mkdir()
    # the body takes a moment before it imports the sub-module (a test sets a task going meanwhile)
    (tmp_path / name / "__init__.py").write_text("import time\ntime.sleep(0.3)\nfrom . import sub\n")
    (tmp_path / name / "sub.py").write_text("VALUE = 7\n")
    sys.path.insert(0, str(tmp_path))
    importlib.invalidate_caches()
    yield name
    sys.path.remove(str(tmp_path))
    for mod in [m for m in sys.modules if m.startswith(name)]:
        del sys.modules[mod]


def test_the_plain_rules_stand_in_until_the_real_validator_is_built() -> None:
    b = Builds()
    v = WorkerValidator(b.built, b.build, SuiteRules, keep_going=lambda: True, background=False)
    plain = v.current()
    assert isinstance(plain, SuiteRules) and v.current() is plain and b.count == 0
    b.build()
    assert v.current() is b.value


def test_a_suite_the_plain_rules_cannot_judge_builds_the_real_one_at_once() -> None:
    def refused() -> object:
        raise ValueError("no plain rule for expect_column_values_to_be_unique")

    b = Builds()
    v = WorkerValidator(b.built, b.build, refused, background=False)
    assert v.current() is b.value and b.count == 1


def test_after_a_task_the_import_runs_once_the_worker_is_quiet_and_a_core_is_idle() -> None:
    b = Builds()
    spare = [False]
    v = WorkerValidator(
        b.built, b.build, SuiteRules, keep_going=lambda: True, spare=lambda: spare[0], quiet_s=0.05, background=True
    )
    assert list(during_task(v, iter([1, 2]))) == [1, 2]
    time.sleep(0.3)
    assert b.count == 0  # no idle core yet
    spare[0] = True
    assert _until(b.built)
    assert v.loaded_in_background and b.count == 1
    assert v.current() is b.value


def test_a_task_that_begins_before_the_quiet_spell_is_over_puts_the_import_off() -> None:
    b = Builds()
    v = WorkerValidator(
        b.built, b.build, SuiteRules, keep_going=lambda: True, spare=lambda: True, quiet_s=0.3, background=True
    )
    v.task_started()
    v.task_ended()
    time.sleep(0.1)
    v.task_started()  # a task within the quiet spell
    time.sleep(0.5)
    assert b.count == 0
    v.task_ended()
    assert _until(b.built)


def test_the_import_waits_at_its_next_module_while_a_task_runs(package: str) -> None:
    b = Builds(lambda: __import__(package))
    v = WorkerValidator(b.built, b.build, SuiteRules, keep_going=lambda: True, background=False)
    v.task_started()
    loader = threading.Thread(target=v.load, daemon=True)
    loader.start()
    time.sleep(0.3)
    assert package not in sys.modules and b.count == 1  # waiting before the package's first module
    v.task_ended()
    loader.join(10)
    assert not loader.is_alive() and b.built()
    assert sys.modules[package].sub.VALUE == 7


def test_the_import_waits_while_no_core_of_the_machine_is_idle(package: str) -> None:
    free = [False]
    b = Builds(lambda: __import__(package))
    v = WorkerValidator(b.built, b.build, SuiteRules, keep_going=lambda: free[0], background=False)
    loader = threading.Thread(target=v.load, daemon=True)
    loader.start()
    time.sleep(0.3)
    assert package not in sys.modules
    free[0] = True
    loader.join(10)
    assert not loader.is_alive() and sys.modules[package].sub.VALUE == 7


def test_a_thread_waiting_for_a_module_the_import_holds_lets_it_go_on(package: str) -> None:
    # the loader runs the package's body (holding its lock) when a task begins, and waits before the
    # sub-module; the task's own import of the package then waits on that lock: the loader must go on
    # rather than wait for the task to end
    b = Builds(lambda: __import__(package))
    v = WorkerValidator(b.built, b.build, SuiteRules, keep_going=lambda: True, background=False)
    loader = threading.Thread(target=v.load, daemon=True)
    loader.start()
    time.sleep(0.1)
    v.task_started()
    time.sleep(0.4)
    assert f"{package}.sub" not in sys.modules  # waiting before the sub-module
    got: list[int] = []
    task = threading.Thread(target=lambda: got.append(importlib.import_module(package).sub.VALUE), daemon=True)
    task.start()
    task.join(10)
    loader.join(10)
    assert got == [7] and not loader.is_alive()
    v.task_ended()


def test_a_failing_import_is_tried_once_and_said(capfd: pytest.CaptureFixture[str]) -> None:
    tries: list[int] = []

    def broken() -> None:
        tries.append(1)
        raise ImportError("no great-expectations here")

    b = Builds(broken)
    v = WorkerValidator(
        b.built, b.build, SuiteRules, keep_going=lambda: True, spare=lambda: True, quiet_s=0.01, background=True
    )
    v.task_started()
    v.task_ended()
    assert _until(lambda: tries == [1])
    time.sleep(0.2)
    assert tries == [1] and not v.loaded_in_background and not b.built()
    assert "validator not built (ImportError('no great-expectations here'))" in capfd.readouterr().err
    assert isinstance(v.current(), SuiteRules)


def test_the_query_routes_with_the_workers_validator() -> None:
    import pandas as pd

    routing.shared_validator.cache_clear()
    v = routing.worker_validator()
    assert isinstance(v.current(), SuiteRules)
    prepare = routing.make_prepare(2, "livectl.admin")
    frame = pd.DataFrame(
        {
            "topic": ["livectl.admin"],
            "partition": [0],
            "offset": [0],
            "timestamp": [pd.Timestamp(1_700_000_000_000, unit="ms")],
            "value": ['{"version": 1, "type": "delete_topic", "request_id": "r", "topic": ".."}'],
        }
    )
    out = pd.concat(list(prepare(iter([frame]))))
    assert out["kind"].tolist()[0] == routing.KIND_REJECTED
    assert "topic_name_legal" in out["payload"].tolist()[0]
    time.sleep(0.1)
    assert not routing.validator_built()  # outside a Spark task no import starts behind the tests


def test_only_a_spark_task_starts_the_import() -> None:
    from pyspark import TaskContext

    assert not in_spark_task()
    TaskContext._setTaskContext(TaskContext())
    try:
        assert in_spark_task()
    finally:
        TaskContext._setTaskContext(None)  # type: ignore[arg-type]
