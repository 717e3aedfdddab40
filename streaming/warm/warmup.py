"""Python workers started before the query needs them: a small Spark job when the controller starts.

The query's first micro-batch — a cold start's failover batch, or a standby's once it wins the lease — is
the one that must be fast, and the first that needs Python workers: without this job it waits for Spark to
start the worker daemon and for each worker to import pandas, pyarrow and livectl (seconds;
``docs/decisions/2026-11-24-python-warmup-job.md``). :func:`start_warmup` runs, in a background thread, one task per
executor core that imports what the query's tasks import (:func:`warm_task`, with the worker daemon's own
list and preload). Spark keeps the workers for the query
(``spark.python.worker.reuse``); it closes them after an idle minute, and then livectl's worker daemon
(:mod:`streaming.warm.worker_daemon`) forks new ones with all of it already in memory.

When: as soon as the SparkSession is up and the query's source is loaded (:class:`streaming.query.SourceAhead`:
Spark starts the worker daemon inside a lock that the source's Python planner processes need, and the
daemon imports for seconds before it lets go), what needs no Python worker done meanwhile
(:meth:`Warmup.prime`) — a standby while it waits for the lease, an active start beside its election,
snapshot read and query start. ``spark.livectl.python.warmup.early false`` makes an active
start (no other controller) start it only once it has read the ZooKeeper tree instead: on ``local[N]`` the
job's imports share the driver's cores and slow the read, but started later the job still holds the task
slots when the failover batch comes; measured side by side neither order won beyond the noise of a busy
machine (``docs/decisions/2026-11-24-python-warmup-job.md``), so the default stays.

The job never delays the lease, the snapshot read or the failover reference: it runs beside them, and a
failure (the session stopping under it, a worker that cannot start) is logged, never raised: the query
then starts its workers itself, as without it. ``spark.livectl.python.warmup false`` switches it off.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pandas as pd

from streaming.errors import first_line
from streaming.runtime.plan_text import explain_text
from streaming.runtime.spark_flags import flag_value, spark_flag

log = logging.getLogger("livectl.warmup")

#: Spark property: ``false`` switches the warm-up job off
WARMUP_CONF = "spark.livectl.python.warmup"
#: Spark property: ``false`` makes an active start warm up once it has read the tree (see the module's docstring)
WARMUP_EARLY_CONF = "spark.livectl.python.warmup.early"

#: the rows :func:`warm_task` yields
WARMED_SCHEMA = "pid long, seconds double, ready boolean"


@dataclass(frozen=True)
class Warmed:
    """The warm-up job's outcome: per task, its worker's process id, its import time and whether the
    worker had the preloaded modules already (reused, or forked from livectl's daemon); the job's time."""

    pids: tuple[int, ...]
    task_seconds: tuple[float, ...]
    ready: tuple[bool, ...]
    job_seconds: float


def warm_task(batches: Iterable[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    """The ``mapInPandas`` function: in the Python worker, do what livectl's worker daemon does before it
    forks (:func:`streaming.warm.worker_daemon.preload` of :data:`streaming.warm.worker_daemon.PRELOADED`: what the
    query's steps import, and the input validator built), so that one list says what a worker needs; one
    row: pid, seconds, and whether the modules were there before (``ready``: a reused worker, or one forked
    from livectl's daemon). A module that cannot be imported, or a validator that cannot be built, fails
    the task, naming it."""
    import os
    import sys

    start = time.perf_counter()
    from streaming.query.routing import shared_validator
    from streaming.warm.worker_daemon import PRELOADED, preload

    ready = all(name in sys.modules for name in PRELOADED)
    done = preload(PRELOADED, build_validator=shared_validator)
    if done.failures:
        raise RuntimeError("Python worker warm-up: " + "; ".join(done.failures))
    for _ in batches:
        pass
    yield pd.DataFrame({"pid": [os.getpid()], "seconds": [time.perf_counter() - start], "ready": [ready]})


def warmup_setting(value: str) -> bool:
    """The value of ``spark.livectl.python.warmup``: ``true`` or ``false`` (any case); anything else is refused."""
    return flag_value(WARMUP_CONF, value)


def warmup_enabled(spark: Any) -> bool:
    """``spark.livectl.python.warmup`` of the session (default ``true``)."""
    return spark_flag(spark, WARMUP_CONF)


def warmup_early(spark: Any) -> bool:
    """``spark.livectl.python.warmup.early`` of the session (default ``true``): whether an active start
    warms its workers as soon as the session is up, as a standby does, rather than once it has read the
    ZooKeeper tree (:func:`streaming.runtime.spark_flags.flag_value`'s values and errors, for this property)."""
    return spark_flag(spark, WARMUP_EARLY_CONF)


def warm_frame(spark: Any, tasks: int | None = None) -> Any:
    """The warm-up job's DataFrame: ``tasks`` tasks, by default one per executor core (``defaultParallelism``),
    so that each core's worker is started, each running :func:`warm_task`."""
    n = tasks if tasks is not None else max(1, int(spark.sparkContext.defaultParallelism))
    return spark.range(0, n, numPartitions=n).mapInPandas(warm_task, WARMED_SCHEMA)


def warm_workers(spark: Any, tasks: int | None = None, frame: Any = None) -> Warmed:
    """Run the warm-up job (blocking): ``frame`` (planned ahead by :meth:`Warmup.prime`) or :func:`warm_frame`."""
    start = time.perf_counter()
    rows = (frame if frame is not None else warm_frame(spark, tasks)).collect()
    return Warmed(
        tuple(int(r["pid"]) for r in rows),
        tuple(float(r["seconds"]) for r in rows),
        tuple(bool(r["ready"]) for r in rows),
        time.perf_counter() - start,
    )


#: how long :meth:`Warmup.start` waits for :meth:`Warmup.prime` before it runs the job unprimed
PRIME_WAIT_S = 60.0


class Warmup:
    """The warm-up job, and what can be done for it before its Python workers start.

    :meth:`prime` runs a job without Python shaped like the warm-up's (one task per core, collected) and
    plans the warm-up's own job: the session's first job pays Spark's one-time costs — classes loaded, code
    generated, the scheduler's and the executor's first tasks — and planning a ``mapInPandas`` job takes
    more: seconds on a loaded machine, measured before the warm-up's worker daemon was started
    (``docs/decisions/2026-11-24-python-warmup-job.md``). None of it needs a Python worker, so it can run while the
    query's source is prepared (:class:`streaming.query.SourceAhead`), which must not wait behind the
    daemon's start. :meth:`start` then runs the job in a thread."""

    def __init__(self, spark: Any) -> None:
        self.spark = spark
        self._frame: Any = None
        self._primed = threading.Event()
        self.prime_seconds: float | None = None

    def prime(self) -> None:
        """The JVM-only first job, then the warm-up's job planned; never raises (the job then plans itself)."""
        spark = self.spark
        try:
            start = time.perf_counter()
            spark.sparkContext.setJobDescription("livectl: Python workers warm-up (Spark's first job)")
            n = max(1, int(spark.sparkContext.defaultParallelism))
            spark.range(0, n, numPartitions=n).collect()
            frame = warm_frame(spark)
            explain_text(frame)  # plans it: the frame keeps the plan for its job
            self._frame = frame
            self.prime_seconds = time.perf_counter() - start
        except Exception as e:  # an optimisation only
            log.info("Python workers warm-up not primed: %s", first_line(e))
        finally:
            self._primed.set()

    def start(self, *, after_prime: bool = False) -> threading.Thread | None:
        """:func:`warm_workers` in a daemon thread (its jobs described as the warm-up in the Spark UI), once
        :meth:`prime` is done when ``after_prime`` (it runs in another thread); the thread, or ``None`` when
        switched off."""
        spark = self.spark
        if not warmup_enabled(spark):
            return None

        def run() -> None:
            if after_prime:
                self._primed.wait(PRIME_WAIT_S)
            try:
                spark.sparkContext.setJobDescription("livectl: Python workers warm-up")
                warmed = warm_workers(spark, frame=self._frame)
            except Exception as e:  # the query starts its own workers then; nothing depends on this job
                log.info("Python workers warm-up did not complete: %s", first_line(e))
                return
            primed = "" if self.prime_seconds is None else f"; primed in {self.prime_seconds:.2f} s before"
            log.info(
                "Python workers warmed: %d workers in %.2f s (imports in the tasks: %s s%s)",
                len(set(warmed.pids)),
                warmed.job_seconds,
                ", ".join(f"{s:.2f}" for s in warmed.task_seconds),
                primed,
            )

        thread = threading.Thread(target=run, name="livectl-python-warmup", daemon=True)
        thread.start()
        return thread


def start_warmup(spark: Any) -> threading.Thread | None:
    """The warm-up job, unprimed, in a daemon thread (:meth:`Warmup.start`); the thread, or ``None`` when
    switched off."""
    return Warmup(spark).start()
