"""A Python worker's input validator: great-expectations once the worker has it, the plain rules before.

Importing great-expectations takes ~3–6 s of CPU here (``bench/README.md``, "Cold start: great-expectations
off the first batch"), and a cold start's first batch — the failover reference and ticks — does not need
it, but waited for it: livectl's worker daemon imported it before forking the first workers. Now the
daemon forks them first and imports it once it has been idle (:func:`streaming.worker_daemon.main`), so
the workers forked later have it; a worker forked before that judges its batches by
:class:`streaming.validation.SuiteRules` (the same suite, evaluated as great-expectations' pandas engine
does; unit tests compare both on every kind of record) and imports great-expectations on a thread of its
own once it has been idle for :data:`IMPORT_QUIET_S` and a core of the machine is idle. While a task of the
worker runs, or no core of the machine is idle, that import waits before its next module
(:class:`_ImportPause`, an audit hook), so the task has the worker to itself and the driver's sinks their
cores — unless a thread waits for a module the import holds: it then goes on at once. No batch ever waits
for the import.
"""

from __future__ import annotations

import functools
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from streaming.peer_states import IdleCoreWatch, machine_has_idle_core

T = TypeVar("T")

#: how long a worker must have run no task before it imports great-expectations: after the decode of the
#: other workers' states (:mod:`streaming.peer_states`, from 2.5 s after a task; ~1–3 s), which a bucket's
#: next batch needs more, and a broker failure 3 s after a cold start met half-done imports (the import
#: took the idle core that decode waits for: 5.3–6.1 s to ZooKeeper against 4.2–4.7 s)
IMPORT_QUIET_S = 10.0

_PAUSE_POLL_S = 0.02
_SPARE_POLL_S = 0.2


def _another_thread_waits_for_a_module() -> bool:
    """Whether a thread other than this one is blocked on a module lock (Python's import system keeps
    them in ``_blocking_on``; ``False`` where it does not)."""
    bootstrap = sys.modules.get("_frozen_importlib")
    waiting = getattr(bootstrap, "_blocking_on", None)
    if not isinstance(waiting, dict):
        return False
    me = threading.get_ident()
    return any(tid != me for tid in list(waiting))


def in_spark_task() -> bool:
    """Whether this thread runs a Spark task (a Python worker's)."""
    from pyspark import TaskContext

    return TaskContext.get() is not None


class _ImportPause:
    """An audit hook (:func:`sys.addaudithook`; Python keeps it for the process's life, so it does nothing
    unless a load is under way): on the loading thread, each ``import`` event — a statement importing a
    module not yet in ``sys.modules``, before its lock is taken — waits while ``busy`` is set or ``spare``
    says no, unless another thread waits for a module lock (one this thread may hold: a package whose body is running).
    Not a ``sys.meta_path`` finder: Python asks those holding its global import lock, which every other
    thread's import then waits for."""

    def __init__(self) -> None:
        self.thread: int | None = None
        self.busy: threading.Event | None = None
        self.spare: Callable[[], bool] = lambda: True

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        if event != "import" or self.thread != threading.get_ident():
            return
        busy, spare = self.busy, self.spare
        while ((busy is not None and busy.is_set()) or not spare()) and not _another_thread_waits_for_a_module():
            time.sleep(_PAUSE_POLL_S)


@functools.cache
def _import_pause() -> _ImportPause:
    """The process's one :class:`_ImportPause`, added as an audit hook on first use."""
    pause = _ImportPause()
    sys.addaudithook(pause)
    return pause


class WorkerValidator:
    """One worker's validator (see the module docstring). ``built`` says whether great-expectations'
    validator is there (in a worker forked after the daemon's import, from the start); ``build`` builds
    it (importing great-expectations); ``plain`` makes the stand-in, which a suite with an expectation
    it does not know refuses (``ValueError``: then :meth:`current` builds the real one at once).
    ``spare`` says whether the import may start (by default: a core of the machine is idle), ``keep_going``
    whether it may go on to its next module (by default: a core was idle over the last fifth of a second,
    :class:`streaming.peer_states.IdleCoreWatch` — the driver's sinks and the other workers' tasks share
    the cores on ``local[N]``);
    ``background`` whether a task's end may start the thread (by default only in a Spark task: not on a
    driver or in tests, which call :meth:`load` by hand)."""

    def __init__(
        self,
        built: Callable[[], bool],
        build: Callable[[], Any],
        plain: Callable[[], Any],
        *,
        spare: Callable[[], bool] = machine_has_idle_core,
        keep_going: Callable[[], bool] | None = None,
        quiet_s: float = IMPORT_QUIET_S,
        background: Callable[[], bool] | bool = in_spark_task,
    ) -> None:
        self._built = built
        self._build = build
        self._plain_factory = plain
        self._plain: Any = None
        self._spare = spare
        self._keep_going = keep_going if keep_going is not None else IdleCoreWatch()
        self._quiet_s = quiet_s
        self._background = background
        self._busy = threading.Event()
        self._idle = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.loaded_in_background = False

    def current(self) -> Any:
        """The validator for the task now: great-expectations' if built, else the plain rules."""
        if self._built():
            return self._build()
        with self._lock:
            if self._plain is None:
                try:
                    self._plain = self._plain_factory()
                except ValueError:
                    return self._build()
            return self._plain

    def task_started(self) -> None:
        """A task of the worker begins: a background import waits at its next module."""
        self._idle.clear()
        self._busy.set()

    def task_ended(self) -> None:
        """The task is done: the import (its thread started on the first task's end) may go on once the
        worker has been idle for ``quiet_s``."""
        self._busy.clear()
        self._idle.set()
        background = self._background() if callable(self._background) else self._background
        if background and self._thread is None and not self._built():
            self._thread = threading.Thread(target=self._run, name="livectl-validator-import", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._built():
            self._idle.wait()
            if self._busy.wait(self._quiet_s):
                continue
            if not self._spare():
                time.sleep(_SPARE_POLL_S)
                continue
            self.load()
            return  # once, even if it failed (said on the worker's standard error)

    def load(self) -> None:
        """Build great-expectations' validator on this thread, waiting before each new module while a task
        runs or no core is idle. Never raises: a failure is said on standard error (the executor's log),
        and the worker goes on judging by the plain rules."""
        pause = _import_pause()
        pause.busy, pause.spare, pause.thread = self._busy, self._keep_going, threading.get_ident()
        try:
            self._build()
            self.loaded_in_background = True
        except Exception as e:
            print(
                f"livectl worker: great-expectations' validator not built ({e!r:.500}); the input suite is "
                "judged without it (streaming.validation.SuiteRules)",
                file=sys.stderr,
                flush=True,
            )
        finally:
            pause.thread, pause.busy, pause.spare = None, None, lambda: True


def during_task(validator: WorkerValidator, rows: Iterator[T]) -> Iterator[T]:
    """``rows`` (a task's output, computed as it is read), with ``validator`` told when the task's work
    begins and ends."""
    validator.task_started()
    try:
        yield from rows
    finally:
        validator.task_ended()
