"""The simulator's own CLI (``livectl-simbrokers``, :mod:`simbrokers.ctl`). ``shutdown N --wait`` reports
the controlled shutdown's real outcome: the controller's last answer
to the broker (played here on a real requests topic) decides the exit code."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from admin_env import Env, env, write_tree
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from core.kafka.envelope import encode_request
from core.kafka.requests import RequestApi
from simbrokers.control import parse_control
from simbrokers.ctl import main
from sinks.local_services import DEFAULT_RUN_DIR, save_records

pytestmark = pytest.mark.integration
__all__ = ["env"]


def play_broker(env: Env, requests: str, answers: list[tuple[int, int, list[tuple[str, int]]]]) -> threading.Thread:
    """Broker 2 receives the shutdown command, the controller answers (epoch, batch, remaining) in turn,
    then the broker deregisters, as a simulated broker does whether its shutdown succeeded or not."""

    def run() -> None:
        c = env.consumer(env.control)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            recs = [r for rs in c.poll(timeout_ms=200).values() for r in rs]
            if recs and parse_control(recs[0].key, recs[0].value).command == "shutdown":
                break
        c.close()
        p = KafkaProducer(bootstrap_servers=env.bootstrap)
        for batch, error, remaining in answers:
            body: dict[str, Any] = {
                "errorCode": error,
                "remainingPartitions": [{"topicName": t, "partitionIndex": i} for t, i in remaining],
            }
            key, value = encode_request(2, RequestApi.CONTROLLED_SHUTDOWN_RESPONSE, 3, batch, body)
            p.send(requests, key=key, value=value)
            # an answer for another broker is not this one's
            other_key, other_value = encode_request(
                1, RequestApi.CONTROLLED_SHUTDOWN_RESPONSE, 3, batch, {"errorCode": 0}
            )
            p.send(requests, key=other_key, value=other_value)
        p.flush()
        p.close()
        # the answers are on the topic before the registration goes: the tool reads to the topic's end once
        # it sees it gone, so it judges by them however soon the broker deregisters after them
        env.zk.delete("/brokers/ids/2")

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


@pytest.fixture()
def requests_topic(env: Env) -> str:
    name = env.admin.replace(".admin", ".requests")
    admin = KafkaAdminClient(bootstrap_servers=env.bootstrap)
    admin.create_topics([NewTopic(name, 1, 1)])
    admin.close()
    return name


def shutdown(env: Env, requests: str) -> int:
    argv = ["shutdown", "2", "--wait", "--timeout", "30"]
    return main(env.args(*argv, "--control-topic", env.control, "--requests-topic", requests, write=False))


def test_failed_controlled_shutdown_is_exit_1_with_the_partitions(
    env: Env, requests_topic: str, capsys: pytest.CaptureFixture[str]
) -> None:
    write_tree(env.zk)
    # two attempts; the last answer (batch 8, two messages of two buckets) still lists partitions
    t = play_broker(env, requests_topic, [(7, 0, [("orders", 1)]), (8, 0, [("orders", 1)]), (8, 0, [("pay", 0)])])
    assert shutdown(env, requests_topic) == 1
    t.join(5)
    err = capsys.readouterr().err
    assert "Controlled shutdown of broker 2 failed; it deregistered uncleanly." in err
    assert "Partitions it could not move leadership of: orders-1,pay-0" in err


def test_successful_controlled_shutdown_after_a_retry_is_exit_0(
    env: Env, requests_topic: str, capsys: pytest.CaptureFixture[str]
) -> None:
    write_tree(env.zk)
    t = play_broker(env, requests_topic, [(7, 0, [("orders", 1)]), (9, 0, [])])
    assert shutdown(env, requests_topic) == 0
    t.join(5)
    assert "Broker 2 completed its controlled shutdown and deregistered." in capsys.readouterr().out


def test_no_answer_at_all_is_a_failure(env: Env, requests_topic: str, capsys: pytest.CaptureFixture[str]) -> None:
    write_tree(env.zk)
    t = play_broker(env, requests_topic, [])
    assert shutdown(env, requests_topic) == 1
    t.join(5)
    assert "no answer from the controller" in capsys.readouterr().err


def test_broker_shutdown_publishes_a_control_message(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    write_tree(env.zk)
    assert main(env.args("shutdown", "2", "--control-topic", env.control, write=False)) == 0
    argv = ["fault", "3", "slow-follower", "--fetch-interval-ms", "5000", "--control-topic", env.control]
    assert main(env.args(*argv, write=False)) == 0
    msgs = [parse_control(k, v) for k, v in env.read(env.control, 2)]
    assert [(m.broker_id, m.command, m.fetch_interval_ms) for m in msgs] == [
        (2, "shutdown", None),
        (3, "slow-follower", 5000),
    ]
    assert main(env.args("kill", "9", "--control-topic", env.control, write=False)) == 1
    assert "broker 9 is not registered" in capsys.readouterr().err
    assert main(env.args("fault", "3", "slow-follower", "--control-topic", env.control, write=False)) == 2


def test_without_addresses_it_connects_where_local_up_recorded(
    env: Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No ``--zookeeper`` / ``--bootstrap-server`` and no environment: the services ``livectl local up``
    recorded in ``run/local/services.json`` of the working directory, as for the admin commands."""
    write_tree(env.zk)
    monkeypatch.delenv("LIVECTL_ZOOKEEPER", raising=False)
    monkeypatch.delenv("LIVECTL_BOOTSTRAP_SERVER", raising=False)
    records = {"zookeeper": {"address": env.zk_connect}, "broker": {"address": env.bootstrap}}
    save_records(tmp_path / DEFAULT_RUN_DIR, records)
    monkeypatch.chdir(tmp_path)
    assert main(["fault", "1", "disk-failure", "--control-topic", env.control]) == 0
    assert [(m.broker_id, m.command) for m in (parse_control(k, v) for k, v in env.read(env.control, 1))] == [
        (1, "disk-failure")
    ]
