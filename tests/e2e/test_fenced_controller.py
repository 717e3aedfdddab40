"""A controller paused past its ZooKeeper session and resumed after a takeover writes nothing anywhere.

Real processes: ZooKeeper and the broker of the session, five simulated brokers, three ``livectl run``
processes on one checkpoint (the crash matrix's harness, :mod:`bench.harness`). Controller A is stopped
with SIGSTOP (its whole process group: Python, its Spark JVM and workers) in the middle of a micro-batch —
right after the first partition state of a large creation reached ZooKeeper, with that batch's other
transactions, requests, admin results and rejected records still to go. Its session expires, the standby B is
elected and finishes the work; then A gets SIGCONT. A must write nothing more: no znode (whatever changes after A
resumes carries B's epoch), no message stamped with A's epoch after B's first one on the requests,
admin-results or rejected topics, and none of its epoch at all once resumed; and it must exit with code 3
and one line saying it was fenced — nothing else on stdout or stderr, no Spark or py4j traceback.

Then the idle case, on the same cluster: B is stopped between micro-batches, the standby C takes over and
handles new input while B is paused (:func:`_paused_between_batches`); B resumed must do the same.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from bench import harness as cm
from bench.harness import fencing
from core import events as ev
from core.codec.events import event_to_json
from livectl import local

pytestmark = pytest.mark.e2e

PARTITIONS = 150


def test_a_paused_controller_resumed_after_a_takeover_writes_nothing(
    zookeeper: local.Service, kafka_broker: local.Service, tmp_path: Path
) -> None:
    m = cm.Matrix(zookeeper.connect, kafka_broker.bootstrap, tmp_path / "cluster", session_timeout_ms=6000)
    a: Any = None
    paused = threading.Event()
    still_paused: list[Any] = []
    try:
        m.open()
        assert m.zk is not None and m.producer is not None
        a = m.start_controller()
        m.wait_loaded(a)
        b = m.start_controller()
        m.wait_waiting(b)
        epoch_a = int(m.zk.get("/controller_epoch")[0])

        topic = f"{m.name}-large"
        first_state = f"/brokers/topics/{topic}/partitions/0/state"

        def pause_on_first_state(data: bytes | None, stat: Any) -> bool:
            if data is None or paused.is_set():
                return not paused.is_set()
            os.killpg(a.proc.pid, signal.SIGSTOP)
            paused.set()
            return False

        m.zk.DataWatch(first_state, pause_on_first_state)
        assignment = {p: (cm.BROKERS[p % 5], cm.BROKERS[(p + 1) % 5]) for p in range(PARTITIONS)}
        create = ev.CreateTopic(
            "large", topic, PARTITIONS, 2, replica_assignment=tuple(assignment[p] for p in range(PARTITIONS))
        )
        invalid = '{"version":1,"type":"delete_topic","request_id":"bad-1","topic":""}'
        # one micro-batch (or the creation first): ZooKeeper writes, requests, an admin result, rejected input
        for value in (event_to_json(create), invalid, "not json at all"):
            m.producer.send(m.topics["admin"], key=b"fencing", value=value.encode())
        m.producer.flush()
        assert paused.wait(120), "controller A never wrote the first partition state"
        paused_at = time.monotonic()

        m.wait_loaded(b)  # A's session expired; B was elected and published its failover reference
        c = m.start_controller()  # the next standby, for the idle case
        _, epoch_stat = m.zk.get("/controller_epoch")
        epoch_b = int(m.zk.get("/controller_epoch")[0])
        assert epoch_b == epoch_a + 1
        assert time.monotonic() - paused_at >= 6.0 * 0.5  # A really was paused past (most of) its session
        cm.wait_until("B finishes the creation", lambda: [r for r in m.results("large") if r["status"] == "ok"], 180)
        cm.wait_until("B answers the invalid command", lambda: m.results("bad-1"), 60)

        # what ZooKeeper holds before A resumes (B's replay of A's half-done batch is over: it re-writes that
        # batch's decisions as they were, stamped with the epoch the buckets had then)
        states = [f"/brokers/topics/{topic}/partitions/{p}/state" for p in range(PARTITIONS)]
        progress_path = f"/livectl/sink/{m.name}"
        before = {path: m.zk.get(path)[1].mzxid for path in [*states, progress_path]}

        old_epoch_before = fencing.epoch_counts(kafka_broker.bootstrap, m.topics, epoch_a)
        mark = len(a.text())
        os.killpg(a.proc.pid, signal.SIGCONT)
        fencing.check_fenced_exit(a, mark)
        assert fencing.epoch_counts(kafka_broker.bootstrap, m.topics, epoch_a) == old_epoch_before, (
            "A wrote after resuming"
        )

        # ZooKeeper: whatever changed after A resumed was written by B (every sink transaction also sets
        # the progress znode with the writer's epoch; new partition states carry the new epoch)
        for path in [*states, progress_path]:
            data, stat = m.zk.get(path)
            if stat.mzxid != before[path]:
                assert json.loads(data)["controller_epoch"] == epoch_b, path
        assert m.zk.get("/controller_epoch")[1].mzxid == epoch_stat.mzxid

        # the topics: nothing of A's epoch after B's first message, on any of them
        for name in ("requests", "results", "rejected"):
            per_partition = fencing.messages(kafka_broker.bootstrap, m.topics[name])
            assert any(fencing.epoch_of(x) == epoch_b for msgs in per_partition.values() for x in msgs), name
            assert fencing.old_epoch_after_new(per_partition, epoch_a, epoch_b) == [], name
        bad = m.results("bad-1")
        assert [r["controller_epoch"] for r in bad] == [epoch_b], "the invalid command is answered once, by B"

        # then B, paused between micro-batches, and C
        _paused_between_batches(cm, m, b, c, bootstrap=kafka_broker.bootstrap, paused=still_paused)
    finally:
        if a is not None and paused.is_set() and a.alive():
            os.killpg(a.proc.pid, signal.SIGCONT)
        for x in still_paused:
            if x.alive():
                os.killpg(x.proc.pid, signal.SIGCONT)
        m.close()


def _paused_between_batches(cm: Any, m: Any, active: Any, standby: Any, *, bootstrap: str, paused: list[Any]) -> None:
    """The idle case: ``active`` is stopped while no micro-batch runs. While it is paused, ``standby`` takes
    over and handles new input (a creation: ZooKeeper writes and requests; an invalid command and a record
    that is not JSON: an admin result and rejected records), so when ``active`` resumes its source has
    records it never saw and the checkpoint has batches it did not write. It must not run them: no znode
    changes, no message stamped with its epoch, exit code 3 and its one line; and the new controller,
    whose checkpoint the resumed one shares, goes on answering."""
    epoch_old = int(m.zk.get("/controller_epoch")[0])
    m.wait_waiting(standby)
    cm.wait_until(
        "the controller between micro-batches", lambda: fencing.between_batches(m.checkpoint), 60, interval=0.2
    )
    os.killpg(active.proc.pid, signal.SIGSTOP)
    paused.append(active)
    m.wait_loaded(standby)  # the session expired; the standby was elected and published its failover reference
    epoch_new = int(m.zk.get("/controller_epoch")[0])
    assert epoch_new == epoch_old + 1

    second = {0: (3, 4, 5)}
    cm.create_topic(m, "idle-2", f"{m.name}-second", second)
    for value in ('{"version":1,"type":"delete_topic","request_id":"idle-bad","topic":""}', "not json at all"):
        m.producer.send(m.topics["admin"], key=b"fencing", value=value.encode())
    m.producer.flush()
    expect = cm.Expect({f"{m.name}-second": second}, request_id="idle-2")
    cm.wait_converged(m, "the new controller creates a topic", expect, 180)
    cm.wait_until("the new controller answers the invalid command", lambda: m.results("idle-bad"), 60)
    cm.wait_until("the new controller between micro-batches", lambda: fencing.between_batches(m.checkpoint), 60)

    tree = fencing.tree(m.zk)
    old_epoch_before = fencing.epoch_counts(bootstrap, m.topics, epoch_old)
    mark = len(active.text())
    os.killpg(active.proc.pid, signal.SIGCONT)
    paused.remove(active)
    fencing.check_fenced_exit(active, mark)

    assert fencing.writes_not_by(m.zk, tree, epoch_new) == []
    assert fencing.epoch_counts(bootstrap, m.topics, epoch_old) == old_epoch_before, "the resumed controller wrote"
    for name in ("requests", "results", "rejected"):
        per_partition = fencing.messages(bootstrap, m.topics[name])
        assert fencing.old_epoch_after_new(per_partition, epoch_old, epoch_new) == [], name
    assert [r["controller_epoch"] for r in m.results("idle-bad")] == [epoch_new]
    assert standby.alive()
    third = {0: (5, 1)}
    cm.create_topic(m, "idle-3", f"{m.name}-third", third)
    expect = cm.Expect({f"{m.name}-third": third}, request_id="idle-3")
    cm.wait_converged(m, "the new controller still answers", expect, 120)
