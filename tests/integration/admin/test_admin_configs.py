"""``livectl configs`` and topic config changes against real ZooKeeper and the real broker (the controller's
answers played by :func:`answer`)."""

from __future__ import annotations

import json

import pytest
from admin_env import Env, answer, env, write_tree

from admin.cli import main
from core.decisions import AdminStatus
from core.events import AlterTopicConfig

pytestmark = pytest.mark.integration
__all__ = ["env"]


def notifications(env: Env) -> list[dict[str, object]]:
    if not env.zk.exists("/config/changes"):
        return []
    names = sorted(env.zk.get_children("/config/changes"))
    assert all(n.startswith("config_change_") and len(n) == len("config_change_") + 10 for n in names)
    return [json.loads(env.zk.get(f"/config/changes/{n}")[0]) for n in names]


def test_broker_and_default_configs_are_kafkas_znodes(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    write_tree(env.zk)
    rate = "leader.replication.throttled.rate=1000,follower.replication.throttled.rate=2000"
    assert (
        main(env.args("configs", "--entity-type", "brokers", "--entity-name", "1", "--alter", "--add-config", rate))
        == 0
    )
    assert "Completed updating config for broker 1." in capsys.readouterr().out
    assert json.loads(env.zk.get("/config/brokers/1")[0]) == {
        "version": 1,
        "config": {"follower.replication.throttled.rate": "2000", "leader.replication.throttled.rate": "1000"},
    }
    argv = [
        "configs",
        "--entity-type",
        "brokers",
        "--entity-default",
        "--alter",
        "--add-config",
        "min.insync.replicas=2",
    ]
    assert main(env.args(*argv)) == 0
    assert json.loads(env.zk.get("/config/brokers/<default>")[0])["config"] == {"min.insync.replicas": "2"}
    argv = ["configs", "--entity-type", "brokers", "--entity-name", "1", "--alter"]
    assert main(env.args(*argv, "--delete-config", "leader.replication.throttled.rate")) == 0
    assert json.loads(env.zk.get("/config/brokers/1")[0])["config"] == {"follower.replication.throttled.rate": "2000"}
    assert notifications(env) == [
        {"version": 2, "entity_path": "brokers/1"},
        {"version": 2, "entity_path": "brokers/<default>"},
        {"version": 2, "entity_path": "brokers/1"},
    ]
    capsys.readouterr()
    assert main(env.args("configs", "--entity-type", "brokers", "--describe", write=False)) == 0
    assert capsys.readouterr().out.splitlines() == [
        "Configs for broker '1' are follower.replication.throttled.rate=2000",
        "Configs for default broker are min.insync.replicas=2",
    ]
    argv = ["configs", "--entity-type", "brokers", "--entity-name", "1", "--describe", "--output", "json"]
    assert main(env.args(*argv, write=False)) == 0
    assert json.loads(capsys.readouterr().out) == {
        "entity_type": "brokers",
        "entities": [{"name": "1", "configs": {"follower.replication.throttled.rate": "2000"}}],
    }


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--entity-type", "brokers", "--entity-name", "1", "--alter",
          "--add-config", "leader.replication.throttled.rate=-1"],
         "leader.replication.throttled.rate: Invalid value -1 for configuration leader.replication.throttled.rate: "
         "Value must be at least 0"),
        (["--entity-type", "brokers", "--entity-name", "1", "--alter", "--add-config", "log.foo=1"],
         "log.foo: Unknown broker config name: log.foo"),
        (["--entity-type", "brokers", "--entity-name", "x", "--alter", "--add-config", "min.insync.replicas=1"],
         "--entity-name: a broker id"),
        (["--entity-type", "brokers", "--entity-name", "1", "--alter", "--delete-config", "min.insync.replicas"],
         "--delete-config: Invalid config(s): min.insync.replicas"),
        (["--entity-type", "topics", "--entity-name", "orders", "--alter", "--add-config", "foo=bar"],
         "foo: Unknown topic config name: foo"),
        (["--entity-type", "topics", "--entity-name", "orders", "--alter", "--add-config", "retention.ms="],
         "retention.ms: Invalid value  for configuration retention.ms: Not a number of type LONG"),
        (["--entity-type", "topics", "--entity-name", "orders", "--alter", "--delete-config", "retention.ms"],
         "--delete-config: Invalid config(s): retention.ms"),
        (["--entity-type", "topics", "--entity-default", "--describe"], "--entity-default: only applies"),
        (["--entity-type", "topics", "--entity-name", "orders", "--alter"], "--alter: needs --add-config"),
    ],
)  # fmt: skip
def test_bad_configs_exit_2_naming_the_key(
    env: Env, capsys: pytest.CaptureFixture[str], argv: list[str], expected: str
) -> None:
    write_tree(env.zk)
    assert main(env.args("configs", *argv)) == 2
    assert expected in capsys.readouterr().err
    assert not env.zk.exists("/config/brokers/1")
    assert notifications(env) == []


def test_topics_create_and_alter_refuse_bad_configs(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    write_tree(env.zk)
    create = ["topics", "--create", "--topic", "t", "--partitions", "1", "--replication-factor", "1"]
    assert main(env.args(*create, "--config", "foo=bar")) == 2
    assert "foo: Unknown topic config name: foo" in capsys.readouterr().err
    argv = ["topics", "--alter", "--topic", "orders", "--partitions", "5", "--config", "retention.ms="]
    assert main(env.args(*argv)) == 2  # checked before the partitions are added
    assert "retention.ms: Invalid value  for configuration retention.ms" in capsys.readouterr().err
    assert env.read(env.admin, 1, timeout=1.0) == []


def test_topic_config_change_waits_for_the_controller_then_notifies(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    write_tree(env.zk)
    t = answer(env, [(AdminStatus.OK, None, {})])
    argv = ["configs", "--entity-type", "topics", "--entity-name", "orders", "--alter"]
    argv += ["--add-config", "retention.ms=1000,cleanup.policy=[compact,delete]", "--delete-config", "cleanup.policy"]
    assert main(env.args(*argv)) == 2  # both added and deleted
    argv = argv[:-2]
    assert main(env.args(*argv, "--timeout", "20")) == 0
    t.join(5)
    assert "Completed updating config for topic orders." in capsys.readouterr().out
    [(_, ev)] = env.commands()
    assert isinstance(ev, AlterTopicConfig)
    assert ev.configs == (("cleanup.policy", "compact,delete"), ("retention.ms", "1000"))
    assert notifications(env) == [{"version": 2, "entity_path": "topics/orders"}]


def test_topic_config_refused_by_the_controller_is_exit_1_without_notification(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    write_tree(env.zk)
    t = answer(env, [(AdminStatus.ERROR, "INVALID_CONFIG", {})])
    argv = ["topics", "--alter", "--topic", "orders", "--delete-config", "cleanup.policy", "--timeout", "20"]
    assert main(env.args(*argv)) == 1
    t.join(5)
    assert "INVALID_CONFIG" in capsys.readouterr().err
    [(_, ev)] = env.commands()
    assert isinstance(ev, AlterTopicConfig) and ev.delete_configs == ("cleanup.policy",) and ev.configs == ()
    assert notifications(env) == []
