"""The demo's own Spark session: started with the JVM's output in a file, stopped with its JVM."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any

from livectl.demo.processes import output_to


def start_spark(settings: Any, master: str, spark_log: Path) -> tuple[Any, subprocess.Popen[bytes] | None]:
    """A SparkSession for ``settings`` on ``master`` and its JVM process (``None`` when PySpark did not
    start one itself). The JVM's output goes to ``spark_log``; Ctrl-C stays with the caller."""
    from streaming.driver.entry import worker_python
    from streaming.driver.session import spark_session

    # Spark's Python processes run this interpreter (it has livectl's dependencies), as livectl run gives it
    # to Spark; a user's choice stands
    workers = worker_python(os.environ, {})
    if workers is not None:
        os.environ["PYSPARK_PYTHON"] = workers
    previous = signal.getsignal(signal.SIGINT)
    with output_to(spark_log):
        spark = spark_session(settings, master)
    if threading.current_thread() is threading.main_thread() and previous is not None:
        # PySpark replaces the SIGINT handler when its context starts: Ctrl-C must stay ours
        signal.signal(signal.SIGINT, previous)
    spark.sparkContext.setLogLevel("WARN")
    gateway = getattr(spark.sparkContext, "_gateway", None)
    jvm: subprocess.Popen[bytes] | None = getattr(gateway, "proc", None)
    return spark, jvm


def stop_spark(spark: Any, jvm: subprocess.Popen[bytes] | None) -> str | None:
    """Stop ``spark`` and wait for its JVM to exit (terminated after 20 s, killed after 10 more).
    Returns what was stopped, for the report, or ``None`` without a JVM of ours."""
    from pyspark import SparkContext

    with contextlib.suppress(Exception):
        spark.stop()
    # the JVM of a PySpark driver exits when its stdin closes (PythonGatewayServer)
    with contextlib.suppress(Exception):
        gateway = SparkContext._gateway
        if gateway is not None:
            gateway.shutdown()
    SparkContext._gateway = None
    SparkContext._jvm = None
    if jvm is None:
        return None
    with contextlib.suppress(OSError):
        if jvm.stdin is not None:
            jvm.stdin.close()
    try:
        jvm.wait(20)
    except subprocess.TimeoutExpired:
        jvm.terminate()
        try:
            jvm.wait(10)
        except subprocess.TimeoutExpired:
            jvm.kill()
            jvm.wait(5)
    return f"Spark JVM (pid {jvm.pid})"
