"""The controller's standard error gate: what the processes it starts write is forwarded while the gate is
open and dropped once it is closed (a fenced controller's one line gets through); restoring it loses nothing
already written. Each case runs in its own Python process, since the gate replaces descriptor 2."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.unit

# a child that inherits descriptor 2 and writes one line to it for each line it reads on its standard input
CHILD = (
    "import sys\n"
    "for line in sys.stdin:\n"
    "    sys.stderr.write(line)\n"
    "    sys.stderr.flush()\n"
    "    print('ok', flush=True)\n"
)


def script_of(body: str) -> str:
    script = textwrap.dedent(
        f"""
        import subprocess, sys
        from streaming.driver.stderr_gate import StderrGate
        CHILD = {CHILD!r}
        def start_child():
            return subprocess.Popen(
                [sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
            )
        def tell(child, text):
            child.stdin.write(text + "\\n")
            child.stdin.flush()
            assert child.stdout.readline() == "ok\\n"
        """
    ) + textwrap.dedent(body)
    return script


def run_script(body: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", script_of(body)], capture_output=True, text=True, timeout=60, check=False
    )


def test_a_closed_gate_drops_what_a_child_writes_and_lets_the_one_line_through() -> None:
    done = run_script(
        """
        gate = StderrGate()
        child = start_child()
        tell(child, "before the fence")
        gate.close(drain_s=10)
        tell(child, "Traceback (most recent call last): EOFError")
        print("python's own noise", file=sys.stderr, flush=True)
        gate.say("livectl run: controller 1 (epoch 3) was fenced")
        child.stdin.close()
        child.wait(timeout=30)
        sys.exit(3)
        """
    )
    assert done.returncode == 3, done.stderr
    assert done.stderr == "before the fence\nlivectl run: controller 1 (epoch 3) was fenced\n"


def test_restoring_an_open_gate_forwards_everything_written_through_it() -> None:
    done = run_script(
        """
        gate = StderrGate()
        child = start_child()
        for i in range(200):
            tell(child, f"child line {i}")
        for i in range(200):
            print(f"own line {i}", file=sys.stderr)
        gate.restore()
        print("after restore", file=sys.stderr, flush=True)
        child.stdin.close()
        child.wait(timeout=30)
        """
    )
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines[:200] == [f"child line {i}" for i in range(200)]
    assert lines[200:400] == [f"own line {i}" for i in range(200)]
    assert lines[400:] == ["after restore"]


def test_a_gate_whose_real_stderr_is_gone_keeps_draining_so_no_writer_blocks() -> None:
    body = """
        gate = StderrGate()
        child = start_child()
        # far more than a pipe holds (64 KiB): a reader that stopped would leave the child blocked
        for i in range(2000):
            tell(child, "x" * 200)
        child.stdin.close()
        child.wait(timeout=30)
        print("done", flush=True)
        """
    proc = subprocess.Popen(
        [sys.executable, "-c", script_of(body)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stderr is not None
    proc.stderr.close()  # the real standard error gone: every forward fails
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert out == "done\n"


def test_no_gate_is_installed_over_a_closed_standard_error() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", script_of("print(StderrGate.install())")],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        timeout=60,
        check=False,
        preexec_fn=lambda: os.close(2),  # the child starts with no descriptor 2
    )
    assert proc.returncode == 0
    assert proc.stdout == "None\n"
