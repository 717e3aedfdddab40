"""The driver's observatory and its Prometheus collector (the page and the endpoint: ``test_streaming_status_page.py``,
``test_streaming_metrics_http.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from observations import batch, samples

from core import decisions as dc
from streaming.monitoring import observability as ob
from streaming.monitoring import observatory as oy
from streaming.monitoring.metrics_http import MetricsServer

pytestmark = pytest.mark.unit


def test_input_counts_each_record_once() -> None:
    frame = pd.DataFrame(
        {
            "kind": ["event", "event", "event", "failover_ref", "tick"],
            "sub": [0, 1, 0, 0, 0],
            "payload": [
                '{"type":"broker_failure"}',
                '{"type":"broker_failure"}',
                '{"type":"create_topic"}',
                "{}",
                '{"type":"tick"}',
            ],
        }
    )
    assert ob.input_counts(frame, 0) == {"broker_failure": 1, "create_topic": 1, "controller_failover": 1}
    assert ob.input_counts(frame, 3) == {"broker_failure": 1, "create_topic": 1}
    assert ob.input_counts(frame.iloc[0:0], 0) == {}


def test_collector_names_and_values_after_a_batch() -> None:
    now = [1000.0]
    o = oy.Observatory(1000, clock=lambda: now[0])
    o.set_role(oy.Role.ACTIVE, 5)
    o.record_batch(batch())
    o.record_progress(7, 850.0)
    server = MetricsServer(o, 1)
    from prometheus_client import generate_latest

    m = samples(generate_latest(server.registry).decode())
    assert m[("kafka_controller_kafkacontroller_activecontrollercount", ())] == 1
    assert m[("kafka_controller_kafkacontroller_offlinepartitionscount", ())] == 1
    assert m[("kafka_controller_kafkacontroller_globalpartitioncount", ())] == 4
    assert m[("kafka_controller_kafkacontroller_topicsineligibletodeletecount", ())] == 0
    assert m[("kafka_controller_controllerstats_uncleanleaderelections_total", ())] == 1
    # the batch handled a broker failure: Kafka's BrokerChange timer (LeaderElectionRateAndTimeMs)
    assert m[("kafka_controller_controllerstats_leaderelectionrateandtimems_count", ())] == 1
    assert m[("kafka_controller_controllerstats_leaderelectionrateandtimems", (("quantile", "0.99"),))] == 850.0
    assert m[("kafka_controller_controllerstats_topicchangerateandtimems_count", ())] == 0
    assert m[("livectl_controller_epoch", (("controller_id", "1000"),))] == 5
    assert m[("livectl_controller_role", (("controller_id", "1000"), ("role", "active")))] == 1
    assert m[("livectl_controller_role", (("controller_id", "1000"), ("role", "standby")))] == 0
    assert m[("livectl_last_batch_id", ())] == 7
    assert m[("livectl_last_batch_duration_seconds", (("part", "micro_batch"),))] == 0.85
    assert m[("livectl_last_batch_duration_seconds", (("part", "zookeeper_sink"),))] == 0.05
    assert m[("livectl_batch_duration_seconds_count", ())] == 1
    assert m[("livectl_input_records_total", (("type", "broker_failure"),))] == 2
    assert m[("livectl_rejected_records_total", ())] == 2
    assert m[("livectl_decisions_total", (("kind", "zookeeper"),))] == 1
    assert m[("livectl_decisions_total", (("kind", "failure"),))] == 1
    assert m[("livectl_broker_requests_total", (("api", "LeaderAndIsr"),))] == 1
    assert m[("livectl_leader_elections_total", ())] == 3
    assert m[("livectl_under_replicated_partitions", ())] == 2
    assert m[("livectl_under_min_isr_partitions", ())] == 1
    assert m[("livectl_offline_partitions", ())] == 1
    assert m[("livectl_reassignments_in_progress", ())] == 1
    assert m[("livectl_partitions", (("state", "OfflinePartition"),))] == 1
    assert m[("livectl_broker_leader_partitions", (("broker", "2"),))] == 2
    assert m[("livectl_broker_preferred_imbalance_ratio", (("broker", "1"),))] == 1.0
    # fenced: the gauge says so at once, before any batch
    o.set_role(oy.Role.FENCED)
    m = samples(generate_latest(server.registry).decode())
    assert m[("kafka_controller_kafkacontroller_activecontrollercount", ())] == 0


def test_ring_buffer_keeps_the_latest_decisions() -> None:
    o = oy.Observatory(1)
    many = [dc.ZkWrite(dc.ZkOp.DELETE, f"/x/{i}") for i in range(oy.DECISIONS_PER_BATCH + 5)]
    for b in range(5):
        o.record_batch(ob.BatchObservation(b, {}, {}, {}, 0, many))
    recent = o.snapshot().recent
    assert len(recent) == oy.RECENT_DECISIONS
    assert recent[-1].kind == "more" and "5 more" in recent[-1].text and recent[-1].batch_id == 4
    assert o.snapshot().decisions_by_kind["zookeeper"] == 5 * len(many)
    # a replayed or unknown batch's progress without a dispatched batch: counted, no timer
    o.record_progress(99, 10.0)
    assert o.snapshot().batches == 1


def test_the_query_steps_feed_the_observatory_without_spark(tmp_path: Path) -> None:
    """prepare → step_bucket(summaries=True) → dispatch, on the shell tests' fakes: the observatory sees
    the buckets' summaries, the input by type and the decisions after a broker failure."""
    from shell_pipeline import ADMIN, EVENTS, Pipeline, epoch_znode, snapshot_of

    from core import events as ev
    from core.codec.events import event_to_json
    from core.zk_path_events import ClusterConfigChanged
    from sinks.memory import MemoryZooKeeper
    from sinks.ports import Fence
    from streaming.query.validation import InputValidator

    zk = MemoryZooKeeper()
    epoch_znode(zk)
    p = Pipeline(tmp_path, zk, Fence(1, 0), InputValidator())
    p.summaries = True
    o = oy.Observatory(1000)
    o.set_role(oy.Role.ACTIVE, 1)
    p.dispatcher.observer = o.record_batch
    p.run_batch([(EVENTS, p.failover_ref(snapshot_of((1, 2, 3))))])
    p.run_batch(
        [
            (ADMIN, event_to_json(ev.CreateTopic("r1", "orders", 2, 2, replica_assignment=((1, 2), (2, 3))))),
            (ADMIN, event_to_json(ev.CreateTopic("r2", "solo", 1, 1, replica_assignment=((3,),)))),
            (ADMIN, "not json"),
        ]
    )
    p.run_batch([(EVENTS, event_to_json(ev.BrokerFailure(3, 103)))])
    s = o.snapshot()
    assert s.kafka_metrics["OfflinePartitionsCount"] == 1 and s.kafka_metrics["GlobalPartitionCount"] == 3
    assert s.cluster.offline_count == 1 and [x.topic for x in s.cluster.offline] == ["solo"]
    assert s.cluster.under_replicated_count == 1  # orders-1: ISR [2]
    # the gauges every view shows (summed once: each bucket's gauges are added up a single time) and the
    # summaries' counts: one definition, the same figures
    assert s.figures == {
        "OfflinePartitionsCount": 1,
        "UnderReplicatedPartitions": 1,
        "UnderMinIsrPartitionCount": 1,  # solo-0: no live leader
        "PreferredReplicaImbalanceCount": 1,  # solo-0: its preferred replica 3 does not lead
        "ReassigningPartitions": 0,
    }
    c = s.cluster
    assert (c.offline_count, c.under_replicated_count, c.under_min_isr_count) == (1, 1, 1)
    assert s.live_brokers == (1, 2)
    assert s.input_by_type == {"controller_failover": 1, "create_topic": 2, "broker_failure": 1}
    assert s.rejected == 1
    assert s.leader_elections == 3  # the three first leaders; broker 3 led nothing it shared
    assert any(d.kind == "zookeeper" and "/brokers/topics/solo/partitions/0/state" in d.text for d in s.recent)
    assert s.last_batch_id == 2 and set(s.last_batch_seconds) == {"spark_job", "zookeeper_sink", "request_sink"}
    # a cluster default min.insync.replicas of 2 decides nothing, yet changes the figure: the buckets count it
    # in their gauges and send their summaries again, so the two agree (orders-1: an ISR of one; solo-0)
    p.run_batch([(EVENTS, event_to_json(ClusterConfigChanged(1, (("min.insync.replicas", "2"),))))])
    s = o.snapshot()
    assert s.figures["UnderMinIsrPartitionCount"] == s.cluster.under_min_isr_count == 2
    # a micro-batch that decides nothing (ticks only): the buckets skip their summaries, the driver keeps them
    out = p.run_batch([])
    rows = [json.loads(x) for x in out[out["kind"] == ob.KIND_SUMMARY]["payload"]]
    assert rows and all(r == {"unchanged": True, "input_by_type": {}} for r in rows)
    after = o.snapshot()
    assert after.last_batch_id == 4 and after.cluster == s.cluster and after.live_brokers == (1, 2)


def test_a_shared_update_metadata_counts_and_reads_per_addressee() -> None:
    from core.kafka.requests import SHARED_BROKER_ID, Addressee, RequestApi, WireBody

    body = WireBody({"controllerId": 0, "controllerEpoch": 1, "brokerEpoch": -1, "topicStates": [
        {"topicName": "t", "partitionStates": [{"partitionIndex": 0}, {"partitionIndex": 1}]}]})  # fmt: skip
    um = dc.BrokerRequest(
        SHARED_BROKER_ID, RequestApi.UPDATE_METADATA, body, (Addressee(1, 11), Addressee(2, 12), Addressee(3, 13))
    )
    assert ob.describe_decision(um) == ("request", "UpdateMetadata to brokers 1,2,3 (2 partitions)")
    o = oy.Observatory(1)
    o.record_batch(ob.BatchObservation(0, {}, {}, {}, 0, [um]))
    # as many as the per-broker requests it stands for (the counter kept its meaning)
    assert o.snapshot().requests_by_api == {"UpdateMetadata": 3}
    assert o.snapshot().decisions_by_kind == {"request": 3}


def test_topic_deletion_timer_counts_only_kafkas_topic_deletion_events() -> None:
    """Kafka raises ``TopicDeletionStopReplicaResponseReceived`` only for a topic whose deletion started, and a
    DeleteTopics request writes ``/admin/delete_topics`` only for a topic that exists: the StopReplica answers
    of a reassignment and a delete of an unknown topic are no ``TopicDeletion`` events."""
    from core import events as ev
    from core.codec.events import event_to_json
    from core.context import ControllerContext
    from core.model import ReplicaAssignment, TopicPartition
    from core.zk_path_events import ZkTopicDeletion

    ctx = ControllerContext(controller_id=1, epoch=2)
    for topic in ("orders", "gone"):
        ctx.set_assignment(TopicPartition(topic, 0), ReplicaAssignment((1, 2)))
    ctx.topics_to_be_deleted.add("gone")
    ctx.topics_with_deletion_started.add("gone")

    def frame(*payloads: str) -> pd.DataFrame:
        return pd.DataFrame({"kind": ["event"] * len(payloads), "sub": [0] * len(payloads), "payload": payloads})

    def answer(topic: str) -> str:
        return event_to_json(ev.StopReplicaResponse(2, (ev.PartitionError(topic, 0, 0),)))

    assert ob.deletion_events(ctx, frame(answer("orders"))) == 0  # a reassignment's removed replica
    assert ob.deletion_events(ctx, frame(event_to_json(ev.DeleteTopic("d1", "nope")))) == 0
    assert ob.deletion_events(ctx, frame(answer("gone"), event_to_json(ev.DeleteTopic("d2", "orders")))) == 2
    assert ob.deletion_events(ctx, frame(event_to_json(ZkTopicDeletion(2, "orders")))) == 1

    # the timer: a batch with StopReplica answers but no deletion event is not timed as TopicDeletion
    o = oy.Observatory(1000)
    name = ("kafka_controller_controllerstats_topicdeletionrateandtimems_count", ())
    for batch_id, deleting in ((1, 0), (2, 0), (3, 1)):
        observed = ob.BatchObservation(
            batch_id, {}, {}, {"stop_replica_response": 2}, 0, (), topic_deletion_events=deleting
        )
        o.record_batch(observed)
        o.record_progress(batch_id, 100.0)
    from prometheus_client import generate_latest

    assert samples(generate_latest(MetricsServer(o, 1).registry).decode())[name] == 1


def test_a_dry_run_is_no_controller_event() -> None:
    """A dry run applies nothing, as Kafka's validateOnly CreateTopics never reaches its controller: it counts
    as an input record of its own type (``<type>_dry_run``) and in no controller-event timer. Seen live:
    ``topics --delete --dry-run`` made ``topicdeletionrateandtimems_count`` 1 before any topic was deleted."""
    from core import events as ev
    from core.codec.events import event_to_json
    from core.context import ControllerContext
    from core.model import ReplicaAssignment, TopicPartition

    ctx = ControllerContext(controller_id=1, epoch=2)
    ctx.set_assignment(TopicPartition("orders", 0), ReplicaAssignment((1, 2)))
    payloads = [
        event_to_json(ev.DeleteTopic("d1", "orders", dry_run=True)),
        event_to_json(ev.CreateTopic("c1", "more", 1, 1, dry_run=True)),
        event_to_json(ev.CreateTopic("c2", "real", 1, 1)),
    ]
    frame = pd.DataFrame({"kind": ["event"] * 3, "sub": [0] * 3, "payload": payloads})
    assert ob.deletion_events(ctx, frame) == 0
    counts = ob.input_counts(frame, 0)
    assert counts == {"delete_topic_dry_run": 1, "create_topic_dry_run": 1, "create_topic": 1}

    o = oy.Observatory(1000)
    o.record_batch(ob.BatchObservation(1, {}, {}, {"delete_topic_dry_run": 1, "create_topic_dry_run": 1}, 0, ()))
    o.record_progress(1, 100.0)
    from prometheus_client import generate_latest

    got = samples(generate_latest(MetricsServer(o, 1).registry).decode())
    assert got[("kafka_controller_controllerstats_topicdeletionrateandtimems_count", ())] == 0
    assert got[("kafka_controller_controllerstats_topicchangerateandtimems_count", ())] == 0
    assert got[("livectl_input_records_total", (("type", "delete_topic_dry_run"),))] == 1
