"""The driver's view for operators: what the Prometheus endpoint and the status page show.

:class:`Observatory` is fed by the controller process — its role (standby, active, fenced), every
micro-batch the dispatcher carried out (:class:`BatchObservation`: Kafka's controller gauges summed over the
buckets, each bucket's :class:`core.observe.BucketSummary`, input records by type, decisions) and every
progress report of the query (the micro-batch's duration) — and keeps:

* the latest figures (replaced after every micro-batch; a bucket's figures stand until its next report, so
  nothing goes stale while the controller is idle: the state they describe has not changed);
* cumulative counters (input records by type, rejected records, decisions by kind, leader elections) and
  Kafka's ``ControllerStats`` timers;
* a ring buffer of the most recent decisions (:attr:`Observatory.recent`), newest last.

:class:`ControllerCollector` turns a snapshot of it into Prometheus metric families at scrape time, under
the names Prometheus' JMX exporter gives Kafka's MBeans (its Kafka rules, ``lowercaseOutputName: true``):
``kafka.controller<type=KafkaController, name=X><>Value`` -> ``kafka_controller_kafkacontroller_x``;
``<type=ControllerStats, name=XPerSec><>Count`` -> ``kafka_controller_controllerstats_x_total``; a timer
``<type=ControllerStats, name=XRateAndTimeMs>`` -> ``…_xrateandtimems_count`` and
``…_xrateandtimems{quantile="0.50"}`` (milliseconds). livectl's own metrics are ``livectl_*``.

**Kafka's controller-event timers, per micro-batch.** Kafka times each controller event by its
``ControllerState`` (``BrokerChange`` is ``LeaderElectionRateAndTimeMs``, ``TopicChange``,
``PartitionReassignment``, …). livectl handles all of a micro-batch's events in one pass, so each state's
timer counts the micro-batches that handled at least one event of that state and records the
micro-batch's duration for it (:data:`CONTROLLER_STATES` maps event types to states).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from core import decisions as dc
from core import observe
from core.controller.metrics import KAFKA_CONTROLLER_GAUGES
from core.kafka.request_codec import wire_object
from core.kafka.requests import RequestApi

#: Kafka's ``KafkaController`` gauges, in the order the dispatcher's sums carry them
KAFKA_GAUGES = KAFKA_CONTROLLER_GAUGES

#: input event type -> Kafka's ``ControllerState`` whose ``…RateAndTimeMs`` timer covers it
CONTROLLER_STATES: Mapping[str, str] = {
    "controller_failover": "ControllerChange",
    "broker_startup": "LeaderElection",  # Kafka's BrokerChange keeps the old timer name
    "broker_failure": "LeaderElection",
    "create_topic": "TopicChange",
    "create_partitions": "TopicChange",
    "delete_topic": "TopicDeletion",
    "stop_replica_response": "TopicDeletion",
    "reassign_partitions": "PartitionReassignment",
    "cancel_reassignment": "PartitionReassignment",
    "auto_rebalance_tick": "AutoLeaderBalance",
    "elect_leaders": "ManualLeaderBalance",
    "controlled_shutdown": "ControlledShutdown",
    "alter_partition": "IsrChange",
    "leader_and_isr_response": "LeaderAndIsrResponseReceived",
    "log_dir_failure": "LogDirChange",
    "alter_topic_config": "TopicUncleanLeaderElectionEnable",
}
TIMER_NAMES = tuple(dict.fromkeys(CONTROLLER_STATES.values()))
#: samples kept per timer for its quantiles (Yammer's default reservoir size)
TIMER_WINDOW = 1028
QUANTILES = (0.5, 0.75, 0.95, 0.98, 0.99, 0.999)
#: decisions kept for the status page
RECENT_DECISIONS = 200
#: decisions of one micro-batch that enter the ring buffer (the rest are counted only)
DECISIONS_PER_BATCH = 60


class Role(Enum):
    STARTING = "starting"
    STANDBY = "standby"
    ACTIVE = "active"
    FENCED = "fenced"
    STOPPED = "stopped"


@dataclass(frozen=True)
class DecisionLine:
    """One decision as the status page lists it."""

    time_s: float
    batch_id: int
    kind: str
    text: str


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


def describe_decision(d: dc.Decision) -> tuple[str, str]:
    """(kind, one line) for the status page."""
    if isinstance(d, dc.ZkWrite):
        data = f" {d.data}" if d.data is not None and len(d.data) <= 200 else ""
        return "zookeeper", f"{d.op.value} {d.path}{data}"
    if isinstance(d, dc.BrokerRequest):
        body = wire_object(d.body)
        parts = sum(len(ts.get("partitionStates") or ()) for ts in body.get("topicStates") or ())
        what = f"{parts} partitions" if parts else "brokers only"
        return "request", f"{d.api.value} to broker {d.broker_id} ({what})"
    if isinstance(d, dc.AdminResult):
        err = f" {d.error}" if d.error else ""
        msg = f": {d.message}" if d.message else ""
        return "admin", f"{d.request_id} {d.command} {d.status.value}{err}{msg}"[:300]
    if isinstance(d, dc.StateChangeFailure):
        return "failure", f"{d.item}: {d.from_state} -> {d.to_state}: {d.reason}"[:300]
    return "other", str(d)[:300]


class _Timer:
    def __init__(self) -> None:
        self.count = 0
        self.total_ms = 0.0
        self.window: deque[float] = deque(maxlen=TIMER_WINDOW)

    def record(self, ms: float) -> None:
        self.count += 1
        self.total_ms += ms
        self.window.append(ms)

    def quantiles(self) -> list[tuple[float, float]]:
        values = sorted(self.window)
        if not values:
            return [(q, 0.0) for q in QUANTILES]
        return [(q, values[min(len(values) - 1, int(q * len(values)))]) for q in QUANTILES]


@dataclass(frozen=True)
class Snapshot:
    """A consistent copy of the observatory's figures (what one scrape or one page shows)."""

    controller_id: int
    role: Role
    controller_epoch: int
    kafka_metrics: Mapping[str, int]
    cluster: observe.BucketSummary
    live_brokers: tuple[int, ...]
    last_batch_id: int
    last_batch_time_s: float
    last_batch_seconds: Mapping[str, float]
    batches: int
    batch_seconds_total: float
    input_by_type: Mapping[str, int]
    rejected: int
    decisions_by_kind: Mapping[str, int]
    requests_by_api: Mapping[str, int]
    leader_elections: int
    unclean_leader_elections: int
    timers: Mapping[str, tuple[int, float, list[tuple[float, float]]]]
    recent: tuple[DecisionLine, ...]
    now_s: float


class Observatory:
    """Thread-safe: the micro-batch thread and the listener write, the HTTP server reads."""

    def __init__(self, controller_id: int, clock: Callable[[], float] = time.time) -> None:
        self._lock = threading.Lock()
        self._clock = clock
        self.controller_id = controller_id
        self._role = Role.STARTING
        self._epoch = 0
        self._kafka: dict[str, int] = {}
        self._summaries: dict[int, observe.BucketSummary] = {}
        self._live: tuple[int, ...] = ()
        self._last_batch = -1
        self._last_batch_time = 0.0
        self._last_seconds: dict[str, float] = {}
        self._batches = 0
        self._batch_seconds = 0.0
        self._input: dict[str, int] = {}
        self._rejected = 0
        self._decisions: dict[str, int] = {}
        self._requests: dict[str, int] = {}
        self._elected = 0
        self._unclean = 0
        self._timers = {name: _Timer() for name in TIMER_NAMES}
        #: the event types of batches whose duration the listener has not reported yet
        self._pending_types: dict[int, tuple[str, ...]] = {}
        self.recent: deque[DecisionLine] = deque(maxlen=RECENT_DECISIONS)

    # ------------------------------------------------------------------ role

    def set_role(self, role: Role, controller_epoch: int | None = None) -> None:
        with self._lock:
            self._role = role
            if controller_epoch is not None:
                self._epoch = controller_epoch

    @property
    def role(self) -> Role:
        return self._role

    def set_live_brokers(self, brokers: Iterable[int]) -> None:
        with self._lock:
            self._live = tuple(sorted(brokers))

    # ------------------------------------------------------------------ feeds

    def record_batch(self, batch: BatchObservation) -> None:
        """After the dispatcher carried out micro-batch ``batch.batch_id`` (a replayed batch counts again:
        its decisions were carried out again, idempotently)."""
        now = self._clock()
        lines: list[DecisionLine] = []
        by_kind: dict[str, int] = {}
        by_api: dict[str, int] = {}
        for d in batch.decisions:
            kind, text = describe_decision(d)
            by_kind[kind] = by_kind.get(kind, 0) + 1
            if isinstance(d, dc.BrokerRequest):
                by_api[d.api.value] = by_api.get(d.api.value, 0) + 1
            if len(lines) < DECISIONS_PER_BATCH:
                lines.append(DecisionLine(now, batch.batch_id, kind, text))
        if len(batch.decisions) > len(lines):
            more = len(batch.decisions) - len(lines)
            lines.append(DecisionLine(now, batch.batch_id, "more", f"… and {more} more decisions in this micro-batch"))
        with self._lock:
            self._kafka = dict(batch.kafka_metrics)
            if batch.live_brokers is not None:
                self._live = batch.live_brokers
            self._summaries.update(batch.summaries)
            self._last_batch = batch.batch_id
            self._last_batch_time = now
            self._last_seconds = dict(batch.seconds)
            for k, n in batch.input_by_type.items():
                self._input[k] = self._input.get(k, 0) + n
            self._rejected += batch.rejected
            for k, n in by_kind.items():
                self._decisions[k] = self._decisions.get(k, 0) + n
            for k, n in by_api.items():
                self._requests[k] = self._requests.get(k, 0) + n
            for s in batch.summaries.values():
                self._elected += s.leader_elections
                self._unclean += s.unclean_leader_elections
            self._pending_types[batch.batch_id] = tuple(t for t, n in batch.input_by_type.items() if n > 0)
            while len(self._pending_types) > 100:
                self._pending_types.pop(next(iter(self._pending_types)))
            self.recent.extend(lines)

    def record_progress(self, batch_id: int, duration_ms: float) -> None:
        """The query's progress report of a micro-batch (its ``triggerExecution`` duration)."""
        with self._lock:
            self._batches += 1
            self._batch_seconds += duration_ms / 1000
            self._last_seconds["micro_batch"] = duration_ms / 1000
            types = self._pending_types.pop(batch_id, ())
            for name in dict.fromkeys(CONTROLLER_STATES[t] for t in types if t in CONTROLLER_STATES):
                self._timers[name].record(duration_ms)

    # ------------------------------------------------------------------ reading

    def snapshot(self) -> Snapshot:
        with self._lock:
            kafka = dict.fromkeys(KAFKA_GAUGES, 0)
            kafka.update({k: v for k, v in self._kafka.items() if k in kafka})
            # the gauge says what this process is now, not what it was at its last micro-batch
            kafka["ActiveControllerCount"] = 1 if self._role is Role.ACTIVE else 0
            return Snapshot(
                controller_id=self.controller_id,
                role=self._role,
                controller_epoch=self._epoch,
                kafka_metrics=kafka,
                cluster=observe.merge(self._summaries.values()),
                live_brokers=self._live,
                last_batch_id=self._last_batch,
                last_batch_time_s=self._last_batch_time,
                last_batch_seconds=dict(self._last_seconds),
                batches=self._batches,
                batch_seconds_total=self._batch_seconds,
                input_by_type=dict(self._input),
                rejected=self._rejected,
                decisions_by_kind=dict(self._decisions),
                requests_by_api=dict(self._requests),
                leader_elections=self._elected,
                unclean_leader_elections=self._unclean,
                timers={n: (t.count, t.total_ms, t.quantiles()) for n, t in self._timers.items()},
                recent=tuple(self.recent),
                now_s=self._clock(),
            )


# ---------------------------------------------------------------------- Prometheus


def _jmx(kind: str, name: str) -> str:
    """The JMX exporter's name of a Kafka controller MBean value (lower case)."""
    return f"kafka_controller_{kind}_{name}".lower()


class ControllerCollector:
    """A ``prometheus_client`` collector: the observatory's figures, computed at every scrape."""

    def __init__(self, observatory: Observatory) -> None:
        self.observatory = observatory

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, SummaryMetricFamily

        s = self.observatory.snapshot()
        for name in KAFKA_GAUGES:
            yield GaugeMetricFamily(
                _jmx("kafkacontroller", name), f"Kafka's KafkaController {name}", s.kafka_metrics[name]
            )
        yield CounterMetricFamily(
            _jmx("controllerstats", "UncleanLeaderElections"),
            "unclean leader elections (Kafka's ControllerStats UncleanLeaderElectionsPerSec)",
            s.unclean_leader_elections,
        )
        for timer, (count, total_ms, quantiles) in s.timers.items():
            name = _jmx("controllerstats", f"{timer}RateAndTimeMs")
            fam = SummaryMetricFamily(
                name,
                f"micro-batches that handled {timer} events and their duration in ms (Kafka's {timer}RateAndTimeMs)",
                count_value=count,
                sum_value=total_ms,
            )
            for q, v in quantiles:
                fam.add_sample(name, {"quantile": f"{q:g}"}, v)
            yield fam

        labels = ["controller_id"]
        cid = [str(s.controller_id)]
        epoch = GaugeMetricFamily(
            "livectl_controller_epoch", "the controller epoch this process holds (0: none)", labels=labels
        )
        epoch.add_metric(cid, s.controller_epoch)
        yield epoch
        role = GaugeMetricFamily(
            "livectl_controller_role", "1 for this process's role", labels=["controller_id", "role"]
        )
        for r in Role:
            role.add_metric([cid[0], r.value], 1 if r is s.role else 0)
        yield role
        yield GaugeMetricFamily("livectl_last_batch_id", "the last micro-batch carried out (-1: none)", s.last_batch_id)
        yield GaugeMetricFamily(
            "livectl_last_batch_timestamp_seconds",
            "when the last micro-batch was carried out (Unix time)",
            s.last_batch_time_s,
        )
        parts = GaugeMetricFamily(
            "livectl_last_batch_duration_seconds",
            "the last micro-batch's duration (micro_batch) and its parts as measured on the driver",
            labels=["part"],
        )
        for part, secs in sorted(s.last_batch_seconds.items()):
            parts.add_metric([part], secs)
        yield parts
        yield SummaryMetricFamily(
            "livectl_batch_duration_seconds",
            "micro-batch durations (the query's triggerExecution)",
            count_value=s.batches,
            sum_value=s.batch_seconds_total,
        )
        inputs = CounterMetricFamily("livectl_input_records", "input records by event type", labels=["type"])
        for t, n in sorted(s.input_by_type.items()):
            inputs.add_metric([t], n)
        yield inputs
        yield CounterMetricFamily(
            "livectl_rejected_records", "input records rejected (sent to the rejected topic)", s.rejected
        )
        decisions = CounterMetricFamily("livectl_decisions", "decisions carried out, by kind", labels=["kind"])
        for k in ("zookeeper", "request", "admin", "failure"):
            decisions.add_metric([k], s.decisions_by_kind.get(k, 0))
        yield decisions
        requests = CounterMetricFamily("livectl_broker_requests", "broker requests sent, by API", labels=["api"])
        for api in RequestApi:
            requests.add_metric([api.value], s.requests_by_api.get(api.value, 0))
        yield requests
        yield CounterMetricFamily(
            "livectl_leader_elections", "partitions whose leader the controller changed", s.leader_elections
        )
        c = s.cluster
        yield GaugeMetricFamily("livectl_reassignments_in_progress", "partitions being reassigned", c.reassigning_count)
        yield GaugeMetricFamily(
            "livectl_under_replicated_partitions",
            "partitions with an ISR below their replication factor",
            c.under_replicated_count,
        )
        yield GaugeMetricFamily(
            "livectl_under_min_isr_partitions",
            "partitions with an ISR below min.insync.replicas",
            c.under_min_isr_count,
        )
        yield GaugeMetricFamily("livectl_offline_partitions", "partitions without a live leader", c.offline_count)
        states = GaugeMetricFamily("livectl_partitions", "partitions by state", labels=["state"])
        for st in ("NewPartition", "OnlinePartition", "OfflinePartition", "NonExistentPartition"):
            states.add_metric([st], c.partitions_by_state.get(st, 0))
        yield states
        leaders = GaugeMetricFamily("livectl_broker_leader_partitions", "partitions led, by broker", labels=["broker"])
        preferred = GaugeMetricFamily(
            "livectl_broker_preferred_partitions", "partitions whose preferred leader is the broker", labels=["broker"]
        )
        imbalance = GaugeMetricFamily(
            "livectl_broker_preferred_imbalance_ratio",
            "share of the broker's preferred partitions led by another broker",
            labels=["broker"],
        )
        brokers = sorted(set(c.leaders_by_broker) | set(c.preferred_by_broker) | set(s.live_brokers))
        for b in brokers:
            bad, total = c.preferred_by_broker.get(b, (0, 0))
            leaders.add_metric([str(b)], c.leaders_by_broker.get(b, 0))
            preferred.add_metric([str(b)], total)
            imbalance.add_metric([str(b)], bad / total if total else 0.0)
        yield leaders
        yield preferred
        yield imbalance


def registry_for(observatory: Observatory) -> Any:
    """A registry of its own (not the process-wide default, so that two controllers in one process —
    tests, a standby beside an active one — each serve their own figures)."""
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry(auto_describe=False)
    registry.register(ControllerCollector(observatory))
    return registry


# ---------------------------------------------------------------------- the buckets' side (executors)

#: the decision row a bucket adds after its metrics row when the endpoint is on
KIND_SUMMARY = "summary"


def input_counts(frame: Any, bucket: int) -> dict[str, int]:
    """Input records by event type in one bucket's routed rows, each record counted once across buckets: a
    record routed to several buckets (a cluster-wide event, a command split by topic) has split index
    (``sub``) 0 in exactly one of them; a failover reference (every bucket, ``sub`` 0) counts in bucket 0."""
    import json

    out: dict[str, int] = {}
    if frame.empty:
        return out
    # a plain loop: a micro-batch's rows for one bucket are few, and pandas' masks cost more than they save
    for kind, sub, payload in zip(frame["kind"], frame["sub"], frame["payload"], strict=True):
        if kind == "event" and sub == 0:
            t = str(json.loads(payload).get("type", "unknown"))
            out[t] = out.get(t, 0) + 1
        elif kind == "failover_ref" and bucket == 0:
            out["controller_failover"] = out.get("controller_failover", 0) + 1
    return out


def summary_payload(before: Any, after: Any, frame: Any, bucket: int, *, changed: bool = True) -> str:
    """The ``summary`` row of a bucket's step: :func:`core.observe.bucket_summary` of the step, the live
    brokers, and the step's input records by type.

    A step that decided nothing (``changed`` false: no ZooKeeper write, request, result or failure) changed
    nothing the summary shows — every partition-state, leader, ISR, assignment or live-broker change is
    written to ZooKeeper or announced to brokers — so its row carries only the input counts and
    ``"unchanged": true``, and the driver keeps the bucket's previous summary. Most buckets of most
    micro-batches are like that (one command touches one bucket), so the summary's pass over the
    partitions is paid only where something changed."""
    import json

    if not changed:
        return json.dumps({"unchanged": True, "input_by_type": input_counts(frame, bucket)}, separators=(",", ":"))
    d = observe.bucket_summary(before, after).to_dict()
    d["live_brokers"] = sorted(after.live_brokers)
    d["input_by_type"] = input_counts(frame, bucket)
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
    for bucket, payload in summary_rows.items():
        d = json.loads(payload)
        for t, n in d.get("input_by_type", {}).items():
            inputs[t] = inputs.get(t, 0) + int(n)
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
    )
