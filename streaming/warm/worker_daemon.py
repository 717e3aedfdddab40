"""The Python worker daemon of livectl's Spark job: pyspark's own daemon, started once the workers' imports are done.

Spark starts one daemon per executor as ``python -m <spark.python.daemon.module>`` (a documented Spark
configuration; pyspark's default is :mod:`pyspark.daemon`) and asks it for a Python worker whenever a task
needs one; the daemon forks the worker. pyspark's daemon imports nothing before forking, so every new
worker would import pyspark's worker, pandas, pyarrow, livectl's modules and great-expectations and build
the input validator inside the task that needed it — seconds, paid again after Spark closes a worker that
has been idle for a minute (an admin command to a quiet controller).

This module is set as ``spark.python.daemon.module`` in the shipped ``spark-defaults.conf``. :func:`main`
imports :data:`PRELOADED`, builds the input validator (:func:`streaming.query.routing.shared_validator`, whose
cache a forked worker inherits), freezes what that made out of the cyclic garbage collector
(:func:`gc.freeze`, as Python's documentation advises before forking: a fork's collections then neither
walk those objects nor dirty their pages) and runs pyspark's daemon, :func:`pyspark.daemon.manager`,
unchanged: a new worker is a fork that finds everything in memory, copy-on-write. Nothing of pyspark's is
patched. Should a preload fail, the daemon says so on its standard error (the executor's log) and runs as
pyspark's: a worker then imports what it needs itself. It lives in livectl's ``streaming`` package, so the
executors of a standalone cluster run it from the packed environment (``livectl package-env``).

pyspark's daemon imports nothing before forking because some libraries start threads at import; the
native threads these imports start register fork handlers, and no Python thread may run when the daemon
forks (:func:`preload` reports one if any does).
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

#: imported before the first fork, in this order: what a worker of the query imports
PRELOADED: tuple[str, ...] = (
    "pyspark.worker",
    "pandas",
    "pyarrow",
    "streaming.query.routing",
    "streaming.query.stateful",
    "streaming.query.validation",
    "great_expectations",
    # pyspark's GroupState imports it on first use (for numpy's presence): unittest, difflib, argparse...
    "pyspark.testing.utils",
)


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
    (:func:`streaming.query.routing.shared_validator`). Never raises: a module that fails to import is reported
    in ``failures`` and the rest go on."""
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


def preload_all() -> Preloaded:
    """:func:`preload` of :data:`PRELOADED` with the shared validator built, its output on standard error."""
    from streaming.query.routing import shared_validator

    with stdout_to_stderr():
        return preload(PRELOADED, build_validator=shared_validator)


def main(manager: Callable[[], None] | None = None) -> None:
    """Preload, freeze, then run pyspark's daemon (``manager``, by default :func:`pyspark.daemon.manager`),
    which reads Spark's arguments from ``sys.argv`` as when Spark starts it directly."""
    done = preload_all()
    gc.freeze()
    if done.failures or done.python_threads:
        print(report(done), file=sys.stderr, flush=True)
    if manager is None:
        from pyspark import daemon

        manager = daemon.manager
    manager()


if __name__ == "__main__":  # pragma: no cover - run by Spark as ``python -m streaming.warm.worker_daemon``
    main()
