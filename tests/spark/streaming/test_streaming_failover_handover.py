"""The controller hand-over against real ZooKeeper, the real broker and the shared SparkSession.

* A takeover on a used checkpoint with commands in flight: nothing is processed under the new epoch
  before its failover snapshot, so a reassignment that arrived while no controller ran (it writes the
  topic znode) is in the new controller's state as it is in ZooKeeper, and runs to its end.
* Every documented start on a new checkpoint (``starting_offsets`` ``latest`` and ``earliest``) loads the
  cluster from the controller's own failover reference and answers commands.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from typing import Any

import pytest
from controller_harness import Cluster, start_controller
from waiting import wait_until

from core import events as ev
from core.model import PartitionTarget
from streaming.driver.startup import uncommitted_batch
from streaming.runtime.checkpoint_fs import FileSystemCheckpointStore

pytestmark = pytest.mark.spark


class SnapshotPublished(logging.Handler):
    """Set once a controller in this process logs its failover snapshot, which it does after publishing the
    snapshot's reference (:func:`streaming.driver.startup.hand_off`): the tree was read before that."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.seen = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("failover snapshot:"):
            self.seen.set()


class HeldZooKeeper:
    """Wraps the real ZooKeeper sink: every micro-batch with writes, but the one a takeover replays before
    reading its snapshot (``replayed``), waits until the failover snapshot is published before writing. A query
    that ran ahead of its snapshot (the race this module shows gone) so writes, every time, what the snapshot
    then misses; a controller in order publishes the snapshot before such a batch runs (the failover barrier),
    so none waits longer than the hand-off takes to log it."""

    def __init__(self, inner: Any, published: threading.Event, replayed: int | None) -> None:
        self.inner = inner
        self.published = published
        self.replayed = replayed
        self.batches_with_writes: list[int] = []

    def write_batch(self, batch_id: int, writes: Any) -> Any:
        if writes:
            self.batches_with_writes.append(batch_id)
            if (self.replayed is None or batch_id > self.replayed) and not self.published.wait(120):
                raise AssertionError(f"micro-batch {batch_id} has writes and no failover snapshot came in 120 s")
        return self.inner.write_batch(batch_id, writes)


def test_a_takeover_with_a_reassignment_in_flight_writes_nothing_its_snapshot_misses(
    spark: Any, cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    for b in (1, 2, 3, 4, 5, 6):
        cluster.register_broker(b)
    first = start_controller(spark, cluster.settings)
    try:
        cluster.send_admin(ev.CreateTopic("c1", "moving", 1, 3, replica_assignment=((1, 2, 3),)))
        wait_until("moving online", lambda: cluster.state("moving", 0))
    finally:
        first.stop()
    assert not first.error

    # while no controller runs: a reassignment (its first step writes the topic znode) and a creation
    cluster.send_admin(ev.ReassignPartitions("r1", (PartitionTarget("moving", 0, (4, 5, 6)),)))
    cluster.send_admin(ev.CreateTopic("c2", "during", 1, 2))
    held: list[HeldZooKeeper] = []
    published = SnapshotPublished()
    replayed = uncommitted_batch(FileSystemCheckpointStore.for_spark(spark, cluster.settings.checkpoint_dir))

    def wrap(zk_sink: Any, request_sink: Any) -> tuple[Any, Any]:
        held.append(HeldZooKeeper(zk_sink, published.seen, replayed))
        return held[0], request_sink

    app_log = logging.getLogger("livectl.app")
    app_log.addHandler(published)
    try:
        with caplog.at_level(logging.INFO, logger="livectl.app"):
            second = start_controller(spark, cluster.settings, wrap_sinks=wrap)
    finally:
        app_log.removeHandler(published)
    epoch = int(cluster.zk.get("/controller_epoch")[0])
    try:
        topic = wait_until(
            "RS written",
            lambda: (t := cluster.znode("/brokers/topics/moving")) and t["partitions"]["0"] == [4, 5, 6, 1, 2, 3] and t,
        )
        assert topic is not None  # wait_until returns only what holds (here for mypy)
        assert topic["adding_replicas"] == {"0": [4, 5, 6]} and topic["removing_replicas"] == {"0": [1, 2, 3]}
        wait_until("during online", lambda: cluster.state("during", 0))
        # the new replicas caught up: the leader says so, at the leader epoch ZooKeeper holds
        state = cluster.state("moving", 0)
        assert state is not None
        version = cluster.zk.get("/brokers/topics/moving/partitions/0/state")[1].version
        cluster.send_broker_event(
            ev.AlterPartition(
                state["leader"],
                cluster.epochs[state["leader"]],
                "moving",
                0,
                state["leader_epoch"],
                version,
                (1, 2, 3, 4, 5, 6),
            )
        )
        final = wait_until(
            "the reassignment completed",
            lambda: (t := cluster.znode("/brokers/topics/moving")) and t["partitions"]["0"] == [4, 5, 6] and t,
            timeout=90,
        )
        assert final is not None
        assert final["adding_replicas"] == {} and final["removing_replicas"] == {}
        s = cluster.state("moving", 0)
        assert s is not None and s["leader"] == 4 and s["isr"] == [4, 5, 6] and s["controller_epoch"] == epoch
        # answered once with its final result, by the new controller
        results = wait_until(
            "r1's final result",
            lambda: (
                (r := [x for x in cluster.admin_results() if x["request_id"] == "r1"]) and r[-1]["status"] == "ok" and r
            ),
        )
        assert [r["status"] for r in results if r["status"] != "in_progress"] == ["ok"]
        assert all(r["controller_epoch"] == epoch for r in results)
        # brokers and ZooKeeper agree: the newest LeaderAndIsr each new replica got is ZooKeeper's state
        for broker in (4, 5, 6):
            newest = [
                ps
                for m in cluster.requests("LeaderAndIsr")
                if m["brokerId"] == broker
                for ts in m["body"]["topicStates"]
                if ts["topicName"] == "moving"
                for ps in ts["partitionStates"]
            ][-1]
            assert (newest["leader"], newest["leaderEpoch"], newest["isr"]) == (
                s["leader"],
                s["leader_epoch"],
                s["isr"],
            )
        assert held[0].batches_with_writes, "the new controller wrote nothing"
    finally:
        second.stop()
    assert not second.error


@pytest.mark.parametrize("starting_offsets", ["latest", "earliest"])
def test_a_new_checkpoint_loads_the_cluster_from_its_own_reference(
    spark: Any, cluster: Cluster, tmp_path: Any, starting_offsets: str
) -> None:
    for b in (1, 2, 3):
        cluster.register_broker(b)
    # history on the topic, from before this controller (and its checkpoint) existed
    cluster.send_admin(ev.CreateTopic("old", "history", 1, 1))
    settings = dataclasses.replace(
        cluster.settings, starting_offsets=starting_offsets, checkpoint_dir=str(tmp_path / f"new-{starting_offsets}")
    )
    controller = start_controller(spark, settings)
    try:
        cluster.send_admin(ev.CreateTopic("new", "fresh", 2, 3))
        wait_until("fresh online", lambda: all(cluster.state("fresh", p) for p in (0, 1)))
        results = wait_until(
            "the command answered",
            lambda: (r := {x["request_id"]: x for x in cluster.admin_results()}).get("new") and r,
        )
        assert results is not None  # wait_until returns only what holds (here for mypy)
        assert results["new"]["status"] == "ok"
        assert cluster.znode("/brokers/topics/history") is None, "history was applied"
        if starting_offsets == "earliest":
            # read, but older than the first failover: answered so that its sender can retry
            old = wait_until(
                "the old command answered", lambda: {x["request_id"]: x for x in cluster.admin_results()}.get("old")
            )
            assert old is not None
            assert old["error"] == "NOT_CONTROLLER"
        else:
            assert "old" not in results, "latest read a record from before the start"
        metrics = wait_until(
            "the cluster loaded",
            lambda: (
                (p := controller.app.query.lastProgress)
                and (m := p["observedMetrics"]["livectl"])["GlobalTopicCount"] == 1
                and m
            ),
        )
        assert metrics["GlobalPartitionCount"] == 2 and metrics["ActiveControllerCount"] == 1
    finally:
        controller.stop()
    assert not controller.error
