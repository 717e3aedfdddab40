"""Simulated broker processes against the real ZooKeeper and the real Kafka-protocol broker.

Each test uses its own ZooKeeper chroot and its own topic names, and plays the controller by writing
requests in the sink's shape to the requests topic and reading the brokers' events.
"""

from __future__ import annotations

import json
import signal
from typing import Any

import pytest
from simbroker_processes import Env, env, registration

from core.events import AlterPartition, ControlledShutdown, LeaderAndIsrResponse
from core.kafka.envelope import encode_envelope
from core.kafka.requests import SHARED_BROKER_ID, Addressee, RequestApi
from simbrokers.control import ControlCommand
from sinks.local_services import DEFAULT_RUN_DIR, save_records

pytestmark = pytest.mark.integration
__all__ = ["env"]  # the fixture (simbroker_processes), for pytest to find here


def lisr(leader: int, epoch: int, isr: list[int], replicas: list[int], live: list[tuple[int, int]]) -> dict[str, Any]:
    return {
        "controllerId": 0,
        "controllerEpoch": 1,
        "brokerEpoch": -1,
        "type": 0,
        "topicStates": [
            {
                "topicName": "orders",
                "topicId": "AAAAAAAAAAAAAAAAAAAAAA",
                "partitionStates": [
                    {
                        "partitionIndex": 0,
                        "controllerEpoch": 1,
                        "leader": leader,
                        "leaderEpoch": epoch,
                        "isr": isr,
                        "partitionEpoch": 0,
                        "replicas": replicas,
                        "addingReplicas": [],
                        "removingReplicas": [],
                        "isNew": True,
                        "leaderRecoveryState": 0,
                    }
                ],
            }
        ],
        "liveLeaders": [{"brokerId": b, "hostName": "127.0.0.1", "port": port} for b, port in live],
    }


def test_brokers_register_answer_leader_and_isr_and_shut_down_on_sigterm(env: Env) -> None:
    proc = env.start("1,2,3")
    env.wait_for(
        lambda: len(env.zk.get_children("/brokers/ids") if env.zk.exists("/brokers/ids") else []) == 3,
        what="3 registrations",
    )
    reg, stat = registration(env, 1)
    assert stat.ephemeralOwner != 0
    assert reg["version"] == 5 and reg["jmx_port"] == -1 and reg["features"] == {}
    assert reg["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}
    assert reg["endpoints"] == [f"PLAINTEXT://127.0.0.1:{reg['port']}"] and reg["host"] == "127.0.0.1"
    assert reg["timestamp"].isdigit() and reg["rack"] is None
    leader_port = reg["port"]

    for b in (1, 2, 3):
        env.send(b, RequestApi.LEADER_AND_ISR, lisr(1, 0, [1, 2, 3], [1, 2, 3], [(1, leader_port)]), batch=1)
    answers = env.wait_events(lambda e: isinstance(e, LeaderAndIsrResponse), count=3)
    assert sorted(e.broker_id for e in answers if isinstance(e, LeaderAndIsrResponse)) == [1, 2, 3]
    assert all(p.error_code == 0 for e in answers if isinstance(e, LeaderAndIsrResponse) for p in e.partitions)

    # a hard kill of one broker: its session closes and the registration vanishes at once
    env.control(ControlCommand(3, "kill"))
    env.wait_for(lambda: env.zk.exists("/brokers/ids/3") is None, what="broker 3 to vanish")

    proc.send_signal(signal.SIGTERM)
    asks = env.wait_events(lambda e: isinstance(e, ControlledShutdown), count=2)
    epochs = {e.broker_id: e.broker_epoch for e in asks if isinstance(e, ControlledShutdown)}
    assert epochs[1] == registration(env, 1)[1].czxid
    # the controller answers broker 1 from two buckets in one batch: one still lists a partition
    env.send(1, RequestApi.CONTROLLED_SHUTDOWN_RESPONSE, {"errorCode": 0, "remainingPartitions": []}, batch=7)
    env.send(
        1,
        RequestApi.CONTROLLED_SHUTDOWN_RESPONSE,
        {"errorCode": 0, "remainingPartitions": [{"topicName": "orders", "partitionIndex": 0}]},
        batch=7,
    )
    env.send(2, RequestApi.CONTROLLED_SHUTDOWN_RESPONSE, {"errorCode": 0, "remainingPartitions": []}, batch=7)
    env.wait_for(lambda: env.zk.exists("/brokers/ids/2") is None, what="broker 2 to deregister")
    assert env.zk.exists("/brokers/ids/1") is not None  # not done: it retries
    retry = env.wait_events(lambda e: isinstance(e, ControlledShutdown) and e.broker_id == 1, timeout=10)
    assert retry
    env.send(1, RequestApi.CONTROLLED_SHUTDOWN_RESPONSE, {"errorCode": 0, "remainingPartitions": []}, batch=8)
    assert proc.wait(20) == 0
    assert env.zk.exists("/brokers/ids/1") is None


def test_followers_in_another_process_fetch_over_tcp_and_a_stuck_one_leaves_the_isr(env: Env) -> None:
    status = env.tmp / "b.json"
    env.start("1", "--replica-lag-time-max-ms", "1500", "--produce-rate", "50")
    env.start("2", "--status-file", str(status))
    env.wait_for(lambda: env.zk.exists("/brokers/ids/1") and env.zk.exists("/brokers/ids/2"), what="registrations")
    leader_port = registration(env, 1)[0]["port"]
    for b in (1, 2):
        env.send(b, RequestApi.LEADER_AND_ISR, lisr(1, 0, [1, 2], [1, 2], [(1, leader_port)]), batch=1)
    env.wait_events(lambda e: isinstance(e, LeaderAndIsrResponse), count=2)

    def follower() -> dict[str, Any]:
        if not status.exists():
            return {}
        return dict(json.loads(status.read_text())["brokers"]["2"]["partitions"].get("orders-0", {}))

    env.wait_for(lambda: follower().get("hw", 0) > 20, what="the follower to replicate and learn the HW")
    assert follower()["role"] == "follower"

    env.control(ControlCommand(2, "stuck-follower"))
    [shrink] = env.wait_events(lambda e: isinstance(e, AlterPartition), timeout=15)
    assert isinstance(shrink, AlterPartition)
    assert (shrink.broker_id, shrink.topic, shrink.partition, shrink.new_isr) == (1, "orders", 0, (1,))
    assert shrink.broker_epoch == registration(env, 1)[1].czxid
    assert (shrink.leader_epoch, shrink.partition_epoch) == (0, 0)


def test_security_options_reach_registrations_and_kafka_clients(env: Env) -> None:
    """--zookeeper-auth / --zookeeper-set-acl: the registration gets Kafka's ACLs (another client cannot
    remove it); --command-config: the Kafka clients take the properties (PLAINTEXT here: the local broker
    has no SASL/SSL), and a malformed file is refused with exit 2."""
    from kazoo.exceptions import NoAuthError
    from kazoo.security import Permissions

    props = env.tmp / "client.properties"
    props.write_text("security.protocol=PLAINTEXT\n")
    env.start("7", "--zookeeper-auth", "digest:brokers:pw", "--zookeeper-set-acl", "--command-config", str(props))
    env.wait_for(lambda: env.zk.exists("/brokers/ids/7") is not None, what="broker 7 registered")
    acls, _ = env.zk.get_acls("/brokers/ids/7")
    assert {(a.id.scheme, a.perms) for a in acls} == {("digest", Permissions.ALL), ("world", Permissions.READ)}
    with pytest.raises(NoAuthError):
        env.zk.set("/brokers/ids/7", b"{}")

    bad = env.tmp / "bad.properties"
    bad.write_text("security.protocol=SASL_SSL\n")
    proc = env.start("8", "--command-config", str(bad))
    assert proc.wait(30) == 2
    assert "--command-config" in env.logs() and "sasl.mechanism" in env.logs()


def test_a_shared_update_metadata_is_applied_by_its_addressees_only(env: Env) -> None:
    status = env.tmp / "shared.json"
    env.start("1,2,3", "--status-file", str(status))
    env.wait_for(
        lambda: all(env.zk.exists(f"/brokers/ids/{b}") for b in (1, 2, 3)) and status.exists(), what="registrations"
    )
    czxid = {b: registration(env, b)[1].czxid for b in (1, 2, 3)}
    body = {"controllerId": 0, "controllerEpoch": 5, "brokerEpoch": -1, "topicStates": [], "liveBrokers": []}
    # one message keyed -1 for brokers 1 and 2 (broker 3 is not addressed), as the request sink writes it
    key, value = encode_envelope(
        SHARED_BROKER_ID,
        RequestApi.UPDATE_METADATA,
        5,
        1,
        json.dumps(body).encode(),
        addressees=(Addressee(1, czxid[1]), Addressee(2, czxid[2])),
    )
    env.producer.send(env.requests, key=key, value=value)
    env.producer.flush()

    def epochs() -> dict[int, int]:
        brokers = json.loads(status.read_text())["brokers"]
        return {int(b): s["controller_epoch"] for b, s in brokers.items()}

    env.wait_for(lambda: epochs()[1] == 5 and epochs()[2] == 5, what="brokers 1 and 2 to apply it")
    # the same status write saw broker 3 after the same message: not addressed, not applied
    assert epochs()[3] == -1


def test_without_addresses_brokers_join_the_services_local_up_recorded(env: Env) -> None:
    """No ``--zookeeper`` / ``--bootstrap-server``, no ``$LIVECTL_*``: the brokers take the addresses
    ``livectl local up`` recorded in ``run/local/services.json`` of their working directory, as the admin
    commands do; they register there and answer on its Kafka."""
    cwd = env.tmp / "cwd"
    save_records(
        cwd / DEFAULT_RUN_DIR, {"zookeeper": {"address": env.zk_connect}, "broker": {"address": env.bootstrap}}
    )
    env.start("5", addresses=False, cwd=cwd)
    env.wait_for(lambda: env.zk.exists("/brokers/ids/5") is not None, what="broker 5 registered")
    port = registration(env, 5)[0]["port"]
    env.send(5, RequestApi.LEADER_AND_ISR, lisr(5, 0, [5], [5], [(5, port)]), batch=1)
    answers = env.wait_events(lambda e: isinstance(e, LeaderAndIsrResponse) and e.broker_id == 5)
    assert answers
