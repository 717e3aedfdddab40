"""ZooKeeper-era tools drive the running controller (issue 14): kazoo writes Kafka's own JSON (``ZkData``:
``TopicZNode``, ``ReassignPartitionsZNode``, ``PreferredReplicaElectionZNode``, ``DeleteTopicsTopicZNode``,
``LogDirEventNotificationSequenceZNode``, ``IsrChangeNotificationSequenceZNode``, ``ConfigEntityZNode``) to real
ZooKeeper while the real query runs;
brokers are ZooKeeper registrations whose AlterPartition / StopReplica answers the test sends as a broker
would. Also: preferred leaders come back by auto leader rebalance within one check interval."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from controller_harness import Cluster, start_controller
from request_bodies import recipients
from waiting import wait_until

from core import events as ev

pytestmark = pytest.mark.spark

TOPIC_ID = "q2Pp0pA5TfS1mGJbsGv3Sg"


def _json(o: Any) -> bytes:
    return json.dumps(o).encode()


def _topic_znode(partitions: dict[int, list[int]]) -> bytes:
    """``TopicZNode.encode`` as Kafka 3.x writes it (version 3: with a topic id)."""
    return _json(
        {
            "version": 3,
            "topic_id": TOPIC_ID,
            "partitions": {str(p): r for p, r in partitions.items()},
            "adding_replicas": {},
            "removing_replicas": {},
        }
    )


def _catch_up(cluster: Cluster, topic: str, partition: int, add: int, timeout: float = 60.0) -> None:
    """The partition's leader adds ``add`` to its ISR (an AlterPartition, as the leader sends it). Like
    Kafka's ``AlterPartitionManager``, a leader whose request was fenced by a newer leader epoch or partition
    epoch (the controller moved the partition on meanwhile) sends it again from the state it now has."""
    deadline = time.monotonic() + timeout
    path = f"/brokers/topics/{topic}/partitions/{partition}/state"
    while True:
        data, stat = cluster.zk.get(path)
        state = json.loads(data)
        leader = state["leader"]
        cluster.send_broker_event(
            ev.AlterPartition(
                leader,
                cluster.epochs[leader],
                topic,
                partition,
                state["leader_epoch"],
                stat.version,
                tuple(dict.fromkeys((*state["isr"], add))),
            )
        )
        # until ``add`` is in the ISR, or the state moved on without it (then the request is sent again)

        def joined_or_moved_on(sent: int = stat.version) -> str | None:
            return ("joined" if add in (cluster.state(topic, partition) or {}).get("isr", []) else None) or (
                "moved on" if cluster.zk.get(path)[1].version != sent else None
            )

        outcome = wait_until(
            f"{add} in the ISR of {topic}-{partition}",
            joined_or_moved_on,
            timeout=max(0.1, deadline - time.monotonic()),
        )
        if outcome == "joined":
            return


def _leader_writes_isr(cluster: Cluster, topic: str, partition: int, isr: list[int]) -> None:
    """A leader below IBP 2.7 (Kafka's ``ZkAlterPartitionManager``): its own compare-and-set of the state znode,
    then its ``IsrChangeNotificationSequenceZNode``."""
    path = f"/brokers/topics/{topic}/partitions/{partition}/state"
    data, stat = cluster.zk.get(path)
    cluster.zk.set(path, _json({**json.loads(data), "isr": isr}), version=stat.version)
    cluster.zk.create(
        "/isr_change_notification/isr_change_",
        _json({"version": 1, "partitions": [{"topic": topic, "partition": partition}]}),
        sequence=True,
        makepath=True,
    )


def _isr_sent(cluster: Cluster, topic: str, partition: int, isr: list[int]) -> list[int]:
    """The brokers an UpdateMetadata gave ``isr`` as the partition's ISR."""
    return [
        b
        for m in cluster.requests("UpdateMetadata")
        for ts in m["body"].get("topicStates", [])
        for ps in ts["partitionStates"]
        if ts["topicName"] == topic and ps["partitionIndex"] == partition and ps["isr"] == isr
        for b in recipients(m)
    ]


def _return(cluster: Cluster, broker: int) -> None:
    """Register ``broker`` again and wait until the controller has seen it (its UpdateMetadata)."""
    before = len([m for m in cluster.requests("UpdateMetadata") if broker in recipients(m)])
    cluster.register_broker(broker)
    wait_until(
        f"broker {broker}'s startup handled",
        lambda: len([m for m in cluster.requests("UpdateMetadata") if broker in recipients(m)]) > before,
    )


def _events(cluster: Cluster, kind: str) -> list[dict[str, Any]]:
    return [e for e in cluster.read_topic(cluster.settings.broker_events_topic) if e.get("type") == kind]


def test_zookeeper_admin_paths_drive_the_running_controller(spark: Any, cluster: Cluster) -> None:
    for b in (1, 2, 3):
        cluster.register_broker(b)
    zk = cluster.zk
    controller = start_controller(spark, cluster.settings)
    try:
        # AdminZkClient.createTopic: the topic's config, then its znode; broker 4 is down
        zk.create("/config/topics/zt", _json({"version": 1, "config": {}}), makepath=True)
        zk.create("/brokers/topics/zt", _topic_znode({0: [1, 2], 1: [4, 2]}), makepath=True)
        # the first micro-batch pays the Python workers' start (tens of seconds on a busy machine)
        s1 = wait_until("zt-1 created with its live replica leading", lambda: cluster.state("zt", 1), timeout=240)
        assert s1["leader"] == 2 and s1["isr"] == [2]
        assert (cluster.state("zt", 0) or {})["leader"] == 1

        # AdminZkClient.addPartitions: the same znode with a partition more
        zk.set("/brokers/topics/zt", _topic_znode({0: [1, 2], 1: [4, 2], 2: [3, 1]}))
        s2 = wait_until("zt-2 added", lambda: cluster.state("zt", 2))
        assert s2["leader"] == 3 and s2["isr"] == [3, 1]

        # ISR changes of a leader below IBP 2.7: written to ZooKeeper by the leader, then notified; the
        # controller sends them to every broker, deletes the notification and takes the znode's version (the
        # elections below write zt-2 at the version the leader left, never refused: no partition_states_read)
        for isr in ([3], [3, 1]):
            before = len(_isr_sent(cluster, "zt", 2, isr))
            _leader_writes_isr(cluster, "zt", 2, isr)

            def sent_to_all(isr: list[int] = isr, before: int = before) -> bool:
                return sorted(_isr_sent(cluster, "zt", 2, isr)[before:]) == [1, 2, 3]

            wait_until(f"zt-2's ISR {isr} sent to every broker", sent_to_all)
            wait_until("the ISR notification deleted", lambda: zk.get_children("/isr_change_notification") == [])
        assert [e["states"][0][0] for e in _events(cluster, "zk_isr_change")] == [2, 2]

        # kafka-reassign-partitions --zookeeper: target broker 5 is down; the controller waits for it
        zk.create(
            "/admin/reassign_partitions",
            _json({"version": 1, "partitions": [{"topic": "zt", "partition": 0, "replicas": [2, 5]}]}),
        )
        topic = wait_until(
            "RS written", lambda: (t := cluster.znode("/brokers/topics/zt")) and t["adding_replicas"] and t
        )
        assert topic["partitions"]["0"] == [2, 5, 1] and topic["adding_replicas"] == {"0": [5]}
        assert topic["topic_id"] == TOPIC_ID
        # the watch fires again on a data change: Kafka reacts to the znode's creation only
        data, stat = zk.get("/admin/reassign_partitions")
        zk.set("/admin/reassign_partitions", data, version=stat.version)
        cluster.register_broker(5)
        wait_until(
            "LeaderAndIsr to the returning target broker",
            lambda: any(m["brokerId"] == 5 for m in cluster.requests("LeaderAndIsr")),
        )
        assert zk.exists("/admin/reassign_partitions") is not None, "in progress: the path stays"
        _catch_up(cluster, "zt", 0, 5)
        wait_until("the reassign path deleted", lambda: zk.exists("/admin/reassign_partitions") is None)
        done = cluster.znode("/brokers/topics/zt")
        assert done is not None and done["partitions"]["0"] == [2, 5] and done["adding_replicas"] == {}
        assert len(_events(cluster, "zk_reassign_partitions")) == 1, "published once, however often the watch fired"

        # preferred replica election (kafka-preferred-replica-election --zookeeper)
        cluster.kill_broker(3)
        wait_until("zt-2 led by 1", lambda: (cluster.state("zt", 2) or {}).get("leader") == 1)
        _return(cluster, 3)
        _catch_up(cluster, "zt", 2, 3)
        zk.create(
            "/admin/preferred_replica_election",
            _json({"version": 1, "partitions": [{"topic": "zt", "partition": 2}]}),
        )
        wait_until("zt-2 back on its preferred replica", lambda: (cluster.state("zt", 2) or {}).get("leader") == 3)
        wait_until("the election path deleted", lambda: zk.exists("/admin/preferred_replica_election") is None)

        # a log dir failed on broker 2: LogDirEventNotificationSequenceZNode
        before = len([m for m in cluster.requests("LeaderAndIsr") if m["brokerId"] == 2])
        zk.create(
            "/log_dir_event_notification/log_dir_event_",
            _json({"version": 1, "broker": 2, "event": 1}),
            sequence=True,
            makepath=True,
        )
        wait_until(
            "LeaderAndIsr to broker 2's replicas",
            lambda: len([m for m in cluster.requests("LeaderAndIsr") if m["brokerId"] == 2]) > before,
        )
        wait_until("the notification deleted", lambda: zk.get_children("/log_dir_event_notification") == [])

        def delete_requests() -> dict[int, list[ev.PartitionError]]:
            out: dict[int, list[ev.PartitionError]] = {}
            for m in cluster.requests("StopReplica"):
                for ts in m["body"]["topicStates"]:
                    for ps in ts["partitionStates"]:
                        if ts["topicName"] == "zt" and ps["deletePartition"]:
                            out.setdefault(m["brokerId"], []).append(ev.PartitionError("zt", ps["partitionIndex"]))
            return out

        # kafka-topics --delete --zookeeper: /admin/delete_topics/<t>, no data. Broker 4 (a replica of zt-1)
        # is down: the topic waits, ineligible for deletion, until it is back (Kafka's TopicDeletionManager)
        zk.create("/admin/delete_topics/zt", b"", makepath=True)
        live = wait_until(
            "StopReplica (delete) to the live replicas", lambda: (d := delete_requests()) and len(d) >= 4 and d
        )
        assert sorted(live) == [1, 2, 3, 5]
        for broker, parts in sorted(live.items()):
            cluster.send_broker_event(ev.StopReplicaResponse(broker, tuple(parts)))
        _return(cluster, 4)
        asked = wait_until("StopReplica (delete) to the returning replica", lambda: delete_requests().get(4))
        cluster.send_broker_event(ev.StopReplicaResponse(4, tuple(asked)))
        wait_until("zt deleted", lambda: zk.exists("/brokers/topics/zt") is None, timeout=90)
        wait_until("its delete_topics child removed", lambda: zk.exists("/admin/delete_topics/zt") is None)
        assert _events(cluster, "partition_states_read") == [], "no write of the controller was refused"
        assert controller.error == []
    finally:
        controller.stop()
    assert not controller.error


def test_preferred_leaders_come_back_within_one_check_interval(spark: Any, cluster: Cluster) -> None:
    """Auto leader rebalance, with ``auto.leader.rebalance.enable`` off in the settings and on in
    ``/config/brokers/<default>`` (the dynamic config wins, as in Kafka)."""
    interval = 4
    settings = cluster.settings.with_overrides(
        ["auto.leader.rebalance.enable=false", f"leader.imbalance.check.interval.seconds={interval}"]
    )
    cluster.zk.create(
        "/config/brokers/<default>",
        _json({"version": 1, "config": {"auto.leader.rebalance.enable": "true"}}),
        makepath=True,
    )
    for b in (1, 2):
        cluster.register_broker(b)
    controller = start_controller(spark, settings)
    try:
        cluster.send_admin(ev.CreateTopic("c", "ar", 2, 2, replica_assignment=((1, 2), (1, 2))))
        wait_until(
            "ar online",
            lambda: all((cluster.state("ar", p) or {}).get("leader") == 1 for p in (0, 1)),
            timeout=240,
        )
        cluster.kill_broker(1)
        wait_until("led by 2", lambda: all((cluster.state("ar", p) or {}).get("leader") == 2 for p in (0, 1)))
        _return(cluster, 1)
        for p in (0, 1):
            _catch_up(cluster, "ar", p, 1)
        caught_up = time.monotonic()
        wait_until(
            "the preferred leaders back",
            lambda: all((cluster.state("ar", p) or {}).get("leader") == 1 for p in (0, 1)),
            timeout=60,
        )
        took = time.monotonic() - caught_up
        # one check interval, plus the micro-batch that applies the tick (trigger 0.5 s, ~1-2 s per batch)
        assert took <= interval + 4, f"took {took:.1f} s"
        ticks = _events(cluster, "auto_rebalance_tick")
        assert ticks and ticks[-1]["brokers"] == [1]
    finally:
        controller.stop()
    assert not controller.error
