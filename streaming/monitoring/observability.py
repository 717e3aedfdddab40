"""What one micro-batch reports for operators, from the executors to the driver.

Each bucket's step adds a ``summary`` row (:data:`KIND_SUMMARY`, :func:`summary_payload`: its
:class:`core.observe.BucketSummary`, live brokers and input records by type, or only the input counts when
the step decided nothing); the dispatcher folds those rows, Kafka's controller gauges summed over the buckets
and the micro-batch's decisions into one :class:`BatchObservation` (:func:`observation`), which it hands to
the :class:`streaming.monitoring.observatory.Observatory` (the figures the endpoint and the status page show;
:mod:`streaming.monitoring.prometheus` names them as Kafka's JMX exporter does). :func:`describe_decision` is one
decision as the status page lists it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from core import decisions as dc
from core import observe
from core.codec.events import event_from_json
from core.errors import FormatError
from core.events import DeleteTopic, StopReplicaResponse
from core.kafka.request_encoding import wire_object
from core.kafka.requests import partition_count
from core.zk_path_events import ZkTopicDeletion

#: the decision row a bucket adds after its metrics row when the endpoint is on
KIND_SUMMARY = "summary"
#: added to the type of an admin command run dry in :func:`input_counts`: such a command applies nothing, as
#: Kafka's ``validateOnly`` never reaches its controller, so it is in no controller-event timer
DRY_RUN_SUFFIX = "_dry_run"
#: the input event types that may be Kafka's ``TopicDeletion`` controller events (:func:`deletion_events`)
_DELETION_TYPES = frozenset({DeleteTopic.TYPE, ZkTopicDeletion.TYPE, StopReplicaResponse.TYPE})


@dataclass(frozen=True)
class BatchObservation:
    """What the dispatcher learnt from one micro-batch (``seconds``: its Spark job, ZooKeeper and topic
    writes, as measured on the driver)."""

    batch_id: int
    kafka_metrics: Mapping[str, int]
    #: the buckets whose summary changed in this micro-batch (the others keep their last one)
    summaries: Mapping[int, observe.BucketSummary]
    input_by_type: Mapping[str, int]
    rejected: int
    decisions: Sequence[dc.Decision]
    seconds: Mapping[str, float] = field(default_factory=dict)
    #: the live brokers as the buckets see them (``None``: not reported)
    live_brokers: tuple[int, ...] | None = None
    #: the input events Kafka's controller handles as ``TopicDeletion`` (:func:`core.observe.topic_deletion_events`)
    topic_deletion_events: int = 0


def describe_decision(d: dc.Decision) -> tuple[str, str]:
    """(kind, one line) for the status page."""
    if isinstance(d, dc.ZkWrite):
        data = f" {d.data}" if d.data is not None and len(d.data) <= 200 else ""
        return "zookeeper", f"{d.op.value} {d.path}{data}"
    if isinstance(d, dc.BrokerRequest):
        parts = partition_count(wire_object(d.body))
        what = f"{parts} partitions" if parts else "brokers only"
        if d.shared:
            return "request", f"{d.api.value} to brokers {','.join(map(str, d.recipients()))} ({what})"
        return "request", f"{d.api.value} to broker {d.broker_id} ({what})"
    if isinstance(d, dc.AdminResult):
        err = f" {d.error}" if d.error else ""
        msg = f": {d.message}" if d.message else ""
        return "admin", f"{d.request_id} {d.command} {d.status.value}{err}{msg}"[:300]
    if isinstance(d, dc.StateChangeFailure):
        return "failure", f"{d.item}: {d.from_state} -> {d.to_state}: {d.reason}"[:300]
    return "other", str(d)[:300]


def input_counts(frame: Any, bucket: int) -> dict[str, int]:
    """Input records by event type in one bucket's routed rows, each record counted once across buckets: a
    record routed to several buckets (a cluster-wide event, a command split by topic) has split index
    (``sub``) 0 in exactly one of them; a failover reference (every bucket, ``sub`` 0) counts in bucket 0. An
    admin command run dry counts under its type and :data:`DRY_RUN_SUFFIX` (``create_topic_dry_run``)."""
    import json

    out: dict[str, int] = {}
    if frame.empty:
        return out
    # a plain loop: a micro-batch's rows for one bucket are few, and pandas' masks cost more than they save
    for kind, sub, payload in zip(frame["kind"], frame["sub"], frame["payload"], strict=True):
        if kind == "event" and sub == 0:
            record = json.loads(payload)
            t = str(record.get("type", "unknown"))
            if record.get("dry_run") is True:
                t += DRY_RUN_SUFFIX  # applies nothing: no controller event, in no controller-event timer
            out[t] = out.get(t, 0) + 1
        elif kind == "failover_ref" and bucket == 0:
            out["controller_failover"] = out.get("controller_failover", 0) + 1
    return out


def deletion_events(before: Any, frame: Any) -> int:
    """:func:`core.observe.topic_deletion_events` of the events of a bucket's routed rows."""
    import json

    events = []
    if frame.empty:
        return 0
    for kind, payload in zip(frame["kind"], frame["payload"], strict=True):
        if kind != "event" or json.loads(payload).get("type") not in _DELETION_TYPES:
            continue
        try:
            events.append(event_from_json(payload))
        except FormatError:
            continue  # refused by the step as well: no controller event
    return observe.topic_deletion_events(before, events)


def summary_payload(
    before: Any, after: Any, frame: Any, bucket: int, *, changed: bool = True, cluster_min_isr: int = 1
) -> str:
    """The ``summary`` row of a bucket's step: :func:`core.observe.bucket_summary` of the step, the live
    brokers, and the step's input records by type (``cluster_min_isr``: the cluster default
    ``min.insync.replicas`` the bucket runs with).

    A step that decided nothing (``changed`` false: no ZooKeeper write, request, result or failure) changed
    nothing the summary shows — every partition-state, leader, ISR, assignment or live-broker change is
    written to ZooKeeper or announced to brokers — so its row carries only the input counts and
    ``"unchanged": true``, and the driver keeps the bucket's previous summary. Most buckets of most
    micro-batches are like that (one command touches one bucket), so the summary's pass over the
    partitions is paid only where something changed."""
    import json

    deleting = {"topic_deletion_events": n} if (n := deletion_events(before, frame)) else {}
    if not changed:
        unchanged = {"unchanged": True, "input_by_type": input_counts(frame, bucket), **deleting}
        return json.dumps(unchanged, separators=(",", ":"))
    d = observe.bucket_summary(before, after, cluster_min_isr=cluster_min_isr).to_dict()
    d["live_brokers"] = sorted(after.live_brokers)
    d["input_by_type"] = input_counts(frame, bucket)
    d.update(deleting)
    return json.dumps(d, separators=(",", ":"))


def observation(
    batch_id: int,
    kafka_metrics: Mapping[str, int],
    summary_rows: Mapping[int, str],
    *,
    rejected: int,
    decisions: Sequence[dc.Decision],
    seconds: Mapping[str, float],
) -> BatchObservation:
    """A :class:`BatchObservation` from the dispatcher's figures and the buckets' ``summary`` rows."""
    import json

    summaries: dict[int, observe.BucketSummary] = {}
    inputs: dict[str, int] = {}
    live: set[int] | None = None
    deleting = 0
    for bucket, payload in summary_rows.items():
        d = json.loads(payload)
        for t, n in d.get("input_by_type", {}).items():
            inputs[t] = inputs.get(t, 0) + int(n)
        deleting += int(d.get("topic_deletion_events", 0))
        if d.get("unchanged"):
            continue
        summaries[bucket] = observe.BucketSummary.from_dict(d)
        live = set(d.get("live_brokers", ())) if live is None else live
    return BatchObservation(
        batch_id,
        kafka_metrics,
        summaries,
        inputs,
        rejected,
        decisions,
        seconds,
        tuple(sorted(live)) if live is not None else None,
        deleting,
    )
