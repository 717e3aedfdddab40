"""The demo's own Spark session: started with the JVM's output in a file, stopped with its JVM."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

from livectl.demo.processes import children, cmdline, output_to, pid_alive

#: what PySpark's JVM runs (``spark-submit`` execs into it): how it is told from this process's other children
JVM_MAIN = "org.apache.spark.deploy.SparkSubmit"


def start_spark(settings: Any, master: str, spark_log: Path) -> tuple[Any, int | None]:
    """A SparkSession for ``settings`` on ``master`` and the pid of its JVM (``None`` when PySpark did not
    start one: a JVM was up before). The JVM's output goes to ``spark_log``; Ctrl-C stays with the caller."""
    from streaming.driver.entry import worker_python
    from streaming.driver.session import spark_session

    # Spark's Python processes run this interpreter (it has livectl's dependencies), as livectl run gives it
    # to Spark; a user's choice stands
    workers = worker_python(os.environ, {})
    if workers is not None:
        os.environ["PYSPARK_PYTHON"] = workers
    previous = signal.getsignal(signal.SIGINT)
    before = set(children(os.getpid()))
    with output_to(spark_log):
        spark = spark_session(settings, master)
    if threading.current_thread() is threading.main_thread() and previous is not None:
        # PySpark replaces the SIGINT handler when its context starts: Ctrl-C must stay ours
        signal.signal(signal.SIGINT, previous)
    spark.sparkContext.setLogLevel("WARN")
    # PySpark starts its JVM as a child of this process: the one child that is new and runs Spark
    started = [pid for pid in children(os.getpid()) if pid not in before and JVM_MAIN in cmdline(pid)]
    return spark, started[0] if len(started) == 1 else None


def stop_spark(spark: Any, jvm: int | None) -> str | None:
    """Stop ``spark``, then its JVM ``jvm`` (SIGTERM: Spark's shutdown hooks run; SIGKILL after 20 s) and
    wait for it to exit. Returns what was stopped, for the report, or ``None`` without a JVM of ours. The
    process cannot start another SparkSession afterwards (PySpark keeps its gateway to the stopped JVM):
    the demo stops Spark last, as it exits."""
    with contextlib.suppress(Exception):
        spark.stop()
    if jvm is None:
        return None
    how = "SIGTERM"
    with contextlib.suppress(ProcessLookupError):
        os.kill(jvm, signal.SIGTERM)
    if not _exited(jvm, 20.0):
        how = "SIGKILL after 20 s"
        with contextlib.suppress(ProcessLookupError):
            os.kill(jvm, signal.SIGKILL)
        _exited(jvm, 5.0)
    _reap(jvm, 5.0)
    return f"Spark JVM (pid {jvm}, {how})"


def _exited(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while pid_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _reap(pid: int, timeout: float) -> None:
    """Collect the exit status of ``pid``, this process's child, so that no zombie stays behind (a JVM that
    has exited is reaped only once all its threads are gone)."""
    deadline = time.monotonic() + timeout
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(pid, os.WNOHANG) == (0, 0) and time.monotonic() < deadline:
            time.sleep(0.05)
