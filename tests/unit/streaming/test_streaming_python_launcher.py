"""The interpreter Spark's Python processes run in local mode (:mod:`streaming.python_launcher`): the
launcher takes the installed pyspark's archives off ``PYTHONPATH`` and runs this interpreter; it is written
once, only into a folder nobody else may write, and falls back to the interpreter itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from streaming.entry import worker_python
from streaming.python_launcher import (
    SHIPPED_ZIP,
    installed_pyspark_home,
    launcher_text,
    local_python,
    pyspark_package_folder,
)

pytestmark = pytest.mark.unit

PRINT_PATH = "import json, sys; print(json.dumps([sys.executable, sys.path[1:]]))"


def _fake_pyspark(root: Path) -> Path:
    """A site folder whose pyspark holds Spark's archives, as a pip install does."""
    home = root / "site" / "pyspark"
    (home / "python" / "lib").mkdir(parents=True)
    (home / "jars").mkdir()
    (home / "__init__.py").write_text("")
    (home / SHIPPED_ZIP).write_bytes(b"PK")
    (home / "python" / "lib" / "py4j-src.zip").write_bytes(b"PK")
    (home / "jars" / "spark-core.jar").write_bytes(b"PK")
    return home


def _run(launcher: str, pythonpath: str) -> tuple[str, list[str]]:
    env = {**os.environ, "PYTHONPATH": pythonpath}
    out = subprocess.run([launcher, "-c", PRINT_PATH], env=env, capture_output=True, text=True, check=True)
    executable, path = json.loads(out.stdout)
    return executable, path


def test_the_launcher_drops_only_the_installed_pysparks_archives(tmp_path: Path) -> None:
    home = _fake_pyspark(tmp_path)
    launcher = local_python(sys.executable, folder=str(tmp_path / "launchers"), home=str(home))
    assert launcher != sys.executable and os.access(launcher, os.X_OK)
    other = tmp_path / "elsewhere"
    other.mkdir()
    kept = [
        str(tmp_path / "spark-dist" / "python" / "lib" / "pyspark.zip"),
        str(other),
        str(tmp_path / "a b" / "*.zip"),
    ]
    given = [
        str(home / SHIPPED_ZIP),
        str(home / "python" / "lib" / "py4j-src.zip"),
        kept[0],
        str(home / "jars" / "spark-core.jar"),
        kept[1],
        kept[2],
    ]
    executable, path = _run(launcher, os.pathsep.join(given))
    assert executable == sys.executable  # the same interpreter, exec'd: its venv and packages
    assert path[: len(kept)] == kept  # the others stay, in their order, spaces and '*' as they were


def test_a_symlinked_home_is_recognised_by_both_of_its_names(tmp_path: Path) -> None:
    home = _fake_pyspark(tmp_path)
    link = tmp_path / "linked"
    link.symlink_to(home.parent)
    launcher = local_python(sys.executable, folder=str(tmp_path / "launchers"), home=str(link / "pyspark"))
    _, path = _run(launcher, os.pathsep.join([str(home / SHIPPED_ZIP), str(link / "pyspark" / SHIPPED_ZIP), "/kept"]))
    assert path[0] == "/kept"


def test_the_launcher_is_written_once_and_reused(tmp_path: Path) -> None:
    home = str(_fake_pyspark(tmp_path))
    folder = tmp_path / "launchers"
    first = local_python(sys.executable, folder=str(folder), home=home)
    before = os.stat(first).st_mtime_ns
    assert local_python(sys.executable, folder=str(folder), home=home) == first
    assert os.stat(first).st_mtime_ns == before
    assert Path(first).read_text() == launcher_text(sys.executable, home)
    assert [p.name for p in folder.iterdir()] == [Path(first).name]  # no staged copy left behind
    # another interpreter or home: another launcher beside it
    assert local_python("/usr/bin/python3", folder=str(folder), home=home) != first
    # a launcher changed on disk is written again
    Path(first).write_text("#!/bin/sh\nexit 1\n")
    assert local_python(sys.executable, folder=str(folder), home=home) == first
    assert Path(first).read_text() == launcher_text(sys.executable, home)


def test_no_launcher_in_a_folder_others_may_write(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    home = str(_fake_pyspark(tmp_path))
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    assert local_python(sys.executable, folder=str(shared), home=home) == sys.executable
    assert list(shared.iterdir()) == []
    assert "not a folder only this user may write" in caplog.text


def test_no_launcher_where_it_cannot_be_written(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    home = str(_fake_pyspark(tmp_path))
    blocked = tmp_path / "file"
    blocked.write_text("")  # a file where the folder should be
    assert local_python(sys.executable, folder=str(blocked / "launchers"), home=home) == sys.executable
    assert "no Python launcher in" in caplog.text


def test_no_launcher_on_a_noexec_mount(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A temporary folder mounted ``noexec`` would let the launcher be written but not run (Spark's Python
    processes would fail to start): the mount's flags are read first. Mounting one needs privileges a test
    does not have, so the file system's answer is the patched one; the real call is made in every other test."""
    home = str(_fake_pyspark(tmp_path))
    real = os.statvfs

    class NoExec:
        def __init__(self, st: os.statvfs_result) -> None:
            self.f_flag = st.f_flag | os.ST_NOEXEC

    monkeypatch.setattr(os, "statvfs", lambda p: NoExec(real(p)))
    folder = tmp_path / "launchers"
    assert local_python(sys.executable, folder=str(folder), home=home) == sys.executable
    assert list(folder.iterdir()) == []
    assert "noexec" in caplog.text


def test_the_home_is_the_installed_pyspark_with_its_archives(tmp_path: Path) -> None:
    home = _fake_pyspark(tmp_path)
    archive = str(home / SHIPPED_ZIP)
    # archives in the path are not looked in; the package is found in the directories
    assert installed_pyspark_home([archive, str(home.parent)]) == str(home)
    (home / SHIPPED_ZIP).unlink()  # a pyspark without Spark's archives: nothing to drop
    assert installed_pyspark_home([str(home.parent)]) is None
    assert installed_pyspark_home([str(tmp_path / "nowhere")]) is None


def test_the_package_folder_is_found_in_directories_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = _fake_pyspark(tmp_path)
    archive = str(home / SHIPPED_ZIP)
    assert pyspark_package_folder([archive, str(home.parent)]) == str(home)
    assert pyspark_package_folder([archive]) is None
    assert pyspark_package_folder([]) is None
    # "" is the working folder, as for the interpreter's own imports
    monkeypatch.chdir(home.parent)
    assert pyspark_package_folder([archive, ""]) == str(home)


def test_a_local_master_runs_spark_python_through_the_launcher() -> None:
    launcher = worker_python({}, {}, "local[2]")
    assert launcher is not None
    assert launcher == local_python()  # this venv's pyspark is pip-installed: its launcher
    assert worker_python({}, {}, "local") == launcher
    assert worker_python({}, {}, "local[*]") == launcher
    # a cluster's executors run elsewhere: the interpreter's path, as before
    assert worker_python({}, {}, "spark://127.0.0.1:7077") == sys.executable
    assert worker_python({}, {}, None) == sys.executable
    # the user's choice stands
    assert worker_python({"PYSPARK_PYTHON": "/opt/py"}, {}, "local[2]") is None
    assert worker_python({}, {"spark.pyspark.python": "/opt/py"}, "local[2]") is None
