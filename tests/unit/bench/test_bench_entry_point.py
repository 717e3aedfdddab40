"""``python -m bench``: one entry point that names every benchmark of bench/ and runs it by name."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench.__main__ import BENCHMARKS

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bench", *args], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )


def test_the_list_names_every_benchmark_module_of_bench() -> None:
    modules = {p.stem for p in (ROOT / "bench").glob("*.py")} - {"__init__", "__main__"}
    modules |= {p.parent.name for p in (ROOT / "bench").glob("*/__init__.py")} - {"harness"}
    assert set(BENCHMARKS) == modules
    assert all(purpose.strip() for purpose in BENCHMARKS.values())


def test_list_prints_each_name_with_its_purpose() -> None:
    done = _bench("--list")
    assert done.returncode == 0, done.stderr
    listed = {line.split()[0]: line.split(None, 1)[1] for line in done.stdout.splitlines()}
    assert listed == BENCHMARKS


def test_an_unknown_name_is_refused_naming_the_known_ones() -> None:
    done = _bench("no_such_benchmark")
    assert done.returncode == 2
    assert "unknown benchmark 'no_such_benchmark'" in done.stderr
    assert "broker_failure" in done.stderr


def test_a_benchmark_runs_by_name_with_its_own_options() -> None:
    # core_step: pure Python, no services; its --help is its argparse page under the entry point's name
    done = _bench("core_step", "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: bench core_step")
    assert "--partitions" in done.stdout


def test_results_stay_out_of_git_and_only_the_baselines_file_is_committed() -> None:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout (an unpacked source archive): nothing is committed to check")
    tracked = subprocess.run(
        ["git", "ls-files", "bench"], cwd=ROOT, capture_output=True, text=True, timeout=30, check=True
    ).stdout.split()
    data = [p for p in tracked if p.endswith(".json")]
    assert data == ["bench/baselines.json"], f"results in git (bench writes them to bench/results/): {data}"
