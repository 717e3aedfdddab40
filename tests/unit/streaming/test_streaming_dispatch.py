"""The dispatcher on the in-memory sinks: fencing, replay of a micro-batch, merged admin results, refused
ZooKeeper writes (read again, redone, their requests withheld)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from shell_pipeline import ADMIN, EVENTS, Pipeline, epoch_znode, snapshot_of

from core import decisions as dc
from core import events as ev
from core.codec.events import event_to_json
from core.kafka.requests import RequestApi, WireBody
from core.kafka.zkdata import decode_partition_state
from sinks.errors import ControllerFencedError
from sinks.memory import MemoryZooKeeper
from sinks.ports import Fence
from streaming.query.batch_rows import merge_admin_results
from streaming.query.validation import InputValidator

pytestmark = pytest.mark.unit

_PARTITION_APIS = ("LeaderAndIsr", "UpdateMetadata")


def test_a_fenced_dispatcher_writes_nothing_more(tmp_path: Path, validator: InputValidator) -> None:
    p = Pipeline.failed_over(tmp_path, validator, (1, 2))
    zk = p.zk
    zk.set("/controller_epoch", b"2")  # another controller was elected
    with pytest.raises(ControllerFencedError):
        p.run_batch([(ADMIN, event_to_json(ev.CreateTopic("r", "late", 1, 1)))])
    assert p.dispatcher.fenced and p.dispatcher.metrics["ActiveControllerCount"] == 0
    assert not zk.exists("/brokers/topics/late")
    assert not [m for m in p.requests.messages if m.topic == "livectl.admin-results"]
    with pytest.raises(ControllerFencedError):
        p.dispatcher.dispatch(pd.DataFrame(), 99)


def test_replaying_a_micro_batch_writes_nothing_twice(tmp_path: Path, validator: InputValidator) -> None:
    p = Pipeline.failed_over(tmp_path, validator)
    zk = p.zk
    saved = {b: s.value for b, s in p.states.items()}
    out = p.run_batch([(ADMIN, event_to_json(ev.CreateTopic("r", "t", 2, 3)))])
    tree = zk.snapshot()
    sent = list(p.requests.messages)
    # Spark replays batch 1 from the same state with the same rows
    for b, value in saved.items():
        p.states[b].value = value
    p.dispatcher.dispatch(out, 1)
    assert zk.snapshot() == tree
    assert p.requests.messages == sent


def test_admin_results_of_a_split_command_are_merged() -> None:
    ok = dc.AdminResult("r", "reassign_partitions", dc.AdminStatus.OK, details={"partitions": {"a-0": "NONE"}})
    busy = dc.AdminResult(
        "r", "reassign_partitions", dc.AdminStatus.IN_PROGRESS, details={"partitions": {"b-0": "NONE"}}
    )
    bad = dc.AdminResult("s", "elect_leaders", dc.AdminStatus.ERROR, "ELECTION_NOT_NEEDED", "x")
    fine = dc.AdminResult("s", "elect_leaders", dc.AdminStatus.OK)
    merged = {r.request_id: r for r in merge_admin_results([ok, busy, bad, fine])}
    assert merged["r"].status is dc.AdminStatus.IN_PROGRESS
    assert merged["r"].details_json() == {"partitions": {"a-0": "NONE", "b-0": "NONE"}}
    assert merged["s"].status is dc.AdminStatus.ERROR and merged["s"].error == "ELECTION_NOT_NEEDED"


def test_a_refused_state_write_is_read_again_and_redone(tmp_path: Path, validator: InputValidator) -> None:
    # the dispatcher hands refused writes to its hook; the app's hook re-reads the znodes and publishes
    # them (streaming.query.refresh); here the same is done on the fakes and fed to the next batch
    zk = MemoryZooKeeper()
    epoch_znode(zk)
    p = Pipeline(tmp_path, zk, Fence(1, 0), validator)
    refused: list[Any] = []
    p.dispatcher.on_refused = refused.extend
    p.run_batch([(EVENTS, p.failover_ref(snapshot_of((1, 2, 3))))])
    p.run_batch([(ADMIN, event_to_json(ev.CreateTopic("r1", "t", 1, 3, replica_assignment=((1, 2, 3),))))])
    path = "/brokers/topics/t/partitions/0/state"
    data, version = zk.get(path)
    zk.set(path, data)  # changed under the controller: same content, a new version
    p.run_batch([(EVENTS, event_to_json(ev.BrokerFailure(1, 101)))])
    assert [(f.write.path, f.error) for f in refused] == [(path, "BadVersion")]
    assert json.loads(zk.get(path)[0])["leader"] == 1  # nothing written
    data, version = zk.get(path)
    read = ev.PartitionStatesRead("t", ((0, decode_partition_state(data.decode(), version)),))
    p.run_batch([(EVENTS, event_to_json(read))])
    state = json.loads(zk.get(path)[0])
    assert (state["leader"], state["isr"], state["leader_epoch"]) == (2, [2, 3], 1)
    assert zk.get(path)[1] == version + 1


def test_requests_of_a_refused_state_write_are_withheld(tmp_path: Path, validator: InputValidator) -> None:
    p = Pipeline.failed_over(tmp_path, validator)
    zk = p.zk
    assignment = ((1, 2, 3), (2, 3, 1))
    p.run_batch([(ADMIN, event_to_json(ev.CreateTopic("r1", "t", 2, 3, replica_assignment=assignment)))])
    path = "/brokers/topics/t/partitions/0/state"
    data, version = zk.get(path)
    zk.set(path, data)  # changed under the controller: its leader-epoch bump there will be refused
    p.run_batch([(EVENTS, event_to_json(ev.BrokerFailure(1, 101)))])

    def states_in(batch: int) -> list[tuple[str, int, int, int]]:
        out: list[tuple[str, int, int, int]] = []
        for m in p.requests.messages:
            msg = m.value_json()
            if m.topic != "livectl.requests" or msg["batchId"] != batch or msg["api"] not in _PARTITION_APIS:
                continue
            for ts in msg["body"]["topicStates"]:
                out.extend(
                    (msg["api"], msg["brokerId"], ps["partitionIndex"], ps["leaderEpoch"])
                    for ps in ts["partitionStates"]
                )
        return out

    sent = states_in(2)
    assert sent, "partition 1's change went out"
    assert all(p_ == 1 for _, _, p_, _ in sent), f"a request for the refused partition 0 went out: {sent}"
    assert json.loads(zk.get(path)[0])["leader_epoch"] == 0
    # re-read and redone: now its LeaderAndIsr goes out, at the epoch ZooKeeper holds
    data, version = zk.get(path)
    p.run_batch(
        [
            (
                EVENTS,
                event_to_json(ev.PartitionStatesRead("t", ((0, decode_partition_state(data.decode(), version)),))),
            )
        ]
    )
    zk_epoch = json.loads(zk.get(path)[0])["leader_epoch"]
    assert zk_epoch == 1
    assert {e for api, _, p_, e in states_in(3) if api == "LeaderAndIsr" and p_ == 0} == {zk_epoch}


def test_withhold_refused_keeps_what_zookeeper_accepted() -> None:
    from sinks.ports import FailedWrite
    from streaming.query.batch_rows import withhold_refused

    def body(*parts: tuple[str, int]) -> WireBody:
        topics: dict[str, list[dict[str, int]]] = {}
        for t, p in parts:
            topics.setdefault(t, []).append({"partitionIndex": p, "leaderEpoch": 1})
        states = [{"topicName": t, "partitionStates": ps} for t, ps in topics.items()]
        return WireBody({"controllerEpoch": 1, "topicStates": states})

    lisr = RequestApi.LEADER_AND_ISR
    um = RequestApi.UPDATE_METADATA
    requests = [
        dc.BrokerRequest(1, lisr, body(("a", 0), ("a", 1), ("b", 0))),
        dc.BrokerRequest(2, lisr, body(("a", 0))),
        dc.BrokerRequest(1, um, body(("a", 0), ("b", 0))),
        dc.BrokerRequest(3, um, body()),  # announces the live brokers only
        dc.BrokerRequest(1, RequestApi.STOP_REPLICA, body(("a", 0))),
    ]
    refused = dc.ZkWrite(dc.ZkOp.SET, "/brokers/topics/a/partitions/0/state", "{}", 3)
    other = dc.ZkWrite(dc.ZkOp.SET, "/brokers/topics/b", "{}", 3)
    kept = withhold_refused(requests, [FailedWrite(0, refused, "BadVersion"), FailedWrite(1, other, "BadVersion")])
    got = [
        (
            r.broker_id,
            r.api,
            [(t["topicName"], p["partitionIndex"]) for t in r.body_json()["topicStates"] for p in t["partitionStates"]],
        )
        for r in kept
    ]
    # a refused partition state holds back that partition's LeaderAndIsr / UpdateMetadata; a refused
    # topic znode every request of the topic (streaming.query.refusals)
    assert got == [
        (1, lisr, [("a", 1)]),
        (3, um, []),
        (1, RequestApi.STOP_REPLICA, [("a", 0)]),
    ]
    assert withhold_refused(requests, []) == requests


def test_withhold_refused_keeps_a_shared_requests_addressees() -> None:
    from core.kafka.requests import SHARED_BROKER_ID, Addressee
    from sinks.ports import FailedWrite
    from streaming.query.batch_rows import withhold_refused

    states = [{"topicName": "a", "partitionStates": [{"partitionIndex": 0}, {"partitionIndex": 1}]}]
    addressees = (Addressee(1, 5), Addressee(2, 6))
    um = dc.BrokerRequest(
        SHARED_BROKER_ID,
        RequestApi.UPDATE_METADATA,
        WireBody({"controllerEpoch": 1, "topicStates": states}),
        addressees,
    )
    refused = dc.ZkWrite(dc.ZkOp.SET, "/brokers/topics/a/partitions/0/state", "{}", 3)
    (kept,) = withhold_refused([um], [FailedWrite(0, refused, "BadVersion")])
    assert kept.addressees == addressees and kept.broker_id == SHARED_BROKER_ID
    assert [p["partitionIndex"] for p in kept.body_json()["topicStates"][0]["partitionStates"]] == [1]


def test_withhold_refused_filters_typed_bodies_as_values() -> None:
    from core.kafka.requests import LeaderAndIsrRequest, LisrPartitionState, StopReplicaPartition, StopReplicaRequest
    from sinks.ports import FailedWrite
    from streaming.query.batch_rows import withhold_refused

    a0, a1 = (LisrPartitionState("a", p, 1, 1, 1, (1,), 0, (1,)) for p in (0, 1))
    lisr = dc.BrokerRequest(1, RequestApi.LEADER_AND_ISR, LeaderAndIsrRequest(0, 1, 5, 0, (a0, a1), ()))
    only_refused = dc.BrokerRequest(2, RequestApi.LEADER_AND_ISR, LeaderAndIsrRequest(0, 1, 5, 0, (a0,), ()))
    stop = dc.BrokerRequest(
        1, RequestApi.STOP_REPLICA, StopReplicaRequest(0, 1, 5, (StopReplicaPartition("a", 0, 1, False),))
    )
    refused = dc.ZkWrite(dc.ZkOp.SET, "/brokers/topics/a/partitions/0/state", "{}", 3)
    kept = withhold_refused([lisr, only_refused, stop], [FailedWrite(0, refused, "BadVersion")])
    # the typed value stays a typed value, without the refused partition; a StopReplica is not held back
    assert kept == [
        dc.BrokerRequest(1, RequestApi.LEADER_AND_ISR, LeaderAndIsrRequest(0, 1, 5, 0, (a1,), ())),
        stop,
    ]


class _OwnWrites:
    """What the admin-path watcher is told of the batches' topic znode writes."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, frozenset[int]], list[str]]] = []

    def expect(self, topics: Any) -> None:
        self.calls.append(("expect", dict(topics), []))

    def settle(self, topics: Any, failed: Any) -> None:
        self.calls.append(("settle", dict(topics), sorted(failed)))


def _loaded_with_own_writes(tmp_path: Path, validator: InputValidator) -> tuple[MemoryZooKeeper, Pipeline, _OwnWrites]:
    """A pipeline past its failover batch (brokers 1-3), its dispatcher telling :class:`_OwnWrites`."""
    zk = MemoryZooKeeper()
    epoch_znode(zk)
    p = Pipeline(tmp_path, zk, Fence(1, 0), validator)
    own = _OwnWrites()
    p.dispatcher.own_writes = own
    p.run_batch([(EVENTS, p.failover_ref(snapshot_of((1, 2, 3))))])
    assert own.calls == [], "a batch that writes no topic znode tells nothing"
    return zk, p, own


def test_the_watcher_is_told_of_the_topic_znodes_a_batch_writes(tmp_path: Path, validator: InputValidator) -> None:
    zk, p, own = _loaded_with_own_writes(tmp_path, validator)
    p.run_batch([(ADMIN, event_to_json(ev.CreateTopic("r1", "t", 2, 3)))])
    assert own.calls == [("expect", {"t": frozenset({0, 1})}, []), ("settle", {"t": frozenset({0, 1})}, [])]
    own.calls.clear()
    p.run_batch([(ADMIN, event_to_json(ev.CreatePartitions("r2", "t", 3)))])
    assert own.calls == [("expect", {"t": frozenset({0, 1, 2})}, []), ("settle", {"t": frozenset({0, 1, 2})}, [])]
    own.calls.clear()
    # someone else created the topic first: the controller's create is refused, and the watcher reads it as theirs
    zk.create("/brokers/topics/u", json.dumps({"version": 2, "partitions": {"0": [2, 3]}}).encode())
    p.run_batch([(ADMIN, event_to_json(ev.CreateTopic("r3", "u", 1, 3)))])
    assert own.calls == [("expect", {"u": frozenset({0})}, []), ("settle", {"u": frozenset({0})}, ["u"])]


def test_a_zookeeper_sink_that_fails_leaves_the_topic_writes_to_be_read_again(
    tmp_path: Path, validator: InputValidator
) -> None:
    zk, p, own = _loaded_with_own_writes(tmp_path, validator)
    zk.set("/controller_epoch", b"2")  # fenced: the ZooKeeper sink raises
    with pytest.raises(ControllerFencedError):
        p.run_batch([(ADMIN, event_to_json(ev.CreateTopic("r", "late", 1, 1)))])
    assert own.calls == [("expect", {"late": frozenset({0})}, []), ("settle", {"late": frozenset({0})}, ["late"])]
