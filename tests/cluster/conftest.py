"""Fixtures of the ``cluster`` tests: the packed environment the executors run, built by the documented
command (``livectl package-env``) once per test session."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def env_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``livectl package-env -o <tmp>/livectl-env.tar.gz``: livectl as a wheel, non-editable, with its
    dependencies, packed with venv-pack (about 1.5 minutes here). ``LIVECTL_TEST_ENV_ARCHIVE`` names an
    archive built earlier by the same command, to save that time when running the test again by hand."""
    prebuilt = os.environ.get("LIVECTL_TEST_ENV_ARCHIVE")
    if prebuilt:
        path = Path(prebuilt).resolve()
        assert path.is_file(), f"LIVECTL_TEST_ENV_ARCHIVE={prebuilt} is not a file"
        return path
    out = tmp_path_factory.mktemp("env") / "livectl-env.tar.gz"
    proc = subprocess.run(
        [sys.executable, "-m", "livectl", "package-env", "--output", str(out), "--quiet"],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, f"livectl package-env failed:\n{proc.stdout}\n{proc.stderr}"
    assert out.is_file() and str(out) in proc.stdout, proc.stdout
    return out
