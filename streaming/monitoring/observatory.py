"""The driver's view for operators: the figures the Prometheus endpoint (:mod:`streaming.monitoring.prometheus`) and
the status page (:mod:`streaming.monitoring.status_page`) show.

:class:`Observatory` is fed by the controller process — its role (standby, active, fenced), every
micro-batch the dispatcher carried out (:class:`BatchObservation`: Kafka's controller gauges summed over the
buckets, each bucket's :class:`core.observe.BucketSummary`, input records by type, decisions) and every
progress report of the query (the micro-batch's duration) — and keeps:

* the latest figures (replaced after every micro-batch; a bucket's figures stand until its next report, so
  nothing goes stale while the controller is idle: the state they describe has not changed);
* cumulative counters (input records by type, rejected records, decisions by kind, leader elections) and
  Kafka's ``ControllerStats`` timers;
* a ring buffer of the most recent decisions (:attr:`Observatory.recent`), newest last.

**Kafka's controller-event timers, per micro-batch.** Kafka times each controller event by its
``ControllerState`` (``BrokerChange`` is ``LeaderElectionRateAndTimeMs``, ``TopicChange``,
``PartitionReassignment``, …). livectl handles all of a micro-batch's events in one pass, so each state's
timer counts the micro-batches that handled at least one event of that state and records the
micro-batch's duration for it (:data:`CONTROLLER_STATES` maps event types to states). ``TopicDeletion``
depends on more than the type (a StopReplica answer is a deletion event only for a topic being deleted):
the buckets count those events (:func:`core.observe.topic_deletion_events`).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum

from core import decisions as dc
from core import observe
from core.controller.metrics import KAFKA_CONTROLLER_GAUGES
from core.kafka.log_dirs import LogDirsReport
from streaming.monitoring.observability import BatchObservation, describe_decision

#: Kafka's ``KafkaController`` gauges, in the order the dispatcher's sums carry them
KAFKA_GAUGES = KAFKA_CONTROLLER_GAUGES
#: the partition figures every view shows (:mod:`core.figures`), from the buckets' gauges summed after each
#: micro-batch: the status page, the Prometheus endpoint and the Spark UI read these same sums
FIGURES = (
    "OfflinePartitionsCount",
    "UnderReplicatedPartitions",
    "UnderMinIsrPartitionCount",
    "PreferredReplicaImbalanceCount",
    "ReassigningPartitions",
)
#: input event type -> Kafka's ``ControllerState`` whose ``…RateAndTimeMs`` timer covers it
CONTROLLER_STATES: Mapping[str, str] = {
    "controller_failover": "ControllerChange",
    "broker_startup": "LeaderElection",  # Kafka's BrokerChange keeps the old timer name
    "broker_failure": "LeaderElection",
    "broker_modification": "LeaderElection",  # Kafka's BrokerModifications runs in the BrokerChange state too
    "create_topic": "TopicChange",
    "create_partitions": "TopicChange",
    "reassign_partitions": "PartitionReassignment",
    "cancel_reassignment": "PartitionReassignment",
    "auto_rebalance_tick": "AutoLeaderBalance",
    "elect_leaders": "ManualLeaderBalance",
    "controlled_shutdown": "ControlledShutdown",
    "alter_partition": "IsrChange",
    "alter_partition_request": "IsrChange",
    "leader_and_isr_response": "LeaderAndIsrResponseReceived",
    "log_dir_failure": "LogDirChange",
    "alter_topic_config": "TopicUncleanLeaderElectionEnable",
}
#: the state of the events :func:`core.observe.topic_deletion_events` counts
TOPIC_DELETION = "TopicDeletion"
TIMER_NAMES = tuple(dict.fromkeys([*CONTROLLER_STATES.values(), TOPIC_DELETION]))
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
    #: the partition figures (:data:`FIGURES`), summed over the buckets after the last micro-batch
    figures: Mapping[str, int]
    #: the lists (capped) and per-broker counts; its counts are those of the buckets' last summaries
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
    #: gentle leader balance (core.leader_balance): preferred-leader moves left, the bound per pass
    #: (``leader.imbalance.max.leaders.per.interval``) and the moves of the last pass
    leader_moves_left: int = 0
    leader_moves_bound: int = 2**31 - 1
    leader_moves_last_pass: int = 0
    #: the cordoned brokers (``/livectl/cordoned_brokers``, core.cordon), as the active controller last read them
    cordoned_brokers: tuple[int, ...] = ()
    #: the brokers a drain is recorded for (``/livectl/drains/<N>``), as the active controller last read them
    draining_brokers: tuple[int, ...] = ()
    #: the brokers' recent DescribeLogDirs reports (core.kafka.log_dirs), for the reassignments' bytes moved
    log_dirs: tuple[LogDirsReport, ...] = ()


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
        #: the controller states (timer names) of batches whose duration the listener has not reported yet
        self._pending_states: dict[int, tuple[str, ...]] = {}
        self.recent: deque[DecisionLine] = deque(maxlen=RECENT_DECISIONS)
        #: the active controller's leader-balance figures (moves left, bound, last pass), read at each
        #: snapshot; ``None`` until its rebalance schedule runs
        self.leader_moves: Callable[[], tuple[int, int, int]] | None = None
        #: the active controller's cordoned brokers (its admin-path watcher's), read at each snapshot
        self.cordoned: Callable[[], tuple[int, ...]] | None = None
        #: the active controller's draining brokers (its admin-path watcher's), read at each snapshot
        self.draining: Callable[[], tuple[int, ...]] | None = None
        #: the brokers' recent log-dirs reports (:class:`streaming.monitoring.log_dirs_watch.LogDirsWatch`), read at
        #: each snapshot
        self.log_dirs: Callable[[], tuple[LogDirsReport, ...]] | None = None

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
            # requests count per broker: a shared request (one UpdateMetadata for a set of brokers) counts
            # as the requests to each that it stands for, as the counters counted before it was shared
            n = len(d.recipients()) if isinstance(d, dc.BrokerRequest) else 1
            by_kind[kind] = by_kind.get(kind, 0) + n
            if isinstance(d, dc.BrokerRequest):
                by_api[d.api.value] = by_api.get(d.api.value, 0) + n
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
            states = [CONTROLLER_STATES[t] for t, n in batch.input_by_type.items() if n > 0 and t in CONTROLLER_STATES]
            if batch.topic_deletion_events:
                states.append(TOPIC_DELETION)
            self._pending_states[batch.batch_id] = tuple(dict.fromkeys(states))
            while len(self._pending_states) > 100:
                self._pending_states.pop(next(iter(self._pending_states)))
            self.recent.extend(lines)

    def record_progress(self, batch_id: int, duration_ms: float) -> None:
        """The query's progress report of a micro-batch (its ``triggerExecution`` duration)."""
        with self._lock:
            self._batches += 1
            self._batch_seconds += duration_ms / 1000
            self._last_seconds["micro_batch"] = duration_ms / 1000
            for name in self._pending_states.pop(batch_id, ()):
                self._timers[name].record(duration_ms)

    # ------------------------------------------------------------------ reading

    def snapshot(self) -> Snapshot:
        source = self.leader_moves
        left, bound, last_pass = source() if source is not None else (0, 2**31 - 1, 0)
        cordoned = self.cordoned() if self.cordoned is not None else ()
        draining = self.draining() if self.draining is not None else ()
        log_dirs = self.log_dirs() if self.log_dirs is not None else ()
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
                figures={name: int(self._kafka.get(name, 0)) for name in FIGURES},
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
                leader_moves_left=left,
                leader_moves_bound=bound,
                leader_moves_last_pass=last_pass,
                cordoned_brokers=tuple(cordoned),
                draining_brokers=tuple(draining),
                log_dirs=log_dirs,
            )
