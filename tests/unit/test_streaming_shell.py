"""The query's steps without Spark: prepare → per-bucket step (a fake GroupState) → dispatch to fakes.

Spark runs exactly these functions; here they are driven by hand so that the shell's contracts are
checked in milliseconds: order of effects, replay, fencing, failover hand-off, merged admin results.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from core import decisions as dc
from core import events as ev
from core.codec.events import event_to_json
from core.kafka.requests import RequestApi
from core.kafka.zkdata import decode_partition_state
from core.model import Broker, PartitionTarget, TopicPartition
from core.snapshot import PartitionStateZnode, TopicZnode, ZkSnapshot
from sinks.errors import ControllerFencedError
from sinks.memory import MemoryRequestSink, MemoryZkSink, MemoryZooKeeper
from sinks.ports import Fence
from streaming import failover, routing, stateful
from streaming.checkpoint_fs import MemoryCheckpointStore
from streaming.dispatch import Dispatcher, merge_admin_results
from streaming.failover import StoreSnapshots
from streaming.settings import Settings, SettingsError
from streaming.validation import InputValidator

pytestmark = pytest.mark.unit

BUCKETS = 4
ADMIN = "livectl.admin"
EVENTS = "livectl.broker-events"


class FakeGroupState:
    """What ``applyInPandasWithState`` hands the function: ``exists``, ``get``, ``update``."""

    def __init__(self) -> None:
        self.value: tuple[Any, ...] | None = None

    @property
    def exists(self) -> bool:
        return self.value is not None

    @property
    def get(self) -> tuple[Any, ...]:
        assert self.value is not None
        return self.value

    def update(self, value: tuple[Any, ...]) -> None:
        self.value = value


_STORES: dict[Path, MemoryCheckpointStore] = {}


def store_at(tmp: Path) -> MemoryCheckpointStore:
    """The in-memory checkpoint named after ``tmp``: pipelines given the same folder share one checkpoint."""
    return _STORES.setdefault(tmp, MemoryCheckpointStore(f"memory:{tmp}"))


class Pipeline:
    """One controller's query, batch by batch, on fakes."""

    def __init__(
        self, tmp: Path, zk: MemoryZooKeeper, fence: Fence, validator: InputValidator, config: Any = None
    ) -> None:
        self.tmp = tmp
        #: the controller configs the buckets run with from a failover on (``make_step``'s)
        self.config = config
        self.zk = zk
        self.fence = fence
        self.validator = validator
        self.states = {b: FakeGroupState() for b in range(-1, BUCKETS)}
        self.requests = MemoryRequestSink(fence)
        self.dispatcher = Dispatcher(MemoryZkSink(zk, fence, "q"), self.requests)
        self.offsets = {ADMIN: 0, EVENTS: 0}
        self.batch = 0
        self.clock = 0

    def records(self, items: list[tuple[str, str]]) -> pd.DataFrame:
        rows = []
        for topic, value in items:
            # records of both topics are ordered by their timestamps, as produced
            self.clock += 1
            rows.append((topic, 0, self.offsets[topic], pd.Timestamp(1_700_000_000_000 + self.clock, unit="ms"), value))
            self.offsets[topic] += 1
        return pd.DataFrame(rows, columns=["topic", "partition", "offset", "timestamp", "value"])

    def failover_ref(self, snapshot: ZkSnapshot) -> str:
        ref = failover.write_snapshot(store_at(self.tmp), 1000, snapshot, BUCKETS)
        return failover.ref_to_json(ref)

    def run_batch(self, items: list[tuple[str, str]]) -> pd.DataFrame:
        routed = pd.concat(
            [routing.prepare_frame(self.records(items), BUCKETS, ADMIN, self.validator), routing.tick_rows(1, BUCKETS)]
        )
        outputs = []
        for bucket, frame in routed.groupby("bucket"):
            outputs.extend(
                stateful.step_bucket(
                    (bucket,),
                    iter([frame]),
                    self.states[int(bucket)],
                    snapshots=StoreSnapshots(store_at(self.tmp)),
                    config=self.config,
                )
            )
        out = pd.concat(outputs, ignore_index=True)
        self.dispatcher.dispatch(out, self.batch)
        self.batch += 1
        return out


@pytest.fixture(scope="module")
def validator() -> InputValidator:
    return InputValidator()


def snapshot_of(brokers: tuple[int, ...], epoch: int = 1, epoch_version: int = 0) -> ZkSnapshot:
    return ZkSnapshot(epoch, epoch_version, tuple(Broker(b, 100 + b) for b in brokers), (), ())


def epoch_znode(zk: MemoryZooKeeper) -> None:
    zk.create("/controller_epoch", b"1")


def test_create_topic_end_to_end_on_fakes(tmp_path: Path, validator: InputValidator) -> None:
    zk = MemoryZooKeeper()
    epoch_znode(zk)
    p = Pipeline(tmp_path, zk, Fence(1, 0), validator)
    p.run_batch([(EVENTS, p.failover_ref(snapshot_of((1, 2, 3))))])
    out = p.run_batch(
        [
            (ADMIN, event_to_json(ev.CreateTopic("r1", "orders", 3, 2))),
            (ADMIN, "not json"),
        ]
    )
    # Kafka's znodes, created through the fenced sink
    topic = json.loads(zk.get("/brokers/topics/orders")[0])
    assert sorted(topic["partitions"]) == ["0", "1", "2"]
    for part in range(3):
        state = json.loads(zk.get(f"/brokers/topics/orders/partitions/{part}/state")[0])
        assert state["leader"] == topic["partitions"][str(part)][0] and state["leader_epoch"] == 0
    # requests: one LeaderAndIsr per broker, in Kafka's order per broker
    msgs = [m.value_json() for m in p.requests.messages if m.topic == "livectl.requests"]
    msgs = [m for m in msgs if m["batchId"] == 1]
    per_broker: dict[int, list[str]] = {}
    for m in msgs:
        per_broker.setdefault(m["brokerId"], []).append(m["api"])
    for apis in per_broker.values():
        assert apis == sorted(apis, key=["LeaderAndIsr", "UpdateMetadata", "StopReplica"].index)
        assert apis.count("LeaderAndIsr") == 1
    results = [m.value_json() for m in p.requests.messages if m.topic == "livectl.admin-results"]
    assert {(r["request_id"], r["status"]) for r in results} == {("r1", "ok")}
    rejected = [m.value_json() for m in p.requests.messages if m.topic == "livectl.rejected"]
    assert len(rejected) == 1 and rejected[0]["payload"] == "not json"
    # one metrics row per bucket per batch; the dispatcher sums them
    assert (out["kind"] == stateful.KIND_METRICS).sum() == BUCKETS
    assert p.dispatcher.metrics["GlobalPartitionCount"] == 3
    assert p.dispatcher.metrics["GlobalTopicCount"] == 1
    assert p.dispatcher.metrics["ActiveControllerCount"] == 1


def test_history_before_the_first_failover_is_not_applied(tmp_path: Path, validator: InputValidator) -> None:
    zk = MemoryZooKeeper()
    epoch_znode(zk)
    p = Pipeline(tmp_path, zk, Fence(1, 0), validator)
    p.run_batch(
        [
            (ADMIN, event_to_json(ev.CreateTopic("old", "history", 1, 1))),
            (EVENTS, p.failover_ref(snapshot_of((1,)))),
            (ADMIN, event_to_json(ev.CreateTopic("new", "current", 1, 1))),
        ]
    )
    assert not zk.exists("/brokers/topics/history")
    assert zk.exists("/brokers/topics/current")
    results = {
        m.value_json()["request_id"]: m.value_json() for m in p.requests.messages if m.topic == "livectl.admin-results"
    }
    assert results["old"]["error"] == "NOT_CONTROLLER"
    assert results["new"]["status"] == "ok"


def test_a_fenced_dispatcher_writes_nothing_more(tmp_path: Path, validator: InputValidator) -> None:
    zk = MemoryZooKeeper()
    epoch_znode(zk)
    p = Pipeline(tmp_path, zk, Fence(1, 0), validator)
    p.run_batch([(EVENTS, p.failover_ref(snapshot_of((1, 2))))])
    zk.set("/controller_epoch", b"2")  # another controller was elected
    with pytest.raises(ControllerFencedError):
        p.run_batch([(ADMIN, event_to_json(ev.CreateTopic("r", "late", 1, 1)))])
    assert p.dispatcher.fenced and p.dispatcher.metrics["ActiveControllerCount"] == 0
    assert not zk.exists("/brokers/topics/late")
    assert not [m for m in p.requests.messages if m.topic == "livectl.admin-results"]
    with pytest.raises(ControllerFencedError):
        p.dispatcher.dispatch(pd.DataFrame(), 99)


def test_replaying_a_micro_batch_writes_nothing_twice(tmp_path: Path, validator: InputValidator) -> None:
    zk = MemoryZooKeeper()
    epoch_znode(zk)
    p = Pipeline(tmp_path, zk, Fence(1, 0), validator)
    p.run_batch([(EVENTS, p.failover_ref(snapshot_of((1, 2, 3))))])
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


def test_state_round_trips_through_its_pyarrow_blob(tmp_path: Path, validator: InputValidator) -> None:
    zk = MemoryZooKeeper()
    epoch_znode(zk)
    p = Pipeline(tmp_path, zk, Fence(1, 0), validator)
    p.run_batch([(EVENTS, p.failover_ref(snapshot_of((1, 2, 3))))])
    p.run_batch([(ADMIN, event_to_json(ev.CreateTopic("r", "t", 4, 2)))])
    for s in p.states.values():
        if s.value is None:
            continue
        fmt, size, blob = s.value
        state = stateful.load_state(fmt, size, blob)
        assert stateful.dump_state(state) == s.value
        assert len(blob) < size  # compressed
    with pytest.raises(ValueError, match="format 99"):
        stateful.load_state(99, 0, b"")


def test_snapshot_is_split_by_bucket(tmp_path: Path) -> None:
    topics = tuple(TopicZnode(f"t{i}", ((0, (1, 2)),)) for i in range(20))
    states = tuple((TopicPartition(f"t{i}", 0), PartitionStateZnode(1, 0, (1, 2), 1, 0)) for i in range(20))
    snap = ZkSnapshot(3, 2, (Broker(1, 7), Broker(2, 8)), topics, states, topics_to_delete=("t3",))
    parts = failover.split_snapshot(snap, BUCKETS)
    assert sorted(t.topic for part in parts for t in part.topics) == sorted(t.topic for t in topics)
    for b, part in enumerate(parts):
        assert all(routing.bucket_of(t.topic, BUCKETS) == b for t in part.topics)
        assert part.brokers == snap.brokers and part.controller_epoch == 3
    ref = failover.write_snapshot(store_at(tmp_path), 7, snap, BUCKETS)
    assert ref["type"] == "controller_failover_ref" and ref["controller_epoch"] == 3
    for b in range(BUCKETS):
        assert failover.load_bucket_failover(ref, b, StoreSnapshots(store_at(tmp_path))).snapshot == parts[b]


def test_admin_results_of_a_split_command_are_merged() -> None:
    ok = dc.AdminResult("r", "reassign_partitions", dc.AdminStatus.OK, details='{"partitions":{"a-0":"NONE"}}')
    busy = dc.AdminResult(
        "r", "reassign_partitions", dc.AdminStatus.IN_PROGRESS, details='{"partitions":{"b-0":"NONE"}}'
    )
    bad = dc.AdminResult("s", "elect_leaders", dc.AdminStatus.ERROR, "ELECTION_NOT_NEEDED", "x")
    fine = dc.AdminResult("s", "elect_leaders", dc.AdminStatus.OK)
    merged = {r.request_id: r for r in merge_admin_results([ok, busy, bad, fine])}
    assert merged["r"].status is dc.AdminStatus.IN_PROGRESS
    assert json.loads(merged["r"].details) == {"partitions": {"a-0": "NONE", "b-0": "NONE"}}
    assert merged["s"].status is dc.AdminStatus.ERROR and merged["s"].error == "ELECTION_NOT_NEEDED"


def test_settings_load_overrides_and_errors(tmp_path: Path) -> None:
    s = Settings.load(overrides=["num_buckets=16", "zookeeper_connect=zk:2181/livectl"])
    assert s.num_buckets == 16 and s.zookeeper_connect == "zk:2181/livectl"
    with pytest.raises(SettingsError) as e:
        Settings.load(overrides=["no_such_key=1"])
    assert e.value.key == "no_such_key"
    with pytest.raises(SettingsError) as e:
        Settings.load(overrides=["num_buckets=many"])
    assert e.value.key == "num_buckets"


class FakeConf:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def get(self, key: str) -> str:
        return self.values[key]

    def set(self, key: str, value: str) -> None:
        self.values[key] = value


class FakeSpark:
    def __init__(self, shuffle_partitions: int) -> None:
        self.conf = FakeConf({"spark.sql.shuffle.partitions": str(shuffle_partitions)})


def test_bucket_count_follows_spark_and_is_fixed_by_the_checkpoint(tmp_path: Path) -> None:
    from streaming.app import resolve_buckets

    base = Settings.from_mapping({"checkpoint_dir": str(tmp_path / "ck"), "num_buckets": 0})
    spark = FakeSpark(6)
    store = store_at(tmp_path / "ck")
    assert resolve_buckets(spark, base, store).num_buckets == 6
    # later starts keep the checkpoint's count, and set Spark's shuffle partitions to it
    spark = FakeSpark(200)
    assert resolve_buckets(spark, base, store).num_buckets == 6
    assert spark.conf.values["spark.sql.shuffle.partitions"] == "6"
    with pytest.raises(SettingsError) as e:
        resolve_buckets(
            FakeSpark(6), Settings.from_mapping({"checkpoint_dir": str(tmp_path / "ck"), "num_buckets": 8}), store
        )
    assert e.value.key == "num_buckets" and "fixed for the life of a checkpoint" in e.value.reason


def test_large_requests_are_split_into_complete_parts() -> None:
    from sinks.requests import MAX_MESSAGE_BYTES, request_messages, split_body

    states = [
        {
            "topicName": f"t{t}",
            "topicId": "x",
            "partitionStates": [
                {"partitionIndex": p, "leader": 1, "leaderEpoch": 3, "isr": [1, 2, 3], "replicas": [1, 2, 3]}
                for p in range(500)
            ],
        }
        for t in range(40)
    ]
    body = {
        "controllerId": 1,
        "controllerEpoch": 2,
        "brokerEpoch": 9,
        "type": 0,
        "topicStates": states,
        "liveLeaders": [{"brokerId": 1, "hostName": "h", "port": 1}],
    }
    parts = split_body(body, 100_000)
    assert len(parts) > 10
    assert all(len(json.dumps(p, separators=(",", ":"), sort_keys=True)) <= 100_000 for p in parts)
    assert all(p["liveLeaders"] == body["liveLeaders"] and p["brokerEpoch"] == 9 for p in parts)
    rebuilt = [
        (ts["topicName"], ps["partitionIndex"])
        for p in parts
        for ts in p["topicStates"]
        for ps in ts["partitionStates"]
    ]
    assert rebuilt == [(f"t{t}", p) for t in range(40) for p in range(500)], "every partition once, in order"
    assert split_body({"errorCode": 0, "remainingPartitions": []}, 10) == [{"errorCode": 0, "remainingPartitions": []}]

    request = dc.BrokerRequest(1, RequestApi.LEADER_AND_ISR, json.dumps(body))
    msgs = request_messages("livectl.requests", Fence(2, 1), 7, [request], max_bytes=100_000)
    values = [m.value_json() for m in msgs]
    assert [(v["part"], v["parts"]) for v in values] == [(k, len(parts)) for k in range(1, len(parts) + 1)]
    assert len({m.identity for m in msgs}) == len(msgs)
    # a request that fits stays one message without part numbers
    small = dc.BrokerRequest(1, RequestApi.LEADER_AND_ISR, json.dumps({**body, "topicStates": states[:2]}))
    (single,) = request_messages("livectl.requests", Fence(2, 1), 7, [small])
    assert "part" not in single.value_json() and len(single.value) <= MAX_MESSAGE_BYTES
    # at the default limit the 1.5 MB request becomes two messages
    assert len(request_messages("livectl.requests", Fence(2, 1), 7, [request])) == 2


def test_worker_state_cache_gives_what_decoding_gives(tmp_path: Path, validator: InputValidator) -> None:
    zk = MemoryZooKeeper()
    epoch_znode(zk)
    p = Pipeline(tmp_path, zk, Fence(1, 0), validator)
    p.run_batch([(EVENTS, p.failover_ref(snapshot_of((1, 2, 3))))])
    saved = {b: s.value for b, s in p.states.items()}
    records = [(ADMIN, event_to_json(ev.CreateTopic("r", "t", 3, 2)))]
    routed = pd.concat(
        [routing.prepare_frame(p.records(records), BUCKETS, ADMIN, validator), routing.tick_rows(1, BUCKETS)]
    )

    def run(cache_cleared: bool) -> list[str]:
        if cache_cleared:
            stateful._STATE_CACHE.clear()
        out: list[str] = []
        for bucket, frame in routed.groupby("bucket"):
            gs = FakeGroupState()
            gs.value = saved[int(bucket)]
            for df in stateful.step_bucket((bucket,), iter([frame]), gs, snapshots=StoreSnapshots(store_at(tmp_path))):
                out.extend(df["payload"])
        return out

    warm = run(cache_cleared=False)  # the cache holds batch 0's states: hits
    cold = run(cache_cleared=True)
    assert warm == cold and any("LeaderAndIsr" in x for x in warm)


def test_failover_references_of_other_runs_are_history(tmp_path: Path, validator: InputValidator) -> None:

    zk = MemoryZooKeeper()
    epoch_znode(zk)
    p = Pipeline(tmp_path, zk, Fence(1, 0), validator)
    gone = p.failover_ref(snapshot_of((1, 2), epoch=1))
    store_at(tmp_path).remove(json.loads(gone)["path"])  # an earlier run's checkpoint was deleted
    out = p.run_batch([(EVENTS, gone)])
    failures = [json.loads(x) for x in out[out["kind"] == stateful.KIND_FAILURE]["payload"]]
    assert len(failures) == BUCKETS and all("is gone" in f["reason"] for f in failures)
    current = p.failover_ref(snapshot_of((1, 2, 3), epoch=2))
    p.run_batch([(EVENTS, current), (ADMIN, event_to_json(ev.CreateTopic("r", "t", 1, 3)))])
    assert zk.exists("/brokers/topics/t")
    # the same reference met again (a replay of the topic) is stale now
    out = p.run_batch([(EVENTS, current)])
    failures = [json.loads(x) for x in out[out["kind"] == stateful.KIND_FAILURE]["payload"]]
    assert failures and all("stale" in f["reason"] for f in failures)
    assert p.dispatcher.metrics["GlobalTopicCount"] == 1


def test_a_refused_state_write_is_read_again_and_redone(tmp_path: Path, validator: InputValidator) -> None:
    # the dispatcher hands refused writes to its hook; the app's hook re-reads the znodes and publishes
    # them (streaming.refresh); here the same is done on the fakes and fed to the next batch
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


def _snapshot_of_tree(zk: MemoryZooKeeper, brokers: tuple[int, ...]) -> ZkSnapshot:
    """What a controller elected now reads from the fake tree (as :func:`streaming.zk_snapshot.read_snapshot`)."""
    from core.kafka.zksnapshot import snapshot_from_znodes

    data, version = zk.get("/controller_epoch")
    znodes = {path: (d.decode() or None, v) for path, (d, v) in zk.nodes.items()}
    infos = tuple(Broker(b, 100 + b) for b in brokers)
    return snapshot_from_znodes(znodes, infos, int(data), version)


def test_a_takeover_handles_the_records_that_waited_for_its_reference_after_it(
    tmp_path: Path, validator: InputValidator
) -> None:
    # the first controller creates a topic, then dies; a reassignment arrives while nobody is controller
    zk = MemoryZooKeeper()
    epoch_znode(zk)
    brokers = (1, 2, 3, 4, 5, 6)
    first = Pipeline(tmp_path, zk, Fence(1, 0), validator)
    first.run_batch([(EVENTS, first.failover_ref(snapshot_of(brokers)))])
    first.run_batch([(ADMIN, event_to_json(ev.CreateTopic("c1", "moving", 1, 3, replica_assignment=((1, 2, 3),))))])
    # the second is elected, reads the tree, and publishes its reference after the waiting command; the
    # source's barrier gives the bucket both in one micro-batch, on the checkpoint's state
    zk.set("/controller_epoch", b"2")
    second = Pipeline(tmp_path, zk, Fence(2, 1), validator)
    second.states, second.offsets, second.batch, second.clock = first.states, first.offsets, first.batch, first.clock
    snapshot = _snapshot_of_tree(zk, brokers)
    ref = failover.ref_to_json(failover.write_snapshot(store_at(tmp_path), 1000, snapshot, BUCKETS))
    reassign = ev.ReassignPartitions("r1", (PartitionTarget("moving", 0, (4, 5, 6)),))
    second.run_batch([(ADMIN, event_to_json(reassign)), (EVENTS, ref)])
    topic = json.loads(zk.get("/brokers/topics/moving")[0])
    assert topic["partitions"]["0"] == [4, 5, 6, 1, 2, 3]
    # handled after the snapshot, the reassignment is in the bucket's state as in ZooKeeper: it goes on
    # to the end (handled before it, the snapshot would have dropped it and the topic znode kept RS)
    state = json.loads(zk.get("/brokers/topics/moving/partitions/0/state")[0])
    version = zk.get("/brokers/topics/moving/partitions/0/state")[1]
    caught_up = ev.AlterPartition(1, 101, "moving", 0, state["leader_epoch"], version, (1, 2, 3, 4, 5, 6))
    second.run_batch([(EVENTS, event_to_json(caught_up))])
    topic = json.loads(zk.get("/brokers/topics/moving")[0])
    assert topic["partitions"]["0"] == [4, 5, 6]
    assert topic.get("adding_replicas", {}) == {} and topic.get("removing_replicas", {}) == {}
    results = [m.value_json() for m in second.requests.messages if m.topic == "livectl.admin-results"]
    assert [r["status"] for r in results if r["request_id"] == "r1"][-1] == "ok"


def test_requests_of_a_refused_state_write_are_withheld(tmp_path: Path, validator: InputValidator) -> None:
    zk = MemoryZooKeeper()
    epoch_znode(zk)
    p = Pipeline(tmp_path, zk, Fence(1, 0), validator)
    p.run_batch([(EVENTS, p.failover_ref(snapshot_of((1, 2, 3))))])
    assignment = ((1, 2, 3), (2, 3, 1))
    p.run_batch([(ADMIN, event_to_json(ev.CreateTopic("r1", "t", 2, 3, replica_assignment=assignment)))])
    path = "/brokers/topics/t/partitions/0/state"
    data, version = zk.get(path)
    zk.set(path, data)  # changed under the controller: its leader-epoch bump there will be refused
    p.run_batch([(EVENTS, event_to_json(ev.BrokerFailure(1, 101)))])

    def states_in(batch: int) -> list[tuple[str, int, int, int]]:
        out = []
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


_PARTITION_APIS = ("LeaderAndIsr", "UpdateMetadata")


def test_withhold_refused_keeps_what_zookeeper_accepted() -> None:
    from sinks.ports import FailedWrite
    from streaming.dispatch import withhold_refused

    def body(*parts: tuple[str, int]) -> str:
        topics: dict[str, list[dict[str, int]]] = {}
        for t, p in parts:
            topics.setdefault(t, []).append({"partitionIndex": p, "leaderEpoch": 1})
        states = [{"topicName": t, "partitionStates": ps} for t, ps in topics.items()]
        return json.dumps({"controllerEpoch": 1, "topicStates": states})

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
    # topic znode every request of the topic (streaming.refusals)
    assert got == [
        (1, lisr, [("a", 1)]),
        (3, um, []),
        (1, RequestApi.STOP_REPLICA, [("a", 0)]),
    ]
    assert withhold_refused(requests, []) == requests


def test_a_used_checkpoint_starts_behind_the_failover_barrier(tmp_path: Path) -> None:
    from streaming.app import ControllerApp
    from streaming.query import SourceStart

    store = MemoryCheckpointStore(f"memory:{tmp_path}/cp")
    settings = Settings.from_mapping({"checkpoint_dir": store.root})
    # a new checkpoint: no barrier (its buckets hold nothing); earliest is the setting's
    assert ControllerApp._source_start(settings, store, 3) == SourceStart()
    # a checkpoint with a planned micro-batch (committed or not): hold back until epoch 3's reference
    store.write_text(f"{store.root}/offsets/0", "v1")
    got = ControllerApp._source_start(settings, store, 3)
    assert got == SourceStart(barrier_epoch=3, barrier_path=f"{store.root}/failover")
    ref = failover.write_snapshot(store, 1000, snapshot_of((1,), epoch=3), BUCKETS)
    assert got.barrier_path is not None and ref["path"].startswith(got.barrier_path + "/")
