"""Ctrl-C stops the crash matrix (``python -m bench crash_matrix``) even when the process inherited SIGINT ignored,
as a job started in the background by a non-interactive shell does: it used to go on killing and restarting
controllers until SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from bench import harness as cm

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import signal, sys, time
    from bench.harness import interruptible

    assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN, "the test starts the process with SIGINT ignored"
    try:
        with interruptible():
            print("inside", flush=True)
            time.sleep(120)
    except KeyboardInterrupt:
        print("interrupted; SIGINT ignored again:", signal.getsignal(signal.SIGINT) == signal.SIG_IGN, flush=True)
        sys.exit(130)
    """
)


def test_an_interrupt_stops_the_matrix_even_with_sigint_inherited_ignored() -> None:
    # the shell's empty trap makes SIGINT ignored, and the Python it execs inherits that
    proc = subprocess.Popen(
        ["sh", "-c", 'trap "" INT; exec "$0" -c "$1"', sys.executable, SCRIPT],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "inside"
        started = time.monotonic()
        os.kill(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=20)
        assert proc.returncode == 130, out
        assert "interrupted; SIGINT ignored again: True" in out
        assert time.monotonic() - started < 20
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_controller_of_an_interrupted_matrix_is_killed_at_once(tmp_path: Path) -> None:
    m = cm.Matrix("127.0.0.1:1", "127.0.0.1:1", tmp_path)
    # a process that ignores SIGTERM, as a controller busy in a long stop would take its minute
    proc = subprocess.Popen(
        [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)"],
        start_new_session=True,
    )
    m.controllers.append(cm.ControllerProcess(1001, proc, tmp_path / "c.log"))
    started = time.monotonic()
    m.close(at_once=True)
    assert proc.poll() == -signal.SIGKILL
    assert time.monotonic() - started < 10
