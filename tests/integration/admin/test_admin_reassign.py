"""``livectl reassign`` as kafka-reassign-partitions behaves, with honest outcomes. The controller is played
by :class:`FakeController` on the real admin topics; ZooKeeper and the broker are real."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from admin_env import Env, env, write_tree
from kafka import KafkaProducer
from waiting import WatchedText

from admin.cli import main
from core.codec.decisions import encode_decision
from core.codec.events import event_from_json
from core.decisions import AdminResult, AdminStatus
from core.events import AdminCommand, AlterTopicConfig, CancelReassignment, Event, ReassignPartitions
from core.kafka.zkdata import encode_broker_registration

pytestmark = pytest.mark.integration
__all__ = ["env"]

Answer = tuple[AdminStatus, str | None, str, dict[str, object]]


class FakeController:
    """Answers every command on the admin topic with ``handler(command)`` (a list of results, sent in turn,
    on one partition: the tool reads them in that order, in one poll or several); ``between(command, i)``, if
    given, runs once result ``i`` is on the topic and before the next is sent: where a test waits for the
    tool to have taken it. Applies topic config changes to ZooKeeper as the controller would. What its
    thread raises, :meth:`close` raises."""

    def __init__(
        self,
        env: Env,
        handler: Callable[[Event], list[Answer]],
        between: Callable[[Event, int], object] | None = None,
    ) -> None:
        self.env = env
        self.handler = handler
        self.between = between
        self.seen: list[Event] = []
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self.play, daemon=True)
        self.thread.start()

    def play(self) -> None:
        try:
            self.run()
        except BaseException as e:  # raised on the test's thread by close()
            self.error = e

    def run(self) -> None:
        c = self.env.consumer(self.env.admin)
        p = KafkaProducer(bootstrap_servers=self.env.bootstrap)
        batch = 100
        while not self.stop.is_set():
            for rs in c.poll(timeout_ms=100).values():
                for r in rs:
                    ev = event_from_json(r.value)
                    self.seen.append(ev)
                    if isinstance(ev, AlterTopicConfig):
                        self.apply_config(ev)
                    for i, (status, error, message, details) in enumerate(self.handler(ev)):
                        assert isinstance(ev, AdminCommand), ev
                        rid = ev.request_id
                        res = AdminResult(rid, ev.TYPE, status, error, message, details)
                        batch += 1
                        value = encode_decision(res) | {"batch_id": batch, "controller_epoch": 3}
                        p.send(self.env.results, key=rid.encode(), value=json.dumps(value).encode())
                        p.flush()
                        if self.between is not None:
                            self.between(ev, i)
        c.close()
        p.close()

    def apply_config(self, ev: AlterTopicConfig) -> None:
        path = f"/config/topics/{ev.topic}"
        cur = json.loads(self.env.zk.get(path)[0])["config"] if self.env.zk.exists(path) else {}
        cur.update(dict(ev.configs))
        for k in ev.delete_configs:
            cur.pop(k, None)
        data = json.dumps({"version": 1, "config": cur}).encode()
        if self.env.zk.exists(path):
            self.env.zk.set(path, data)
        else:
            self.env.zk.create(path, data, makepath=True)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        if self.error is not None:
            raise self.error


def ok(_ev: Event) -> list[Answer]:
    return [(AdminStatus.OK, None, "", {})]


def plan(env: Env, name: str, parts: list[tuple[str, int, list[int]]]) -> Path:
    path = env.tmp / name
    entries = [{"topic": t, "partition": p, "replicas": r} for t, p, r in parts]
    path.write_text(json.dumps({"version": 1, "partitions": entries}))
    return path


def clean_tree(env: Env) -> None:
    """write_tree without the reassignment in progress on orders-1."""
    write_tree(env.zk)
    set_orders(env, {"0": [1, 2], "1": [2, 3], "2": [3, 1]})


def set_orders(
    env: Env,
    partitions: dict[str, list[int]],
    adding: dict[str, list[int]] | None = None,
    removing: dict[str, list[int]] | None = None,
) -> None:
    znode = {
        "version": 3,
        "partitions": partitions,
        "adding_replicas": adding or {},
        "removing_replicas": removing or {},
    }
    env.zk.set("/brokers/topics/orders", json.dumps(znode).encode())


def test_cancel_with_a_partition_not_in_progress_is_exit_1_per_partition(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    write_tree(env.zk)

    def answer(ev: Event) -> list[Answer]:
        assert isinstance(ev, CancelReassignment)
        parts = {
            "orders-1": {"error": "NONE"},
            "orders-2": {"error": "NO_REASSIGNMENT_IN_PROGRESS", "message": "No reassignment in progress."},
        }
        return [(AdminStatus.IN_PROGRESS, None, "", {"partitions": parts})]

    ctl = FakeController(env, answer)
    try:
        path = plan(env, "cancel.json", [("orders", 1, [2, 3, 1]), ("orders", 2, [3, 4])])
        assert main(env.args("reassign", "--cancel", "--reassignment-json-file", str(path), "--timeout", "20")) == 1
    finally:
        ctl.close()
    out, err = capsys.readouterr()
    assert "Successfully cancelled partition reassignments for: orders-1" in out
    assert "orders-2" not in out
    assert "Error cancelling partition reassignment for:\norders-2: NO_REASSIGNMENT_IN_PROGRESS" in err


def test_execute_with_throttle_writes_kafkas_configs_and_verify_clears_them(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    clean_tree(env)
    ctl = FakeController(
        env, lambda ev: ok(ev) if not isinstance(ev, ReassignPartitions) else [(AdminStatus.IN_PROGRESS, None, "", {})]
    )
    try:
        path = plan(env, "move.json", [("orders", 0, [2, 3]), ("orders", 1, [2, 3])])
        argv = ["reassign", "--execute", "--reassignment-json-file", str(path), "--throttle", "50000"]
        assert main(env.args(*argv, "--replica-alter-log-dirs-throttle", "70000", "--timeout", "20")) == 0
        out = capsys.readouterr().out
        assert "The inter-broker throttle limit was set to 50000 B/s" in out
        assert "Successfully started partition reassignments for orders-0,orders-1" in out
        cfg = json.loads(env.zk.get("/config/topics/orders")[0])["config"]
        assert cfg["leader.replication.throttled.replicas"] == "0:1,0:2,1:2,1:3"
        assert cfg["follower.replication.throttled.replicas"] == "0:3"
        for b in (1, 2, 3):
            assert json.loads(env.zk.get(f"/config/brokers/{b}")[0])["config"] == {
                "follower.replication.throttled.rate": "50000",
                "leader.replication.throttled.rate": "50000",
                "replica.alter.log.dirs.io.max.bytes.per.second": "70000",
            }
        changes = [
            json.loads(env.zk.get(f"/config/changes/{c}")[0]) for c in sorted(env.zk.get_children("/config/changes"))
        ]
        assert {c["entity_path"] for c in changes} == {"topics/orders", "brokers/1", "brokers/2", "brokers/3"}
        types = [type(ev) for ev in ctl.seen]
        assert types == [AlterTopicConfig, ReassignPartitions]  # the throttle first, as Kafka's tool does
        # still moving: --verify keeps the throttles (exit 3)
        set_orders(env, {"0": [2, 3, 1], "1": [2, 3], "2": [3, 1]}, {"0": [3]}, {"0": [1]})
        assert main(env.args("reassign", "--verify", "--reassignment-json-file", str(path), "--timeout", "20")) == 3
        assert env.zk.exists("/config/brokers/1") and "Clearing" not in capsys.readouterr().out
        # done: --verify clears every throttle
        set_orders(env, {"0": [2, 3], "1": [2, 3], "2": [3, 1]})
        assert main(env.args("reassign", "--verify", "--reassignment-json-file", str(path), "--timeout", "20")) == 0
        out = capsys.readouterr().out
    finally:
        ctl.close()
    assert "Clearing broker-level throttles on brokers 1,2,3" in out
    assert "Clearing topic-level throttles on topic orders" in out
    assert json.loads(env.zk.get("/config/topics/orders")[0])["config"] == {"cleanup.policy": "compact"}
    for b in (1, 2, 3):
        assert json.loads(env.zk.get(f"/config/brokers/{b}")[0])["config"] == {}


def test_list_shows_adding_and_removing(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    clean_tree(env)
    assert main(env.args("reassign", "--list", write=False)) == 0
    assert capsys.readouterr().out.strip() == "No partition reassignments found."
    set_orders(env, {"0": [2, 3, 1], "1": [2, 3], "2": [3, 1]}, {"0": [3]}, {"0": [1]})
    # no broker has reported its log sizes on this (empty) topic: the data moved is not known
    quiet = ["--log-dirs-topic", env.admin]
    assert main(env.args("reassign", "--list", *quiet, write=False)) == 0
    assert capsys.readouterr().out.splitlines() == [
        "Current partition reassignments:",
        "orders-0: replicas: 2,3,1. adding: 3. removing: 1.",
        "",
        "Data moved (the brokers' log sizes, DescribeLogDirs):",
        "orders-0: moved 0 B of unknown, rate unknown, time left unknown",
        "Total: moved 0 B of unknown, rate unknown, time left unknown (1 partition(s) not reported yet)",
    ]
    assert main(env.args("reassign", "--describe", "--output", "json", *quiet, write=False)) == 0
    doc = json.loads(capsys.readouterr().out)
    unknown = {"bytes_to_move": None, "bytes_moved": 0, "bytes_per_second": None, "seconds_left": None,
               "percent": None, "waiting_for": [3], "not_alive": []}  # fmt: skip
    assert doc["reassignments"] == [
        {"topic": "orders", "partition": 0, "replicas": [2, 3, 1], "adding_replicas": [3], "removing_replicas": [1],
         "waiting_for": [3], "not_alive": [], "progress": unknown}
    ]  # fmt: skip
    assert doc["progress"] == {
        **unknown, "partitions_unknown": 1, "partitions_waiting": 1, "partitions_waiting_for_not_alive": 0,
    }  # fmt: skip


def test_verify_and_list_show_the_data_moved_from_the_brokers_log_sizes(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    # orders-0 (leader 1) is adding broker 3; the brokers report their DescribeLogDirs answers on a topic
    clean_tree(env)
    set_orders(env, {"0": [1, 2, 3], "1": [2, 3], "2": [3, 1]}, {"0": [3]})
    topic = f"{env.admin}.log-dirs"
    kib = 1024
    now = int(time.time() * 1000)
    reports = [
        (1, now - 2_000, 400 * kib),  # the leader's log
        (3, now - 2_000, 100 * kib),
        (3, now - 1_000, 150 * kib),  # 50 KiB/s over the window
        (3, now, 200 * kib),
    ]
    publish_log_dirs(env, topic, reports, junk=True)
    figures = {"bytes_to_move": 400 * kib, "bytes_moved": 200 * kib, "bytes_per_second": 50 * kib, "seconds_left": 4.0,
               "percent": 50, "waiting_for": [3], "not_alive": []}  # fmt: skip
    path = plan(env, "move.json", [("orders", 0, [1, 2, 3])])
    verify = ["reassign", "--verify", "--reassignment-json-file", str(path), "--log-dirs-topic", topic]
    assert main(env.args(*verify, write=False)) == 3
    assert capsys.readouterr().out.splitlines()[-4:] == [
        "",
        "Data moved (the brokers' log sizes, DescribeLogDirs):",
        "orders-0: moved 200.0 KiB of 400.0 KiB (50%), 50.0 KiB/s, about 4 s left",
        "Total: moved 200.0 KiB of 400.0 KiB (50%), 50.0 KiB/s, about 4 s left",
    ]
    assert main(env.args(*verify, "--output", "json", write=False)) == 3
    doc = json.loads(capsys.readouterr().out)
    assert doc["partitions"][0]["progress"] == figures
    assert doc["progress"] == {
        **figures, "partitions_unknown": 0, "partitions_waiting": 1, "partitions_waiting_for_not_alive": 0,
    }  # fmt: skip
    listing = ["reassign", "--list", "--output", "json", "--log-dirs-topic", topic]
    assert main(env.args(*listing, write=False)) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["progress"] for r in doc["reassignments"]] == [figures]

    # Kafka unreachable: the reassignment's status still comes from ZooKeeper, within seconds, the data unknown
    started = time.monotonic()
    argv = [*verify, "--zookeeper", env.zk_connect, "--bootstrap-server", "127.0.0.1:1"]
    assert main(argv) == 3
    out, err = capsys.readouterr()
    assert time.monotonic() - started < 15
    assert "orders-0: moved 0 B of unknown, rate unknown, time left unknown" in out
    assert "Warning: no log sizes (cannot reach Kafka at 127.0.0.1:1): bytes moved and time left unknown." in err


def publish_log_dirs(env: Env, topic: str, reports: list[tuple[int, int, int]], *, junk: bool = False) -> None:
    """DescribeLogDirs-shaped reports of orders-0's size, (broker, time ms, bytes) each, on ``topic``."""
    producer = KafkaProducer(bootstrap_servers=env.bootstrap)
    for broker, at, size in reports:
        sizes = {"partitionIndex": 0, "partitionSize": size, "offsetLag": 0, "isFutureKey": False}
        dirs = [{"errorCode": 0, "logDir": "/d", "topics": [{"name": "orders", "partitions": [sizes]}]}]
        doc = {"version": 1, "brokerId": broker, "timeMs": at, "errorCode": 0, "results": dirs}
        producer.send(topic, key=str(broker).encode(), value=json.dumps(doc).encode())
    if junk:
        producer.send(topic, key=b"9", value=b"not a report")  # skipped
    producer.flush()
    producer.close()


def test_a_move_waiting_for_a_dead_broker_is_never_shown_done(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    # a drain's move of orders-0 off broker 5 onto 3 (origin 1,2,5, target 1,2,3): broker 3 has copied all of the
    # leader's 400 KiB and is in the ISR, but broker 2, a replica of the target, died (its registration gone, out
    # of the ISR). Kafka completes the move only with 1, 2 and 3 in the ISR: it waits for broker 2, and every
    # view says so instead of 100% and 0 s left.
    clean_tree(env)
    set_orders(env, {"0": [1, 2, 3, 5], "1": [2, 3], "2": [3, 1]}, {"0": [3]}, {"0": [5]})
    state = {"version": 1, "leader": 1, "leader_epoch": 5, "controller_epoch": 2, "isr": [1, 3]}
    env.zk.set("/brokers/topics/orders/partitions/0/state", json.dumps(state).encode())
    env.zk.delete("/brokers/ids/2")
    topic = f"{env.admin}.log-dirs-dead"
    now = int(time.time() * 1000)
    kib = 1024
    publish_log_dirs(env, topic, [(1, now - 1_000, 400 * kib), (3, now - 1_000, 300 * kib), (3, now, 400 * kib)])
    why = "waiting for broker 2, which is not alive"
    listing = ["reassign", "--list", "--log-dirs-topic", topic]
    assert main(env.args(*listing, write=False)) == 0
    assert capsys.readouterr().out.splitlines() == [
        "Current partition reassignments:",
        f"orders-0: replicas: 1,2,3,5. adding: 3. removing: 5. Not done: {why}.",
        "",
        "Data moved (the brokers' log sizes, DescribeLogDirs):",
        f"orders-0: moved 400.0 KiB of 400.0 KiB (99%), 100.0 KiB/s, time left unknown; {why}",
        f"Total: moved 400.0 KiB of 400.0 KiB (99%), 100.0 KiB/s, time left unknown; 1 partition(s) {why}",
    ]
    assert main(env.args(*listing, "--output", "json", write=False)) == 0
    [row] = json.loads(capsys.readouterr().out)["reassignments"]
    assert (row["waiting_for"], row["not_alive"]) == ([2], [2])
    assert row["progress"] == {"bytes_to_move": 400 * kib, "bytes_moved": 400 * kib, "bytes_per_second": 100 * kib,
                               "seconds_left": None, "percent": 99, "waiting_for": [2], "not_alive": [2]}  # fmt: skip
    path = plan(env, "drain.json", [("orders", 0, [1, 2, 3])])
    verify = ["reassign", "--verify", "--reassignment-json-file", str(path), "--log-dirs-topic", topic]
    assert main(env.args(*verify, write=False)) == 3
    out = capsys.readouterr().out
    assert f"Reassignment of partition orders-0 is still in progress. Not done: {why}." in out
    assert main(env.args(*verify, "--output", "json", write=False)) == 3
    doc = json.loads(capsys.readouterr().out)
    [row] = doc["partitions"]
    assert (row["status"], row["waiting_for"], row["not_alive"], row["adding_not_in_isr"]) == (
        "in_progress",
        [2],
        [2],
        [],
    )
    assert (row["progress"]["percent"], doc["progress"]["percent"], doc["progress"]["seconds_left"]) == (99, 99, None)


def test_wait_reports_a_superseded_reassignment_as_such(
    env: Env, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    clean_tree(env)
    stderr = WatchedText(sys.stderr)
    monkeypatch.setattr(sys, "stderr", stderr)

    def answer(ev: Event) -> list[Answer]:
        message = "The reassignment of orders-0 was superseded by a newer reassignment."
        parts = {"orders-0": {"error": "REASSIGNMENT_SUPERSEDED", "message": message}}
        return [
            (AdminStatus.IN_PROGRESS, None, "", {"partitions": {"orders-0": {"error": "NONE"}}}),
            (AdminStatus.ERROR, "REASSIGNMENT_SUPERSEDED", "superseded", {"partitions": parts}),
        ]

    # the error only once the tool follows (its first line): --execute's own answer is the in-progress one
    ctl = FakeController(env, answer, lambda _ev, i: None if i else stderr.wait_for("0/1 partitions done"))
    try:
        path = plan(env, "move.json", [("orders", 0, [2, 3])])
        argv = ["reassign", "--execute", "--reassignment-json-file", str(path), "--wait", "--timeout", "20"]
        assert main(env.args(*argv)) == 1
    finally:
        ctl.close()
    out, err = capsys.readouterr()
    assert "completed" not in out + err
    assert "orders-0: REASSIGNMENT_SUPERSEDED: The reassignment of orders-0 was superseded" in err
    assert "0/1 partitions done" in err and "orders-0: not started yet" in err


def test_wait_follows_progress_until_zookeeper_shows_every_partition_done(
    env: Env, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An ok from one bucket is final only once every partition of the request is at its target."""
    clean_tree(env)
    stderr = WatchedText(sys.stderr)
    monkeypatch.setattr(sys, "stderr", stderr)

    def answer(ev: Event) -> list[Answer]:
        set_orders(env, {"0": [2, 3, 1], "1": [2, 3], "2": [3, 1]}, {"0": [3]}, {"0": [1]})
        return [(AdminStatus.IN_PROGRESS, None, "", {"partitions": {"orders-0": {"error": "NONE"}}}),
                (AdminStatus.OK, None, "Reassignment completed.", {})]  # fmt: skip

    def between(_ev: Event, i: int) -> None:
        if i == 0:
            # the "ok" only once the tool follows: --execute's own first answer is the in-progress one
            stderr.wait_for("0/1 partitions done")
            return
        # the "ok" is on the topic. Broker 3 joins the ISR: the tool's round that draws that reads ZooKeeper
        # after the "ok" was written and polls the results next, so it holds the "ok" while ZooKeeper still
        # shows the partition moving; only then does the reassignment end in ZooKeeper
        stderr.wait_for("adding replicas not yet in the ISR: 3")
        isr = {"version": 1, "leader": 1, "leader_epoch": 4, "controller_epoch": 2, "isr": [1, 2, 3]}
        env.zk.set("/brokers/topics/orders/partitions/0/state", json.dumps(isr).encode())
        stderr.wait_for("adding replicas not yet in the ISR: none (finishing)")
        set_orders(env, {"0": [2, 3], "1": [2, 3], "2": [3, 1]})

    ctl = FakeController(env, answer, between)
    try:
        path = plan(env, "move.json", [("orders", 0, [2, 3])])
        argv = ["reassign", "--execute", "--reassignment-json-file", str(path), "--wait", "--timeout", "20"]
        assert main(env.args(*argv)) == 0
    finally:
        ctl.close()
    out, err = capsys.readouterr()
    assert "Reassignment of 1 partition(s) completed." in out
    assert "  orders-0: adding replicas not yet in the ISR: 3" in err  # ISR [1, 2]: 3 is not in it
    assert "  orders-0: adding replicas not yet in the ISR: none (finishing)" in err
    assert err.rstrip().endswith("1/1 partitions done")


def _isr(env: Env, partition: int, leader: int, isr: list[int]) -> None:
    state = {"version": 1, "leader": leader, "leader_epoch": 4, "controller_epoch": 2, "isr": isr}
    env.zk.set(f"/brokers/topics/orders/partitions/{partition}/state", json.dumps(state).encode())


def test_wait_ends_at_once_when_only_moves_waiting_for_a_dead_broker_are_left(
    env: Env, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # orders-0 moves onto broker 3 (1,2 -> 2,3) and orders-2 onto broker 4 (1,2 -> 1,4). Broker 3 dies once the
    # moves started: orders-0 cannot complete until it is back (Kafka needs every target replica in the ISR).
    # The tool goes on while orders-2 can still complete, then ends at once, exit 1, naming orders-0 and broker 3,
    # rather than waiting out --timeout; the reassignment stays in ZooKeeper, and nothing else is sent
    clean_tree(env)
    env.zk.create("/brokers/ids/4", encode_broker_registration("127.0.0.1", 9094, None, 1).encode())
    set_orders(env, {"0": [1, 2], "1": [2, 3], "2": [1, 2]})
    _isr(env, 2, 1, [1, 2])
    stderr = WatchedText(sys.stderr)
    monkeypatch.setattr(sys, "stderr", stderr)

    def answer(ev: Event) -> list[Answer]:
        # the controller starts both moves, then broker 3's registration goes
        set_orders(env, {"0": [2, 3, 1], "1": [2, 3], "2": [1, 4, 2]}, {"0": [3], "2": [4]}, {"0": [1], "2": [2]})
        env.zk.delete("/brokers/ids/3")
        parts = {"orders-0": {"error": "NONE"}, "orders-2": {"error": "NONE"}}
        return [(AdminStatus.IN_PROGRESS, None, "", {"partitions": parts})]

    def between(_ev: Event, _i: int) -> None:
        stderr.wait_for("  orders-0: adding replicas not yet in the ISR: 3; waiting for broker 3, which is not alive")
        stderr.wait_for("  orders-2: adding replicas not yet in the ISR: 4")
        # broker 4 catches up and the controller completes orders-2: only orders-0 is left, waiting for broker 3
        _isr(env, 2, 1, [1, 2, 4])
        set_orders(env, {"0": [2, 3, 1], "1": [2, 3], "2": [1, 4]}, {"0": [3]}, {"0": [1]})

    ctl = FakeController(env, answer, between)
    try:
        path = plan(env, "move.json", [("orders", 0, [2, 3]), ("orders", 2, [1, 4])])
        argv = ["reassign", "--execute", "--reassignment-json-file", str(path), "--wait", "--timeout", "30"]
        started = time.monotonic()
        assert main(env.args(*argv)) == 1
        took = time.monotonic() - started
    finally:
        ctl.close()
    assert took < 20, took  # not the 30 s of --timeout
    out, err = capsys.readouterr()
    assert "completed" not in out
    assert "1/2 partitions done\n  orders-0: adding replicas not yet in the ISR: 3; waiting for broker 3" in err
    assert (
        "livectl reassign: error: the reassignment cannot complete: 1 partition(s) wait for brokers that are not "
        "alive: orders-0 (broker 3); a move completes only when every target replica is in the ISR, and nothing "
        "else is in flight, so the tool stops waiting (request "
    ) in err
    assert (
        f"It stays in place (in ZooKeeper) and completes once it is back: start broker 3, then follow it with "
        f"`livectl reassign --verify --reassignment-json-file {path}`; or cancel it with "
        f"`livectl reassign --cancel --reassignment-json-file {path}`."
    ) in err
    # the reassignment is left as it was, and the tool sent nothing but it
    znode = json.loads(env.zk.get("/brokers/topics/orders")[0])
    assert (znode["adding_replicas"], znode["removing_replicas"]) == ({"0": [3]}, {"0": [1]})
    assert [type(ev) for ev in ctl.seen] == [ReassignPartitions]


def test_cancel_wait_ends_at_once_when_going_back_waits_for_a_dead_broker(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    # orders-1 is moving from 2,3 onto 2,3,1 (write_tree); broker 3 died. Cancelled, it goes back to 2,3, which
    # completes only with 3 in the ISR again: --cancel --wait ends at once, exit 1, saying so
    write_tree(env.zk)
    env.zk.delete("/brokers/ids/3")

    def answer(ev: Event) -> list[Answer]:
        assert isinstance(ev, CancelReassignment)
        set_orders(env, {"0": [1, 2], "1": [2, 3, 1], "2": [3, 4]}, {}, {"1": [1]})  # back to 2,3: 1 removed
        return [(AdminStatus.IN_PROGRESS, None, "", {"partitions": {"orders-1": {"error": "NONE"}}})]

    ctl = FakeController(env, answer)
    try:
        path = plan(env, "cancel.json", [("orders", 1, [2, 3, 1])])
        argv = ["reassign", "--cancel", "--reassignment-json-file", str(path), "--wait", "--timeout", "30"]
        started = time.monotonic()
        assert main(env.args(*argv)) == 1
        took = time.monotonic() - started
    finally:
        ctl.close()
    assert took < 20, took
    out, err = capsys.readouterr()
    assert "Successfully cancelled partition reassignments for: orders-1" in out
    assert "  orders-1: adding replicas not yet in the ISR: none; waiting for broker 3, which is not alive" in err
    assert (
        "livectl reassign: error: the cancellation cannot complete: 1 partition(s) wait for brokers that are not "
        "alive: orders-1 (broker 3);"
    ) in err
    assert "completes once it is back: start broker 3 (follow it with `livectl reassign --list`)" in err


def test_elect_leaders_reports_each_partition_as_kafkas_tool_does(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    write_tree(env.zk)
    parts = {
        "orders-0": {"error": "NONE"},
        "orders-1": {"error": "ELECTION_NOT_NEEDED", "message": "Leader election not needed"},
        "orders-2": {"error": "PREFERRED_LEADER_NOT_AVAILABLE", "message": "Failed to elect leader for partition"},
    }
    ctl = FakeController(
        env, lambda ev: [(AdminStatus.ERROR, "PREFERRED_LEADER_NOT_AVAILABLE", "x", {"partitions": parts})]
    )
    try:
        argv = ["elect-leaders", "--election-type", "PREFERRED", "--all-topic-partitions", "--wait", "--timeout", "20"]
        assert main(env.args(*argv)) == 1
    finally:
        ctl.close()
    out, err = capsys.readouterr()
    assert "Successfully completed leader election (PREFERRED) for partitions orders-0" in out
    assert "Valid replica already elected for partitions orders-1" in out
    assert "1 replica(s) could not be elected:" in err
    assert "Error completing leader election (PREFERRED) for partition: orders-2: PREFERRED_LEADER_NOT_AVAILABLE" in err


def test_elect_leaders_all_says_which_partitions_are_queued(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    """Under ``leader.imbalance.max.leaders.per.interval`` an ``--all-topic-partitions`` preferred election is
    queued for the leader-balance passes: the tool says so instead of claiming the elections done."""
    from core.controller.elections import QUEUED

    write_tree(env.zk)
    parts = {"orders-0": {"error": "NONE", "message": QUEUED}, "orders-1": {"error": "NONE"}}
    message = "preferred leader elections queued: at most 5 per leader-balance pass"
    ctl = FakeController(env, lambda ev: [(AdminStatus.OK, None, message, {"partitions": parts, "queued": 1})])
    try:
        argv = ["elect-leaders", "--election-type", "PREFERRED", "--all-topic-partitions", "--wait", "--timeout", "20"]
        assert main(env.args(*argv)) == 0
    finally:
        ctl.close()
    out, _ = capsys.readouterr()
    assert "Successfully completed leader election (PREFERRED) for partitions orders-1\n" in out
    assert "Queued leader election (PREFERRED) for partitions orders-0\n" in out
    assert f"\n1 {message}\n" in out  # the count, summed over the buckets' answers, then their one message
