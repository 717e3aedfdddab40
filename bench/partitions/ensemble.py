"""The ZooKeeper ensemble's own faults: its leader killed, a minority or the quorum cut off."""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient

from bench import harness as cm
from bench.harness import fencing, netns
from bench.partitions.common import Hosts, Row, Views, answered_once, controller_host, in_order, repeated_requests
from livectl import local


def _server_of(h: Hosts, address: str, but: local.Service | None = None) -> local.Service | None:
    """The ensemble server (other than ``but``) a client at ``address`` is connected to now (the servers'
    ``stat``; a server cut off still lists the connections it has not yet timed out)."""
    return next((s for s in h.ensemble.servers if s is not but and address in h.ensemble.clients(s)), None)


def _broker_sessions(m: cm.Matrix) -> dict[int, int]:
    """Each registered broker's registration's creation id (a new one: its session ended and it registered
    again)."""
    assert m.zk is not None
    out = {}
    for b in m.registered_brokers():
        stat = m.zk.exists(f"/brokers/ids/{b}")
        if stat is not None:
            out[b] = stat.czxid
    return out


def _replica_problems(h: Hosts, m: cm.Matrix) -> list[str]:
    """Where a server's copy of the cluster's tree differs from the first one's (each read after ``sync``)."""
    copies = []
    for s in h.ensemble.servers:
        c = KazooClient(hosts=f"{s.address}/{m.name}", timeout=10)
        c.start(timeout=30)
        try:
            c.sync("/")
            copies.append((s.name, fencing.tree(c)))
        finally:
            c.stop()
            c.close()
    first_name, first = copies[0]
    out = []
    for name, copy in copies[1:]:
        differ = sorted(set(first.items()) ^ set(copy.items()))
        if differ:
            out.append(f"{name}'s tree differs from {first_name}'s at {len(differ)} znode(s): {differ[:3]}")
    return out


def ensemble_fault(h: Hosts, m: cm.Matrix, fault: str, log: Callable[[str], None] = print) -> Row:
    """Item 3: ``zk-leader-kill`` (the ensemble's leader SIGKILLed) or ``zk-minority-cut`` (the server holding
    the active controller's session cut off from the other two servers and from every other host: a
    follower, or the leader when the session is there) during ``reassign`` (as the reassignment's RS is
    written) or ``broker-failure`` (as a leading broker's registration goes away after its SIGKILL).

    What carrying on means: a minority lost is ZooKeeper's to hide. Every session on the server that went
    away moves to another server within the session timeout (ZooKeeper's new leader keeps the sessions it
    finds), so the active controller keeps its lease and its epoch (no standby runs here to fail over to)
    and finishes the work; then the usual invariants, and every server's copy of the tree the same once the
    server is back."""
    kind, during = fault.split(":", 1)
    row = Row(fault)
    assert m.zk is not None and m.active is not None
    c = m.active
    epoch = int(m.zk.get("/controller_epoch")[0])
    c_address = controller_host(h, c).address
    tag = f"e{kind[3]}{during[0]}{len(m.controllers)}{len(row.fault)}"
    point: cm.Reassign | cm.BrokerDown
    if during == "reassign":
        point = cm.Reassign(m, "reassign:rs-written", tag)
    else:
        point = cm.BrokerDown(m, "failure:first-state-write", tag)
    final = point.expect().assignments[point.topic]
    point.stage()
    leader_before = h.ensemble.leader()
    hit: list[str] = []
    done = threading.Event()
    at: list[float] = []
    victim: list[local.Service] = []
    cut_pairs: list[tuple[netns.Host, netns.Host]] = []

    def strike(what: str) -> None:
        leader = h.ensemble.leader()
        if kind == "zk-leader-kill":
            victim.append(leader)
            h.ensemble.kill(leader)
        else:
            # the server the active controller's session is on, so that its session must move: a follower,
            # or the leader when that is where it is (the other two then elect a new leader)
            held = _server_of(h, c_address)
            target = held or next(s for s in h.ensemble.servers if s is not leader)
            victim.append(target)
            t_host = h.ensemble.host_of(target)
            for other in list(h.net.hosts.values()):
                if other is not t_host:
                    h.net.cut(t_host, other)
                    cut_pairs.append((t_host, other))
        at.append(time.monotonic())
        hit.append(what)
        done.set()

    def arm(path: str, seen: Callable[[dict[str, Any] | None], str | None]) -> None:
        assert m.zk is not None

        def watch(data: bytes | None, stat: Any) -> bool:
            if hit or done.is_set():
                return False
            what = seen(json.loads(data) if data else ({} if stat is not None else None))
            if what is None:
                return True
            hit.append("armed")  # once: the strike runs on a thread of its own, not kazoo's
            threading.Thread(target=strike, args=(what,), name="partitions-ensemble-strike", daemon=True).start()
            return False

        m.zk.DataWatch(path, watch)

    with Views(m, point.topic) as views:
        held_before = _server_of(h, c_address)
        sessions = _broker_sessions(m)
        if during == "reassign":
            rs = [4, 5, 3, 1, 2]
            arm(
                f"/brokers/topics/{point.topic}",
                lambda d: f"RS {rs} written" if d and d.get("partitions", {}).get("0") == rs else None,
            )
        else:
            broker = cm.BrokerDown.BROKER
            seen_registered = [False]

            def gone(d: dict[str, Any] | None) -> str | None:
                if d is not None:
                    seen_registered[0] = True
                    return None
                return f"broker {broker}'s registration gone" if seen_registered[0] else None

            arm(f"/brokers/ids/{broker}", gone)
        time.sleep(1.0)  # records produced and acknowledged before the fault
        point.fire()
        if not done.wait(90):
            row.problems.append(f"the fault's moment never came ({fault})")
            return row
        hit.remove("armed")
        struck = at[0]
        moved: list[float] = []
        served_by: list[str] = []

        def session_moved() -> bool:
            # a server lists its clients only while it serves (a server without a quorum answers "not serving")
            server = _server_of(h, c_address, but=victim[0])
            if server is not None:
                moved.append(time.monotonic() - struck)
                served_by.append(server.name)
                return True
            return False

        with contextlib.suppress(cm.MatrixError):
            cm.wait_until("the controller's session on another server", session_moved, 60, interval=0.5)
        expect = point.expect()
        try:
            cm.wait_converged(m, f"{fault}: the work finished", expect, 180)
        except cm.MatrixError as e:
            row.problems.append(str(e)[:400])
        converged = time.monotonic() - struck
        # the server comes back; the ensemble is whole again for what follows
        if kind == "zk-leader-kill":
            h.ensemble.restart(victim[0])
        else:
            for a, b in cut_pairs:
                h.net.heal(a, b)
        h.ensemble.leader()
        cm.wait_until("the test's own session back", lambda: m.zk is not None and m.zk.connected, 60)
        now_sessions = _broker_sessions(m)
        expired = sorted(b for b, z in sessions.items() if now_sessions.get(b, z) != z and b != cm.BrokerDown.BROKER)
        if during == "broker-failure":
            try:
                point.after()  # broker 2 started again, back in every ISR, views agreeing
            except cm.MatrixError as e:
                row.problems.append(f"after the broker's return: {str(e)[:400]}")
        time.sleep(1.0)
    if not c.alive():
        row.problems.append(f"controller {c.controller_id} exited {c.proc.returncode}: {c.text().splitlines()[-3:]}")
    now = int(m.zk.get("/controller_epoch")[0])
    if now != epoch:
        row.problems.append(f"controller epoch {epoch} -> {now}: the lease moved")
    row.problems += views.problems()
    row.problems += answered_once(m, f"{tag}-r" if during == "reassign" else f"{tag}-c", epoch)
    row.problems += repeated_requests(m)
    if during == "reassign":
        row.problems += m.problems(cm.Expect({point.topic: final}))
    # after a broker failure the returned broker is back in every ISR with the views agreeing (checked by
    # ``after``); leadership goes back to it only with a preferred-replica election, which is not this fault's
    row.problems += _replica_problems(h, m)
    role = "leader" if victim[0] is leader_before else "follower"
    was_on = held_before.name if held_before else "?"
    session = (
        f"its session (on {was_on}) served by {served_by[0]} {moved[0]:.1f} s after"
        if moved
        else f"its session (on {was_on}) not seen on another server"
    )
    struck_how = "killed" if kind == "zk-leader-kill" else "cut off"
    row.outcome = (
        f"{victim[0].name} ({role}) {struck_how} at {hit[0]}; controller kept epoch {epoch}, {session}; "
        f"broker sessions expired: {expired or 'none'}"
    )
    row.seconds = round(converged, 1)
    log(f"{row.fault}: {row.outcome}; converged {converged:.1f} s after; problems {row.problems[:3]}")
    return row


def quorum_cut(h: Hosts, m: cm.Matrix, log: Callable[[str], None] = print) -> Row:
    """``zk-quorum-cut:reassign``: the server holding the active controller's session cut off from the other
    two servers only (its clients still reach it), a standby waiting, as a reassignment is sent. The server
    answers its clients' pings until it gives up on its quorum (``syncLimit × tickTime``, 10 s here) while
    the leader expires their sessions after the session timeout (6 s here): the controller may be fenced.
    Either it keeps its lease and finishes, or it exits with code 3 and one line and the standby finishes;
    nothing of its epoch after the standby's, every command answered once, every server's tree the same."""
    row = Row("zk-quorum-cut:reassign")
    assert m.zk is not None and m.active is not None
    a = m.active
    standby = m.start_controller()
    m.wait_waiting(standby)
    epoch = int(m.zk.get("/controller_epoch")[0])
    tag = f"eq{len(m.controllers)}"
    point = cm.Reassign(m, "reassign:rs-written", tag)
    point.stage()
    leader = h.ensemble.leader()
    held = _server_of(h, controller_host(h, a).address)
    target = held or next(s for s in h.ensemble.servers if s is not leader)
    role = "leader" if target is leader else "follower"
    t_host = h.ensemble.host_of(target)
    others = [x for x in h.ensemble.hosts if x is not t_host]
    sessions = _broker_sessions(m)
    mark = len(a.text())
    with Views(m, point.topic) as views:
        time.sleep(1.0)
        for x in others:
            h.net.cut(t_host, x)
        cut_at = time.monotonic()
        point.fire()
        try:
            cm.wait_converged(m, "the reassignment finished", point.expect(), 240)
        except cm.MatrixError as e:
            row.problems.append(str(e)[:400])
        converged = time.monotonic() - cut_at
        for x in others:
            h.net.heal(t_host, x)
        h.ensemble.leader()
        cm.wait_until("the test's own session back", lambda: m.zk is not None and m.zk.connected, 60)
        time.sleep(1.0)
    now = int(m.zk.get("/controller_epoch")[0])
    if now == epoch:
        what = f"kept its lease (epoch {epoch})"
        if not a.alive():
            row.problems.append(f"controller {a.controller_id} exited {a.proc.returncode} with the epoch unchanged")
        standby.stop()
    else:
        # it ran batches while its server still answered, so it logged before its one last line
        try:
            rc = a.proc.wait(90)
        except subprocess.TimeoutExpired:
            rc = None
        said = [line for line in a.text()[mark:].splitlines() if line.strip()]
        last = said[-1] if said else ""
        outcome = f"exit {rc}: {last[:90]}"
        if rc != 3 or "was fenced" not in last or "Traceback" in a.text()[mark:]:
            row.problems.append(f"controller {a.controller_id} exited {rc} saying {said[-3:]}")
        m.wait_loaded(standby, 60)
        what = f"fenced ({outcome}); the standby took over at epoch {now} and finished"
        row.problems += in_order(m, epoch, now)
    now_sessions = _broker_sessions(m)
    expired = sorted(b for b, z in sessions.items() if now_sessions.get(b, z) != z)
    row.problems += views.problems()
    row.problems += answered_once(m, f"{tag}-r")
    row.problems += repeated_requests(m)
    row.problems += m.problems(cm.Expect({point.topic: point.expect().assignments[point.topic]}))
    row.problems += _replica_problems(h, m)
    row.outcome = (
        f"{target.name} ({role}) cut off from the other two servers, not from its clients, as the reassignment "
        f"was sent; the controller {what}; broker sessions expired: {expired or 'none'}"
    )
    row.seconds = round(converged, 1)
    log(f"{row.fault}: {row.outcome}; converged {converged:.1f} s after; problems {row.problems[:3]}")
    return row
