"""The ZooKeeper admin paths watched live (issue 14, item 1) and Kafka's controller configs (item 2), in
the core: plain values in, decisions out."""

from __future__ import annotations

import json

import pytest
from core_support import Cluster, startup

from core.cluster_config import CONTROLLER_CONFIGS, controller_fields, effective_configs, parse_config
from core.codec.events import event_from_json, event_to_json
from core.controller import ControllerConfig, brokers_over_imbalance, imbalance
from core.decisions import AdminResult, ZkOp, ZkWrite
from core.errors import FormatError
from core.events import AutoRebalanceTick, BrokerFailure, CreateTopic, Event, ReassignPartitions
from core.kafka.requests import RequestApi
from core.kafka.zkdata import PREFERRED_REPLICA_ELECTION, REASSIGN_PARTITIONS, delete_topic_path
from core.model import PartitionTarget, TopicPartition
from core.states import PartitionState
from core.zk_path_events import (
    ClusterConfigChanged,
    ZkLogDirEvents,
    ZkPreferredElection,
    ZkReassignment,
    ZkTopicChange,
    ZkTopicDeletion,
)

pytestmark = pytest.mark.unit

TP = TopicPartition("t", 0)
EPOCH = 1  # Cluster.start's controller epoch


def _cluster(brokers: tuple[int, ...] = (1, 2, 3), replicas: tuple[int, ...] = (1, 2)) -> Cluster:
    c = Cluster.start(list(brokers))
    c.run(CreateTopic("create", "t", replica_assignment=(replicas,), partitions=1, replication_factor=len(replicas)))
    return c


def _zk(c: Cluster, op: ZkOp | None = None) -> list[ZkWrite]:
    return [d for d in c.decisions if isinstance(d, ZkWrite) and (op is None or d.op is op)]


def _leader(c: Cluster, tp: TopicPartition = TP) -> int:
    lai = c.ctx.leader_and_isr(tp)
    assert lai is not None
    return lai.leader


# --------------------------------------------------------------------------- /admin/reassign_partitions


def test_zk_reassignment_waits_for_a_target_broker_that_is_down() -> None:
    c = _cluster()
    # the API refuses a target broker that is not live ...
    c.run(ReassignPartitions("api", (PartitionTarget("t", 0, (3, 4)),)))
    [result] = [d for d in c.decisions if isinstance(d, AdminResult)]
    assert result.error == "INVALID_REPLICA_ASSIGNMENT"
    assert TP not in c.ctx.partitions_being_reassigned
    # ... the ZooKeeper path does not: the reassignment starts and waits for broker 4
    c.run(ZkReassignment(EPOCH, (PartitionTarget("t", 0, (3, 4)),)))
    assert TP in c.ctx.partitions_being_reassigned
    assert json.loads(c.zk.get("/brokers/topics/t") or "")["adding_replicas"] == {"0": [3, 4]}
    assert not _zk(c, ZkOp.DELETE), "the path stays while its entry is in progress"
    c.run(startup(4))
    assert c.requests(RequestApi.LEADER_AND_ISR, broker=4), "the returning target broker is started"
    c.catch_up(TP)
    assert TP not in c.ctx.partitions_being_reassigned
    assert c.ctx.replicas(TP) == (3, 4)
    assert [w.path for w in _zk(c, ZkOp.DELETE)] == [REASSIGN_PARTITIONS], "deleted once its entries are done"


def test_zk_reassignment_drops_entries_it_cannot_start_and_deletes_the_path() -> None:
    c = _cluster()
    c.run(ZkReassignment(EPOCH, (PartitionTarget("t", 7, (1, 2)), PartitionTarget("gone", 0, (1, 2)))))
    assert not c.ctx.partitions_being_reassigned
    assert [w.path for w in _zk(c, ZkOp.DELETE)] == [REASSIGN_PARTITIONS]


def test_zk_events_read_under_another_epoch_are_not_applied() -> None:
    c = _cluster()
    before = c.state
    for stale in (
        ZkReassignment(EPOCH - 1, (PartitionTarget("t", 0, (2, 3)),)),
        ZkReassignment(EPOCH + 1, (PartitionTarget("t", 0, (2, 3)),)),
        ZkPreferredElection(EPOCH - 1, (TP,)),
        ZkTopicDeletion(EPOCH - 1, "t"),
        ZkTopicChange(EPOCH - 1, "t", ((0, (1, 2)), (1, (2, 3)))),
        ZkLogDirEvents(EPOCH - 1, (("log_dir_event_0000000000", 1),)),
        ClusterConfigChanged(EPOCH - 1, (("delete.topic.enable", "false"),)),
    ):
        assert c.run(stale) == [], stale
    assert c.state == before


def test_zk_reassignment_after_a_takeover_is_the_snapshots() -> None:
    """The previous controller published the event but did not apply it: the new one has read the znode
    in its snapshot and resumed it there, so the old event must not start it again."""
    c = _cluster()
    c.zk.nodes[REASSIGN_PARTITIONS] = (
        json.dumps({"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [2, 3]}]}),
        0,
    )
    c.failover()
    assert TP in c.ctx.partitions_being_reassigned
    assert c.run(ZkReassignment(EPOCH, (PartitionTarget("t", 0, (2, 3)),))) == []


# --------------------------------------------------------------------------- /admin/preferred_replica_election


def test_zk_preferred_election_elects_and_deletes_the_path() -> None:
    c = _cluster()
    c.run(BrokerFailure(1, 101))
    assert _leader(c) == 2
    c.run(startup(1))
    c.catch_up(TP)
    c.run(ZkPreferredElection(EPOCH, (TP, TopicPartition("unknown", 0))))
    assert _leader(c) == 1
    assert [w.path for w in _zk(c, ZkOp.DELETE)] == [PREFERRED_REPLICA_ELECTION]
    # the watch firing again changes nothing but deleting the path
    c.run(ZkPreferredElection(EPOCH, (TP,)))
    assert _leader(c) == 1
    assert [w.path for w in _zk(c)] == [PREFERRED_REPLICA_ELECTION]
    assert not c.requests(RequestApi.LEADER_AND_ISR)


# --------------------------------------------------------------------------- /admin/delete_topics


def test_zk_topic_deletion_queues_the_topic() -> None:
    c = _cluster()
    c.run(ZkTopicDeletion(EPOCH, "t"))
    assert "t" in c.ctx.topics_to_be_deleted
    assert c.requests(RequestApi.STOP_REPLICA)
    assert not [w for w in _zk(c) if w.op is ZkOp.CREATE], "the tool created the znode already"
    c.ack_stop_replicas()
    assert "t" not in c.ctx.topic_partitions
    assert delete_topic_path("t") in [w.path for w in c.zk.history if w.op is ZkOp.DELETE]
    assert c.run(ZkTopicDeletion(EPOCH, "t")) != [] and [w.path for w in _zk(c)] == [delete_topic_path("t")]


def test_zk_topic_deletion_of_an_unknown_topic_or_with_deletion_off_removes_the_znode() -> None:
    c = _cluster()
    c.run(ZkTopicDeletion(EPOCH, "nosuch"))
    assert [(w.op, w.path) for w in _zk(c)] == [(ZkOp.DELETE, delete_topic_path("nosuch"))]
    c.run(ClusterConfigChanged(EPOCH, (("delete.topic.enable", "false"),)))
    assert c.state.config.delete_topic_enable is False
    c.run(ZkTopicDeletion(EPOCH, "t"))
    assert "t" not in c.ctx.topics_to_be_deleted
    assert [(w.op, w.path) for w in _zk(c)] == [(ZkOp.DELETE, delete_topic_path("t"))]


# --------------------------------------------------------------------------- /brokers/topics


def test_zk_topic_change_creates_a_topic_even_with_a_replica_broker_offline() -> None:
    c = Cluster.start([1, 2])
    c.run(
        ZkTopicChange(
            EPOCH,
            "n",
            ((0, (1, 3)), (1, (3, 4))),
            "AAAAAAAAAAAAAAAAAAAAAA",
            (("unclean.leader.election.enable", "true"),),
        )
    )
    p0, p1 = TopicPartition("n", 0), TopicPartition("n", 1)
    assert c.ctx.replicas(p0) == (1, 3) and c.ctx.replicas(p1) == (3, 4)
    assert c.ctx.partition_state(p0) is PartitionState.ONLINE and _leader(c, p0) == 1
    assert c.ctx.partition_state(p1) is PartitionState.NEW, "no live replica: it waits"
    assert c.ctx.topic_ids["n"] == "AAAAAAAAAAAAAAAAAAAAAA"
    assert c.ctx.unclean_leader_election["n"] is True
    assert not [w for w in _zk(c) if w.path == "/brokers/topics/n"], "the tool wrote the topic znode"
    c.run(startup(3))
    assert c.ctx.partition_state(p1) is PartitionState.ONLINE and _leader(c, p1) == 3
    # the same znode seen again (or the controller's own write coming back) adds nothing
    assert c.run(ZkTopicChange(EPOCH, "n", ((0, (1, 3)), (1, (3, 4))))) == []


def test_zk_topic_change_adds_partitions_and_not_to_a_topic_being_deleted() -> None:
    c = _cluster()
    c.run(ZkTopicChange(EPOCH, "t", ((0, (1, 2)), (1, (2, 3)))))
    assert _leader(c, TopicPartition("t", 1)) == 2
    c.run(ZkTopicDeletion(EPOCH, "t"))
    c.run(ZkTopicChange(EPOCH, "t", ((0, (1, 2)), (1, (2, 3)), (2, (3, 1)))))
    assert TopicPartition("t", 2) not in c.ctx.partition_assignments
    [restore] = _zk(c)
    assert restore.op is ZkOp.SET and restore.path == "/brokers/topics/t"
    assert set(json.loads(restore.data or "")["partitions"]) == {"0", "1"}


# --------------------------------------------------------------------------- /log_dir_event_notification


def test_zk_log_dir_events_probe_the_brokers_replicas_and_delete_the_notifications() -> None:
    c = _cluster()
    names = ("log_dir_event_0000000000", "log_dir_event_0000000001")
    c.run(ZkLogDirEvents(EPOCH, ((names[0], 1), (names[1], 1))))
    assert c.requests(RequestApi.LEADER_AND_ISR, broker=1)
    assert [w.path for w in _zk(c, ZkOp.DELETE)] == [f"/log_dir_event_notification/{n}" for n in names]


# --------------------------------------------------------------------------- configs


def test_kafka_controller_configs_names_defaults_and_errors() -> None:
    defaults = ControllerConfig()
    for kafka, (fname, _, default) in CONTROLLER_CONFIGS.items():
        assert getattr(defaults, fname) == default, kafka
    assert defaults.leader_imbalance_check_interval_seconds == 300
    assert parse_config("auto.leader.rebalance.enable", "FALSE") is False
    assert parse_config("leader.imbalance.per.broker.percentage", "25") == 25
    with pytest.raises(FormatError) as e:
        parse_config("leader.imbalance.check.interval.seconds", "0")
    assert e.value.field == "leader.imbalance.check.interval.seconds" and "at least 1" in e.value.reason
    with pytest.raises(FormatError, match="either true or false"):
        parse_config("delete.topic.enable", "maybe")
    with pytest.raises(FormatError, match="Not a number"):
        parse_config("leader.imbalance.per.broker.percentage", "ten")
    assert controller_fields([("log.retention.ms", "1"), ("delete.topic.enable", "false")]) == {
        "delete_topic_enable": False
    }
    static = {"unclean.leader.election.enable": "false", "delete.topic.enable": "true"}
    assert effective_configs(static, {"unclean.leader.election.enable": "true", "x": "y"}, {}) == (
        ("delete.topic.enable", "true"),
        ("unclean.leader.election.enable", "true"),
    )


def test_unclean_turned_on_for_the_cluster_elects_offline_partitions() -> None:
    c = _cluster(replicas=(1, 2))
    c.run(BrokerFailure(2, 102))
    c.run(BrokerFailure(1, 101))
    assert c.ctx.partition_state(TP) is PartitionState.OFFLINE
    c.run(startup(2))  # not in the ISR ([1]): no clean leader
    assert c.ctx.partition_state(TP) is PartitionState.OFFLINE
    c.run(ClusterConfigChanged(EPOCH, (("unclean.leader.election.enable", "true"),)))
    assert c.ctx.partition_state(TP) is PartitionState.ONLINE and _leader(c) == 2


def test_auto_rebalance_imbalance_sum_and_tick() -> None:
    c = _cluster()
    c.run(BrokerFailure(1, 101))
    c.run(startup(1))
    c.catch_up(TP)
    counts = imbalance(c.state)
    assert counts == {1: (1, 1)}
    assert brokers_over_imbalance(counts, 10) == (1,)
    c.run(AutoRebalanceTick((1,)))
    assert _leader(c) == 1
    assert brokers_over_imbalance(imbalance(c.state), 10) == ()


# --------------------------------------------------------------------------- the JSON forms


@pytest.mark.parametrize(
    "event",
    [
        ZkReassignment(3, (PartitionTarget("t", 0, (1, 2)), PartitionTarget("u", 1, (2,)))),
        ZkPreferredElection(3, (TopicPartition("t", 0),)),
        ZkTopicDeletion(3, "t"),
        ZkTopicChange(3, "t", ((0, (1, 2)), (1, (2, 3))), "abc", (("cleanup.policy", "compact"),)),
        ZkLogDirEvents(3, (("log_dir_event_0000000012", 4),)),
        ClusterConfigChanged(3, (("auto.leader.rebalance.enable", "false"),)),
    ],
)
def test_zk_events_round_trip(event: Event) -> None:
    assert event_from_json(event_to_json(event)) == event


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"type": "zk_delete_topic", "controller_epoch": -1, "topic": "t"}, "controller_epoch"),
        ({"type": "zk_delete_topic", "controller_epoch": 1, "topic": "a/b"}, "topic"),
        ({"type": "zk_topic_change", "controller_epoch": 1, "topic": "t", "partitions": [[0, []]]}, "partitions[0][1]"),
        (
            {"type": "zk_topic_change", "controller_epoch": 1, "topic": "t", "partitions": [[0, [1, 1]]]},
            "partitions[0][1]",
        ),
        ({"type": "zk_log_dir_events", "controller_epoch": 1, "notifications": [["x", 1]]}, "notifications[0][0]"),
        (
            {"type": "cluster_config", "controller_epoch": 1, "configs": {"delete.topic.enable": "no"}},
            "delete.topic.enable",
        ),
        ({"type": "zk_reassign_partitions", "controller_epoch": 1, "partitions": []}, "partitions"),
        ({"type": "zk_topic_change", "controller_epoch": 1, "topic": "t", "partitions": {"0": [1]}}, "partitions"),
        ({"type": "zk_topic_change", "controller_epoch": 1, "topic": "t", "partitions": [[0]]}, "partitions[0]"),
        ({"type": "zk_log_dir_events", "controller_epoch": 1, "notifications": "x"}, "notifications"),
        ({"type": "zk_log_dir_events", "controller_epoch": 1, "notifications": [[1]]}, "notifications[0]"),
    ],
)
def test_zk_events_bad_input_names_the_field(body: dict[str, object], field: str) -> None:
    with pytest.raises(FormatError) as e:
        event_from_json(json.dumps({"version": 1, **body}))
    assert e.value.field == field, e.value


def test_settings_take_kafka_names() -> None:
    from streaming.settings import Settings, SettingsError

    s = Settings().with_overrides(
        ["auto.leader.rebalance.enable=false", "leader_imbalance_check_interval_seconds=5", "delete.topic.enable=false"]
    )
    assert s.controller_config() == ControllerConfig(
        delete_topic_enable=False, auto_leader_rebalance_enable=False, leader_imbalance_check_interval_seconds=5
    )
    assert Settings.from_mapping({"unclean.leader.election.enable": True}).unclean_leader_election_enable is True
    assert (
        s.with_controller_configs(
            [("leader.imbalance.per.broker.percentage", "30")]
        ).leader_imbalance_per_broker_percentage
        == 30
    )
    with pytest.raises(SettingsError) as e:
        Settings().with_overrides(["leader.imbalance.check.interval.seconds=0"])
    assert e.value.key == "leader_imbalance_check_interval_seconds" and "at least 1" in e.value.reason
    with pytest.raises(SettingsError) as e:
        Settings().with_controller_configs([("auto.leader.rebalance.enable", "sometimes")])
    assert e.value.key == "auto_leader_rebalance_enable"
