"""Draining a broker against the real controller query (real ZooKeeper, broker and Spark; issue 44, item 1):
``livectl brokers --drain 4`` moves broker 4's leaderships first, then its replicas in batches under the
throttle, while this test plays the brokers' part (a leader adds a new replica to its ISR once it has caught
up: Kafka's AlterPartition); a drain cancelled halfway leaves the broker cordoned and its moves cancelled; run
again after the controller restarted, it finishes."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from controller_harness import Cluster, start_controller
from waiting import wait_until

from admin import drain as drain_tool
from admin.cli import main
from admin.drain import drain_path
from core import events as ev
from core.drain import DrainStep, plan_drain

pytestmark = pytest.mark.spark

BROKER = 4


def cli(cluster: Cluster, *argv: str) -> int:
    s = cluster.settings
    return main(
        [
            *argv,
            "--zookeeper", cluster.zk_connect, "--bootstrap-server", cluster.bootstrap,
            "--admin-topic", s.admin_topic, "--admin-results-topic", s.admin_results_topic,
        ]
    )  # fmt: skip


class Brokers(threading.Thread):
    """The brokers' part: every partition with an adding replica gets it into its ISR (the leader's
    AlterPartition), and what the cluster looked like when each move was first seen is recorded."""

    def __init__(self, cluster: Cluster, topic: str, partitions: int) -> None:
        super().__init__(daemon=True)
        self.cluster, self.topic, self.partitions = cluster, topic, partitions
        self.stop = threading.Event()
        self.catch_up = threading.Event()
        #: per move seen: the leaders of every partition then
        self.leaders_at_moves: list[list[int]] = []
        self.offline_seen = False
        self.error: BaseException | None = None

    def run(self) -> None:
        seen: set[tuple[int, tuple[int, ...]]] = set()
        try:
            while not self.stop.is_set():
                znode = self.cluster.znode(f"/brokers/topics/{self.topic}") or {}
                adding = {int(p): tuple(r) for p, r in (znode.get("adding_replicas") or {}).items()}
                states = [self.cluster.state(self.topic, p) or {} for p in range(self.partitions)]
                leaders = [int(s.get("leader", -1)) for s in states]
                self.offline_seen |= any(leader < 0 for leader in leaders)
                for p, add in adding.items():
                    if (p, add) not in seen:
                        seen.add((p, add))
                        self.leaders_at_moves.append(leaders)
                    if self.catch_up.is_set():
                        self._alter(p, states[p], add)
                time.sleep(0.3)
        except BaseException as e:  # surfaced by the test
            self.error = e

    def _alter(self, p: int, state: dict[str, Any], add: tuple[int, ...]) -> None:
        leader, isr = int(state["leader"]), list(state["isr"])
        if set(add) <= set(isr):
            return
        _, stat = self.cluster.zk.get(f"/brokers/topics/{self.topic}/partitions/{p}/state")
        new_isr = tuple(isr + [b for b in add if b not in isr])
        alter = ev.AlterPartition(
            leader, self.cluster.epochs[leader], self.topic, p, int(state["leader_epoch"]), stat.version, new_isr
        )
        self.cluster.send_broker_event(alter)


def _holding(cluster: Cluster, topic: str, partitions: int) -> tuple[list[int], list[int]]:
    znode = cluster.znode(f"/brokers/topics/{topic}") or {}
    on = [int(p) for p, r in znode["partitions"].items() if BROKER in r]
    led = [p for p in range(partitions) if (cluster.state(topic, p) or {}).get("leader") == BROKER]
    return on, led


def _rounds_after_batch(rounds: list[DrainStep]) -> int:
    """How many rounds planned after the first that started replica moves (0 before it)."""
    started = [i for i, step in enumerate(rounds) if step.replica_moves]
    return len(rounds) - 1 - started[0] if started else 0


def test_drain_leaders_first_in_batches_cancel_and_resume(
    spark: Any, cluster: Cluster, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    rounds: list[DrainStep] = []  # every round's plan, in order: the drain runs in this process

    def planned(*args: Any, **kwargs: Any) -> DrainStep:
        step = plan_drain(*args, **kwargs)
        rounds.append(step)
        return step

    monkeypatch.setattr(drain_tool, "plan_drain", planned)
    for b in (1, 2, 3, BROKER):
        cluster.register_broker(b)
    controller = start_controller(spark, cluster.settings)
    topic, n = "orders", 8
    # broker 4 leads partitions 0 and 1 and follows in 2-5; 6 and 7 do not have it
    assignment = "4:1,4:2,1:4,2:4,3:4,1:4,1:2,2:3"
    assert cli(cluster, "topics", "--create", "--topic", topic, "--replica-assignment", assignment, "--wait") == 0
    assert _holding(cluster, topic, n) == ([0, 1, 2, 3, 4, 5], [0, 1])
    brokers = Brokers(cluster, topic, n)
    brokers.start()
    try:
        # without catching up: the leaderships move, then one batch starts and waits; cancelled meanwhile
        outcome: list[int] = []
        first = ("brokers", "--drain", str(BROKER), "--batch-size", "2", "--throttle", "1000", "--timeout", "120")
        drain = threading.Thread(target=lambda: outcome.append(cli(cluster, *first)))
        drain.start()
        wait_until("a batch moving", lambda: len(brokers.leaders_at_moves) >= 2, 120)
        assert _holding(cluster, topic, n)[1] == [], "the leaderships moved first"
        assert all(BROKER not in leaders for leaders in brokers.leaders_at_moves)
        cfg = wait_until("the throttle", lambda: (cluster.znode(f"/config/topics/{topic}") or {}).get("config"), 30)
        assert cfg["follower.replication.throttled.replicas"]
        assert cluster.znode(f"/config/brokers/{BROKER}") == {
            "version": 1,
            "config": {"follower.replication.throttled.rate": "1000", "leader.replication.throttled.rate": "1000"},
        }
        # a round plans only after the one before it finished (its moves started and answered): the second
        # round after the batch's shows that the one between, which saw the batch moving, started nothing
        wait_until("two rounds after the batch", lambda: _rounds_after_batch(rounds) >= 2, 60)
        assert [len(s.replica_moves) for s in rounds if s.replica_moves] == [2], "no more than the batch size"
        moving = (cluster.znode(f"/brokers/topics/{topic}") or {}).get("adding_replicas") or {}
        assert len(moving) == 2, "no more than the batch size moves at once"
        assert len(brokers.leaders_at_moves) == 2
        assert cli(cluster, "brokers", "--cancel-drain", str(BROKER), "--timeout", "60") == 0
        drain.join(120)
        assert outcome == [1], "the running drain stops: cancelled"
        assert cluster.znode(drain_path(BROKER)) is None
        znode = cluster.znode(f"/brokers/topics/{topic}") or {}
        assert not znode.get("adding_replicas") and not znode.get("removing_replicas"), "its moves cancelled"
        assert cluster.znode("/livectl/cordoned_brokers") == {"version": 1, "brokers": [BROKER]}

        # the controller restarts; the drain, run again, resumes from the cluster as it is and finishes
        controller.stop()
        controller = start_controller(spark, cluster.settings)
        brokers.catch_up.set()
        capsys.readouterr()
        argv = ("brokers", "--drain", str(BROKER), "--batch-size", "2", "--throttle", "1000", "--timeout", "240")
        assert cli(cluster, *argv) == 0
        out = capsys.readouterr().out
        assert f"Broker {BROKER} is drained" in out
        assert _holding(cluster, topic, n) == ([], [])
        assert cluster.znode(drain_path(BROKER)) is None
        assert cluster.znode(f"/config/brokers/{BROKER}") in (None, {"version": 1, "config": {}}), "throttle cleared"
        assert not brokers.offline_seen, "no partition was without a leader"
        assert brokers.error is None
    finally:
        brokers.stop.set()
        controller.stop()
    assert not controller.error
