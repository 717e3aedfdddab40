"""The source's read planning kept warm while the controller waits, so the query's first batch finds it done.

Spark plans a Python streaming source's read once per run of a query, when its first micro-batch is
planned: the JVM asks a Python planner process (``pyspark.sql.worker.plan_data_source_read``) for the read
function, and the source's creation (``pyspark.sql.worker.create_data_source``) before it. Each kind of
planner process is forked from a pyspark daemon of its own, started on first use, and each new process
imports pyspark's SQL worker, pyarrow and livectl's source before it answers: ~1.1 s on this project's
machines, on the critical path of exactly the batch that must be fast — a standby's first batch after it
wins the lease, a cold start's failover batch (``bench/README.md``, "Where a takeover's failover batch
waits"). Spark pools the processes it has finished with (``spark.python.worker.reuse``) and hands them to
the next planning of the same Python executable and environment — from one query of the source to the next,
or from any other planning — but closes one that has been idle for a minute (``PythonWorkerFactory``'s fixed
idle timeout), so a standby's are gone by the takeover.

:class:`ReadPlanning` plans the source's streaming read, as the query's first batch will, as soon as the
source is loaded and then every :data:`INTERVAL_S` seconds until the query starts: the two planner
processes are then in Spark's pool, imports done, when the first batch asks (answering in milliseconds).
A planning has no side effect: the source's reader is created and pickled, never asked for offsets or
records (no Kafka connection). It goes through ``UserDefinedPythonDataSource`` — the calls Spark's own
``PythonMicroBatchStream`` makes — which are not a public PySpark API: if a Spark version moves them, the
first planning fails, says so once in the log and the keeping stops; the query then plans its read itself,
as without this. ``spark.livectl.python.warmup false`` switches it off with the workers' warm-up.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from streaming.errors import first_line

log = logging.getLogger("livectl.read_planning")

#: Spark closes a pooled Python planner process idle for a minute (``PythonWorkerFactory``, not configurable);
#: planning every 40 s keeps one ready, with the query's start (a few seconds) inside the margin
INTERVAL_S = 40.0


def plan_read(spark: Any, source_name: str, options: Mapping[str, str], frame: Any) -> float:
    """Plan the streaming read of the registered Python data source ``source_name`` with ``options`` — its
    creation and its read function, in Spark's planner processes — for the schema of ``frame`` (the
    source's loaded streaming DataFrame); nothing is read. Returns the seconds it took; raises what Spark
    raises."""
    started = time.monotonic()
    jvm = spark._jvm
    source = spark._jsparkSession.sessionState().dataSourceManager().lookupDataSource(source_name)
    java_options = jvm.java.util.HashMap()
    for name, value in options.items():
        java_options.put(name, value)
    schema = frame._jdf.schema()
    case_insensitive = jvm.org.apache.spark.sql.util.CaseInsensitiveStringMap(java_options)
    created = source.createDataSourceInPython(source_name, case_insensitive, jvm.scala.Option.apply(schema))
    source.createReadInfoInPython(created, schema, True)
    return time.monotonic() - started


class ReadPlanning:
    """:func:`plan_read` of the prepared source now (:meth:`plan`, in the caller's thread), then every
    ``interval`` seconds in a thread of its own (:meth:`start`) until :meth:`stop`. Never raises: a failed
    planning is logged and ends the keeping (the next would fail alike)."""

    def __init__(
        self, spark: Any, source_name: str, options: Mapping[str, str], frame: Any, interval: float = INTERVAL_S
    ) -> None:
        self._spark = spark
        self._source_name = source_name
        self._options = dict(options)
        self._frame = frame
        self._interval = interval
        self._stop = threading.Event()
        self._failed = False
        #: the seconds of each planning made, in order (the first includes the planner processes' start)
        self.seconds: list[float] = []
        self.thread = threading.Thread(target=self._run, name="livectl-read-planning", daemon=True)

    def plan(self) -> bool:
        """One planning; whether it was made."""
        if self._failed or self._stop.is_set():
            return False
        try:
            seconds = plan_read(self._spark, self._source_name, self._options, self._frame)
        except Exception as e:  # an optimisation only: the query plans its own read
            self._failed = True
            log.info("the source's read planning is not kept warm: %s", first_line(e))
            return False
        if not self.seconds:
            log.info("the source's read planned ahead in %.2f s; planned again every %.0f s", seconds, self._interval)
        self.seconds.append(seconds)
        return True

    def start(self) -> ReadPlanning:
        self.thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            if not self.plan():
                return

    def stop(self) -> None:
        """No planning after this returns, except one already under way (milliseconds, warm)."""
        self._stop.set()
