"""The Python worker daemon of livectl's Spark job: pyspark's daemon with the workers' imports done once.

Spark starts one daemon per executor (``python -m <spark.python.daemon.module>``) and asks it for a Python
worker whenever a task needs one; the daemon forks the worker. pyspark's own daemon (:mod:`pyspark.daemon`)
imports nothing before forking, so every new worker would import pyspark's worker, pandas, pyarrow,
livectl's modules and great-expectations (~5 s on this project's machines, see ``bench/README.md``, "Python
workers") and build the input validator, inside the task that needed it. Spark closes a worker that has been idle
for a minute (``PythonWorkerFactory``'s fixed idle timeout), so this is paid again by the first micro-batch
after an idle minute — an admin command to a quiet controller — and by a cold start's or a standby's
first batch.

This module is set as ``spark.python.daemon.module`` in ``streaming/conf/spark-defaults.conf``. It runs
:func:`preload` — the imports of :data:`PRELOADED` — and then hands over to pyspark's daemon
(:func:`pyspark.daemon.manager`): a new worker is a fork that finds everything in memory, copy-on-write.
The preloaded objects are frozen out of the garbage collector (:func:`gc.freeze`) before the first fork.
great-expectations (:data:`DEFERRED`) and the validator of :func:`streaming.routing.shared_validator`
come later: they were 3.3 of the preload's 4.3 s (6.6 s in a loaded cold start), which a cold start's and
a standby's first batch waited for, and that batch — the failover reference and ticks — does not use them.
The daemon imports them from its loop once it has had no request for :data:`DEFERRED_QUIET_S` and a core
of the machine is idle (:func:`install_idle_preload` wraps the ``select.poll`` object pyspark's loop
polls), so the workers it forks after that have them; a worker forked before judges its input without
them and imports them in its own idle time (:mod:`streaming.worker_validator`). It lives in livectl's
``streaming`` package, so the executors of a standalone cluster run it from the packed environment
(``livectl package-env``) like the rest of the job.

Spark puts its own archives on the daemon's ``PYTHONPATH``, ahead of the environment's packages: pyspark's
``pyspark.zip``, py4j's source zip and ``spark-core``'s jar. Imported from a zip, pyspark's modules are
compiled from source in every daemon (no bytecode cache: ~2 s of the preload here), and every new worker's
first task re-reads the archives' directories in pure Python (pyspark's ``setup_spark_files`` adds the task's
files directory to ``sys.path`` and so calls ``importlib.invalidate_caches()``, which rebuilds each
``zipimporter``'s index: the jar alone has ~6,000 entries; 0.16 s quiet, 0.7 s in a loaded failover batch).
When those archives are the ones shipped inside the very pyspark installation that this interpreter imports
from a directory (a ``pip install pyspark``: ``site-packages/pyspark/python/lib/``, ``…/pyspark/jars/``),
everything in them is installed beside them, so :func:`drop_shipped_archives` takes them off ``sys.path``
before anything is imported; archives from anywhere else (a Spark distribution's ``SPARK_HOME``) stay.

pyspark's daemon imports nothing before forking because some libraries start threads at import; the
native threads that these imports start (OpenBLAS' and Arrow's jemalloc background thread) register
fork handlers, and no Python thread is running when the daemon forks (:func:`preload` checks and
reports one). Should a preload fail, the daemon says so on its standard error (the executor's log) and
runs as pyspark's: a worker then imports what it needs itself, as without this module.

A reused worker runs pyspark's ``gc.collect()`` after every task (``pyspark.daemon``), and a worker of the
query keeps the states of the buckets it ran (:data:`streaming.stateful._STATE_CACHE`: ~0.6M objects per
50k partitions), which each of those collections walked again: 0.2–0.6 s of CPU per task in a broker
failure at 100k partitions, on a core the other bucket's task wanted (``bench/README.md``, "Python
workers"). :class:`TaskEndCollector` takes that collection's place in the workers this daemon forks: the
same collection — the task's garbage cycles are freed — then the survivors frozen, so the next one walks
only what later tasks made. Freezing keeps a frozen object that later becomes part of a garbage cycle
until a collection that includes the frozen ones, so it is bounded: once the frozen objects are twice as
many as after the last full collection, and at least a million more, a full one runs
(:attr:`TaskEndCollector.growth`, :attr:`TaskEndCollector.headroom`).
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import select
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from streaming.python_launcher import pyspark_package_folder

#: imported before the first fork, in this order: what a worker of the query imports on its first task
PRELOADED: tuple[str, ...] = (
    "pyspark.worker",
    "pandas",
    "pyarrow",
    "streaming.routing",
    "streaming.stateful",
    "streaming.validation",
    # pyspark's GroupState imports it on first use (for numpy's presence): unittest, difflib, argparse...;
    # great-expectations used to bring them in before the first fork
    "pyspark.testing.utils",
)
#: imported once the daemon is idle after its first forks (with the validator built): what a worker
#: needs only for a batch with input, which a worker forked earlier imports in its own idle time
#: (:mod:`streaming.worker_validator`)
DEFERRED: tuple[str, ...] = ("great_expectations",)
#: how long the daemon must have had no request before it imports :data:`DEFERRED`: its import cannot wait
#: for a task as a worker's does (it is one thread, and a fork must not copy an import under way), and it
#: only spares the workers forked later their own import, so it waits for a controller that has settled
DEFERRED_QUIET_S = 30.0


def drop_shipped_archives(path: list[str]) -> tuple[str, ...]:
    """Remove from ``path`` (``sys.path``) the archive entries (files: zips, jars) that lie inside the
    ``pyspark`` package this interpreter finds in ``path``'s directories; returns them, in their order.
    Nothing is removed when no such package is found or ``pyspark`` is already imported (from wherever it
    came: its modules and the archives must not be mixed)."""
    if "pyspark" in sys.modules:
        return ()
    archives = [entry for entry in path if entry and os.path.isfile(entry)]
    if not archives:
        return ()
    folder = pyspark_package_folder(path)
    if folder is None:
        return ()
    home = os.path.join(os.path.realpath(folder), "")
    dropped = tuple(entry for entry in archives if os.path.realpath(entry).startswith(home))
    path[:] = [entry for entry in path if entry not in dropped]
    for entry in dropped:  # a finder already made for one would still be asked by invalidate_caches()
        sys.path_importer_cache.pop(entry, None)
    return dropped


@dataclass(frozen=True)
class Preloaded:
    """What :func:`preload` did: seconds per module, the validator's build time, what failed."""

    seconds: tuple[tuple[str, float], ...]
    validator_seconds: float | None
    failures: tuple[str, ...]
    python_threads: tuple[str, ...]


def preload(
    modules: tuple[str, ...] = PRELOADED,
    build_validator: Callable[[], object] | None = None,
) -> Preloaded:
    """Import ``modules``, then build the worker's shared validator with ``build_validator`` if given
    (:func:`streaming.routing.shared_validator`, whose cache a forked worker inherits). Never raises: a
    module that fails to import is reported in ``failures`` and the rest go on."""
    seconds: list[tuple[str, float]] = []
    failures: list[str] = []
    for name in modules:
        start = time.perf_counter()
        try:
            importlib.import_module(name)
        except Exception as e:
            failures.append(f"import {name}: {e!r}")
            continue
        seconds.append((name, time.perf_counter() - start))
    validator_seconds: float | None = None
    try:
        if build_validator is not None:
            start = time.perf_counter()
            build_validator()
            validator_seconds = time.perf_counter() - start
    except Exception as e:
        failures.append(f"validator: {e!r}")
    others = tuple(t.name for t in threading.enumerate() if t is not threading.main_thread())
    return Preloaded(tuple(seconds), validator_seconds, tuple(failures), others)


def report(done: Preloaded) -> str:
    """One line for the executor's log."""
    total = sum(s for _, s in done.seconds) + (done.validator_seconds or 0.0)
    text = f"livectl worker daemon: preloaded {len(done.seconds)} modules and the validator in {total:.2f} s"
    if done.failures:
        text += "; failed: " + "; ".join(done.failures)
    if done.python_threads:
        text += "; Python threads running before fork: " + ", ".join(done.python_threads)
    return text


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """File descriptor 1 goes to standard error meanwhile: the daemon's first bytes on its standard output
    are the port Spark reads, so nothing an import prints may come before them."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


#: frozen objects a worker may gain over its mark before a full collection, whatever ``growth`` allows: one
#: 50k-partition bucket's state is ~0.6M objects, and without it the first bucket task of every worker (the
#: mark then being the daemon's ~0.26M preloaded objects) ran a full collection, 0.6-0.8 s of CPU in a
#: takeover's failover batch (bench/README.md, "The task-end collector's headroom")
HEADROOM = 1_000_000


class TaskEndCollector:
    """The collection after each task in a forked worker, in place of :func:`gc.collect` (the daemon calls
    ``gc.collect()`` through its module's ``gc`` name, which :func:`install_task_end_collector` points
    here; any other attribute is :mod:`gc`'s). :meth:`collect` collects what is not frozen and then
    freezes the survivors; when that leaves more frozen objects than the limit — ``growth`` times those the
    last full collection left (the first task's end sets the mark), and at least ``headroom`` more —
    everything is unfrozen and collected first, so a frozen object that became garbage in a cycle is held at
    most until the frozen set has grown that much. The bucket states a worker keeps are acyclic (freed by
    reference counting when replaced, frozen or not), so the bound is for the rare cycle only."""

    def __init__(self, growth: float = 2.0, headroom: int = HEADROOM) -> None:
        if growth <= 1.0:
            raise ValueError(f"growth must be greater than 1 (got {growth})")
        if headroom < 0:
            raise ValueError(f"headroom must not be negative (got {headroom})")
        self.growth = growth
        self.headroom = headroom
        self.full_collections = 0
        self._limit: float | None = None

    def _limit_from(self, frozen: int) -> float:
        return max(frozen * self.growth, frozen + self.headroom)

    def collect(self, generation: int = 2) -> int:
        """What pyspark's daemon calls after a task: the number of unreachable objects found."""
        found = gc.collect(generation)
        gc.freeze()
        frozen = gc.get_freeze_count()
        if self._limit is None:
            self._limit = self._limit_from(frozen)
        elif frozen > self._limit:
            gc.unfreeze()
            found += gc.collect()
            gc.freeze()
            self._limit = self._limit_from(gc.get_freeze_count())
            self.full_collections += 1
        return found

    def __getattr__(self, name: str) -> Any:
        return getattr(gc, name)


def install_task_end_collector(daemon: types.ModuleType, collector: TaskEndCollector | None = None) -> bool:
    """Point ``daemon``'s (:mod:`pyspark.daemon`'s) ``gc`` at ``collector`` (a new
    :class:`TaskEndCollector` by default); ``False`` (nothing changed) if that module has no ``gc`` of
    its own, as a pyspark that no longer collects after tasks would not."""
    if getattr(daemon, "gc", None) is not gc:
        return False
    daemon.gc = collector if collector is not None else TaskEndCollector()  # type: ignore[attr-defined]
    return True


def preload_deferred() -> Preloaded:
    """:func:`preload` of :data:`DEFERRED` with the shared validator built, then everything frozen (as
    before the first fork); a failure is said on standard error (the executor's log)."""
    from streaming.routing import shared_validator

    with stdout_to_stderr():
        done = preload(DEFERRED, build_validator=shared_validator)
    gc.freeze()
    if done.failures:
        print(report(done), file=sys.stderr, flush=True)
    return done


class _IdlePoll:
    """A ``select.poll()`` object whose ``poll`` runs ``idle`` once, after a poll that found nothing when
    there had been no event for ``quiet_s`` and ``spare()`` (a core of the machine is idle) allows;
    everything else is the wrapped poller's."""

    def __init__(self, poller: Any, idle: Callable[[], object], quiet_s: float, spare: Callable[[], bool]) -> None:
        self._poller = poller
        self._idle: Callable[[], object] | None = idle
        self._quiet_s = quiet_s
        self._spare = spare
        self._last_event = time.monotonic()

    def poll(self, *args: Any) -> Any:
        events = self._poller.poll(*args)
        if events:
            self._last_event = time.monotonic()
        elif self._idle is not None and time.monotonic() - self._last_event >= self._quiet_s and self._spare():
            idle, self._idle = self._idle, None
            idle()
        return events

    def __getattr__(self, name: str) -> Any:
        return getattr(self._poller, name)


class _IdleSelect(types.ModuleType):
    """:mod:`select` as :mod:`pyspark.daemon` sees it, its ``poll()`` an :class:`_IdlePoll`."""

    def __init__(self, idle: Callable[[], object], quiet_s: float, spare: Callable[[], bool]) -> None:
        super().__init__("select")
        self._idle_args = (idle, quiet_s, spare)

    def poll(self) -> _IdlePoll:
        return _IdlePoll(select.poll(), *self._idle_args)

    def __getattr__(self, name: str) -> Any:
        return getattr(select, name)


def install_idle_preload(
    daemon: types.ModuleType,
    idle: Callable[[], object] = preload_deferred,
    quiet_s: float = DEFERRED_QUIET_S,
    spare: Callable[[], bool] | None = None,
) -> bool:
    """Make ``daemon`` (:mod:`pyspark.daemon`) run ``idle`` once from its loop, when it has had no request
    for ``quiet_s`` and a core of the machine is idle (``spare``, by default
    :func:`streaming.peer_states.machine_has_idle_core`); ``False`` (nothing changed) if that module has
    no ``select`` of its own or its loop does not poll."""
    if getattr(daemon, "select", None) is not select or not hasattr(select, "poll"):
        return False
    if spare is None:
        from streaming.peer_states import machine_has_idle_core

        spare = machine_has_idle_core
    daemon.select = _IdleSelect(idle, quiet_s, spare)  # type: ignore[attr-defined]
    return True


def main(
    manager: Callable[[], None] | None = None, drop_archives: bool = True, freeze_after_tasks: bool = True
) -> None:
    """Preload, then run pyspark's daemon (``manager``, by default :func:`pyspark.daemon.manager`), which
    reads Spark's arguments from ``sys.argv`` as when Spark starts it directly. ``drop_archives``:
    :func:`drop_shipped_archives` first; ``freeze_after_tasks``: pyspark's daemon's collection after each
    task made by a :class:`TaskEndCollector` (``False`` for either only to measure what it saves:
    ``bench/worker_start.py``, ``bench/no_freeze_daemon.py``)."""
    if drop_archives:
        drop_shipped_archives(sys.path)
    with stdout_to_stderr():
        done = preload()
    # pyspark's daemon runs gc.collect() in a reused worker after every task: with everything above in the
    # tracked heap that took 160 ms instead of 26 ms here (bench/README.md, "Python workers"); frozen, the
    # preloaded objects are left out of every collection (and their pages are not dirtied in the forks)
    gc.freeze()
    if done.failures or done.python_threads:
        print(report(done), file=sys.stderr, flush=True)
    if manager is None:
        from pyspark import daemon

        if freeze_after_tasks and not install_task_end_collector(daemon):
            print(
                "livectl worker daemon: pyspark.daemon has no gc of its own; its collection is left as is",
                file=sys.stderr,
                flush=True,
            )
        if not install_idle_preload(daemon):
            print(
                "livectl worker daemon: pyspark.daemon does not poll; great-expectations is imported now",
                file=sys.stderr,
                flush=True,
            )
            preload_deferred()
        manager = daemon.manager
    manager()


if __name__ == "__main__":  # pragma: no cover - run by Spark as ``python -m streaming.worker_daemon``
    main()
