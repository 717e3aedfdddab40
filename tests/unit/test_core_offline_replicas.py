"""``/livectl/offline_replicas/<topic>``: the replicas the controller holds offline on failed log dirs,
written with the step's decisions, updated as replicas come back and deleted with the topic."""

from __future__ import annotations

import json

import pytest
from core_support import Cluster, startup

from core import offline_replicas as orr
from core.controller import ControllerConfig, ControllerState
from core.decisions import ZkOp, ZkWrite
from core.errors import FormatError
from core.events import (
    BrokerFailure,
    ControllerFailover,
    CreateTopic,
    DeleteTopic,
    LeaderAndIsrResponse,
    LogDirFailure,
    PartitionError,
    ReassignPartitions,
)
from core.kafka.zksnapshot import snapshot_from_znodes
from core.model import Broker, PartitionTarget, TopicPartition

STORAGE = 56  # KAFKA_STORAGE_ERROR
PATH = "/livectl/offline_replicas/t"


def make() -> Cluster:
    return Cluster.start([1, 2, 3], ControllerConfig())


def create(c: Cluster, assignment: tuple[tuple[int, ...], ...], topic: str = "t") -> None:
    c.run(CreateTopic(f"create-{topic}", topic, len(assignment), len(assignment[0]), assignment, ()))


def fail_dir(c: Cluster, broker: int, *tps: tuple[str, int]) -> None:
    """Broker ``broker`` loses a log dir holding ``tps`` and answers the controller's LeaderAndIsr so."""
    c.run(LogDirFailure(broker))
    c.run(LeaderAndIsrResponse(broker, tuple(PartitionError(t, p, STORAGE) for t, p in tps)))


def znode(c: Cluster, path: str = PATH) -> dict[str, object] | None:
    data = c.zk.get(path)
    return None if data is None else json.loads(data)


def offline_writes(c: Cluster) -> list[ZkWrite]:
    return [d for d in c.decisions if isinstance(d, ZkWrite) and d.path.startswith(orr.OFFLINE_REPLICAS)]


def test_failed_log_dir_is_recorded_in_the_same_batch_as_the_leader_change() -> None:
    c = make()
    create(c, ((1, 2), (2, 1), (3, 2)))
    fail_dir(c, 1, ("t", 0), ("t", 1))
    assert znode(c) == {"version": 1, "partitions": {"0": [1], "1": [1]}}
    paths = [d.path for d in c.decisions if isinstance(d, ZkWrite)]
    # the new leader of t-0 and the record travel in one step, state first
    assert paths.index("/brokers/topics/t/partitions/0/state") < paths.index(PATH)
    lai = c.ctx.leader_and_isr(TopicPartition("t", 0))
    assert lai is not None and (lai.leader, lai.isr) == (2, (2,))


def test_nothing_written_when_the_record_does_not_change() -> None:
    c = make()
    create(c, ((1, 2),))
    fail_dir(c, 1, ("t", 0))
    assert len(offline_writes(c)) == 1
    c.run(LeaderAndIsrResponse(1, (PartitionError("t", 0, STORAGE),)))  # told again: same record
    assert offline_writes(c) == []
    create(c, ((2, 3),), topic="u")
    assert offline_writes(c) == []


def test_replica_back_online_removes_it() -> None:
    c = make()
    create(c, ((1, 2), (2, 1)))
    fail_dir(c, 1, ("t", 0), ("t", 1))
    c.run(LeaderAndIsrResponse(1, (PartitionError("t", 0, 0),)))
    assert znode(c) == {"version": 1, "partitions": {"1": [1]}}
    c.run(LeaderAndIsrResponse(1, (PartitionError("t", 1, 0),)))
    assert znode(c) is None
    assert offline_writes(c) == [ZkWrite(ZkOp.DELETE_TREE, PATH)]


def test_broker_restart_clears_its_failed_dirs() -> None:
    c = make()
    create(c, ((1, 2),))
    fail_dir(c, 1, ("t", 0))
    c.run(startup(1, epoch=500))  # re-registration with a newer epoch: a bounce, dirs online again
    assert znode(c) is None


def test_dead_broker_is_left_to_the_broker_registrations() -> None:
    c = make()
    create(c, ((1, 2),))
    fail_dir(c, 1, ("t", 0))
    c.run(BrokerFailure(1))
    assert znode(c) is None


def test_reassignment_that_removes_the_replica_drops_it() -> None:
    c = make()
    create(c, ((1, 2), (1, 3)))
    fail_dir(c, 1, ("t", 0), ("t", 1))
    c.run(ReassignPartitions("r", (PartitionTarget("t", 0, (2, 3)),)))
    c.catch_up(TopicPartition("t", 0))
    assert c.ctx.replicas(TopicPartition("t", 0)) == (2, 3)
    assert znode(c) == {"version": 1, "partitions": {"1": [1]}}


def test_topic_deletion_waits_for_the_replica_then_leaves_no_znode() -> None:
    """As in Kafka, a replica on a failed log dir makes the topic ineligible for deletion; the record
    stays (and ``describe`` keeps showing it) until the broker comes back and the deletion ends."""
    c = make()
    create(c, ((1, 2),))
    fail_dir(c, 1, ("t", 0))
    c.run(DeleteTopic("d", "t"))
    c.ack_stop_replicas()
    assert "t" in c.ctx.topics_ineligible_for_deletion
    assert znode(c) == {"version": 1, "partitions": {"0": [1]}}
    c.run(startup(1, epoch=500))
    for _ in range(3):
        if "t" not in c.ctx.topic_partitions:
            break
        c.ack_stop_replicas()
    assert "t" not in c.ctx.topic_partitions
    assert znode(c) is None
    assert "/brokers/topics/t" not in c.zk.nodes


def test_removed_topic_leaves_the_record() -> None:
    c = make()
    create(c, ((1, 2),))
    fail_dir(c, 1, ("t", 0))
    ctx = c.state.context.copy()
    assert orr.record(ctx) == {"t": {0: (1,)}}
    ctx.remove_topic("t")
    assert orr.record(ctx) == {}
    assert orr.writes(
        {"t": {0: (1,)}},
        {},
    ) == [ZkWrite(ZkOp.DELETE_TREE, PATH)]


def test_failover_deletes_the_records_a_new_controller_cannot_vouch_for() -> None:
    c = make()
    create(c, ((1, 2),))
    create(c, ((2, 3),), topic="u")
    fail_dir(c, 1, ("t", 0))
    c.failover()
    # the snapshot lists the records ZooKeeper holds; the new context knows no failed dir
    assert offline_writes(c) == [ZkWrite(ZkOp.DELETE_TREE, PATH)]
    assert znode(c) is None
    # the new controller learns it again from the broker's answer
    c.run(LeaderAndIsrResponse(1, (PartitionError("t", 0, STORAGE),)))
    assert znode(c) == {"version": 1, "partitions": {"0": [1]}}
    c.zk.nodes["/livectl/offline_replicas/gone"] = ('{"version":1,"partitions":{"0":[1]}}', 0)  # topic deleted
    c.failover()
    assert [w.path for w in offline_writes(c)] == ["/livectl/offline_replicas/gone", PATH]
    assert not any(p.startswith("/livectl/offline_replicas/") for p in c.zk.nodes)


def test_failover_learning_in_the_same_step_rewrites_the_record() -> None:
    c = make()
    create(c, ((1, 2), (2, 1)))
    fail_dir(c, 1, ("t", 0), ("t", 1))
    c.run(LeaderAndIsrResponse(1, (PartitionError("t", 1, 0),)))
    assert znode(c) == {"version": 1, "partitions": {"0": [1]}}
    # ... a failover whose micro-batch also carries a broker's storage error for t-1
    c.controller_epoch += 1
    brokers = [Broker(b.id, b.epoch, b.rack, b.endpoints) for b in c.ctx.live_brokers.values()]
    snap = snapshot_from_znodes(c.zk.nodes, brokers, c.controller_epoch, c.controller_epoch - 1)
    c.state = ControllerState(config=c.state.config)
    c.run(ControllerFailover(0, snap), LeaderAndIsrResponse(1, (PartitionError("t", 1, STORAGE),)))
    assert offline_writes(c) == [ZkWrite(ZkOp.UPSERT, PATH, orr.encode({1: (1,)}), make_parents=True)]
    assert znode(c) == {"version": 1, "partitions": {"1": [1]}}


def test_writes_diff_is_minimal_and_ordered() -> None:
    before: orr.OfflineRecord = {"a": {0: (1,)}, "b": {0: (2,)}, "c": {1: (3,)}}
    after: orr.OfflineRecord = {"a": {0: (1,)}, "c": {1: (1, 3)}, "d": {2: (4,)}}
    assert orr.writes(
        before,
        after,
    ) == [
        ZkWrite(ZkOp.DELETE_TREE, "/livectl/offline_replicas/b"),
        ZkWrite(
            ZkOp.UPSERT, "/livectl/offline_replicas/c", '{"version":1,"partitions":{"1":[1,3]}}', make_parents=True
        ),
        ZkWrite(ZkOp.UPSERT, "/livectl/offline_replicas/d", '{"version":1,"partitions":{"2":[4]}}', make_parents=True),
    ]
    assert (
        orr.writes(
            before,
            before,
        )
        == []
    )
    # failover: before is not trusted; the listed records go unless still true, all of after is written
    assert [(w.op, w.path) for w in orr.writes(before, {"a": {0: (1,)}}, reset=frozenset({"a", "b"}))] == [
        (ZkOp.DELETE_TREE, "/livectl/offline_replicas/b"),
        (ZkOp.UPSERT, "/livectl/offline_replicas/a"),
    ]


def test_encode_decode_round_trip() -> None:
    parts = {2: (1, 4), 0: (3,)}
    text = orr.encode(parts)
    assert text == '{"version":1,"partitions":{"0":[3],"2":[1,4]}}'
    assert orr.decode(text) == {0: (3,), 2: (1, 4)}
    assert orr.decode(b'{"version":1,"partitions":{}}') == {}


@pytest.mark.parametrize(
    ("data", "field", "reason"),
    [
        ("{", "$", "not valid JSON"),
        ("[]", "$", "expected a JSON object"),
        ('{"version":2,"partitions":{}}', "version", "expected 1, got 2"),
        ('{"version":1}', "partitions", "expected an object"),
        ('{"version":1,"partitions":{"x":[1]}}', "partitions.x", "not an integer"),
        ('{"version":1,"partitions":{"-1":[1]}}', "partitions.-1", "negative"),
        ('{"version":1,"partitions":{"0":[1,"2"]}}', "partitions.0", "non-negative broker ids"),
        ('{"version":1,"partitions":{"0":3}}', "partitions.0", "non-negative broker ids"),
        ('{"version":1,"partitions":{"0":[true]}}', "partitions.0", "non-negative broker ids"),
    ],
)
def test_decode_names_the_bad_field(data: str, field: str, reason: str) -> None:
    with pytest.raises(FormatError) as e:
        orr.decode(data)
    assert e.value.field == field and reason in e.value.reason


def test_record_ignores_dead_brokers_and_replicas_outside_the_assignment() -> None:
    c = make()
    create(c, ((1, 2),))
    ctx = c.state.context.copy()
    ctx.replicas_on_offline_dirs = {
        1: {TopicPartition("t", 0)},
        3: {TopicPartition("t", 0)},
        9: {TopicPartition("t", 0)},
    }
    assert orr.record(ctx) == {"t": {0: (1,)}}
