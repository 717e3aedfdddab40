"""A class-data-sharing archive of the classes a Spark driver loads, so that the driver's JVM starts faster.

Java's dynamic CDS archive (JEP 350, documented JVM options: ``-XX:ArchiveClassesAtExit`` writes it when a JVM
exits, ``-XX:SharedArchiveFile`` maps it) keeps Spark's classes parsed and verified: a SparkSession and its first
job took 3.6 s with it against 7.3 s without (docs/decisions/2026-12-07-driver-class-archive.md). An archive
serves one Java runtime and one class path, so its file is named by a key over both (:func:`archive_key`).
:func:`make` writes it with a short ``spark-submit`` job (about 45 s, once: ``livectl class-archive``, run by
``scripts/setup``); ``livectl run`` maps it when it is there (setting ``spark_class_archive``). A JVM whose
runtime or class path does not match the archive starts without it, as if none were given (``-Xshare:auto``).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Mapping
from pathlib import Path

#: the job the archive is made from: a session with livectl's Spark defaults, an Arrow round trip, a pandas UDF
#: through a Python worker, and a streaming query with a stateful pandas step over RocksDB state (the classes
#: ``livectl run``'s driver loads before its first micro-batch); a new version makes new archives
WORKLOAD_VERSION = "1"
WORKLOAD = textwrap.dedent(
    """
    import sys

    import pandas as pd
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.state import GroupStateTimeout

    scratch = sys.argv[1]
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    frame = spark.range(100).selectExpr("id % 4 AS k", "id AS v")
    frame.groupBy("k").applyInPandas(lambda f: f.head(1), "k long, v long").toPandas()
    frame.groupBy("k").count().collect()
    frame.write.json(scratch + "/in")


    def step(key, frames, state):
        total = sum(len(f) for f in frames)
        yield pd.DataFrame({"k": [key[0]], "n": [total]})


    query = (
        spark.readStream.schema("k long, v long").json(scratch + "/in")
        .groupBy("k")
        .applyInPandasWithState(step, "k long, n long", "n long", "append", GroupStateTimeout.NoTimeout)
        .writeStream.foreachBatch(lambda batch, _id: batch.toPandas())
        .option("checkpointLocation", scratch + "/checkpoint")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    spark.stop()
    """
)
#: a failed attempt is not repeated by :func:`ensure` within this time (a CI run's parallel sessions)
FAILED_KEPT_S = 3600.0
#: the JVM options that make Java write, and map, a dynamic archive (Java's documented ``-XX`` options)
_WRITE = "-XX:ArchiveClassesAtExit="
_MAP = "-XX:SharedArchiveFile="


class ClassArchiveError(Exception):
    """The archive could not be made; the message says why and where the job's log is."""


def checkout_root() -> Path | None:
    """The checkout livectl runs from (an editable install: ``scripts/setup`` beside the packages), else None."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "scripts" / "setup").is_file() else None


def default_folder(environ: Mapping[str, str] = os.environ) -> Path:
    """Where archives are kept: ``.cache/jvm/spark-cds`` in the checkout (beside the Maven artifacts
    ``scripts/setup`` resolves), else ``$XDG_CACHE_HOME/livectl/spark-cds`` (``~/.cache/livectl/spark-cds``)."""
    root = checkout_root()
    if root is not None:
        return root / ".cache" / "jvm" / "spark-cds"
    cache = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "livectl" / "spark-cds"


def spark_home(environ: Mapping[str, str] = os.environ) -> Path:
    """The Spark whose launcher starts the driver: ``$SPARK_HOME``, else the pyspark package (pip's layout)."""
    if environ.get("SPARK_HOME"):
        return Path(environ["SPARK_HOME"])
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def java_home(environ: Mapping[str, str] = os.environ) -> Path | None:
    """The Java runtime Spark's launcher runs: ``$JAVA_HOME``, else the one of ``java`` on ``PATH``; None if none."""
    if environ.get("JAVA_HOME"):
        return Path(environ["JAVA_HOME"])
    java = shutil.which("java", path=environ.get("PATH"))
    return None if java is None else Path(java).resolve().parents[1]


def archive_key(environ: Mapping[str, str] = os.environ, extra_class_path: str = "") -> str | None:
    """What an archive depends on, as 16 hex digits: the Java runtime (its path and its ``lib/modules`` image's
    size and time) and the driver's class path as Spark's launcher builds it (``spark.driver.extraClassPath``,
    the conf folder, Spark's jars — each jar's name and size — and the Hadoop/YARN folders and
    ``SPARK_DIST_CLASSPATH`` it adds). None when there is no Java runtime or no Spark jars."""
    home = java_home(environ)
    if home is None:
        return None
    modules = home / "lib" / "modules"
    try:
        image = modules.stat()
    except OSError:
        return None
    spark = spark_home(environ)
    jars = spark / "jars"
    listing = sorted(f"{p.name}:{p.stat().st_size}" for p in jars.glob("*.jar")) if jars.is_dir() else []
    if not listing:
        return None
    parts = [
        f"workload {WORKLOAD_VERSION}",
        f"java {home.resolve()} {image.st_size} {int(image.st_mtime)}",
        f"extra {extra_class_path}",
        f"conf {environ.get('SPARK_CONF_DIR') or spark / 'conf'}",
        *(f"{name} {environ.get(name, '')}" for name in ("HADOOP_CONF_DIR", "YARN_CONF_DIR", "SPARK_DIST_CLASSPATH")),
        f"jars {jars.resolve()}",
        *listing,
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def archive_path(folder: Path, key: str) -> Path:
    return folder / f"{key}.jsa"


def find(folder: Path, key: str | None) -> Path | None:
    """The archive for ``key`` in ``folder`` when it was made (a file :func:`make` finished), else None."""
    if key is None:
        return None
    path = archive_path(folder, key)
    try:
        return path if path.stat().st_size > 0 else None
    except OSError:
        return None


def java_options(path: Path) -> str:
    """The JVM options that map ``path``: a JVM it does not match starts without it, silently."""
    return f"{_MAP}{path} -Xshare:auto"


def with_archive(options: str, path: Path) -> str:
    """Java options ``options`` with ``path`` mapped, unless they already choose an archive or sharing mode."""
    if _MAP in options or _WRITE in options or "-Xshare:" in options:
        return options
    return f"{options} {java_options(path)}".strip()


def ensure(
    folder: Path, environ: Mapping[str, str] = os.environ, *, retry_after_s: float = 0.0, timeout_s: float = 900.0
) -> Path:
    """The archive for this Java and Spark in ``folder``, made first when missing (one process makes it, the
    others wait for it). A failure within ``retry_after_s`` of an earlier one is not tried again."""
    key = archive_key(environ)
    if key is None:
        raise ClassArchiveError("no Java runtime (JAVA_HOME or java on PATH) or no Spark jars: nothing to archive")
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = find(folder, key)
        if found is not None:
            return found
        failed = folder / f"{key}.failed"
        if retry_after_s > 0 and failed.exists() and time.time() - failed.stat().st_mtime < retry_after_s:
            raise ClassArchiveError(f"an attempt failed {failed.read_text().strip()}")
        try:
            made = make(folder, key, environ, timeout_s=timeout_s)
        except ClassArchiveError as e:
            failed.write_text(f"{e}\n")
            raise
        failed.unlink(missing_ok=True)
        return made


def make(folder: Path, key: str, environ: Mapping[str, str] = os.environ, *, timeout_s: float = 900.0) -> Path:
    """Write the archive for ``key`` by running :data:`WORKLOAD` under Spark's ``spark-submit`` with Java's
    ``-XX:ArchiveClassesAtExit``; it appears under its final name only once complete. The job's output is in
    ``<folder>/<key>.log``."""
    from streaming.resources import SPARK_DEFAULTS, conf_path

    path = archive_path(folder, key)
    partial = folder / f"{key}.{os.getpid()}.partial.jsa"
    log = folder / f"{key}.log"
    with tempfile.TemporaryDirectory(prefix="livectl-cds-") as scratch:
        job = Path(scratch) / "workload.py"
        job.write_text(WORKLOAD)
        env = {
            **environ,
            # only the archive's options: an archive mapped by the environment is not written over
            "SPARK_SUBMIT_OPTS": f"{_WRITE}{partial} -Djava.io.tmpdir={scratch}",
            "SPARK_LOCAL_DIRS": scratch,
            "PYSPARK_PYTHON": environ.get("PYSPARK_PYTHON") or sys.executable,
        }
        submit = spark_home(environ) / "bin" / "spark-submit"
        # livectl's Spark defaults, as livectl run has them: their classes (RocksDB's state store, the metrics
        # servlet, livectl's worker daemon) are loaded as in a run
        cmd = [str(submit), "--properties-file", str(conf_path(SPARK_DEFAULTS)), str(job), scratch]
        began = time.monotonic()
        with open(log, "w") as out:
            try:
                done = subprocess.run(
                    cmd, stdout=out, stderr=subprocess.STDOUT, env=env, timeout=timeout_s, check=False, cwd=scratch
                )
            except (OSError, subprocess.TimeoutExpired) as e:
                partial.unlink(missing_ok=True)
                raise ClassArchiveError(f"{submit}: {e}; see {log}") from e
        if done.returncode != 0 or not partial.exists():
            partial.unlink(missing_ok=True)
            raise ClassArchiveError(f"the archive's job exited with code {done.returncode}; see {log}")
    partial.rename(path)
    for stale in folder.glob(f"{key}.*.partial.jsa"):  # an earlier attempt's, cut off mid-way
        stale.unlink(missing_ok=True)
    with open(log, "a") as out:
        out.write(f"\narchive {path.name} made in {time.monotonic() - began:.1f} s\n")
    return path
