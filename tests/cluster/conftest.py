"""Fixtures of the ``cluster`` tests: the packed environment the executors run, built by the documented
command (``livectl package-env``) once per test session.

The build takes about 1.5 minutes, most of it one core's pip install, so when a session has collected a
``cluster`` test the build starts as collection ends, in a process of its own, and runs beside the tests
before it (the session runs the ``cluster`` tests last: ``tests/conftest.py``); the fixture waits for it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

#: the whole build, however long the tests before it ran
BUILD_TIMEOUT_S = 900.0


class _Build:
    """``livectl package-env --output <folder>/livectl-env.tar.gz`` running in a process of its own."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.out = folder / "livectl-env.tar.gz"
        self.log = folder / "package-env.log"
        with self.log.open("w") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "livectl", "package-env", "--output", str(self.out), "--quiet"],
                stdout=log,
                stderr=subprocess.STDOUT,
                text=True,
            )

    def archive(self) -> Path:
        rc = self.proc.wait(timeout=BUILD_TIMEOUT_S)
        printed = self.log.read_text(errors="replace")
        assert rc == 0, f"livectl package-env failed (exit {rc}):\n{printed}"
        assert self.out.is_file() and str(self.out) in printed, printed
        return self.out

    def discard(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        shutil.rmtree(self.folder, ignore_errors=True)


_early: list[_Build] = []


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly or os.environ.get("LIVECTL_TEST_ENV_ARCHIVE"):
        return
    if any(item.get_closest_marker("cluster") for item in session.items):
        _early.append(_Build(Path(tempfile.mkdtemp(prefix="livectl-test-env-"))))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    while _early:
        _early.pop().discard()


@pytest.fixture(scope="session")
def env_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``livectl package-env -o <tmp>/livectl-env.tar.gz``: livectl as a wheel, non-editable, with its
    dependencies, packed with venv-pack (started as collection ended, see above). ``LIVECTL_TEST_ENV_ARCHIVE``
    names an archive built earlier by the same command, to save that time when running the test again by
    hand."""
    prebuilt = os.environ.get("LIVECTL_TEST_ENV_ARCHIVE")
    if prebuilt:
        path = Path(prebuilt).resolve()
        assert path.is_file(), f"LIVECTL_TEST_ENV_ARCHIVE={prebuilt} is not a file"
        return path
    if not _early:  # asked for by a test without the cluster marker (none is: test_test_tree.py): build it now
        _early.append(_Build(tmp_path_factory.mktemp("env")))
    return _early[0].archive()
