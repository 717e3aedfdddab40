"""The driver's observatory, its Prometheus collector, the status page and the HTTP endpoint (real sockets)."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from pathlib import Path

import pandas as pd
import pytest
from prometheus_client.parser import text_string_to_metric_families

from core import decisions as dc
from core import observe
from core.kafka.requests import RequestApi
from streaming import observability as ob
from streaming.metrics_http import MetricsServer, MetricsServerError, start_endpoint
from streaming.settings import Settings, SettingsError
from streaming.status_page import render

pytestmark = pytest.mark.unit


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def summary_row(**kw: object) -> str:
    d = observe.BucketSummary(**kw).to_dict()  # type: ignore[arg-type]
    d["live_brokers"] = [1, 2, 3]
    d["input_by_type"] = {"broker_failure": 1}
    return json.dumps(d)


def batch(batch_id: int = 7) -> ob.BatchObservation:
    urp = observe.PartitionInfo("orders", 0, (1, 2, 3), 2, (2, 3))
    off = observe.PartitionInfo("solo", 0, (1,), -1, (1,))
    moving = observe.ReassignmentInfo("moving", 0, (4, 5), (4, 5), (1,), (1, 4))
    rows = {
        0: summary_row(
            partitions_by_state={"OnlinePartition": 3, "OfflinePartition": 1},
            leaders_by_broker={2: 2, 3: 1},
            preferred_by_broker={1: (2, 2), 2: (0, 1), 3: (0, 1)},
            under_replicated_count=2,
            under_min_isr_count=1,
            offline_count=1,
            reassigning_count=1,
            under_replicated=(urp,),
            offline=(off,),
            reassignments=(moving,),
            leader_elections=1,
            unclean_leader_elections=0,
        ),
        1: summary_row(leader_elections=2, unclean_leader_elections=1),
    }
    decisions: list[dc.Decision] = [
        dc.ZkWrite(dc.ZkOp.SET, "/brokers/topics/orders/partitions/0/state", '{"leader":2}', 3),
        dc.BrokerRequest(2, RequestApi.LEADER_AND_ISR, json.dumps({"topicStates": [{"partitionStates": [{}]}]})),
        dc.AdminResult("r1", "create_topic", dc.AdminStatus.OK, None, "", "{}"),
        dc.StateChangeFailure("orders-0", "OnlinePartition", "NewPartition", "invalid transition"),
    ]
    kafka = {"ActiveControllerCount": 1, "OfflinePartitionsCount": 1, "GlobalTopicCount": 3, "GlobalPartitionCount": 4}
    return ob.observation(
        batch_id,
        kafka,
        rows,
        rejected=2,
        decisions=decisions,
        seconds={"spark_job": 0.2, "zookeeper_sink": 0.05, "request_sink": 0.01},
    )


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_settings_of_the_endpoint() -> None:
    s = Settings()
    assert (s.metrics_port, s.metrics_bind_address) == (0, "127.0.0.1")
    assert Settings().with_overrides(["metrics_port=9404"]).metrics_port == 9404
    with pytest.raises(SettingsError, match="metrics_port"):
        Settings(metrics_port=70000)
    with pytest.raises(SettingsError, match="metrics_bind_address"):
        Settings(metrics_bind_address=" ")


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
    o = ob.Observatory(1000, clock=lambda: now[0])
    o.set_role(ob.Role.ACTIVE, 5)
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
    o.set_role(ob.Role.FENCED)
    m = samples(generate_latest(server.registry).decode())
    assert m[("kafka_controller_kafkacontroller_activecontrollercount", ())] == 0


def test_ring_buffer_keeps_the_latest_decisions() -> None:
    o = ob.Observatory(1)
    many = [dc.ZkWrite(dc.ZkOp.DELETE, f"/x/{i}") for i in range(ob.DECISIONS_PER_BATCH + 5)]
    for b in range(5):
        o.record_batch(ob.BatchObservation(b, {}, {}, {}, 0, many))
    recent = o.snapshot().recent
    assert len(recent) == ob.RECENT_DECISIONS
    assert recent[-1].kind == "more" and "5 more" in recent[-1].text and recent[-1].batch_id == 4
    assert o.snapshot().decisions_by_kind["zookeeper"] == 5 * len(many)
    # a replayed or unknown batch's progress without a dispatched batch: counted, no timer
    o.record_progress(99, 10.0)
    assert o.snapshot().batches == 1


def test_status_page_content() -> None:
    o = ob.Observatory(1000, clock=lambda: 2000.0)
    o.set_role(ob.Role.ACTIVE, 5)
    o.record_batch(batch())
    page = render(o.snapshot())
    assert '<span id="role">active</span>' in page
    assert "controller epoch 5" in page and "live brokers [1, 2, 3]" in page
    assert '<svg id="leaders-chart"' in page and "broker 1" in page and "imb 100%" in page
    assert "<td>orders</td>" in page and "<td>solo</td>" in page
    assert "50%" in page  # moving-0: 1 of its 2 target replicas in the ISR
    assert "LeaderAndIsr to broker 2 (1 partitions)" in page
    assert "r1 create_topic ok" in page
    assert "orders-0: OnlinePartition -&gt; NewPartition: invalid transition" in page
    empty = render(ob.Observatory(1).snapshot())
    assert "No partitions yet." in empty and "never" in empty


def test_endpoint_serves_metrics_page_and_health_standby_first() -> None:
    assert start_endpoint(1, 0, "127.0.0.1") == (None, None)
    port = free_port()
    o, server = start_endpoint(1001, port, "127.0.0.1")
    assert o is not None and server is not None
    try:
        o.set_role(ob.Role.STANDBY)
        base = f"http://127.0.0.1:{port}"
        with urllib.request.urlopen(f"{base}/metrics", timeout=5) as r:
            assert r.headers["Content-Type"].startswith("text/plain")
            m = samples(r.read().decode())
        assert m[("kafka_controller_kafkacontroller_activecontrollercount", ())] == 0
        assert m[("livectl_controller_role", (("controller_id", "1001"), ("role", "standby")))] == 1
        with urllib.request.urlopen(f"{base}/", timeout=5) as r:
            assert "standby" in r.read().decode()
        with urllib.request.urlopen(f"{base}/healthz", timeout=5) as r:
            assert r.read() == b"standby\n"
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(f"{base}/nothing", timeout=5)
        assert e.value.code == 404
        # the port is taken: a clear error naming the settings
        with pytest.raises(MetricsServerError, match="metrics_port"):
            MetricsServer(o, port).start()
    finally:
        server.stop()


def test_the_query_steps_feed_the_observatory_without_spark(tmp_path: Path) -> None:
    """prepare → step_bucket(summaries=True) → dispatch, on the shell tests' fakes: the observatory sees
    the buckets' summaries, the input by type and the decisions after a broker failure."""
    from test_streaming_shell import ADMIN, EVENTS, Pipeline, StoreSnapshots, epoch_znode, snapshot_of, store_at

    from core import events as ev
    from core.codec.events import event_to_json
    from sinks.memory import MemoryZooKeeper
    from sinks.ports import Fence
    from streaming import routing, stateful
    from streaming.validation import InputValidator

    class Observed(Pipeline):
        def run_batch(self, items: list[tuple[str, str]]) -> pd.DataFrame:
            routed = pd.concat(
                [routing.prepare_frame(self.records(items), 4, ADMIN, self.validator), routing.tick_rows(1, 4)]
            )
            outputs = []
            for bucket, frame in routed.groupby("bucket"):
                outputs.extend(
                    stateful.step_bucket(
                        (bucket,),
                        iter([frame]),
                        self.states[int(bucket)],
                        snapshots=StoreSnapshots(store_at(self.tmp)),
                        summaries=True,
                    )
                )
            out = pd.concat(outputs, ignore_index=True)
            self.dispatcher.dispatch(out, self.batch)
            self.batch += 1
            return out

    zk = MemoryZooKeeper()
    epoch_znode(zk)
    p = Observed(tmp_path, zk, Fence(1, 0), InputValidator())
    o = ob.Observatory(1000)
    o.set_role(ob.Role.ACTIVE, 1)
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
    assert s.live_brokers == (1, 2)
    assert s.input_by_type == {"controller_failover": 1, "create_topic": 2, "broker_failure": 1}
    assert s.rejected == 1
    assert s.leader_elections == 3  # the three first leaders; broker 3 led nothing it shared
    assert any(d.kind == "zookeeper" and "/brokers/topics/solo/partitions/0/state" in d.text for d in s.recent)
    assert s.last_batch_id == 2 and set(s.last_batch_seconds) == {"spark_job", "zookeeper_sink", "request_sink"}
    # a micro-batch that decides nothing (ticks only): the buckets skip their summaries, the driver keeps them
    out = p.run_batch([])
    rows = [json.loads(x) for x in out[out["kind"] == ob.KIND_SUMMARY]["payload"]]
    assert rows and all(r == {"unchanged": True, "input_by_type": {}} for r in rows)
    after = o.snapshot()
    assert after.last_batch_id == 3 and after.cluster == s.cluster and after.live_brokers == (1, 2)
