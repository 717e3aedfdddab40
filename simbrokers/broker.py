"""A simulated Kafka broker, pure: fed decoded requests, fetches and a clock value; returns core events.

What it checks and answers, as Kafka's ``ReplicaManager`` / ``KafkaApis`` do:

* **broker epoch**: a request carrying a broker epoch older than this registration's (``brokerEpoch`` !=
  -1 and < ours) is refused with ``STALE_BROKER_EPOCH``;
* **controller epoch**: LeaderAndIsr / StopReplica from an older controller epoch are refused with
  ``STALE_CONTROLLER_EPOCH`` (every partition carries the error); UpdateMetadata from one is ignored;
* **LeaderAndIsr**, per partition: log directory failed -> ``KAFKA_STORAGE_ERROR``; leader epoch newer
  than ours and this broker among the replicas -> become leader / follower; newer but not among the
  replicas -> ``UNKNOWN_TOPIC_OR_PARTITION``; not newer -> ``STALE_CONTROLLER_EPOCH`` and nothing
  changes. Answer: a :class:`core.events.LeaderAndIsrResponse`;
* **StopReplica**, per partition: epoch -2 (deleting), -1 (none) or newer than ours -> stop (and delete
  the replica when ``deletePartition``); older -> ``FENCED_LEADER_EPOCH``; equal -> ``STALE_CONTROLLER_EPOCH``;
  failed log directory -> ``KAFKA_STORAGE_ERROR``. Answer (only for ``deletePartition`` partitions, which
  drive topic deletion): a :class:`core.events.StopReplicaResponse`;
* **UpdateMetadata**: kept in a metadata cache (live brokers and their endpoints, partition states);
* **AlterPartitionResponse**: commits or drops the pending ISR change of each partition its entries answer;
  a top-level error backs off the proposal whose correlation id it names (each proposal is one request);
* **AlterPartition** proposals are never timed out (Kafka's ``DefaultAlterPartitionManager``: "We will not
  timeout AlterPartition request"): a sent proposal waits for its answer however long the controller's
  backlog is, and is sent again only (a) after a top-level error in its answer, after
  ``alter_partition_backoff_ms``; (b) when a controller request (LeaderAndIsr, UpdateMetadata, StopReplica)
  brings a higher controller epoch than the one known when it was sent — a new controller, to which Kafka's
  broker-to-controller channel sends the request again (after a disconnection or a ``NOT_CONTROLLER``
  answer); (c) when its record could not be written (:meth:`SimBroker.alter_partition_not_sent`: Kafka's
  channel sends a request again after a failed send). Kafka's network client also disconnects and
  resends a request unanswered for ``controller.socket.timeout.ms`` (30 s); that guards a request lost with
  its connection, and ``livectl.broker-events`` loses no acknowledged record (a new controller reads on from
  the checkpoint): it is not emulated, since every copy is one more record in the backlog it waits behind;
* **ControlledShutdownResponse**: fed to :class:`simbrokers.shutdown.ControlledShutdownProcess`.

Duplicates are dropped: per API, a message older than the highest ``(controllerEpoch, batchId)`` applied,
or one already applied (same :attr:`core.kafka.envelope.Envelope.dedupe_key`).

Faults: a *slow* follower fetches at a longer interval and/or fewer records per fetch; a *stuck* follower
stops fetching; a *disk failure* takes every replica offline (no serving, no fetching, storage errors
on requests) and reports a :class:`core.events.LogDirFailure` once; it lasts until the broker restarts.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field, replace

from core.events import (
    AlterPartition,
    ControlledShutdown,
    Event,
    LeaderAndIsrResponse,
    LogDirFailure,
    PartitionError,
    StopReplicaResponse,
)
from core.kafka.envelope import Envelope
from core.kafka.error_codes import KafkaError
from core.kafka.log_dirs import LogDirResult, LogDirsReport, PartitionLogDir, TopicLogDir
from core.kafka.requests import (
    AlterPartitionResponse,
    BrokerAddress,
    ControlledShutdownResponse,
    LeaderAndIsrRequest,
    MetadataPartitionState,
    RequestApi,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from core.model import EPOCH_DURING_DELETE, NO_EPOCH, TopicPartition
from simbrokers.partition import FetchPartitionRequest, FetchPartitionResponse, Role, SimPartition
from simbrokers.shutdown import ControlledShutdownProcess, ShutdownPhase
from simbrokers.throttle import Quota, ThrottleConfig

_DEDUPE_CAPACITY = 100_000


@dataclass(frozen=True)
class BrokerConfig:
    """Kafka's broker settings that matter here (Kafka's names in the comments), plus the simulation's own."""

    #: replica.lag.time.max.ms
    replica_lag_time_max_ms: int = 30_000
    #: min.insync.replicas (acks=all producers)
    min_insync_replicas: int = 1
    #: records per second appended to each partition this broker leads
    produce_rate: float = 10.0
    #: how often a follower fetches (replica.fetch.backoff.ms-like pacing)
    fetch_interval_ms: int = 100
    #: records per fetch and partition (replica.fetch.max.bytes, counted in records)
    fetch_max_records: int = 10_000
    #: back off after a top-level AlterPartition error or a failed send (an unanswered AlterPartition is
    #: never sent again on a timer: see the module's docstring)
    alter_partition_backoff_ms: int = 500
    #: controlled.shutdown.max.retries
    controlled_shutdown_max_retries: int = 3
    #: controlled.shutdown.retry.backoff.ms
    controlled_shutdown_retry_backoff_ms: int = 5_000
    #: request.timeout.ms for the ControlledShutdown request
    controlled_shutdown_timeout_ms: int = 30_000
    #: how long to wait for more messages of one controller batch answering a ControlledShutdown
    controlled_shutdown_settle_ms: int = 500
    #: bytes one simulated record weighs for the replication quotas (``*.replication.throttled.rate``)
    record_bytes: int = 1024


@dataclass(frozen=True)
class Faults:
    """Injected faults. ``None`` means "as configured"."""

    slow_fetch_interval_ms: int | None = None
    slow_fetch_max_records: int | None = None
    stuck: bool = False
    disk_failed: bool = False


@dataclass(frozen=True)
class FetchRequest:
    replica_id: int
    partitions: tuple[FetchPartitionRequest, ...]
    #: records per partition the follower accepts (a slow follower asks for fewer)
    max_records: int = 10_000


@dataclass(frozen=True)
class FetchResponse:
    partitions: tuple[FetchPartitionResponse, ...]


@dataclass
class MetadataCache:
    brokers: dict[int, BrokerAddress] = field(default_factory=dict)
    partitions: dict[TopicPartition, MetadataPartitionState] = field(default_factory=dict)


class SimBroker:
    """One broker. Not thread-safe: the shell serialises calls (one lock per broker)."""

    def __init__(self, broker_id: int, config: BrokerConfig | None = None, *, broker_epoch: int = -1) -> None:
        self.broker_id = broker_id
        self.config = config or BrokerConfig()
        self.broker_epoch = broker_epoch
        self.controller_epoch = -1
        self.partitions: dict[TopicPartition, SimPartition] = {}
        self.metadata = MetadataCache()
        #: endpoints of leaders from LeaderAndIsr ``liveLeaders`` (UpdateMetadata's live brokers complete it)
        self.leader_addresses: dict[int, BrokerAddress] = {}
        self.faults = Faults()
        self.shutdown = ControlledShutdownProcess(
            max_retries=self.config.controlled_shutdown_max_retries,
            backoff_ms=self.config.controlled_shutdown_retry_backoff_ms,
            timeout_ms=self.config.controlled_shutdown_timeout_ms,
            settle_ms=self.config.controlled_shutdown_settle_ms,
        )
        self.truncated_records = 0
        self._applied: OrderedDict[tuple[int, int, str, str], None] = OrderedDict()
        self._applied_high: dict[RequestApi, tuple[int, int]] = {}
        self._log_dir_failure_reported = False
        self._pending_events: list[Event] = []
        self.throttle = ThrottleConfig()
        self._leader_quota: Quota | None = None
        self._follower_quota: Quota | None = None

    # ------------------------------------------------------------------ requests from the controller

    def handle(self, env: Envelope, now_ms: int) -> list[Event]:
        """Apply one request addressed to this broker — to it alone, or a shared one naming it among its
        addressees (applied with its own broker epoch) — and return the events to publish; any other
        request is ignored."""
        mine = env.for_broker(self.broker_id)
        if mine is None:
            return []
        env = mine
        if not self._first_application(env):
            return []
        body = env.body
        if isinstance(body, LeaderAndIsrRequest):
            return [self._leader_and_isr(body, now_ms)]
        if isinstance(body, UpdateMetadataRequest):
            self._update_metadata(body)
            return []
        if isinstance(body, StopReplicaRequest):
            resp = self._stop_replica(body)
            return [resp] if resp is not None else []
        if isinstance(body, ControlledShutdownResponse):
            send = self.shutdown.on_response(
                (env.controller_epoch, env.batch_id), body.error_code, body.remaining, now_ms
            )
            return [self._controlled_shutdown_request()] if send else []
        if isinstance(body, AlterPartitionResponse):
            self._alter_partition_response(body, now_ms)
            return []
        raise AssertionError(f"unhandled request {env.api}")

    def _first_application(self, env: Envelope) -> bool:
        """Per API, the highest ``(controllerEpoch, batchId)`` applied so far: older messages are dropped (a
        replayed or out-of-date batch); messages of that same batch apply once each (by body digest)."""
        mark = (env.controller_epoch, env.batch_id)
        high = self._applied_high.get(env.api)
        if high is not None and mark < high:
            return False
        key = env.dedupe_key
        if key in self._applied:
            return False
        self._applied_high[env.api] = mark
        self._applied[key] = None
        if len(self._applied) > _DEDUPE_CAPACITY:
            self._applied.popitem(last=False)
        return True

    def _stale_broker_epoch(self, request_epoch: int) -> bool:
        return request_epoch != -1 and request_epoch < self.broker_epoch

    def _leader_and_isr(self, req: LeaderAndIsrRequest, now_ms: int) -> LeaderAndIsrResponse:
        def everyone(code: int) -> LeaderAndIsrResponse:
            return LeaderAndIsrResponse(
                self.broker_id, tuple(PartitionError(s.topic, s.partition, code) for s in req.partitions), code
            )

        if self._stale_broker_epoch(req.broker_epoch):
            return everyone(KafkaError.STALE_BROKER_EPOCH)
        if req.controller_epoch < self.controller_epoch:
            return everyone(KafkaError.STALE_CONTROLLER_EPOCH)
        self._controller_epoch_seen(req.controller_epoch)
        for addr in req.live_leaders:
            self.leader_addresses[addr.broker_id] = addr
        errors: list[PartitionError] = []
        for st in req.partitions:
            tp = st.tp
            if self.faults.disk_failed:
                errors.append(PartitionError(tp.topic, tp.partition, KafkaError.KAFKA_STORAGE_ERROR))
                continue
            part = self.partitions.get(tp)
            current_epoch = part.leader_epoch if part is not None else -1
            if st.leader_epoch > current_epoch:
                if self.broker_id not in st.replicas:
                    errors.append(PartitionError(tp.topic, tp.partition, KafkaError.UNKNOWN_TOPIC_OR_PARTITION))
                    continue
                if part is None:
                    part = self.partitions[tp] = SimPartition(tp, self.broker_id)
                if st.leader == self.broker_id:
                    part.make_leader(st, now_ms)
                else:
                    part.make_follower(st, now_ms)
                errors.append(PartitionError(tp.topic, tp.partition, KafkaError.NONE))
            else:
                # Kafka answers both "older" and "same" leader epochs this way and changes nothing
                errors.append(PartitionError(tp.topic, tp.partition, KafkaError.STALE_CONTROLLER_EPOCH))
        return LeaderAndIsrResponse(self.broker_id, tuple(errors), KafkaError.NONE)

    def _update_metadata(self, req: UpdateMetadataRequest) -> None:
        if self._stale_broker_epoch(req.broker_epoch) or req.controller_epoch < self.controller_epoch:
            return
        self._controller_epoch_seen(req.controller_epoch)
        self.metadata.brokers = {a.broker_id: a for b in req.live_brokers if (a := b.address()) is not None}
        for st in req.partitions:
            self.metadata.partitions[TopicPartition(st.topic, st.partition)] = st

    def _stop_replica(self, req: StopReplicaRequest) -> StopReplicaResponse | None:
        deleting = [p for p in req.partitions if p.delete_partition]

        def everyone(code: int) -> StopReplicaResponse | None:
            if not deleting:
                return None
            return StopReplicaResponse(
                self.broker_id, tuple(PartitionError(p.topic, p.partition, code) for p in deleting), code
            )

        if self._stale_broker_epoch(req.broker_epoch):
            return everyone(KafkaError.STALE_BROKER_EPOCH)
        if req.controller_epoch < self.controller_epoch:
            return everyone(KafkaError.STALE_CONTROLLER_EPOCH)
        self._controller_epoch_seen(req.controller_epoch)
        errors: list[PartitionError] = []
        for sp in req.partitions:
            tp = sp.tp
            part = self.partitions.get(tp)
            if self.faults.disk_failed:
                code = KafkaError.KAFKA_STORAGE_ERROR
            elif part is None:
                code = KafkaError.NONE  # nothing hosted: a delete of a stray replica succeeds
            elif sp.leader_epoch in (EPOCH_DURING_DELETE, NO_EPOCH) or sp.leader_epoch >= part.leader_epoch:
                # Kafka's ReplicaManager.stopReplicas: the current leader epoch applies too; only an older
                # one is fenced
                code = KafkaError.NONE
                if sp.delete_partition:
                    del self.partitions[tp]
                else:
                    part.stop()
            else:
                code = KafkaError.FENCED_LEADER_EPOCH
            if sp.delete_partition:
                errors.append(PartitionError(tp.topic, tp.partition, code))
        if not errors:
            return None
        return StopReplicaResponse(self.broker_id, tuple(errors), KafkaError.NONE)

    def _controller_epoch_seen(self, epoch: int) -> None:
        """A controller request of ``epoch`` (not older than ours) was accepted. A higher epoch is a new
        controller: every proposal waiting for an answer that was sent under an older epoch is sent again at
        the next tick, as Kafka's broker-to-controller channel sends its in-flight request to the new
        controller. (A LeaderAndIsr naming the partition replaces its proposal anyway.)"""
        if epoch <= self.controller_epoch:
            return
        self.controller_epoch = epoch
        for part in self.partitions.values():
            pending = part.pending
            if pending is not None and pending.send_at_ms is None and pending.sent_controller_epoch < epoch:
                pending.send_at_ms = 0

    def alter_partition_not_sent(self, correlation_id: int, now_ms: int) -> bool:
        """The record of the proposal ``correlation_id`` could not be written (the producer gave up, or Kafka
        was unreachable): send it again after ``alter_partition_backoff_ms``, as Kafka's channel sends a request
        again after its send failed. Returns whether a proposal waiting for its answer had that id (False:
        answered or replaced since, nothing to send)."""
        for part in self.partitions.values():
            pending = part.pending
            if pending is not None and pending.correlation_id == correlation_id and pending.send_at_ms is None:
                pending.send_at_ms = now_ms + self.config.alter_partition_backoff_ms
                return True
        return False

    def _alter_partition_response(self, resp: AlterPartitionResponse, now_ms: int) -> None:
        if resp.error_code != KafkaError.NONE:
            # NOT_CONTROLLER, STALE_BROKER_EPOCH, ...: Kafka's AlterPartitionManager retries the whole request —
            # the one the answer names (each proposal is its own request here); an answer naming none, all
            for part in self.partitions.values():
                pending = part.pending
                if pending is not None and resp.correlation_id in (-1, pending.correlation_id):
                    pending.send_at_ms = now_ms + self.config.alter_partition_backoff_ms
            return
        for res in resp.partitions:
            target = self.partitions.get(res.tp)
            if target is not None:
                target.apply_alter_result(res, now_ms)

    # ------------------------------------------------------------------ time passes

    def tick(self, now_ms: int) -> list[Event]:
        """Produce on led partitions, check the ISR, (re)send ISR proposals, drive controlled shutdown."""
        events, self._pending_events = self._pending_events, []
        if not self.faults.disk_failed:
            for part in self.partitions.values():
                if part.role is not Role.LEADER:
                    continue
                part.produce(now_ms, self.config.produce_rate, self.config.min_insync_replicas)
                part.maybe_shrink_isr(now_ms, self.config.replica_lag_time_max_ms)
                pending = part.pending
                if pending is not None and pending.send_at_ms is not None and now_ms >= pending.send_at_ms:
                    # sent, it waits for its answer (or a reason to send it again) without a timeout
                    pending.send_at_ms = None
                    pending.sent += 1
                    pending.sent_controller_epoch = self.controller_epoch
                    events.append(
                        AlterPartition(
                            self.broker_id,
                            self.broker_epoch,
                            part.tp.topic,
                            part.tp.partition,
                            part.leader_epoch,
                            part.partition_epoch,
                            pending.isr,
                            correlation_id=pending.correlation_id,
                        )
                    )
        if self.shutdown.poll(now_ms):
            events.append(self._controlled_shutdown_request())
        return events

    # ------------------------------------------------------------------ replication

    def fetch_interval_ms(self) -> int:
        return self.faults.slow_fetch_interval_ms or self.config.fetch_interval_ms

    def fetch_requests(self, now_ms: int) -> dict[int, FetchRequest]:
        """The fetches due now, one request per leader (Kafka's fetcher threads, one per source broker)."""
        if self.faults.stuck or self.faults.disk_failed:
            return {}
        by_leader: dict[int, list[FetchPartitionRequest]] = {}
        for part in self.partitions.values():
            if part.role is Role.FOLLOWER and part.leader >= 0 and now_ms >= part.next_fetch_ms:
                part.next_fetch_ms = now_ms + self.fetch_interval_ms()
                by_leader.setdefault(part.leader, []).append(part.fetch_request())
        limit = self.fetch_max_records()
        return {leader: FetchRequest(self.broker_id, tuple(reqs), limit) for leader, reqs in by_leader.items()}

    def set_throttle(self, throttle: ThrottleConfig) -> None:
        """New replication quotas (from the dynamic configs); a changed rate starts a fresh bucket."""
        self.throttle = throttle
        if throttle.leader_rate is None:
            self._leader_quota = None
        elif self._leader_quota is None or self._leader_quota.rate != throttle.leader_rate:
            self._leader_quota = Quota(throttle.leader_rate)
        if throttle.follower_rate is None:
            self._follower_quota = None
        elif self._follower_quota is None or self._follower_quota.rate != throttle.follower_rate:
            self._follower_quota = Quota(throttle.follower_rate)

    def handle_fetch(self, req: FetchRequest, now_ms: int) -> FetchResponse:
        """Serve a follower's fetch as leader (a follower outside the ISR of a throttled partition gets what
        the leader quota has room for)."""
        limit = min(req.max_records, self.config.fetch_max_records)
        out = []
        for p in req.partitions:
            tp = TopicPartition(p.topic, p.partition)
            part = self.partitions.get(tp)
            if self.faults.disk_failed:
                out.append(FetchPartitionResponse(p.topic, p.partition, KafkaError.KAFKA_STORAGE_ERROR))
            elif part is None:
                out.append(FetchPartitionResponse(p.topic, p.partition, KafkaError.UNKNOWN_TOPIC_OR_PARTITION))
            else:
                n = limit
                quota = self._leader_quota
                if (
                    quota is not None
                    and req.replica_id not in part.isr
                    and self.throttle.leader_throttled(tp, self.broker_id)
                ):
                    available = max(0, part.log.log_end_offset - p.fetch_offset)
                    n = quota.grant(now_ms, min(limit, available), self.config.record_bytes)
                out.append(part.handle_fetch(req.replica_id, p, now_ms, n))
        return FetchResponse(tuple(out))

    def fetch_max_records(self) -> int:
        return self.faults.slow_fetch_max_records or self.config.fetch_max_records

    def on_fetch_response(self, leader_id: int, resp: FetchResponse, now_ms: int) -> None:
        """Apply a leader's answer to our fetch."""
        if self.faults.disk_failed:
            return
        for p in resp.partitions:
            tp = TopicPartition(p.topic, p.partition)
            part = self.partitions.get(tp)
            if part is not None and part.role is Role.FOLLOWER and part.leader == leader_id:
                taken = p
                quota = self._follower_quota
                if (
                    quota is not None
                    and p.records
                    and self.broker_id not in part.isr
                    and self.throttle.follower_throttled(tp, self.broker_id)
                ):
                    # the follower quota: take what it has room for, fetch the rest later
                    granted = quota.grant(now_ms, len(p.records), self.config.record_bytes)
                    taken = replace(p, records=p.records[:granted])
                self.truncated_records += part.apply_fetch(taken)
                if (taken.records or taken.diverging is not None) and self.faults.slow_fetch_interval_ms is None:
                    # Kafka's fetcher sends the next fetch as soon as a response brought data
                    part.next_fetch_ms = now_ms

    def leader_address(self, leader_id: int) -> BrokerAddress | None:
        return self.leader_addresses.get(leader_id) or self.metadata.brokers.get(leader_id)

    # ------------------------------------------------------------------ faults and shutdown

    def inject(self, faults: Faults) -> list[Event]:
        """Replace the injected faults. A disk failure sticks until restart and is reported once."""
        if self.faults.disk_failed and not faults.disk_failed:
            faults = replace(faults, disk_failed=True)
        self.faults = faults
        if faults.disk_failed and not self._log_dir_failure_reported:
            self._log_dir_failure_reported = True
            for part in self.partitions.values():
                part.stop()
            return [LogDirFailure(self.broker_id)]
        return []

    def start_controlled_shutdown(self, now_ms: int) -> list[Event]:
        """SIGTERM: ask the controller to move leadership away (idempotent)."""
        return [self._controlled_shutdown_request()] if self.shutdown.start(now_ms) else []

    def _controlled_shutdown_request(self) -> ControlledShutdown:
        return ControlledShutdown(self.broker_id, self.broker_epoch)

    @property
    def shutdown_phase(self) -> ShutdownPhase:
        return self.shutdown.phase

    # ------------------------------------------------------------------ views for tests and status

    def describe_log_dirs(self, time_ms: int) -> LogDirsReport:
        """Kafka's DescribeLogDirs answer for the partitions being reassigned (adding or removing replicas in
        their latest LeaderAndIsr), as a request naming those partitions gets it: one log directory, each
        replica's ``partitionSize`` (log end offset x ``record_bytes``) and ``offsetLag`` (high watermark minus
        log end offset, at least 0); a failed disk answers ``KAFKA_STORAGE_ERROR`` for the directory.
        ``time_ms``: the wall clock, which readers in other processes compare."""
        by_topic: dict[str, list[PartitionLogDir]] = {}
        moving = [(tp, p) for tp, p in self.partitions.items() if p.adding or p.removing]
        for tp, p in sorted(moving, key=_by_name):
            log = p.log
            size = log.log_end_offset * self.config.record_bytes
            lag = max(0, log.high_watermark - log.log_end_offset)
            by_topic.setdefault(tp.topic, []).append(PartitionLogDir(tp.partition, size, lag))
        error = KafkaError.KAFKA_STORAGE_ERROR if self.faults.disk_failed else KafkaError.NONE
        topics = () if error else tuple(TopicLogDir(t, tuple(ps)) for t, ps in by_topic.items())
        result = LogDirResult(f"/simbrokers/{self.broker_id}", topics, int(error))
        return LogDirsReport(self.broker_id, time_ms, (result,))

    def leader_partitions(self) -> list[TopicPartition]:
        return sorted(tp for tp, p in self.partitions.items() if p.role is Role.LEADER)

    def status(self) -> dict[str, object]:
        """A JSON-able summary (for the shell's status log and tests)."""
        return {
            "broker_id": self.broker_id,
            "broker_epoch": self.broker_epoch,
            "controller_epoch": self.controller_epoch,
            "faults": {
                "slow_fetch_interval_ms": self.faults.slow_fetch_interval_ms,
                "slow_fetch_max_records": self.faults.slow_fetch_max_records,
                "stuck": self.faults.stuck,
                "disk_failed": self.faults.disk_failed,
            },
            "shutdown": self.shutdown.phase.value,
            "partitions": {
                str(tp): {
                    "role": p.role.value,
                    "leader": p.leader,
                    "leader_epoch": p.leader_epoch,
                    "isr": list(p.isr),
                    "leo": p.log.log_end_offset,
                    "hw": p.log.high_watermark,
                    "acked": len(p.acked),
                }
                for tp, p in sorted(self.partitions.items(), key=_by_name)
            },
        }


def _by_name(item: tuple[TopicPartition, object]) -> tuple[str, int]:
    # a tuple of builtins compares in C; the dataclass's own ordering costs seconds at 60,000 partitions
    return item[0].topic, item[0].partition
