"""A replica being added, in real simulated broker processes, seen through the brokers' own log-size reports
(DescribeLogDirs' shape, on their log-dirs topic) by ``livectl reassign --list``: the bytes to move are the
leader's log, the bytes moved rise to them while the throttled follower copies it, with a rate and a time
left on the way, and nothing is left at the end."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from simbroker_processes import Env, env, registration
from waiting import wait_until

from admin.cli import main
from core.events import LeaderAndIsrResponse
from core.kafka.requests import RequestApi
from simbrokers.control import ControlCommand
from sinks.entity_configs import change_broker_configs, write_entity_configs

pytestmark = pytest.mark.integration
__all__ = ["env"]

RECORD = 1024  # bytes a simulated record weighs
BACKLOG = 400  # records on the leader before the follower is added
RATE = 60 * RECORD  # the follower quota: about 6 s to copy the backlog


def lisr(epoch: int, replicas: list[int], adding: list[int], leader_port: int) -> dict[str, Any]:
    state = {
        "partitionIndex": 0, "controllerEpoch": 1, "leader": 1, "leaderEpoch": epoch, "isr": [1],
        "partitionEpoch": epoch, "replicas": replicas, "addingReplicas": adding, "removingReplicas": [],
        "isNew": epoch == 0, "leaderRecoveryState": 0,
    }  # fmt: skip
    return {
        "controllerId": 0, "controllerEpoch": 1, "brokerEpoch": -1, "type": 0,
        "topicStates": [{"topicName": "orders", "topicId": "AAAAAAAAAAAAAAAAAAAAAA", "partitionStates": [state]}],
        "liveLeaders": [{"brokerId": 1, "hostName": "127.0.0.1", "port": leader_port}],
    }  # fmt: skip


def test_bytes_moved_rise_to_the_leaders_log(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    topic = f"{env.events}.log-dirs"
    reports = ("--log-dirs-topic", topic, "--log-dirs-interval-ms", "200")
    # what the controller would have written: orders-0 on broker 1, adding broker 2 (KIP-455), led by 1
    env.zk.create(
        "/brokers/topics/orders",
        json.dumps({"version": 3, "partitions": {"0": [1, 2]}, "adding_replicas": {"0": [2]},
                    "removing_replicas": {}}).encode(),
        makepath=True,
    )  # fmt: skip
    env.zk.create(
        "/brokers/topics/orders/partitions/0/state",
        json.dumps({"version": 1, "leader": 1, "leader_epoch": 1, "controller_epoch": 1, "isr": [1]}).encode(),
        makepath=True,
    )
    write_entity_configs(env.zk, "topics", "orders", {"follower.replication.throttled.replicas": "0:2"})
    change_broker_configs(env.zk, "2", {"follower.replication.throttled.rate": str(RATE)})
    status = env.tmp / "status-1.json"
    env.start("1", "--produce-rate", "400", "--status-file", str(status), "--status-interval-ms", "100", *reports)
    env.wait_for(lambda: env.zk.exists("/brokers/ids/1"), what="broker 1")
    port = registration(env, 1)[0]["port"]
    env.send(1, RequestApi.LEADER_AND_ISR, lisr(0, [1], [], port), batch=1)
    env.wait_events(lambda e: isinstance(e, LeaderAndIsrResponse), count=1)

    def leader_status() -> tuple[int, int]:
        """The status file's wall-clock time (ms) and the leader's log end in it; (0, 0) before the first."""
        if not status.exists():
            return 0, 0
        written = json.loads(status.read_text())
        return written["time_ms"], int(written["brokers"]["1"]["partitions"].get("orders-0", {}).get("leo", 0))

    env.wait_for(lambda: leader_status()[1] >= BACKLOG, timeout=60, what=f"{BACKLOG} records on the leader")
    env.control(ControlCommand(1, "produce-rate", rate=0.0))  # the leader's log stops growing: a fixed target
    # broker 1 logs the command as it applies it, in the loop that produces and writes the status file: a status
    # begun after the line was seen (by the wall clock both processes read) holds the leader's final log end
    log = env.tmp / "simbrokers-1.log"
    env.wait_for(
        lambda: any("broker 1: control command" in x and "produce-rate" in x for x in log.read_text().splitlines()),
        what="broker 1 applying produce-rate 0",
    )
    applied_ms = time.time() * 1000
    env.wait_for(lambda: leader_status()[0] > applied_ms, what="a status written after it")
    size = leader_status()[1] * RECORD
    env.start("2", *reports)
    env.wait_for(lambda: env.zk.exists("/brokers/ids/2"), what="broker 2")
    for b in (1, 2):
        env.send(b, RequestApi.LEADER_AND_ISR, lisr(1, [1, 2], [2], port), batch=2)

    argv = ["reassign", "--list", "--output", "json", "--log-dirs-topic", topic,
            "--zookeeper", env.zk_connect, "--bootstrap-server", env.bootstrap]  # fmt: skip
    samples: list[dict[str, Any]] = []

    def sampled_to_the_end() -> bool:
        assert main(argv) == 0
        [row] = json.loads(capsys.readouterr().out)["reassignments"]
        samples.append(p := row["progress"])
        # all moved, not only a time left that rounds to 0.0 s (a few kB short at the quota)
        return p["bytes_to_move"] is not None and p["bytes_moved"] == p["bytes_to_move"] and p["seconds_left"] == 0.0

    wait_until("the move reported done", sampled_to_the_end, 60, detail=lambda: f"{samples}\n{env.logs()}")
    known = [s for s in samples if s["bytes_to_move"] is not None]
    assert known and known[-1] == {**known[-1], "bytes_to_move": size, "bytes_moved": size, "seconds_left": 0.0}, (
        samples,
        env.logs(),
    )
    assert all(s["bytes_to_move"] == size for s in known), samples
    moved = [s["bytes_moved"] for s in known]
    assert moved == sorted(moved), samples  # never goes back
    # on the way: part moved, at a rate near the quota, and a time left that is left / rate
    midway = [s for s in known if 0 < s["bytes_moved"] < size and s["bytes_per_second"]]
    assert midway, samples
    for s in midway:
        assert 0.3 * RATE < s["bytes_per_second"] < 3 * RATE, samples
        assert s["seconds_left"] == pytest.approx((size - s["bytes_moved"]) / s["bytes_per_second"], abs=0.1)
