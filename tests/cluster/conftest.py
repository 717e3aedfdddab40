"""Fixtures of the ``cluster`` tests: the packed environment the executors run, built by the documented
command (``livectl package-env``) once per test session.

The build takes about 1.5 minutes, most of it one core's pip install, so when a session has collected a
``cluster`` test the build starts as collection ends, in a process of its own, and runs beside the tests
before it (the session runs the ``cluster`` tests last: ``tests/conftest.py``); the fixture waits for it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from bench.harness.sparkcluster import EnvBuild

_early: list[EnvBuild] = []


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly or os.environ.get("LIVECTL_TEST_ENV_ARCHIVE"):
        return
    if any(item.get_closest_marker("cluster") for item in session.items):
        _early.append(EnvBuild(Path(tempfile.mkdtemp(prefix="livectl-test-env-"))))


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
        _early.append(EnvBuild(tmp_path_factory.mktemp("env")))
    return _early[0].archive()
