"""``livectl brokers --drain N`` / ``--cancel-drain N`` against the real ZooKeeper and Kafka, with a stand-in
controller (issue 44, item 1): what a cancelled drain leaves behind, and the options the command refuses."""

from __future__ import annotations

import json

import pytest
from admin_env import Env, answer, env, write_tree

from admin.cli import main
from admin.drain import DrainRecord, drain_path
from core.cordon import CORDONED_BROKERS
from core.decisions import AdminStatus
from core.events import AlterTopicConfig

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
