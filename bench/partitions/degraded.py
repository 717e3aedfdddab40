"""The active controller's link to ZooKeeper, or to Kafka, degraded rather than cut (``zk-degraded``,
``kafka-degraded``): the closest real thing here to Trogdor's degraded-network fault.

The machines' kernel has no ``netem`` (no pure delay, no random loss) but has ``tbf``: the link between the
controller's host and the peers (the three ZooKeeper servers, or Kafka's host) goes through a token bucket
of a low rate with a short queue behind it (:class:`bench.harness.netns.Shaping`), both ways (the host's end
of its veth for what it sends, the root's end for what it hears; ``u32`` filters pick the peers' packets,
everything else passes untouched). That is a bandwidth cap, queueing delay up to ``limit / rate``, and tail
drops TCP must retransmit. The test's own clients are not on that link.

While the link is degraded, a standby waiting: a creation of 150 partitions (replication factor 2), a command
that is not valid, and a leading broker SIGKILLed (its registration expires; its partitions need new leaders).
The link is held degraded until that work is done, at least ``hold_s`` and at most ``max_hold_s``, then
healed. What livectl did is recorded: kept its lease and carried on slower (the same epoch, the work done
during the degradation or after), or gave it up (it exits with one line: fenced, or its query failed) and the
standby took over. The ``tbf`` statistics (packets, drops, both ways) go in the row.

Checked: leader and controller epochs only grow, no two leaders at one leader epoch, no acknowledged record
lost (the brokers' views), each command answered exactly once, no request written twice, nothing of the old
epoch after the new one's first message (after a takeover), and after healing ZooKeeper and the brokers'
views agree; the broker is then started again and rejoins every ISR.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Callable

from bench import harness as cm
from bench.harness import fencing, netns
from bench.harness.points import view_problems
from bench.partitions.common import (
    Hosts,
    Row,
    Views,
    answered_once,
    controller_host,
    in_order,
    repeated_requests,
    send_raw,
)

#: the ZooKeeper link: 32 kbit/s (4 KB/s), a bucket of one packet, a queue of two (0.75 s of delay at most)
ZK_SHAPING = netns.Shaping(rate="32kbit", burst="1600b", limit="3000b")
#: the Kafka link: the same
KAFKA_SHAPING = netns.Shaping(rate="32kbit", burst="1600b", limit="3000b")


def _peers(h: Hosts, link: str) -> list[netns.Host]:
    return list(h.ensemble.hosts) if link == "zk" else [h.host("kafka")]


def degraded_link(
    h: Hosts,
    m: cm.Matrix,
    link: str,
    *,
    shaping: netns.Shaping | None = None,
    hold_s: float = 30.0,
    max_hold_s: float = 150.0,
    log: Callable[[str], None] = print,
) -> Row:
    """``link`` (``zk`` or ``kafka``): the active controller's link to it degraded while work arrives; see the
    module docstring."""
    if link not in ("zk", "kafka"):
        raise ValueError(f"link: 'zk' or 'kafka', got {link!r}")
    shaping = shaping or (ZK_SHAPING if link == "zk" else KAFKA_SHAPING)
    row = Row(f"{link}-degraded")
    assert m.zk is not None and m.active is not None
    a = m.active
    standby = m.start_controller()
    m.wait_waiting(standby)
    epoch = int(m.zk.get("/controller_epoch")[0])
    tag = f"d{link[0]}{len(m.controllers)}"
    point = cm.BrokerDown(m, "failure:degraded", tag)
    point.stage()  # broker 2 leads both partitions of point.topic (its creation is request {tag}-c)
    topic = f"{m.name}-{tag}"
    assignment = {p: (cm.BROKERS[p % 5], cm.BROKERS[(p + 1) % 5]) for p in range(cm.LARGE_PARTITIONS)}
    failed = point.ASSIGNMENT
    cm.wait_until("A between micro-batches", lambda: fencing.between_batches(m.checkpoint), 60, interval=0.2)
    a_host = controller_host(h, a)
    mark = len(a.text())
    with Views(m, point.topic) as views, Views(m, topic) as created_views:
        time.sleep(1.0)  # records produced and acknowledged under broker 2 before the fault
        h.net.degrade(a_host, _peers(h, link), shaping)
        start = time.monotonic()
        cm.create_topic(m, f"{tag}-n", topic, assignment)
        send_raw(m, f'{{"version":1,"type":"delete_topic","request_id":"{tag}-bad","topic":""}}')
        point.fire()  # broker 2 SIGKILLed
        expect = cm.Expect({topic: assignment, point.topic: failed}, down=(point.BROKER,), request_id=f"{tag}-n")
        done_at: list[float] = []

        def done() -> bool:
            if not done_at and not m.problems(expect) and m.results(f"{tag}-bad"):
                done_at.append(time.monotonic() - start)
            return bool(done_at) and time.monotonic() - start >= hold_s

        with contextlib.suppress(cm.MatrixError):
            cm.wait_until("the work done while degraded", done, max_hold_s, interval=1.0)
        stats = h.net.shaped(a_host)
        held = time.monotonic() - start
        h.net.restore(a_host)
        healed = time.monotonic()
        now = int(m.zk.get("/controller_epoch")[0])
        if now == epoch and a.alive():
            what = f"kept its lease (epoch {epoch}) and carried on"
        else:
            try:
                rc: int | None = a.proc.wait(90)
            except subprocess.TimeoutExpired:
                rc = None
            said = [line for line in a.text()[mark:].splitlines() if line.strip()]
            last = said[-1] if said else ""
            one_line = ("was fenced" in last and rc == 3) or (rc == 1 and last.startswith("livectl run:"))
            if not one_line or "Traceback" in a.text()[mark:]:
                row.problems.append(f"controller {a.controller_id} exited {rc} saying {said[-3:]}")
            m.wait_loaded(standby, 120)
            now = int(m.zk.get("/controller_epoch")[0])
            if now != epoch + 1:
                row.problems.append(f"controller epoch {epoch} -> {now}")
            what = f"exited {rc} ({last[:100]}); the standby took over at epoch {now}"
            row.problems += in_order(m, epoch, now)
        try:
            cm.wait_converged(m, "the work after healing", expect, 180)
        except cm.MatrixError as e:
            row.problems.append(str(e)[:400])
        cm.wait_until("the invalid command answered", lambda: m.results(f"{tag}-bad"), 60)
        converged = time.monotonic() - start
        after_heal = time.monotonic() - healed
        try:
            point.after()  # broker 2 started again, back in point.topic's ISRs
            missing: list[str] = []

            def rejoined() -> bool:
                missing[:] = view_problems(m, topic, assignment)
                for p, replicas in assignment.items():
                    state = m.znode(f"/brokers/topics/{topic}/partitions/{p}/state")[0] or {}
                    if point.BROKER in replicas and point.BROKER not in state.get("isr", []):
                        missing.append(f"{topic}-{p} ISR {state.get('isr')}")
                return not missing

            try:
                cm.wait_until(f"broker {point.BROKER} back in every ISR of {topic}", rejoined, 120, interval=0.5)
            except cm.MatrixError:
                row.problems.append(f"after the broker's return: {missing[:3]}")
        except cm.MatrixError as e:
            row.problems.append(f"after the broker's return: {str(e)[:400]}")
        time.sleep(1.0)
    row.problems += views.problems() + created_views.problems()
    row.problems += answered_once(m, f"{tag}-n", None if now != epoch else epoch)
    row.problems += answered_once(m, f"{tag}-bad", None if now != epoch else epoch)
    row.problems += repeated_requests(m)
    if now == epoch:
        if not a.alive():
            row.problems.append(f"controller {a.controller_id} exited {a.proc.returncode} with the epoch unchanged")
        standby.stop()
    drops = ", ".join(
        f"{way} {s['packets']} packets ({s['bytes'] // 1000} kB) sent, {s['drops']} dropped"
        for way, s in sorted(stats.items(), reverse=True)
    )
    during = f"done {done_at[0]:.1f} s into it" if done_at else f"not done in {held:.0f} s"
    row.outcome = (
        f"{link} link at {shaping.rate} (queue {shaping.limit}) for {held:.0f} s, the work {during}; "
        f"the controller {what}; tbf: {drops}; converged {after_heal:.1f} s after healing"
    )
    row.seconds = round(converged, 1)
    log(f"{row.fault}: {row.outcome}; problems {row.problems[:3]}")
    return row
