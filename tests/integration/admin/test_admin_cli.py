"""The admin CLI against the real ZooKeeper and the real Kafka-protocol broker.

Each test has its own ZooKeeper chroot (a Kafka-layout tree written with kazoo) and its own topics.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from admin_env import Env, Status, answer, env, write_tree
from waiting import WatchedText

from admin.cli import main
from core.decisions import AdminStatus
from core.events import CreatePartitions, CreateTopic, DeleteTopic, ElectLeaders, ReassignPartitions
from core.model import ElectionType

pytestmark = pytest.mark.integration

__all__ = ["env"]  # the fixture, from admin_env

REPO = Path(__file__).resolve().parents[3]


# ----------------------------------------------------------------------------- publishing commands


def test_create_publishes_core_json_with_a_fresh_request_id(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    """``--no-wait``: fire and forget, nothing answers here and the tool exits 0 saying "submitted"."""
    rc = main(
        env.args(
            "topics", "--create", "--topic", "orders", "--partitions", "3", "--replication-factor", "2",
            "--config", "cleanup.policy=compact", "--config", "unclean.leader.election.enable=true", "--no-wait",
        )
    )  # fmt: skip
    assert rc == 0
    [(key, ev)] = env.commands()
    assert isinstance(ev, CreateTopic)
    assert key == ev.request_id and len(ev.request_id) == 32
    assert (ev.topic, ev.partitions, ev.replication_factor, ev.replica_assignment) == ("orders", 3, 2, ())
    assert dict(ev.configs) == {"cleanup.policy": "compact", "unclean.leader.election.enable": "true"}
    out, err = capsys.readouterr()
    assert ev.request_id in err
    assert out == "Creation of topic orders submitted.\n"


def test_create_with_replica_assignment_and_other_commands(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    write_tree(env.zk)
    fire = "--no-wait"
    assert main(env.args("topics", "--create", "--topic", "pay", "--replica-assignment", "1:2,2:3", fire)) == 0
    assert main(env.args("topics", "--alter", "--topic", "orders", "--partitions", "5", fire)) == 0
    assert main(env.args("topics", "--delete", "--topic", "orders", fire)) == 0
    assert main(env.args("elect-leaders", "--election-type", "preferred", "--all-topic-partitions", fire)) == 0
    argv = ["elect-leaders", "--election-type", "UNCLEAN", "--topic", "orders", "--partition", "2", fire]
    assert main(env.args(*argv)) == 0
    assert capsys.readouterr().out.splitlines() == [
        "Creation of topic pay submitted.",
        "Addition of partitions to topic orders (3 -> 5) submitted.",
        "Deletion of topic orders submitted.",
        "Leader election (PREFERRED) submitted for all partitions.",
        "Leader election (UNCLEAN) submitted for orders-2.",
    ]
    events = [ev for _, ev in env.commands(5)]
    assert isinstance(events[0], CreateTopic)
    assert events[0] == CreateTopic(events[0].request_id, "pay", 2, 2, ((1, 2), (2, 3)))
    assert isinstance(events[1], CreatePartitions) and events[1].total_count == 5
    # config changes wait for the controller's answer: tests/integration/admin/test_admin_configs.py
    assert isinstance(events[2], DeleteTopic) and events[2].topic == "orders"
    assert isinstance(events[3], ElectLeaders) and events[3].election_type is ElectionType.PREFERRED
    assert events[3].partitions == ()
    assert isinstance(events[4], ElectLeaders) and events[4].election_type is ElectionType.UNCLEAN
    assert [str(tp) for tp in events[4].partitions] == ["orders-2"]


def test_invalid_input_names_the_option_and_exits_2(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    write_tree(env.zk)
    cases = [
        (["topics", "--create", "--topic", "x", "--partitions", "0", "--replication-factor", "1"], "--partitions"),
        (["topics", "--create", "--topic", "bad name", "--partitions", "1", "--replication-factor", "1"], "--topic"),
        (["topics", "--create", "--topic", "x", "--partitions", "1"], "--replication-factor: is required"),
        (["topics", "--create", "--topic", "x", "--replica-assignment", "1:a"], "--replica-assignment"),
        (["topics", "--alter", "--topic", "orders", "--partitions", "2"], "can only be increased"),
        (["topics", "--create", "--topic", "x", "--partitions", "1", "--replication-factor", "1", "--config", "k"],
         "--config: expected KEY=VALUE"),
        (["elect-leaders", "--election-type", "preferred", "--topic", "orders"], "--partition: is required"),
    ]  # fmt: skip
    for argv, expected in cases:
        assert main(env.args(*argv)) == 2, argv
        assert expected in capsys.readouterr().err
    assert env.read(env.admin, 1, timeout=1.0) == []  # nothing was published


def test_existing_topic_is_refused_unless_if_not_exists(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    write_tree(env.zk)
    argv = ["topics", "--create", "--topic", "orders", "--partitions", "1", "--replication-factor", "1"]
    assert main(env.args(*argv)) == 1
    assert "Topic 'orders' already exists." in capsys.readouterr().err
    assert main(env.args(*argv, "--if-not-exists")) == 0
    assert main(env.args("topics", "--delete", "--topic", "nope")) == 1


# ----------------------------------------------------------------------------- reading ZooKeeper


def test_list_and_describe_read_kafkas_layout(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    write_tree(env.zk)
    assert main(env.args("topics", "--list", write=False)) == 0
    assert capsys.readouterr().out.splitlines() == ["old - marked for deletion", "orders"]
    assert main(env.args("topics", "--describe", "--topic", "orders", write=False)) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (
        "Topic: orders\tTopicId: q1w2e3r4t5y6u7i8o9p0aa\tPartitionCount: 3\tReplicationFactor: 2\t"
        "Configs: cleanup.policy=compact"
    )
    assert lines[1] == "\tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1,2"
    assert lines[2] == "\tTopic: orders\tPartition: 1\tLeader: 2\tReplicas: 2,3,1\tIsr: 2\tAdding Replicas: 1"
    assert lines[3] == "\tTopic: orders\tPartition: 2\tLeader: none\tReplicas: 3,4\tIsr: 3\tOffline: 4"
    assert main(env.args("topics", "--describe", "--topic", "ord.*", "--under-replicated-partitions", write=False)) == 0
    under = capsys.readouterr().out.splitlines()
    assert [ln.split("\t")[2] for ln in under] == ["Partition: 1", "Partition: 2"]
    assert main(env.args("topics", "--describe", "--topic", "orders", "--unavailable-partitions", write=False)) == 0
    assert [ln.split("\t")[2] for ln in capsys.readouterr().out.splitlines()] == ["Partition: 2"]
    assert main(env.args("topics", "--describe", "--topic", "missing", write=False)) == 1


def test_brokers_list_and_controller_status(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(env.args("controller", "status", write=False)) == 1  # no controller yet
    assert "Active controller: none" in capsys.readouterr().out
    write_tree(env.zk)
    assert main(env.args("brokers", "list", write=False)) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["ID", "EPOCH", "RACK", "ENDPOINTS"]
    assert [ln.split()[0] for ln in out[1:]] == ["1", "2", "3"]
    assert "PLAINTEXT://127.0.0.1:9091" in out[1]
    assert main(env.args("controller", "status", write=False)) == 0
    assert capsys.readouterr().out.splitlines() == [
        "Active controller: 7",
        "Elected at:        2023-11-14T22:13:20.000Z",
        "Controller epoch:  5 (zkVersion 0)",
    ]
    assert main(env.args("controller", "status", "--json", write=False)) == 0
    assert json.loads(capsys.readouterr().out) == {
        "broker_id": 7,
        "timestamp": "1700000000000",
        "elected_at": "2023-11-14T22:13:20.000Z",
        "epoch": 5,
        "epoch_zk_version": 0,
    }


def test_brokers_list_min_fails_below_the_count(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    """``--min N`` is a healthcheck: exit 1 with the count on stderr below N, 0 at or above it."""
    assert main(env.args("brokers", "list", "--min", "1", write=False)) == 1
    captured = capsys.readouterr()
    assert "no brokers registered" in captured.out
    assert "0 broker(s) registered under /brokers/ids, fewer than --min 1" in captured.err
    assert main(env.args("brokers", "list", "--min", "0", write=False)) == 0
    capsys.readouterr()
    write_tree(env.zk)  # brokers 1, 2, 3
    assert main(env.args("brokers", "list", "--min", "3", write=False)) == 0
    assert [ln.split()[0] for ln in capsys.readouterr().out.splitlines()[1:]] == ["1", "2", "3"]
    assert main(env.args("brokers", "list", "--min", "4", "--json", write=False)) == 1
    captured = capsys.readouterr()
    assert sorted(json.loads(captured.out)) == ["1", "2", "3"]
    assert "3 broker(s) registered under /brokers/ids, fewer than --min 4" in captured.err
    env.zk.delete("/brokers/ids/3")
    assert main(env.args("brokers", "list", "--min", "3", write=False)) == 1
    assert "fewer than --min 3" in capsys.readouterr().err
    assert main(env.args("brokers", "list", "--min", "-1", write=False)) == 2
    assert "error: --min: must be 0 or more, got -1" in capsys.readouterr().err


def test_reassign_generate_execute_verify(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    write_tree(env.zk)
    move = env.tmp / "move.json"
    move.write_text('{"version":1,"topics":[{"topic":"orders"}]}')
    assert (
        main(env.args("reassign", "--generate", "--topics-to-move-json-file", str(move), "--broker-list", "1,2,3")) == 0
    )
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "Current partition replica assignment"
    assert out[3] == "Proposed partition reassignment configuration"
    proposed = json.loads(out[4])
    assert [e["partition"] for e in proposed["partitions"]] == [0, 1, 2]
    assert all(len(e["replicas"]) == 2 and set(e["replicas"]) <= {1, 2, 3} for e in proposed["partitions"])
    assert proposed["partitions"][0]["log_dirs"] == ["any", "any"]

    plan = env.tmp / "plan.json"
    plan.write_text(out[4])
    # orders-1 is being reassigned already: Kafka's tool refuses unless --additional
    assert main(env.args("reassign", "--execute", "--reassignment-json-file", str(plan))) == 1
    assert "Cannot execute because there is an existing partition assignment" in capsys.readouterr().err
    t = answer(env, [(AdminStatus.IN_PROGRESS, None, {"partitions": {"orders-0": {"error": "NONE"}}})])
    argv = ["reassign", "--execute", "--additional", "--reassignment-json-file", str(plan), "--timeout", "20"]
    assert main(env.args(*argv)) == 0
    t.join(5)
    [(_, ev)] = env.commands()
    assert isinstance(ev, ReassignPartitions)
    assert [(t.topic, t.partition, list(t.replicas)) for t in ev.partitions] == [
        (e["topic"], e["partition"], e["replicas"]) for e in proposed["partitions"]
    ]
    capsys.readouterr()

    done = env.tmp / "verify.json"
    done.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [
                    {"topic": "orders", "partition": 0, "replicas": [1, 2]},
                    {"topic": "orders", "partition": 1, "replicas": [2, 3, 1]},
                ],
            }
        )
    )
    assert main(env.args("reassign", "--verify", "--reassignment-json-file", str(done))) == 3
    lines = capsys.readouterr().out.splitlines()[1:]
    assert lines[:2] == [
        "Reassignment of partition orders-0 is completed.",
        "Reassignment of partition orders-1 is still in progress.",
    ]
    # then the data moved, from the brokers' log-size reports: none here (no broker runs)
    assert lines[2:4] == ["", "Data moved (the brokers' log sizes, DescribeLogDirs):"], lines
    assert lines[4].startswith("orders-1: ") and "unknown" in lines[4], lines


def test_bad_reassignment_file_gives_a_clear_error_and_exit_code_2(env: Env) -> None:
    write_tree(env.zk)
    bad = env.tmp / "bad.json"
    bad.write_text('{"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[1,1]}]}')
    proc = subprocess.run(
        [sys.executable, "-m", "admin", *env.args("reassign", "--execute", "--reassignment-json-file", str(bad))],
        cwd=REPO,
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert f"{bad}: partitions[0].replicas: must not repeat a broker id, got [1, 1]" in proc.stderr
    unknown = env.tmp / "unknown.json"
    unknown.write_text('{"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[1,9]}]}')
    assert main(env.args("reassign", "--execute", "--reassignment-json-file", str(unknown))) == 2
    notjson = env.tmp / "notjson.json"
    notjson.write_text("{")
    assert main(env.args("reassign", "--cancel", "--reassignment-json-file", str(notjson))) == 2
    assert env.read(env.admin, 1, timeout=1.0) == []


# ----------------------------------------------------------------------------- waiting for the answer


def test_wait_follows_in_progress_until_ok(
    env: Env, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    write_tree(env.zk)
    err = WatchedText(sys.stderr)
    monkeypatch.setattr(sys, "stderr", err)
    t = answer(
        env,
        [
            # the first answer in the text form a controller before details became objects wrote
            (AdminStatus.IN_PROGRESS, None, '{"done":1,"total":3}'),
            (AdminStatus.IN_PROGRESS, None, {"done": 2, "total": 3}),
            (AdminStatus.OK, None, {}),
        ],
        # the next answer only once the tool has drawn this one: each progress step is shown
        between=lambda i: err.wait_for(f"{i + 1}/3 in_progress"),
    )
    argv = ["topics", "--create", "--topic", "pay", "--partitions", "3", "--replication-factor", "1", "--wait"]
    assert main(env.args(*argv, "--timeout", "20")) == 0
    t.join(5)
    captured = capsys.readouterr()
    assert "Created topic pay." in captured.out
    assert "1/3" in captured.err and "2/3" in captured.err and "ok" in captured.err


def test_a_refusal_is_exit_1_with_the_reason_in_one_line_without_any_option(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    """The answer is awaited by default, as kafka-topics awaits its response; ``--wait`` does the same."""
    reason = "Replication factor: 9 larger than available brokers: 3."
    for i, extra in enumerate(((), ("--wait",))):
        t = answer(env, [(AdminStatus.ERROR, "INVALID_REPLICATION_FACTOR", {})], message=reason, skip=i)
        argv = ["topics", "--create", "--topic", "pay", "--partitions", "3", "--replication-factor", "9", *extra]
        assert main(env.args(*argv, "--timeout", "20")) == 1
        t.join(5)
        out, err = capsys.readouterr()
        assert out == ""
        assert err.splitlines()[-1] == f"livectl topics: error: INVALID_REPLICATION_FACTOR: {reason}", err


def test_a_deletion_is_answered_when_it_starts_and_followed_with_wait(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kafka's DeleteTopics answers once the deletion started: so does the tool by default (exit 0 on the
    controller's ``in_progress``); ``--wait`` follows it to the controller's ``ok``."""
    write_tree(env.zk)
    started: Status = (AdminStatus.IN_PROGRESS, None, {})
    done: Status = (AdminStatus.OK, None, {})
    t = answer(env, [started])
    assert main(env.args("topics", "--delete", "--topic", "orders", "--timeout", "20")) == 0
    t.join(5)
    assert capsys.readouterr().out == "Topic orders is marked for deletion.\n"
    t = answer(env, [started, done], skip=1)
    assert main(env.args("topics", "--delete", "--topic", "orders", "--wait", "--timeout", "20")) == 0
    t.join(5)
    assert capsys.readouterr().out == "Topic orders deleted.\n"


def test_wait_ignores_results_of_a_controller_already_replaced(
    env: Env, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The new controller (epoch 4) answers first; a late "ok" from the fenced one (epoch 3) must not end
    the wait; the new controller's final answer does."""
    err = WatchedText(sys.stderr)
    monkeypatch.setattr(sys, "stderr", err)
    t = answer(
        env,
        [
            (AdminStatus.IN_PROGRESS, None, {"done": 1, "total": 3}),
            (AdminStatus.OK, None, {}),
            (AdminStatus.ERROR, "INVALID_REPLICATION_FACTOR", {}),
        ],
        epochs=[4, 3, 4],
        # the stale "ok" only once the tool has taken the new controller's first answer; the final error is
        # the later marker: on the same partition, the "ok" before it has been read when it ends the wait
        between=lambda i: None if i else err.wait_for("1/3 in_progress"),
    )
    argv = ["topics", "--create", "--topic", "pay", "--partitions", "3", "--replication-factor", "9", "--wait"]
    assert main(env.args(*argv, "--timeout", "20")) == 1
    t.join(5)
    assert "INVALID_REPLICATION_FACTOR: step 2" in capsys.readouterr().err


def test_no_answer_in_time_is_exit_3_naming_the_request_id(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    for extra in ((), ("--wait",)):
        argv = ["elect-leaders", "--election-type", "PREFERRED", "--all-topic-partitions", *extra, "--timeout", "1"]
        assert main(env.args(*argv)) == 3
        [(rid, _ev)] = env.commands(len(extra) + 1)[len(extra) :]
        last = capsys.readouterr().err.splitlines()[-1]
        assert last == (
            f"livectl elect-leaders: request {rid} not finished within 1s (no answer yet); the controller may "
            f"still carry it out: look it up later with `livectl audit --request-id {rid}`"
        )


def test_no_wait_and_wait_together_are_invalid(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    write_tree(env.zk)
    argv = ["elect-leaders", "--election-type", "PREFERRED", "--all-topic-partitions", "--wait", "--no-wait"]
    assert main(env.args(*argv)) == 2
    assert "livectl elect-leaders: error: --no-wait: can't be used with --wait" in capsys.readouterr().err
    # a topic config change waits: its /config/changes notification follows the controller's answer
    argv = ["topics", "--alter", "--topic", "orders", "--config", "retention.ms=1000", "--no-wait"]
    assert main(env.args(*argv)) == 2
    assert "--no-wait: a topic config change waits for the controller's answer" in capsys.readouterr().err
    argv = [
        "configs",
        "--entity-type",
        "topics",
        "--entity-name",
        "orders",
        "--alter",
        "--add-config",
        "retention.ms=1",
    ]
    assert main(env.args(*argv, "--no-wait")) == 2
    assert env.read(env.admin, 1, timeout=1.0) == []  # nothing was published


# ----------------------------------------------------------------------------- Kafka client security


def test_command_config_reaches_the_kafka_clients(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    """Kafka's --command-config: the properties go to the producer and the result follower. The local
    broker speaks PLAINTEXT only (no SASL/SSL broker can be had here), so the file names that protocol;
    a malformed file is refused with exit 2 before anything is sent."""
    good = env.tmp / "client.properties"
    good.write_text("# the local broker\nsecurity.protocol=PLAINTEXT\nssl.endpoint.identification.algorithm=\n")
    t = answer(env, [(AdminStatus.OK, None, {})])
    argv = ["topics", "--create", "--topic", "sec", "--partitions", "1", "--replication-factor", "1"]
    assert main(env.args(*argv, "--command-config", str(good), "--wait", "--timeout", "20")) == 0
    t.join(5)
    [(_key, ev)] = env.commands()
    assert isinstance(ev, CreateTopic) and ev.topic == "sec"

    bad = env.tmp / "bad.properties"
    bad.write_text("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n")
    capsys.readouterr()
    assert main(env.args(*argv, "--command-config", str(bad))) == 2
    err = capsys.readouterr().err
    assert "--command-config" in err and "sasl.jaas.config" in err
    assert main(env.args(*argv, "--command-config", str(env.tmp / "missing.properties"))) == 2
    assert len(env.read(env.admin, 2, timeout=1.0)) == 1, "nothing more was published"
