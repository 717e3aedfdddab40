"""``livectl demo`` run as a user runs it (its own ZooKeeper, broker and Spark): Ctrl-C during the first step
ends it with exit code 130 and leaves none of the processes it started. By hand, not in CI (``.ci/run``'s
``by_hand``: CI's 30 minutes; docs/development.md)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from livectl.demo import descendants

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]


def _alive(pid: int, cmdline: str) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        now = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z" and now == cmdline


def test_demo_command_ctrl_c(tmp_path: Path) -> None:
    """``livectl demo`` started as a user would; Ctrl-C (SIGINT) in step 1; exit code 130, nothing left."""
    run_dir = tmp_path / "demo-cli"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "livectl", "demo", "--brokers", "4", "--run-dir", str(run_dir), "--quiet"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        text=True,
        # its own process group, as in a terminal: Ctrl-C reaches the group (the demo and the Spark JVM)
        start_new_session=True,
    )
    lines: list[str] = []
    started: dict[int, str] = {}
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 240
        for line in proc.stdout:
            lines.append(line)
            if "step 1/7" in line or time.monotonic() > deadline:
                break
        assert any("step 1/7" in x for x in lines), "".join(lines)
        assert any("Spark UI: http" in x for x in lines), "".join(lines)
        # everything the demo started, with command lines, while it runs
        for pid in descendants(proc.pid):
            with_cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            started[pid] = with_cmd
        assert sum("simbrokers" in c for c in started.values()) == 4, started
        assert any("ZooKeeperServerMain" in c for c in started.values()), started
        assert any("kafka.Kafka" in c for c in started.values()), started
        assert any("SparkSubmit" in c for c in started.values()), started
        os.killpg(proc.pid, signal.SIGINT)
        rest, _ = proc.communicate(timeout=120)
        lines.append(rest)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = "".join(lines)
    print(text)
    assert proc.returncode == 130, text
    assert "interrupted" in text and "none left running" in text, text
    leftovers = {pid: c for pid, c in started.items() if _alive(pid, c)}
    assert not leftovers, leftovers
    assert not (run_dir / "demo-processes.json").exists()
