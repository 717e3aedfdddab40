"""``livectl brokers --drain N`` / ``--cancel-drain N`` against the real ZooKeeper and Kafka, with a stand-in
controller (issue 44, item 1): what a cancelled drain leaves behind, and the options the command refuses."""

from __future__ import annotations

import json
import time

import pytest
from admin_env import Env, Player, answer, env, write_tree
from kafka import KafkaProducer

from admin.cli import main
from admin.drain import DrainRecord, drain_path
from core.codec.decisions import encode_decision
from core.codec.events import event_from_json
from core.cordon import CORDONED_BROKERS
from core.decisions import AdminResult, AdminStatus
from core.events import AlterTopicConfig, ReassignPartitions
from core.model import PartitionTarget

pytestmark = pytest.mark.integration
__all__ = ["env"]

RATES = {"leader.replication.throttled.rate": "20000", "follower.replication.throttled.rate": "20000"}


def _configs(env: Env, path: str) -> dict[str, str]:
    data, _ = env.zk.get(path)
    config: dict[str, str] = json.loads(data)["config"]
    return config


def test_cancelling_a_throttled_drain_clears_its_throttles(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    # a drain of broker 3 at 20000 B/s, cancelled between its rounds: the rates on the brokers and the
    # throttled replicas on its topic were the drain's, and go with it, as kafka-reassign-partitions --cancel
    # clears the throttles of the moves it cancels
    write_tree(env.zk)
    env.zk.create(drain_path(3), DrainRecord(10, 20000).encode(), makepath=True)
    for b in (1, 3):
        env.zk.create(f"/config/brokers/{b}", json.dumps({"version": 1, "config": RATES}).encode(), makepath=True)
    throttled = {
        "cleanup.policy": "compact",
        "leader.replication.throttled.replicas": "0:1,0:2",
        "follower.replication.throttled.replicas": "0:3",
    }
    env.zk.set("/config/topics/orders", json.dumps({"version": 1, "config": throttled}).encode())
    controller = answer(env, [(AdminStatus.OK, None, {})])
    assert main(env.args("brokers", "--cancel-drain", "3", "--timeout", "20")) == 0
    controller.join(5)
    out = capsys.readouterr().out
    assert "Drain of broker 3 cancelled" in out
    assert "Clearing broker-level throttles on brokers 1,3" in out
    assert not env.zk.exists(drain_path(3))
    for b in (1, 3):
        assert _configs(env, f"/config/brokers/{b}") == {}
    ((_, sent),) = env.commands()
    assert isinstance(sent, AlterTopicConfig)
    assert (sent.topic, sent.configs, sent.delete_configs) == (
        "orders",
        (),
        ("follower.replication.throttled.replicas", "leader.replication.throttled.replicas"),
    )


def test_cancelling_a_drain_without_a_throttle_leaves_the_throttles(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    # the rates were set by someone else (a reassignment of the operator's): not the drain's to clear
    write_tree(env.zk)
    env.zk.create(drain_path(3), DrainRecord(10, -1).encode(), makepath=True)
    env.zk.create("/config/brokers/1", json.dumps({"version": 1, "config": RATES}).encode(), makepath=True)
    assert main(env.args("brokers", "--cancel-drain", "3")) == 0
    assert "Clearing" not in capsys.readouterr().out
    assert _configs(env, "/config/brokers/1") == RATES


@pytest.mark.parametrize("action", ["--drain", "--cancel-drain", "--cordon", "--uncordon"])
def test_no_wait_is_refused_naming_the_option(env: Env, capsys: pytest.CaptureFixture[str], action: str) -> None:
    # a drain's rounds run in the tool and a cordon is the tool's own write: there is nothing to fire and forget
    write_tree(env.zk)
    env.zk.create(drain_path(3), DrainRecord(10, -1).encode(), makepath=True)
    assert main(env.args("brokers", action, "3", "--no-wait", "--timeout", "2")) == 2
    err = capsys.readouterr().err
    assert err.startswith("livectl brokers: error: --no-wait: "), err
    assert not env.zk.exists(CORDONED_BROKERS)  # nothing was done
    assert env.zk.exists(drain_path(3))


def _orders(
    env: Env, partitions: dict[str, list[int]], adding: dict[str, list[int]], removing: dict[str, list[int]]
) -> None:
    znode = {"version": 3, "partitions": partitions, "adding_replicas": adding, "removing_replicas": removing}
    env.zk.set("/brokers/topics/orders", json.dumps(znode).encode())


def test_a_drain_left_only_with_moves_waiting_for_a_dead_broker_ends_naming_it(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    # broker 3's only partition left, orders-2, has its other replica on broker 4, which is not registered: a move
    # replacing 3 would keep 4 in its target and never complete (Kafka completes a move with every target replica
    # in the ISR). The drain starts none, and ends at once naming the partition and the broker, instead of
    # waiting out its timeout with the move hanging (exit 1; the drain stays recorded to be run again)
    write_tree(env.zk)
    _orders(env, {"0": [1, 2], "1": [2, 1], "2": [3, 4]}, {}, {})
    started = time.monotonic()
    assert main(env.args("brokers", "--drain", "3", "--timeout", "60")) == 1
    assert time.monotonic() - started < 30
    err = capsys.readouterr().err
    assert (
        "the drain of broker 3 cannot go on: 1 partition(s) wait for brokers that are not alive: orders-2 (broker 4)"
        in err
    )
    assert "bring those brokers back, or move those partitions' replicas off them" in err
    assert env.zk.exists(drain_path(3))


def test_a_move_whose_new_broker_died_is_replanned_onto_a_live_broker(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    # the drain of 3 had moved orders-2 onto 4 (origin 3,1; target 4,1); broker 4 is gone. The next round
    # supersedes the move with a live broker in 4's place (2: 1 is a replica, 3 the drained one), and the stand-in
    # controller applies it to ZooKeeper as the controller would; then the move is in flight on live brokers
    write_tree(env.zk)
    _orders(env, {"0": [1, 2], "1": [2, 1], "2": [4, 1, 3]}, {"2": [4]}, {"2": [3]})
    env.zk.create(drain_path(3), DrainRecord(10, -1).encode(), makepath=True)

    def controller() -> None:
        c = env.consumer(env.admin)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            recs = [r for rs in c.poll(timeout_ms=200).values() for r in rs]
            if recs:
                ev = event_from_json(recs[0].value)
                assert isinstance(ev, ReassignPartitions)
                _orders(env, {"0": [1, 2], "1": [2, 1], "2": [2, 1, 3]}, {"2": [2]}, {"2": [3]})
                result = AdminResult(ev.request_id, ev.TYPE, AdminStatus.IN_PROGRESS, None, "", {})
                value = encode_decision(result) | {"batch_id": 10, "controller_epoch": 3}
                p = KafkaProducer(bootstrap_servers=env.bootstrap)
                p.send(env.results, key=ev.request_id.encode(), value=json.dumps(value).encode())
                p.flush()
                p.close()
                break
        c.close()

    player = Player(controller)
    player.start()
    # the re-planned move stays in flight (nobody catches it up here): the drain runs out of time, exit 3
    assert main(env.args("brokers", "--drain", "3", "--timeout", "4")) == 3
    player.join(5)
    out = capsys.readouterr().out
    assert "Re-planned the move of orders-2 off broker 3: broker 4 is not alive; target 2,1." in out
    ((_, sent),) = env.commands()
    assert isinstance(sent, ReassignPartitions)
    assert sent.partitions == (PartitionTarget("orders", 2, (2, 1)),)
