"""A controller, then a broker, cut off from ZooKeeper (``zk-cut:*``, ``broker-zk-cut``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from bench import harness as cm
from bench.harness import fencing
from bench.partitions.common import (
    Hosts,
    Row,
    Views,
    answered_once,
    controller_host,
    cut_when_planned,
    exit_problems,
    in_order,
    no_writes_of,
    send_raw,
)


def zk_cut(h: Hosts, m: cm.Matrix, when: str = "idle", log: Callable[[str], None] = print) -> Row:
    """Item 1: the active controller cut off from ZooKeeper (``when``: ``idle``, ``before-zk-writes``,
    ``after-zk-writes``), its link to Kafka kept; a standby is started first. See the module docstring."""
    row = Row(f"zk-cut:{when}")
    assert m.zk is not None and m.active is not None
    a = m.active
    b = m.start_controller()
    m.wait_waiting(b)
    epoch_a = int(m.zk.get("/controller_epoch")[0])
    cm.wait_until("A between micro-batches", lambda: fencing.between_batches(m.checkpoint), 60, interval=0.2)
    before = fencing.epoch_counts(m.bootstrap, m.topics, epoch_a)
    partitions = cm.LARGE_PARTITIONS if when == "after-zk-writes" else 3
    assignment = {p: (cm.BROKERS[p % 5], cm.BROKERS[(p + 1) % 5]) for p in range(partitions)}
    tag = f"zk{when[:2]}{len(m.controllers)}"
    topic = f"{m.name}-{tag}"
    a_host = controller_host(h, a)
    cut_at: list[float] = []
    seen: list[str] = []

    def cut(what: str) -> None:
        if not cut_at:
            h.cut_from_zookeeper(a_host)
            cut_at.append(time.monotonic())
            seen.append(what)

    watcher: threading.Thread | None = None
    if when == "idle":
        cut("between micro-batches")
    elif when == "after-zk-writes":
        first = f"/brokers/topics/{topic}/partitions/0/state"

        def on_first(data: bytes | None, stat: Any) -> bool:
            if data is not None:
                cut("the first partition state written")
            return not cut_at

        m.zk.DataWatch(first, on_first)
    else:
        watcher = cut_when_planned(m, lambda: cut("the micro-batch planned, before its ZooKeeper writes"))
    # input while A is (or is about to be) cut off: ZooKeeper writes, requests, an admin result, rejected
    cm.create_topic(m, f"{tag}-c", topic, assignment)
    send_raw(m, f'{{"version":1,"type":"delete_topic","request_id":"{tag}-bad","topic":""}}')
    send_raw(m, "not json at all")
    cm.wait_until("the cut", lambda: cut_at, 90, interval=0.05)
    if watcher is not None:
        watcher.join(5)
    after_cut = fencing.epoch_counts(m.bootstrap, m.topics, epoch_a)
    m.wait_loaded(b, timeout=120)  # A's session expired; B was elected and published its reference
    took_over = time.monotonic() - cut_at[0]
    epoch_b = int(m.zk.get("/controller_epoch")[0])
    if epoch_b != epoch_a + 1:
        row.problems.append(f"controller epoch {epoch_a} -> {epoch_b}")
    expect = cm.Expect({topic: assignment}, request_id=f"{tag}-c")
    cm.wait_converged(m, "B finishes the creation", expect, 180)
    cm.wait_until("B answers the invalid command", lambda: m.results(f"{tag}-bad"), 60)
    done = time.monotonic() - cut_at[0]
    if when != "after-zk-writes":
        # nothing of A's epoch since the cut (cut mid-batch, a write may already have been under way)
        row.problems += no_writes_of(m, epoch_a, before, "while cut off")
    row.problems += no_writes_of(m, epoch_a, after_cut, "after the cut")
    tree = fencing.tree(m.zk)
    mark = len(a.text())
    h.heal_from_zookeeper(a_host)
    outcome, problems = exit_problems(a, mark)
    row.problems += problems
    row.problems += [f"after healing: {w}" for w in fencing.writes_not_by(m.zk, tree, epoch_b)]
    row.problems += no_writes_of(m, epoch_a, after_cut, "after healing")
    row.problems += in_order(m, epoch_a, epoch_b)
    row.problems += answered_once(m, f"{tag}-bad", epoch_b) + answered_once(m, f"{tag}-c")
    row.problems += m.problems(cm.Expect({topic: assignment}))
    row.outcome = f"cut {seen[0]}; B took over {took_over:.1f} s after; A: {outcome}"
    row.seconds = round(done, 1)
    log(f"{row.fault}: {row.outcome}; converged {done:.1f} s after the cut; problems {row.problems[:3]}")
    return row


# ---------------------------------------------------------------------------- a broker cut off from ZooKeeper


def broker_zk_cut(h: Hosts, m: cm.Matrix, log: Callable[[str], None] = print) -> Row:
    """Item 4: a simulated broker that leads partitions cut off from ZooKeeper, not from Kafka: its
    registration expires while it still serves; the controller treats it as failed and elects new leaders;
    the old leader's view moves on at the next epoch; the link returns and it rejoins every ISR."""
    row = Row("broker-zk-cut")
    assert m.zk is not None and m.active is not None
    broker = 2
    assignment = {0: (2, 3, 4), 1: (2, 4, 5)}
    topic = f"{m.name}-bcut"
    cm.create_topic(m, f"{topic}-c", topic, assignment)
    cm.wait_converged(m, f"{topic} online", cm.Expect({topic: assignment}), 120)
    states = {p: m.znode(f"/brokers/topics/{topic}/partitions/{p}/state")[0] or {} for p in assignment}
    b_host = h.host(f"broker-{broker}")
    with Views(m, topic) as views:
        time.sleep(1.5)  # records produced and acknowledged under broker 2 (the producers run at 10/s)
        h.cut_from_zookeeper(b_host)
        cut_at = time.monotonic()

        def moved() -> bool:
            now = {p: m.znode(f"/brokers/topics/{topic}/partitions/{p}/state")[0] or {} for p in assignment}
            return all(
                s.get("leader") != broker
                and s.get("leader_epoch", -1) > states[p]["leader_epoch"]
                and broker not in s["isr"]
                for p, s in now.items()
            )

        cm.wait_until(f"new leaders for broker {broker}'s partitions", moved, 60, interval=0.2)
        elected = time.monotonic() - cut_at
        registered_while_cut = broker in m.registered_brokers()
        # the followers fetch from the new leaders; the old one's view moves on only once it hears again
        time.sleep(1.5)
        h.heal_from_zookeeper(b_host)
        healed = time.monotonic()

        def back() -> list[str]:
            isr = [m.znode(f"/brokers/topics/{topic}/partitions/{p}/state")[0] or {} for p in assignment]
            missing = [
                f"{topic}-{p} ISR {s.get('isr')}"
                for p, s in zip(assignment, isr, strict=True)
                if broker not in s.get("isr", [])
            ]
            return missing + cm.view_problems(m, topic, assignment)

        last: list[str] = []

        def rejoined() -> bool:
            last[:] = back()
            return not last

        try:
            cm.wait_until(f"broker {broker} back in every ISR, views agreeing", rejoined, 120, interval=0.5)
        except cm.MatrixError:
            row.problems.append(f"after healing: {last[:3]}")
        rejoin = time.monotonic() - healed
        time.sleep(1.0)
    row.problems += views.problems()
    if registered_while_cut:
        row.problems.append(f"broker {broker} still registered when its partitions moved")
    for p in assignment:
        old = (f"{topic}-{p}", states[p]["leader_epoch"])
        if old not in views.leaders:
            row.problems.append(f"{topic}-{p}: never seen led at epoch {old[1]} (the views were not sampled)")
    row.outcome = f"new leaders {elected:.1f} s after the cut; rejoined {rejoin:.1f} s after healing"
    row.seconds = round(elected, 1)
    log(f"{row.fault}: {row.outcome}; problems {row.problems[:3]}")
    return row
