"""The controller cut off from Kafka (``kafka-cut``, ``kafka-cut:in-batch``)."""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Callable

from bench import harness as cm
from bench.harness import fencing
from bench.partitions.common import (
    SESSION_TIMEOUT_MS,
    Hosts,
    Row,
    answered_once,
    controller_host,
    cut_when_planned,
    in_order,
    repeated_requests,
    send_raw,
)


def kafka_cut(
    h: Hosts, m: cm.Matrix, *, hold_s: float = 2.5 * SESSION_TIMEOUT_MS / 1000, log: Callable[[str], None] = print
) -> Row:
    """Item 2: the active controller cut off from Kafka, not from ZooKeeper, for ``hold_s`` while commands
    wait (a creation and an invalid command). livectl keeps the lease and waits, as Kafka's ZooKeeper
    controller does: its session stays valid, no standby is elected, the epoch stays; when the link returns
    it reads the commands and answers each once, and no request is written twice."""
    row = Row("kafka-cut")
    assert m.zk is not None and m.active is not None
    c = m.active
    epoch = int(m.zk.get("/controller_epoch")[0])
    cm.wait_until(
        "the controller between micro-batches", lambda: fencing.between_batches(m.checkpoint), 60, interval=0.2
    )
    c_host, kafka_host = controller_host(h, c), h.host("kafka")
    topic = f"{m.name}-kcut"
    assignment = {0: (1, 2, 3), 1: (3, 4, 5)}
    h.net.cut(c_host, kafka_host)
    cut_at = time.monotonic()
    cm.create_topic(m, f"{topic}-c", topic, assignment)
    send_raw(m, f'{{"version":1,"type":"delete_topic","request_id":"{topic}-bad","topic":""}}')
    cm.wait_until("the cut held", lambda: time.monotonic() - cut_at >= hold_s, hold_s + 5, interval=0.2)
    holder = m.znode("/controller")[0] or {}
    if holder.get("brokerid") != c.controller_id or int(m.zk.get("/controller_epoch")[0]) != epoch:
        row.problems.append(f"the lease moved while cut off from Kafka: /controller {holder}")
    if not c.alive():
        row.problems.append(f"controller {c.controller_id} exited with {c.proc.returncode} while cut off from Kafka")
    h.net.heal(c_host, kafka_host)
    healed = time.monotonic()
    cm.wait_converged(m, "the creation after healing", cm.Expect({topic: assignment}, request_id=f"{topic}-c"), 180)
    cm.wait_until("the invalid command answered", lambda: m.results(f"{topic}-bad"), 60)
    answered = time.monotonic() - healed
    row.problems += answered_once(m, f"{topic}-c", epoch) + answered_once(m, f"{topic}-bad", epoch)
    row.problems += repeated_requests(m)
    row.outcome = f"kept the lease {hold_s:.0f} s cut off (epoch {epoch}); answered {answered:.1f} s after healing"
    row.seconds = round(answered, 1)
    log(f"{row.fault}: {row.outcome}; problems {row.problems[:3]}")
    return row


def kafka_cut_in_batch(h: Hosts, m: cm.Matrix, *, hold_s: float = 100.0, log: Callable[[str], None] = print) -> Row:
    """Item 2 inside a micro-batch: the active controller cut off from Kafka as the batch holding a creation
    is planned (its records still to read, its requests to write), a standby waiting, for up to ``hold_s``
    (past ``sink_retry_timeout_ms``): what the controller does is recorded; then the link returns and
    everything must be answered once, with nothing written twice or out of epoch order."""
    row = Row("kafka-cut:in-batch")
    assert m.zk is not None and m.active is not None
    c = m.active
    s = m.start_controller()
    m.wait_waiting(s)
    epoch = int(m.zk.get("/controller_epoch")[0])
    cm.wait_until(
        "the controller between micro-batches", lambda: fencing.between_batches(m.checkpoint), 60, interval=0.2
    )
    c_host, kafka_host = controller_host(h, c), h.host("kafka")
    topic = f"{m.name}-kbcut"
    assignment = {0: (1, 2, 3), 1: (3, 4, 5)}
    cut_at: list[float] = []

    def cut() -> None:
        h.net.cut(c_host, kafka_host)
        cut_at.append(time.monotonic())

    watcher = cut_when_planned(m, cut)
    cm.create_topic(m, f"{topic}-c", topic, assignment)
    send_raw(m, f'{{"version":1,"type":"delete_topic","request_id":"{topic}-bad","topic":""}}')
    cm.wait_until("the cut", lambda: cut_at, 90, interval=0.05)
    watcher.join(5)
    mark = len(c.text())

    def moved() -> bool:
        assert m.zk is not None
        return not c.alive() or int(m.zk.get("/controller_epoch")[0]) != epoch

    cm.wait_until("the hold", lambda: moved() or time.monotonic() - cut_at[0] >= hold_s, hold_s + 10, interval=0.5)
    held = time.monotonic() - cut_at[0]
    h.net.heal(c_host, kafka_host)
    if c.alive() and int(m.zk.get("/controller_epoch")[0]) == epoch:
        what = f"kept the lease {held:.0f} s, still running"
        new_epoch = epoch
    else:
        with contextlib.suppress(subprocess.TimeoutExpired):
            c.proc.wait(60)
        said = [line for line in c.text()[mark:].splitlines() if line.strip() and "WARN" not in line]
        what = f"exited {c.proc.returncode} {held:.0f} s after the cut ({said[-1][:80] if said else ''})"
        m.wait_loaded(s)
        new_epoch = int(m.zk.get("/controller_epoch")[0])
    cm.wait_converged(m, "the creation after healing", cm.Expect({topic: assignment}, request_id=f"{topic}-c"), 180)
    cm.wait_until("the invalid command answered", lambda: m.results(f"{topic}-bad"), 60)
    row.problems += answered_once(m, f"{topic}-c") + answered_once(m, f"{topic}-bad")
    row.problems += repeated_requests(m)
    if new_epoch != epoch:
        row.problems += in_order(m, epoch, new_epoch)
    else:
        s.stop()
    row.outcome = f"cut as the batch was planned; the controller {what}"
    row.seconds = round(time.monotonic() - cut_at[0], 1)
    log(f"{row.fault}: {row.outcome}; problems {row.problems[:3]}")
    return row
