"""The live controller query against real ZooKeeper, the real broker and Spark in local mode."""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any

import pytest
from controller_harness import Cluster, start_controller
from spark_status import job_descriptions
from waiting import wait_until

from core import events as ev
from core.model import PartitionTarget
from streaming.monitoring.audit_log import default_audit_dir
from streaming.source.query_source import connector_jars

pytestmark = pytest.mark.spark


def lisr_entries(cluster: Cluster, topic: str) -> list[tuple[int, int, dict[str, Any]]]:
    """(broker the message went to, partition, partition state) of every LeaderAndIsr entry for ``topic``."""
    out: list[tuple[int, int, dict[str, Any]]] = []
    for m in cluster.requests("LeaderAndIsr"):
        for ts in m["body"]["topicStates"]:
            if ts["topicName"] == topic:
                out.extend((int(m["brokerId"]), ps["partitionIndex"], ps) for ps in ts["partitionStates"])
    return out


def test_create_topic_bad_command_and_broker_failure(spark: Any, cluster: Cluster) -> None:
    epochs = {b: cluster.register_broker(b) for b in (1, 2, 3)}
    listeners = spark._jsparkSession.streams().listListeners
    before = len(listeners())
    controller = start_controller(spark, cluster.settings)
    try:
        # a bad command and a good one, in the same micro-batch
        cluster.send_admin(
            '{"version":1,"type":"create_topic","request_id":"bad","topic":"x","partitions":0,"replication_factor":1}'
        )
        cluster.send_admin(ev.CreateTopic("good", "orders", 2, 3, replica_assignment=((1, 2, 3), (2, 3, 1))))

        # the first query of the session also starts the Python workers: slow on a loaded machine
        wait_until("orders online", lambda: all(cluster.state("orders", p) for p in (0, 1)), timeout=180)
        topic = cluster.znode("/brokers/topics/orders")
        assert topic is not None
        assert topic["partitions"] == {"0": [1, 2, 3], "1": [2, 3, 1]}
        assert topic["adding_replicas"] == {} and topic["removing_replicas"] == {}
        controller_epoch = int(cluster.zk.get("/controller_epoch")[0])
        assert cluster.state("orders", 0) == {
            "version": 1,
            "leader": 1,
            "leader_epoch": 0,
            "controller_epoch": controller_epoch,
            "isr": [1, 2, 3],
        }
        assert cluster.state("orders", 1) == {
            "version": 1,
            "leader": 2,
            "leader_epoch": 0,
            "controller_epoch": controller_epoch,
            "isr": [2, 3, 1],
        }
        controller_znode = cluster.znode("/controller")
        assert controller_znode is not None and controller_znode["brokerid"] == cluster.settings.controller_id

        entries = wait_until(
            "LeaderAndIsr for every replica", lambda: (e := lisr_entries(cluster, "orders")) and len(e) >= 6 and e
        )
        assert sorted((b, p) for b, p, _ in entries) == sorted([(1, 0), (2, 0), (3, 0), (1, 1), (2, 1), (3, 1)]), (
            "one LeaderAndIsr per replica"
        )
        for _b, _p, ps in entries:
            assert ps["leaderEpoch"] == 0 and ps["isNew"] is True
        lisr_msgs = cluster.requests("LeaderAndIsr")
        assert {m["brokerId"] for m in lisr_msgs} == {1, 2, 3}
        assert all(m["body"]["brokerEpoch"] == epochs[m["brokerId"]] for m in lisr_msgs)

        rejected = wait_until("the bad command rejected", cluster.rejected)
        assert len(rejected) == 1
        assert rejected[0]["source"]["topic"] == cluster.settings.admin_topic
        assert any("partitions_positive" in r for r in rejected[0]["reasons"])
        results = wait_until("two admin results", lambda: len(r := cluster.admin_results()) >= 2 and r)
        by_id = {r["request_id"]: r for r in results}
        assert by_id["good"]["status"] == "ok"
        assert by_id["bad"]["status"] == "error" and by_id["bad"]["error"] == "INVALID_REQUEST"

        # partition 1's state znode changes under the controller (same content, a new version): its next
        # compare-and-set there is refused (BadVersion); it re-reads the znode and makes the change again
        path = "/brokers/topics/orders/partitions/1/state"
        data, stat = cluster.zk.get(path)
        cluster.zk.set(path, data, version=stat.version)

        # broker 1 dies: partition 0 moves to broker 2, both ISRs lose broker 1
        cluster.kill_broker(1)
        wait_until("partition 0 re-elected", lambda: (s := cluster.state("orders", 0)) and s["leader"] == 2)
        wait_until(
            "partition 1's ISR shrunk after the re-read",
            lambda: (s := cluster.state("orders", 1)) and s["isr"] == [2, 3],
        )
        assert cluster.zk.get(path)[1].version == stat.version + 2  # the refused write, then the retry
        s0, s1 = cluster.state("orders", 0), cluster.state("orders", 1)
        assert s0 is not None and s1 is not None
        assert s0["isr"] == [2, 3] and s0["leader_epoch"] == 1
        assert s1["leader"] == 2 and s1["isr"] == [2, 3] and s1["leader_epoch"] == 1
        progress = controller.app.query.lastProgress
        metrics = progress["observedMetrics"]["livectl"]
        assert metrics["ActiveControllerCount"] == 1
        assert metrics["GlobalTopicCount"] == 1 and metrics["GlobalPartitionCount"] == 2
        assert metrics["OfflinePartitionsCount"] == 0

        # the Spark UI: the newest batch summary says the state after the failure (broker 1 gone from
        # both ISRs: two partitions under-replicated), the election was announced
        cid = cluster.settings.controller_id
        descriptions = job_descriptions(spark.sparkContext, limit=500)
        summary = next(
            d for d in descriptions if d.startswith(f"livectl c{cid} e{controller_epoch} batch ") and ": offline" in d
        )
        assert ": offline 0, URP 2, under min ISR 0, reassigning 0; imbalanced 1, topics 1, partitions 2" in summary, (
            summary
        )
        assert f"livectl c{cid} e{controller_epoch} active: elected controller" in descriptions
        assert len(listeners()) > before
    finally:
        controller.stop()
    assert not controller.error
    assert len(listeners()) == before, "the run removed the query listeners it added to the session"

    # the state-change log, read by Spark SQL: the refused compare-and-set and its retry, the leader
    # moved to broker 2 by a LeaderAndIsr to brokers 2 and 3, the admin result — each once
    audit_dir = default_audit_dir(controller.app.settings.checkpoint_dir)
    spark.read.parquet(audit_dir).createOrReplaceTempView("state_changes")
    rows = spark.sql(
        "SELECT kind, action, outcome, error, brokers, detail, controller_epoch FROM state_changes "
        "WHERE topic = 'orders' AND partition = 1 AND kind = 'zk_write' ORDER BY time, batch_id, seq"
    ).collect()
    assert [(r.outcome, r.error) for r in rows][-2:] == [("refused", "BadVersion"), ("written", None)]
    assert {r.controller_epoch for r in rows} == {controller_epoch}
    moved = spark.sql(
        "SELECT brokers, detail FROM state_changes WHERE kind = 'request' AND action = 'LeaderAndIsr' "
        "AND topic = 'orders' AND partition = 0 AND get_json_object(detail, '$.leader') = 2"
    ).collect()
    assert moved and all(sorted(r.brokers) == [2, 3] for r in moved)
    dupes = spark.sql(
        "SELECT batch_id, seq, count(*) AS n FROM state_changes GROUP BY batch_id, seq HAVING n > 1"
    ).collect()
    assert dupes == []
    good = spark.sql("SELECT outcome, date FROM state_changes WHERE request_id = 'good'").collect()
    assert [r.outcome for r in good] == ["ok"] and good[0].date is not None


class CrashOnStopReplica:
    """Wraps the real request sink: the first batch holding a StopReplica crashes after the ZooKeeper
    writes of that batch and before any request is written, as a driver dying mid-batch would."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.crashed = False

    def write_requests(self, batch_id: int, requests: Any) -> Any:
        if not self.crashed and any(r.api.value == "StopReplica" for r in requests):
            self.crashed = True
            raise RuntimeError(f"injected crash in micro-batch {batch_id}")
        return self.inner.write_requests(batch_id, requests)

    def write_admin_results(self, batch_id: int, results: Any) -> Any:
        return self.inner.write_admin_results(batch_id, results)

    def write_rejected(self, batch_id: int, rejected: Any) -> Any:
        return self.inner.write_rejected(batch_id, rejected)


@pytest.mark.parametrize(
    "query_source",
    [
        "python",
        # Spark's format("kafka"): the restart publishes the failover reference before the query starts, and
        # the crashed batch is replayed by the Python source held at the barrier (streaming.driver.app)
        pytest.param(
            "kafka",
            marks=pytest.mark.skipif(not connector_jars(""), reason="Spark's Kafka connector: run scripts/setup"),
        ),
    ],
)
def test_reassignment_survives_restart_and_a_crash_inside_a_micro_batch(
    spark: Any, cluster: Cluster, query_source: str
) -> None:
    cluster.settings = replace(cluster.settings, query_source=query_source)
    for b in (1, 2, 3, 4, 5, 6):
        cluster.register_broker(b)
    controller = start_controller(spark, cluster.settings)

    def source_ran(c: Any) -> str:
        """The source of the controller's query as Spark names it, once a batch reported it."""
        progress = c.app.query.lastProgress
        described = str(progress["sources"][0]["description"]) if progress else ""
        assert not described or ("KafkaV2[Subscribe[" in described) == (query_source == "kafka"), described
        return described

    try:
        cluster.send_admin(ev.CreateTopic("c1", "moving", 1, 3, replica_assignment=((1, 2, 3),)))
        wait_until("moving online", lambda: cluster.state("moving", 0))
        wait_until("a batch's progress", lambda: source_ran(controller))
        cluster.send_admin(ev.ReassignPartitions("r1", (PartitionTarget("moving", 0, (4, 5, 6)),)))
        # RS = distinct(target ++ origin) is written first
        topic = wait_until(
            "RS written",
            lambda: (t := cluster.znode("/brokers/topics/moving")) and t["partitions"]["0"] == [4, 5, 6, 1, 2, 3] and t,
        )
        assert topic["adding_replicas"] == {"0": [4, 5, 6]}
        assert topic["removing_replicas"] == {"0": [1, 2, 3]}
    finally:
        controller.stop()
    assert not controller.error

    # a new controller takes over in the middle of the reassignment; it crashes inside the micro-batch
    # that completes it, after that batch's ZooKeeper writes and before its requests
    crash: list[CrashOnStopReplica] = []

    def wrap(zk_sink: Any, request_sink: Any) -> tuple[Any, Any]:
        crash.append(CrashOnStopReplica(request_sink))
        return zk_sink, crash[0]

    controller = start_controller(spark, cluster.settings, wrap_sinks=wrap)
    epoch = int(cluster.zk.get("/controller_epoch")[0])
    assert epoch == 2
    try:
        # the leader acts on the newest LeaderAndIsr it received (the new controller resumes the move)
        wait_until(
            "the resumed reassignment's LeaderAndIsr",
            lambda: any(m["controllerEpoch"] == epoch and m["brokerId"] == 1 for m in cluster.requests("LeaderAndIsr")),
        )
        state = cluster.state("moving", 0)
        _, stat = cluster.zk.get("/brokers/topics/moving/partitions/0/state")
        assert state is not None
        cluster.send_broker_event(
            ev.AlterPartition(
                state["leader"],
                cluster.epochs[state["leader"]],
                "moving",
                0,
                state["leader_epoch"],
                stat.version,
                (1, 2, 3, 4, 5, 6),
            )
        )
        wait_until("the injected crash", lambda: controller.error or not controller.thread.is_alive(), timeout=90)
    finally:
        controller.stop()
    assert crash[0].crashed and controller.error, "the controller should have died inside the micro-batch"
    written_before_replay = cluster.state("moving", 0)
    assert written_before_replay is not None and written_before_replay["leader"] == 4

    controller = start_controller(spark, cluster.settings)
    try:
        final = wait_until(
            "reassignment complete",
            lambda: (t := cluster.znode("/brokers/topics/moving")) and t["partitions"]["0"] == [4, 5, 6] and t,
        )
        assert final["adding_replicas"] == {} and final["removing_replicas"] == {}
        wait_until("a batch's progress", lambda: source_ran(controller))
        s = cluster.state("moving", 0)
        assert s is not None and s["leader"] == 4 and s["isr"] == [4, 5, 6]
        # the replay wrote nothing twice in ZooKeeper: the state znode is where the crashed batch left it
        assert s == written_before_replay

        def deletes() -> list[int]:
            out: list[int] = []
            for m in cluster.requests("StopReplica"):
                for ts in m["body"]["topicStates"]:
                    if ts["topicName"] == "moving":
                        out.extend(m["brokerId"] for p in ts["partitionStates"] if p["deletePartition"])
            return out

        assert sorted(wait_until("StopReplica(delete) to the old replicas", deletes)) == [1, 2, 3]
        identities = [(m["controllerEpoch"], m["batchId"], m["brokerId"], m["api"]) for m in cluster.requests()]
        assert len(identities) == len(set(identities)), "a request was written twice"
    finally:
        controller.stop()
    assert not controller.error


def test_zombie_is_fenced_and_a_cold_start_rebuilds_from_zookeeper(spark: Any, cluster: Cluster, tmp_path: Any) -> None:
    for b in (1, 2, 3):
        cluster.register_broker(b)
    zombie = start_controller(spark, cluster.settings)
    try:
        cluster.send_admin(ev.CreateTopic("c1", "kept", 2, 2, replica_assignment=((1, 2), (2, 3))))
        wait_until("kept online", lambda: all(cluster.state("kept", p) for p in (0, 1)))
        # another controller is elected behind the zombie's back: /controller_epoch moves on
        # while the zombie's own ZooKeeper session and /controller znode stay as they were
        data, _ = cluster.zk.get("/controller_epoch")
        cluster.zk.set("/controller_epoch", str(int(data) + 1).encode())
        cluster.send_admin(ev.CreateTopic("c2", "refused", 1, 1))
        wait_until("the zombie to stop", lambda: not zombie.thread.is_alive(), timeout=90)
    finally:
        zombie.stop()
    from streaming.driver.shutdown import ControllerStoppedError

    assert zombie.error and isinstance(zombie.error[0], ControllerStoppedError)
    assert zombie.app.dispatcher is not None and zombie.app.dispatcher.fenced
    assert cluster.znode("/brokers/topics/refused") is None, "a fenced controller's write got through"
    assert not any(r["request_id"] == "c2" for r in cluster.admin_results())

    # broker 1 dies while no controller runs: partition 0's leader is gone
    cluster.kill_broker(1)
    cold = cluster.settings.__class__.from_mapping(
        {**cluster.settings.__dict__, "checkpoint_dir": str(tmp_path / "cold-checkpoint")}
    )
    controller = start_controller(spark, cold)
    try:
        # rebuilt from ZooKeeper: the partition led by the dead broker is elected again, the ISRs shrink
        s0 = wait_until("kept-0 re-elected", lambda: (s := cluster.state("kept", 0)) and s["leader"] == 2 and s)
        assert s0["isr"] == [2]
        s1 = wait_until("kept-1 unchanged", lambda: cluster.state("kept", 1))
        assert s1["leader"] == 2 and s1["isr"] == [2, 3]
        # and it runs on: a command submitted now is carried out
        cluster.send_admin(ev.CreateTopic("c3", "fresh", 1, 2))
        wait_until("fresh online", lambda: cluster.state("fresh", 0))
        # lastProgress is published once the micro-batch's foreachBatch has returned
        metrics = wait_until(
            "metrics of both topics",
            lambda: (
                (p := controller.app.query.lastProgress)
                and (m := p["observedMetrics"]["livectl"])["GlobalTopicCount"] == 2
                and m
            ),
        )
        assert metrics["ActiveControllerCount"] == 1 and metrics["GlobalPartitionCount"] == 3
    finally:
        controller.stop()
    assert not controller.error


def _logged(caplog: pytest.LogCaptureFixture, text: str) -> bool:
    return any(text in r.getMessage() for r in caplog.records)


def test_standby_takes_over_from_the_shared_checkpoint(
    spark: Any, cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    import logging
    import threading

    from streaming.driver.app import ControllerApp

    for b in (1, 2, 3):
        cluster.register_broker(b)
    active = start_controller(spark, cluster.settings)
    standby_app = ControllerApp(cluster.settings, spark=spark)
    standby_ready = threading.Event()
    standby_errors: list[BaseException] = []

    def run_standby() -> None:
        try:
            standby_app.run(ready=standby_ready)
        except BaseException as e:
            standby_errors.append(e)

    standby = threading.Thread(target=run_standby, name="livectl-standby", daemon=True)
    try:
        cluster.send_admin(ev.CreateTopic("c1", "before", 1, 3))
        wait_until("before online", lambda: cluster.state("before", 0))
        caplog.set_level(logging.INFO, logger="livectl.app")
        standby.start()
        # the standby waits for the lease while the active controller works: it reads the tree ahead and
        # decides each bucket's failover batch for it (streaming.query.decided). Deciding ahead is a standby's
        # alone: once it has, it is seen waiting, not started
        wait_until("the standby to decide ahead", lambda: _logged(caplog, "standby: decided the failover batch"))
        assert not standby_ready.is_set()
        epoch_before = int(cluster.zk.get("/controller_epoch")[0])

        # the active controller's ZooKeeper session ends, as when its driver dies
        active.app.zk.stop()
        wait_until("the standby to take over", standby_ready.is_set, timeout=120)
        assert int(cluster.zk.get("/controller_epoch")[0]) == epoch_before + 1
        # nothing changed in ZooKeeper since: every bucket's batch was the one decided, and handed over
        buckets = cluster.settings.num_buckets or int(spark.conf.get("spark.sql.shuffle.partitions"))
        assert _logged(caplog, f"{buckets} of {buckets} buckets' failover batch decided ahead")
        wait_until("the old controller to stop", lambda: not active.thread.is_alive(), timeout=60)

        # the new controller resumed the shared checkpoint: it knows the topic and acts on new commands
        cluster.send_admin(ev.CreatePartitions("p1", "before", 2))
        wait_until("the new partition", lambda: cluster.state("before", 1))
        cluster.kill_broker(1)
        wait_until(
            "broker 1 out of every ISR",
            lambda: all((s := cluster.state("before", p)) and 1 not in s["isr"] for p in (0, 1)),
        )
        results = {r["request_id"]: r for r in cluster.admin_results()}
        assert results["p1"]["status"] == "ok" and results["p1"]["controller_epoch"] == epoch_before + 1
        # the Spark UI said it: the standby waiting, then elected under the next epoch
        cid = cluster.settings.controller_id
        descriptions = job_descriptions(spark.sparkContext, limit=1000)
        waited = f"livectl c{cid} standby: waiting for the controller lease (held by c{cid})"
        elected = f"livectl c{cid} e{epoch_before + 1} active: elected controller"
        assert waited in descriptions and elected in descriptions
        assert descriptions.index(elected) < descriptions.index(waited)  # newest first
    finally:
        standby_app.stop()
        standby.join(60)
        active.stop()
    assert not standby_errors


def _offset_log(checkpoint: str) -> dict[int, dict[str, Any]]:
    """Batch id → the source's end offset, from the checkpoint's offset log."""
    import json
    from pathlib import Path

    out: dict[int, dict[str, Any]] = {}
    for path in (Path(checkpoint) / "offsets").iterdir():
        if path.name.isdigit():
            out[int(path.name)] = json.loads(path.read_text().splitlines()[2])
    return out


def test_a_takeover_meets_its_backlog_after_a_failover_batch_of_one_record(spark: Any, cluster: Cluster) -> None:
    """Broker requests piled up while no controller ran (issue 41: 210k-884k in one failover batch at 100k):
    the new controller's failover batch is its reference alone, the requests follow ``max_records_per_batch``
    at a time, and each is answered once, on the snapshot."""
    cluster.settings = replace(cluster.settings, max_records_per_batch=4)
    epochs = {b: cluster.register_broker(b) for b in (1, 2, 3)}
    controller = start_controller(spark, cluster.settings)
    try:
        cluster.send_admin(ev.CreateTopic("c1", "piled", 1, 3, replica_assignment=((1, 2, 3),)))
        wait_until("piled online", lambda: cluster.state("piled", 0), timeout=180)
    finally:
        controller.stop()
    assert not controller.error
    before = max(_offset_log(cluster.settings.checkpoint_dir))
    # 10 proposals the leader sends while no controller answers: only the first can apply
    state = cluster.state("piled", 0)
    _, stat = cluster.zk.get("/brokers/topics/piled/partitions/0/state")
    assert state is not None
    for n in range(10):
        cluster.send_broker_event(
            ev.AlterPartition(1, epochs[1], "piled", 0, state["leader_epoch"], stat.version, (1, 2), correlation_id=n)
        )
    controller = start_controller(spark, cluster.settings)
    try:
        epoch = int(cluster.zk.get("/controller_epoch")[0])

        def answered() -> list[int]:
            ids = [
                p["correlationId"]
                for m in cluster.requests("AlterPartitionResponse")
                if m["controllerEpoch"] == epoch
                for t in m["body"]["topics"]
                for p in t["partitions"]
            ]
            return ids if len(ids) >= 10 else []

        ids = wait_until("the 10 proposals answered", answered, timeout=120)
        assert sorted(ids) == list(range(10))  # each once
        isr = cluster.state("piled", 0)
        assert isr is not None and isr["isr"] == [1, 2]
    finally:
        controller.stop()
    assert not controller.error
    log = _offset_log(cluster.settings.checkpoint_dir)
    events = cluster.settings.broker_events_topic
    run = [log[b] for b in sorted(log) if b > before]
    # the failover batch: no position moved, the reference handed out ahead of the 10 proposals
    assert run[0][events] == log[before][events] and run[0]["@ahead"]["topic"] == events
    # then at most 4 records a batch (of every topic), the reference skipped when the reads pass it
    for prev, end in itertools.pairwise(run):
        moved = sum(o - prev[t][p] for t, parts in end.items() if not t.startswith("@") for p, o in parts.items())
        assert moved <= 4 + ("@ahead" in prev and "@ahead" not in end), (prev, end)
    assert "@ahead" not in run[-1]
