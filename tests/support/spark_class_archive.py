"""A class-data-sharing archive of the classes a Spark driver loads, for the Spark JVMs the tests start.

A test's Spark JVM spends most of its start-up loading and verifying Spark's classes. Java's dynamic CDS archive
(JEP 350: ``-XX:ArchiveClassesAtExit`` writes it, ``-XX:SharedArchiveFile`` maps it) keeps them parsed: a
SparkSession and its first job took 3.1-3.8 s with it against 8.0-8.7 s without (this machine, busy). The
archive is made once per pyspark install and Java runtime, by a short job (a session, Arrow and a Python worker),
under ``.cache/jvm/spark-cds`` beside the Maven artifacts. A JVM whose class path or runtime no longer matches
the archive starts without it, as if no archive were given (Java's default ``-Xshare:auto``).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache" / "jvm" / "spark-cds"
#: a failed attempt is not repeated by the sessions that start within this time (CI's two at once)
FAILED_KEPT_S = 3600.0

#: the job the archive is made from: a session, an Arrow round trip and a pandas UDF through a Python worker
#: (a bare session with livectl's jars; the streaming operators' classes are loaded from the jars as before)
WORKLOAD = textwrap.dedent(
    """
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .getOrCreate()
    )
    frame = spark.range(100).selectExpr("id % 4 AS k", "id AS v")
    frame.groupBy("k").applyInPandas(lambda f: f.head(1), "k long, v long").toPandas()
    frame.groupBy("k").count().collect()
    spark.stop()
    """
)


def _key() -> str:
    """What the archive depends on: the Java runtime and the pyspark install (its jars are the class path)."""
    import pyspark

    java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=True).stderr
    jars = Path(pyspark.__file__).parent / "jars"
    listing = sorted(f"{p.name}:{p.stat().st_size}" for p in jars.glob("*.jar"))
    return hashlib.sha256("\n".join([java, str(jars), *listing]).encode()).hexdigest()[:16]


def archive(timeout_s: float = 600) -> Path | None:
    """The archive for this pyspark and Java, made first if missing (one process makes it, the others wait);
    ``None`` when it cannot be made (the reason is in ``<cache>/<key>.log``; tried again after an hour)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    key = _key()
    path = CACHE / f"{key}.jsa"
    failed = CACHE / f"{key}.failed"
    with open(CACHE / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.exists():
            return path
        if failed.exists() and time.time() - failed.stat().st_mtime < FAILED_KEPT_S:
            return None
        partial = CACHE / f"{key}.{os.getpid()}.jsa"
        log = CACHE / f"{key}.log"
        scratch = CACHE / f"{key}.{os.getpid()}.scratch"
        env = {
            **os.environ,
            "SPARK_SUBMIT_OPTS": f"-XX:ArchiveClassesAtExit={partial} -Djava.io.tmpdir={scratch}",
            "SPARK_LOCAL_DIRS": str(scratch),
            # Spark's Python side takes the workers' interpreter from here (livectl run sets it likewise)
            "PYSPARK_PYTHON": sys.executable,
        }
        scratch.mkdir(exist_ok=True)
        job = scratch / "workload.py"
        job.write_text(WORKLOAD)
        began = time.monotonic()
        # spark-submit runs the JVM in front, so that it has written the archive when the command returns
        submit = Path(sys.executable).parent / "spark-submit"
        with open(log, "w") as out:
            done = subprocess.run(
                [str(submit), str(job)], stdout=out, stderr=subprocess.STDOUT, env=env, timeout=timeout_s, check=False
            )
        subprocess.run(["rm", "-rf", str(scratch)], check=False)
        if done.returncode != 0 or not partial.exists():
            failed.write_text(f"exit code {done.returncode}; see {log.name}\n")
            partial.unlink(missing_ok=True)
            return None
        partial.rename(path)
        for stale in CACHE.glob(f"{key}.*.jsa"):  # an earlier attempt's, cut off mid-way
            stale.unlink(missing_ok=True)
        with open(log, "a") as out:
            out.write(f"\narchive made in {time.monotonic() - began:.1f} s\n")
        return path


def java_options(path: Path) -> str:
    """The options that map ``path`` into a JVM: it starts without it (silently) when it no longer matches."""
    return f"-XX:SharedArchiveFile={path}"
