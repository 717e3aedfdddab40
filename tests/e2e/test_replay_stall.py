"""A takeover whose replay stops making progress ends with one line and exit code 1 (issue 41 b).

Real processes, the crash matrix's harness (:mod:`bench.harness`): the session's ZooKeeper, a Kafka broker of
the test's own (it is stopped), five simulated brokers and two ``livectl run`` processes on one checkpoint.
Controller A is SIGKILLed as the first partition state of a large creation reaches ZooKeeper: its micro-batch is
planned and not committed. The standby B, whose ``replay_stall_timeout_ms`` is 15 s, takes over and replays it;
once B's replay has written to ZooKeeper (the sink's progress znode carries B's epoch), the Kafka broker is
stopped (SIGSTOP): B's request writes can no longer go anywhere, and nothing else moves; once B has logged that
it refuses the stalled replay, the broker gets SIGCONT. B must say how the replay went while it waited, then exit
with code 1 and one line, ``the replay of micro-batch N made no progress for 15 s``, naming the step it was
stuck in.

A replay that progresses throughout is waited for past the stall timeout: the Spark tier proves it on a real
replay (``tests/spark/streaming/test_streaming_replay_progress.py``), the 100k-partition long run at scale.

By hand (minutes: two controllers' start-ups and a Kafka broker's): ``scripts/test tests/e2e/test_replay_stall.py``;
left out of CI's selection (``.ci/run``, ``by_hand``).
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from bench import harness as cm
from livectl import local
from sinks.zookeeper import progress_path

pytestmark = pytest.mark.e2e

PARTITIONS = 1000
STALL_MS = 15000


def test_a_replay_that_stops_making_progress_ends_with_one_line_and_exit_code_1(
    zookeeper: local.Service, tmp_path: Path
) -> None:
    kafka = local.start_kafka(tmp_path / "kafka")
    stopped = [False]
    m = cm.Matrix(zookeeper.connect, kafka.bootstrap, tmp_path / "cluster", session_timeout_ms=6000)
    try:
        m.open()
        assert m.zk is not None
        a = m.start_controller()
        m.wait_loaded(a)  # before B starts: whichever is first takes the lease
        b = m.start_controller({"replay_stall_timeout_ms": STALL_MS, "sink_retry_timeout_ms": 20000})
        m.wait_waiting(b)
        epoch_a = int(m.zk.get("/controller_epoch")[0])

        topic = f"{m.name}-large"
        first_state = f"/brokers/topics/{topic}/partitions/0/state"

        def first_state_written(path: str, data: dict[str, Any] | None, version: int) -> str | None:
            return "the creation's first partition state" if data else None

        with m.kill_when([first_state], first_state_written) as hits:
            cm.create_topic(m, "big", topic, {p: (1 + p % 5, 1 + (p + 1) % 5) for p in range(PARTITIONS)})
            cm.wait_until("controller A killed mid-batch", lambda: bool(hits), 180)
        assert not a.alive()

        progress = progress_path(m.name)

        def replay_wrote() -> bool:
            assert m.zk is not None
            if not b.alive():
                raise cm.MatrixError(
                    f"controller B exited with {b.proc.returncode} before its replay wrote; see {b.log}"
                )
            if m.zk.exists(progress) is None:
                return False
            return int(json.loads(m.zk.get(progress)[0]).get("controller_epoch", -1)) > epoch_a

        cm.wait_until("B's replay writing to ZooKeeper", replay_wrote, 180, interval=0.02)
        os.kill(kafka.pid, signal.SIGSTOP)
        stopped[0] = True
        began = time.monotonic()
        # the stall is refused with the broker still stopped; then it comes back, so that the query's stop (its
        # batch's write waiting on the broker, retried) ends: the refused replay stays refused
        cm.wait_until(
            "B refusing the stalled replay", lambda: "made no progress for 15 s" in b.text(), STALL_MS / 1000 + 120
        )
        assert stopped[0]
        os.kill(kafka.pid, signal.SIGCONT)
        stopped[0] = False
        cm.wait_until("controller B's exit", lambda: not b.alive(), 300)
        took = time.monotonic() - began
        text = b.text()
        assert b.proc.returncode == 1, text[-3000:]
        lines = [line for line in text.splitlines() if line.startswith("livectl run: ")]
        assert len(lines) == 1, lines
        match = re.fullmatch(
            r"livectl run: the replay of micro-batch (\d+) made no progress for 15 s "
            r"\(replay_stall_timeout_ms; (\d+) s in all; Spark: .*; driver: (.*)\)",
            lines[0],
        )
        assert match, lines[0]
        # it was the write to the stopped broker that hung, after the ZooKeeper writes
        assert "broker requests" in match.group(3) or "admin results" in match.group(3), lines[0]
        assert int(match.group(2)) >= STALL_MS / 1000
        assert took >= STALL_MS / 1000
        # while it waited, the log said how the replay went
        said = [line for line in text.splitlines() if f"replaying micro-batch {match.group(1)}" in line]
        assert said, text[-3000:]
    finally:
        if stopped[0]:
            os.kill(kafka.pid, signal.SIGCONT)
        m.close(at_once=True)
        local.stop_kafka(kafka)
