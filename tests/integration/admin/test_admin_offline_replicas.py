"""``topics --describe`` ``Offline:`` against real ZooKeeper, with the tree written as the controller writes
it: core's decisions applied by the real ZooKeeper sink (fenced, in order). Offline = replicas on brokers
that are not registered plus replicas on a failed log dir (``/livectl/offline_replicas/<topic>``)."""

from __future__ import annotations

import json

import pytest
from admin_env import Env, env

from admin.cli import main
from core.controller import ControllerState, initial_state, step
from core.decisions import AdminResult, AdminStatus, ZkWrite
from core.events import (
    BrokerFailure,
    BrokerStartup,
    ControllerFailover,
    CreateTopic,
    Event,
    LeaderAndIsrResponse,
    LogDirFailure,
    PartitionError,
)
from core.kafka.zkdata import encode_broker_registration
from core.kafka.zksnapshot import snapshot_from_znodes
from core.model import Broker, Endpoint
from sinks.ports import Fence
from sinks.zookeeper import ZooKeeperSink
from streaming.zk.snapshot_reader import read_snapshot

pytestmark = pytest.mark.integration
__all__ = ["env"]

STORAGE = 56  # KAFKA_STORAGE_ERROR


class Controller:
    """core's controller whose ZooKeeper writes go through the real sink, one micro-batch per step."""

    def __init__(self, env: Env) -> None:
        self.zk = env.zk
        self.zk.create("/controller_epoch", b"1")
        self.sink = ZooKeeperSink(self.zk, Fence(1, 0), "offline-test")
        self.state: ControllerState = initial_state()
        self.batch = 0

    def run(self, *events: Event) -> list[AdminResult]:
        self.state, decisions = step(self.state, events)
        result = self.sink.write_batch(self.batch, [d for d in decisions if isinstance(d, ZkWrite)])
        assert result.failed == ()
        self.batch += 1
        return [d for d in decisions if isinstance(d, AdminResult)]

    def register(self, b: int) -> Broker:
        self.zk.create(
            f"/brokers/ids/{b}", encode_broker_registration("127.0.0.1", 9090 + b, None, 1).encode(), makepath=True
        )
        return Broker(b, 100 + b, None, (Endpoint("PLAINTEXT", "127.0.0.1", 9090 + b),))


def describe(env: Env, capsys: pytest.CaptureFixture[str], *options: str) -> list[str]:
    assert main(env.args("topics", "--describe", "--topic", "t", *options, write=False)) == 0
    return capsys.readouterr().out.splitlines()


def fields(line: str) -> dict[str, str]:
    return dict(f.split(": ", 1) for f in line.strip("\t").split("\t"))


def test_offline_is_dead_brokers_plus_failed_log_dirs(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    c = Controller(env)
    brokers = [c.register(b) for b in (1, 2, 3)]
    c.run(ControllerFailover(0, snapshot_from_znodes({}, brokers, 1, 0)))
    (created,) = c.run(CreateTopic("c", "t", 3, 3, ((1, 2, 3), (2, 3, 1), (3, 1, 2)), ()))
    assert created.status is AdminStatus.OK
    # broker 1 loses the log dir holding t-0 and t-1; broker 3 dies (its registration is gone)
    c.run(LogDirFailure(1))
    c.run(LeaderAndIsrResponse(1, (PartitionError("t", 0, STORAGE), PartitionError("t", 1, STORAGE))))
    assert json.loads(env.zk.get("/livectl/offline_replicas/t")[0]) == {
        "version": 1,
        "partitions": {"0": [1], "1": [1]},
    }
    # what a new controller reads lists the record (streaming.zk.snapshot_reader, the real reader)
    assert read_snapshot(env.zk).offline_replica_topics == ("t",)
    env.zk.delete("/brokers/ids/3")
    c.run(BrokerFailure(3))

    lines = [fields(ln) for ln in describe(env, capsys)[1:]]
    assert [(p["Partition"], p["Leader"], p["Isr"], p.get("Offline")) for p in lines] == [
        ("0", "2", "2", "1,3"),
        ("1", "2", "2", "3,1"),
        ("2", "1", "1,2", "3"),
    ]
    doc = json.loads("\n".join(describe(env, capsys, "--output", "json")))
    assert [p["offline_replicas"] for p in doc["topics"][0]["partitions"]] == [[1, 3], [3, 1], [3]]
    # the controller moved leadership off the failed dir and shrank the ISR in the same batch, so
    # Kafka's filters agree with Offline: all under-replicated, none unavailable
    assert [fields(ln)["Partition"] for ln in describe(env, capsys, "--under-replicated-partitions")] == ["0", "1", "2"]
    assert describe(env, capsys, "--unavailable-partitions") == []

    # broker 1's dir for t-1 is back (its LeaderAndIsr answer is clean): only the dead broker remains there
    c.run(LeaderAndIsrResponse(1, (PartitionError("t", 1, 0),)))
    assert json.loads(env.zk.get("/livectl/offline_replicas/t")[0]) == {"version": 1, "partitions": {"0": [1]}}
    assert [fields(ln).get("Offline") for ln in describe(env, capsys)[1:]] == ["1,3", "3", "3"]
    # broker 1 restarts: it re-registers (a newer epoch) with every dir online and the record goes
    env.zk.delete("/brokers/ids/1")
    c.register(1)
    c.run(BrokerStartup(1, 500, None, brokers[0].endpoints))
    assert not env.zk.exists("/livectl/offline_replicas/t")
    assert [fields(ln).get("Offline") for ln in describe(env, capsys)[1:]] == ["3", "3", "3"]


def test_malformed_record_is_refused_naming_the_znode(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    c = Controller(env)
    brokers = [c.register(b) for b in (1, 2)]
    c.run(ControllerFailover(0, snapshot_from_znodes({}, brokers, 1, 0)))
    c.run(CreateTopic("c", "t", 1, 2, ((1, 2),), ()))
    env.zk.create("/livectl/offline_replicas/t", b'{"version":1,"partitions":{"0":"1"}}', makepath=True)
    assert main(env.args("topics", "--describe", "--topic", "t", write=False)) == 2
    err = capsys.readouterr().err
    assert "/livectl/offline_replicas/t: partitions.0" in err and "broker ids" in err
