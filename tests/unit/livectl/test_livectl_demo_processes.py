"""The demo's process trees, read from ``/proc`` (``livectl/demo/processes.py``): a process started here and
the child it starts are found by parent, by ancestry and by process group."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from livectl.demo.processes import children, descendants, pid_alive, process_stats

pytestmark = pytest.mark.unit

#: starts ``sleep`` and says its PID: the test then knows the tree is complete
_PARENT = "import subprocess; c = subprocess.Popen(['sleep', '60']); print(c.pid, flush=True); c.wait()"


def test_a_process_and_its_child_are_found_by_parent_ancestry_and_group() -> None:
    parent = subprocess.Popen([sys.executable, "-c", _PARENT], stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert children(parent.pid) == [child]
        assert children(child) == []
        assert {parent.pid, child} <= set(descendants(os.getpid()))
        stats = dict(process_stats())
        assert int(stats[child][1]) == parent.pid, "the second field is the parent"
        assert int(stats[child][2]) == int(stats[parent.pid][2]) == parent.pid, "the third, the process group"
        assert pid_alive(parent.pid) and pid_alive(child)
    finally:
        os.killpg(parent.pid, signal.SIGKILL)
        parent.wait()
    assert not pid_alive(parent.pid)
    assert parent.pid not in dict(process_stats())
