"""The Spark processes the benchmarks start are found by process group (``bench/harness/sparkcluster.py``,
over the demo's ``/proc`` reader)."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest

from bench.harness.sparkcluster import group_members

pytestmark = pytest.mark.unit


def test_the_members_of_a_process_group() -> None:
    leader = subprocess.Popen(["sh", "-c", "sleep 60 & echo $!; wait"], stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert leader.stdout is not None
        child = int(leader.stdout.readline())
        assert set(group_members(leader.pid)) == {leader.pid, child}
    finally:
        os.killpg(leader.pid, signal.SIGKILL)
        leader.wait()
    assert leader.pid not in group_members(leader.pid)
