"""The interpreter Spark starts its Python processes with when livectl starts Spark in local mode: this
driver's own, without the copies of pyspark that Spark puts ahead of it.

Spark puts its own archives first on the ``PYTHONPATH`` of every Python process it starts — pyspark's
``pyspark.zip``, py4j's source zip and ``spark-core``'s jar, from ``SPARK_HOME``. With a ``pip install
pyspark`` ``SPARK_HOME`` is the installed package itself, so the archives hold the very modules installed
beside them; but imported from a zip, with no bytecode cache, pyspark is compiled from source in every
process. livectl's worker daemon drops them itself (:func:`streaming.worker_daemon.drop_shipped_archives`);
Spark's own processes on the driver are not livectl's code: the streaming source's runner
(``pyspark.sql.streaming.python_streaming_source_runner``, started with each query) and the data source's
planners (``pyspark.sql.worker.*``) spent 1.5–2.9 s of CPU each compiling pyspark from the zip — in a
takeover, the new query's source runner did so on the two cores the failover's hand-off and batch wanted
(``bench/README.md``, "Spark's Python processes import the installed pyspark").

So in local mode (every Python process on the driver's machine) the interpreter Spark is given is a
launcher: a POSIX shell script that takes those archives off ``PYTHONPATH`` — only entries that lie inside
the installed pyspark this interpreter imports, so archives from anywhere else (a Spark distribution's
``SPARK_HOME``) stay — and ``exec``\\ s this interpreter with the same arguments. It is written once per user
and content under the system's temporary folder (a folder only its owner may write, checked before use);
when it cannot be (or cannot run there: a ``noexec`` mount), or pyspark is not installed with its archives,
the interpreter itself is used, as before.
On a cluster the executors' interpreter is the user's (``livectl package-env`` sets it): nothing changes.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import logging
import os
import shlex
import stat
import sys
import tempfile
from collections.abc import Sequence

log = logging.getLogger("livectl.app")

#: the archive Spark ships inside its Python folder; its presence marks a pyspark installed with its archives
SHIPPED_ZIP = os.path.join("python", "lib", "pyspark.zip")


def pyspark_package_folder(path: Sequence[str]) -> str | None:
    """The folder of the ``pyspark`` package found in ``path``'s entries that are not files (the archives
    — zips, jars — are not looked in; ``""``, the working folder, is); else ``None``.
    Standard library only: :mod:`streaming.worker_daemon` calls it before anything else is imported."""
    entries = [entry for entry in path if not (entry and os.path.isfile(entry))]
    spec = importlib.machinery.PathFinder.find_spec("pyspark", entries)
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    return str(locations[0]) if locations else None


def installed_pyspark_home(path: Sequence[str] | None = None) -> str | None:
    """The folder of the pyspark package this interpreter finds in ``path``'s directories (default
    ``sys.path``; :func:`pyspark_package_folder`), when Spark's archives lie inside it; else ``None``."""
    home = pyspark_package_folder(sys.path if path is None else path)
    if home is None or not os.path.isfile(os.path.join(home, SHIPPED_ZIP)):
        return None
    return home


def launcher_text(python: str, home: str) -> str:
    """The launcher's script: ``PYTHONPATH`` without the zips and jars inside ``home`` (as given and as its
    real path: Spark names them from ``SPARK_HOME``, which may be either), then ``exec python "$@"``."""
    homes = dict.fromkeys(os.path.join(h, "") for h in (home, os.path.realpath(home)))
    patterns = "|".join(f"{shlex.quote(h)}*.{ext}" for h in homes for ext in ("zip", "jar"))
    return (
        "#!/bin/sh\n"
        "# livectl (streaming/python_launcher.py): Spark's Python processes without the pyspark archives that\n"
        "# this interpreter has installed beside them; imported from the zip, pyspark is compiled in each one\n"
        "set -f\n"
        "kept=\n"
        "IFS=:\n"
        "for entry in $PYTHONPATH; do\n"
        '  case "$entry" in\n'
        f"    {patterns}) ;;\n"
        '    *) kept="${kept:+$kept:}$entry" ;;\n'
        "  esac\n"
        "done\n"
        "unset IFS\n"
        "PYTHONPATH=$kept\n"
        "export PYTHONPATH\n"
        f'exec {shlex.quote(python)} "$@"\n'
    )


def _own_folder(folder: str) -> bool:
    """``folder`` exists as a real directory of this user that nobody else may write."""
    st = os.lstat(folder)
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def local_python(python: str | None = None, *, folder: str | None = None, home: str | None = None) -> str:
    """The interpreter for Spark's Python processes in local mode: the launcher of ``python`` (default this
    interpreter) — written into ``folder`` (default ``<temp>/livectl-<uid>``) when not there yet — or
    ``python`` itself when pyspark is not installed with its archives (``home``: default
    :func:`installed_pyspark_home`) or the launcher cannot be written safely."""
    python = python or sys.executable
    home = home or installed_pyspark_home()
    if home is None:
        return python
    text = launcher_text(python, home)
    folder = folder or os.path.join(tempfile.gettempdir(), f"livectl-{os.getuid()}")
    target = os.path.join(folder, f"python-{hashlib.sha256(text.encode()).hexdigest()[:16]}")
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        if not _own_folder(folder):
            log.warning("%s is not a folder only this user may write: Spark's Python processes run %s", folder, python)
            return python
        if os.statvfs(folder).f_flag & os.ST_NOEXEC:  # a temporary folder mounted noexec: nothing there runs
            log.warning("%s does not allow programs to run (noexec): Spark's Python processes run %s", folder, python)
            return python
        try:
            with open(target, encoding="utf-8") as f:
                if f.read() == text and os.access(target, os.X_OK):
                    return target
        except FileNotFoundError:
            pass
        staged = f"{target}.{os.getpid()}.tmp"
        with open(staged, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(staged, 0o755)
        os.replace(staged, target)  # whole or not at all, for other drivers starting at the same moment
    except OSError as e:
        log.warning("no Python launcher in %s (%s): Spark's Python processes run %s", folder, e, python)
        return python
    return target
