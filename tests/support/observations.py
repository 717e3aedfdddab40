"""A controller batch's observation as the driver records it: two buckets' summaries and a few decisions
(shared by the observatory's tests and the monitoring configuration's), and a reader of Prometheus' text format."""

from __future__ import annotations

import json

from prometheus_client.parser import text_string_to_metric_families

from core import decisions as dc
from core import observe
from core.kafka.requests import RequestApi, WireBody
from streaming.monitoring import observability as ob


def summary_row(summary: observe.BucketSummary) -> str:
    """A bucket's summary row as the step writes it (with the live brokers and input counts it adds)."""
    d = summary.to_dict()
    d["live_brokers"] = [1, 2, 3]
    d["input_by_type"] = {"broker_failure": 1}
    return json.dumps(d)


def batch(batch_id: int = 7) -> ob.BatchObservation:
    urp = observe.PartitionInfo("orders", 0, (1, 2, 3), 2, (2, 3))
    off = observe.PartitionInfo("solo", 0, (1,), -1, (1,))
    moving = observe.ReassignmentInfo("moving", 0, (4, 5), (4, 5), (1,), (1, 4))
    rows = {
        0: summary_row(
            observe.BucketSummary(
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
                replicas_by_broker={1: 3, 2: 3, 3: 2, 4: 1, 5: 1},
            )
        ),
        1: summary_row(
            observe.BucketSummary(leader_elections=2, unclean_leader_elections=1, replicas_by_broker={3: 1})
        ),
    }
    decisions: list[dc.Decision] = [
        dc.ZkWrite(dc.ZkOp.SET, "/brokers/topics/orders/partitions/0/state", '{"leader":2}', 3),
        dc.BrokerRequest(2, RequestApi.LEADER_AND_ISR, WireBody({"topicStates": [{"partitionStates": [{}]}]})),
        dc.AdminResult("r1", "create_topic", dc.AdminStatus.OK, None, "", {}),
        dc.StateChangeFailure("orders-0", "OnlinePartition", "NewPartition", "invalid transition"),
    ]
    # the buckets' gauges summed: the partition figures agree with the summaries above (core.figures)
    kafka = {
        "ActiveControllerCount": 1,
        "OfflinePartitionsCount": 1,
        "GlobalTopicCount": 3,
        "GlobalPartitionCount": 4,
        "PreferredReplicaImbalanceCount": 2,
        "UnderReplicatedPartitions": 2,
        "UnderMinIsrPartitionCount": 1,
        "ReassigningPartitions": 1,
    }
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
