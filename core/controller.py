"""The controller operations (Kafka's ``KafkaController``) and ``step``, the streaming job's entry.

``step(state, events) -> (state, decisions)`` copies the bucket's :class:`ControllerState` once,
applies the events in order and returns the new state and the decisions: ZooKeeper writes (in order),
then the step's broker requests batched per broker (LeaderAndIsr, UpdateMetadata, StopReplica, then
answers to broker requests), then admin results, then per-item state-change failures. The input state
is never modified. Nothing raises per item: impossible commands get an :class:`AdminResult` with
Kafka's error name.

Operations, each with its ordered side effects (Kafka 3.x ZooKeeper-mode semantics):

* **new topic / new partitions** — ``/config/topics/<t>`` and ``/brokers/topics/<t>`` written; partitions
  -> New, replicas -> New, partitions -> Online (state znodes created), replicas -> Online.
* **topic deletion** — ``/admin/delete_topics/<t>`` created; see :mod:`core.deletion`; a final ``ok``
  result when the topic is gone.
* **broker startup** — UpdateMetadata (brokers only) to the other brokers, UpdateMetadata for every
  partition with a leader to the new broker, its replicas -> Online, New/Offline partitions -> Online,
  reassignments whose targets include it resumed, deletions with replicas on it resumed. A startup
  with a newer epoch for a live broker is a bounce: failure, then startup. An older or equal epoch is
  ignored.
* **broker failure** — partitions whose leader is gone -> Offline, New/Offline partitions -> Online
  (offline election), the broker's replicas -> Offline (ISR shrink), replicas of topics being deleted
  fail their deletion; UpdateMetadata (brokers only) if nothing else changed.
* **controlled shutdown** — partitions it leads (replication factor > 1) re-elected with the
  controlled-shutdown strategy, StopReplica to it for the ones it follows and those replicas ->
  Offline; answers a ``ControlledShutdownResponse`` listing the partitions it still leads.
* **reassignment** (KIP-455) — :func:`on_partition_reassignment`; submit, supersede (a new target
  replaces the old; replicas no longer needed are stopped at once), cancel (= reassign to origin).
* **elections on demand** — preferred / unclean per partition, with Kafka's per-partition errors.
* **auto leader rebalance** — preferred election for the partitions of the brokers named by the tick.
* **AlterPartition** — ISR changes from leaders, Kafka's validation and error codes, then
  UpdateMetadata and reassignment completion.
* **log-dir failure** — LeaderAndIsr to the broker's replicas; ``KAFKA_STORAGE_ERROR`` in the response
  marks replicas offline.
* **controller failover** — context from the ZooKeeper snapshot, UpdateMetadata (brokers only), replica
  states initialised (online / DeletionIneligible) then moved Online / Offline, partition states
  initialised (Online / Offline / New) then New/Offline elected, reassignments resumed (legacy
  ``/admin/reassign_partitions`` entries started), deletions resumed, pending preferred elections run.

Where livectl deliberately differs from Kafka: AlterPartition additionally rejects an ISR that omits the
leader or names a non-replica (``INVALID_REQUEST``) and a request from a broker that is not the leader
(``NOT_LEADER_OR_FOLLOWER``), as KRaft does; ``/admin/reassign_partitions`` and
``/admin/preferred_replica_election`` are deleted (not rewritten) once the bucket's entries are done,
because a bucket sees only its own entries (the work itself is persisted in the topic and state
znodes first, and a replayed micro-batch replays the failover).

Multi-bucket merging: every bucket answers a ControlledShutdown with one ``ControlledShutdownResponse``
(merge by concatenating ``remainingPartitions``); admin results of a command split across buckets
share its ``request_id`` (merge: error if any is error, in_progress if any is, else ok);
:func:`metrics` and :func:`imbalance` return per-bucket counts to sum.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from core import deletion, offline_replicas, partition_machine, replica_machine
from core import limits as lim
from core.cluster_config import controller_fields
from core.context import ControllerContext, context_from_dict
from core.decisions import (
    ANY_VERSION,
    AdminResult,
    AdminStatus,
    BrokerRequest,
    Decision,
    ZkOp,
    ZkWrite,
)
from core.election import ElectionStrategy, preferred_leader
from core.events import (
    AdminCommand,
    AlterPartition,
    AlterTopicConfig,
    AutoRebalanceTick,
    BrokerFailure,
    BrokerStartup,
    CancelReassignment,
    ClusterConfigChanged,
    ControlledShutdown,
    ControllerFailover,
    CreatePartitions,
    CreateTopic,
    DeleteTopic,
    ElectLeaders,
    Event,
    LeaderAndIsrResponse,
    LogDirFailure,
    PartitionStatesRead,
    ReassignPartitions,
    StopReplicaResponse,
    Tick,
    TopicCreationRefused,
    ZkLogDirEvents,
    ZkPreferredElection,
    ZkReassignment,
    ZkTopicChange,
    ZkTopicDeletion,
)
from core.kafka.error_codes import CODES as ERROR_CODES
from core.kafka.error_codes import KafkaError
from core.kafka.requests import RequestApi
from core.kafka.zkdata import (
    LOG_DIR_EVENT_NOTIFICATION,
    PREFERRED_REPLICA_ELECTION,
    REASSIGN_PARTITIONS,
    delete_topic_path,
    encode_partition_state,
    encode_topic_config,
    encode_topic_znode,
    partition_state_path,
    topic_config_path,
    topic_path,
)
from core.model import (
    NO_LEADER,
    RECOVERED,
    RECOVERING,
    Broker,
    ElectionType,
    LeaderAndIsr,
    PartitionReplica,
    PartitionTarget,
    ReplicaAssignment,
    TopicPartition,
    sort_tps,
)
from core.placement import BrokerRack, PlacementError, assign_replicas, stable_start_index, validate_manual_assignment
from core.replica_machine import remove_replica_from_isr
from core.requests import Effects
from core.snapshot import ZkSnapshot
from core.states import PartitionState, ReplicaState
from core.topic_configs import topic_configs_problem

STATE_VERSION = 1
UNCLEAN_CONFIG = "unclean.leader.election.enable"
KAFKA_STORAGE_ERROR = int(KafkaError.KAFKA_STORAGE_ERROR)


@dataclass(frozen=True)
class ControllerConfig:
    """The broker configs the controller reads (Kafka's names in the docstrings)."""

    #: ``delete.topic.enable``
    delete_topic_enable: bool = True
    #: ``unclean.leader.election.enable`` (cluster default; topics may override)
    unclean_leader_election_enable: bool = False
    #: ``auto.leader.rebalance.enable``
    auto_leader_rebalance_enable: bool = True
    #: ``leader.imbalance.per.broker.percentage``
    leader_imbalance_per_broker_percentage: int = 10
    #: ``leader.imbalance.check.interval.seconds`` (the driver's schedule of :class:`AutoRebalanceTick`)
    leader_imbalance_check_interval_seconds: int = 300


@dataclass(frozen=True)
class ControllerState:
    """One bucket's controller state: the context plus the admin bookkeeping. Treat as immutable:
    ``step`` returns a new one. Serialise with :meth:`to_bytes` / :meth:`from_bytes` (compact JSON)."""

    context: ControllerContext = field(default_factory=ControllerContext)
    config: ControllerConfig = field(default_factory=ControllerConfig)
    #: request id -> partitions whose reassignment (or cancellation) it still waits for
    pending_reassignments: dict[str, frozenset[TopicPartition]] = field(default_factory=dict)
    #: request id -> topics whose deletion it still waits for
    pending_deletions: dict[str, frozenset[str]] = field(default_factory=dict)
    #: partitions started from the legacy ``/admin/reassign_partitions`` path and not finished
    zk_reassignments: frozenset[TopicPartition] = frozenset()
    #: request id -> its partitions whose reassignment a later request replaced: partition -> "superseded"
    #: or "cancelled" (its final answer says so instead of "completed")
    interrupted_reassignments: dict[str, dict[str, str]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "context": self.context.to_dict(),
            "config": {f.name: getattr(self.config, f.name) for f in fields(self.config)},
            "pending_reassignments": {
                rid: [[tp.topic, tp.partition] for tp in sorted(tps)] for rid, tps in self.pending_reassignments.items()
            },
            "pending_deletions": {rid: sorted(ts) for rid, ts in self.pending_deletions.items()},
            "zk_reassignments": [[tp.topic, tp.partition] for tp in sorted(self.zk_reassignments)],
            "interrupted_reassignments": {
                rid: dict(sorted(v.items())) for rid, v in sorted(self.interrupted_reassignments.items())
            },
        }

    @staticmethod
    def from_dict(d: dict[str, Any]) -> ControllerState:
        if d.get("version") != STATE_VERSION:
            from core.errors import FormatError

            raise FormatError("version", f"unsupported controller state version {d.get('version')}")
        return ControllerState(
            context_from_dict(d["context"]),
            ControllerConfig(**d["config"]),
            {rid: frozenset(TopicPartition(t, p) for t, p in tps) for rid, tps in d["pending_reassignments"].items()},
            {rid: frozenset(ts) for rid, ts in d["pending_deletions"].items()},
            frozenset(TopicPartition(t, p) for t, p in d["zk_reassignments"]),
            {rid: dict(v) for rid, v in d.get("interrupted_reassignments", {}).items()},
        )

    def to_bytes(self) -> bytes:
        return json.dumps(self.to_dict(), separators=(",", ":")).encode()

    @staticmethod
    def from_bytes(data: bytes) -> ControllerState:
        result: ControllerState = ControllerState.from_dict(json.loads(data))
        return result


def initial_state(config: ControllerConfig | None = None) -> ControllerState:
    return ControllerState(ControllerContext(), config or ControllerConfig())


# --------------------------------------------------------------------------- the running controller


class _Controller:
    """Mutable working copy used inside one ``step``."""

    def __init__(self, state: ControllerState) -> None:
        self.ctx = state.context.copy()
        self.config = state.config
        self.pending_reassignments = {k: set(v) for k, v in state.pending_reassignments.items()}
        self.pending_deletions = {k: set(v) for k, v in state.pending_deletions.items()}
        self.zk_reassignments = set(state.zk_reassignments)
        self._had_zk_reassignments = bool(self.zk_reassignments)
        self.interrupted = {k: dict(v) for k, v in state.interrupted_reassignments.items()}
        self.fx = Effects()
        self._offline_before = offline_replicas.record(self.ctx)
        #: on failover, the topics ZooKeeper holds a record of (the new context knows no failed dir)
        self._offline_reset: frozenset[str] | None = None

    def decisions(self) -> list[Decision]:
        """The step's decisions, with the writes that keep ``/livectl/offline_replicas`` in step with the
        context (:mod:`core.offline_replicas`)."""
        after = offline_replicas.record(self.ctx)
        self.fx.zk.extend(offline_replicas.writes(self._offline_before, after, self._offline_reset))
        return self.fx.decisions(self.ctx)

    def state(self) -> ControllerState:
        return ControllerState(
            self.ctx,
            self.config,
            {k: frozenset(v) for k, v in self.pending_reassignments.items()},
            {k: frozenset(v) for k, v in self.pending_deletions.items()},
            frozenset(self.zk_reassignments),
            {k: dict(v) for k, v in self.interrupted.items()},
        )

    # ------------------------------------------------------------------ helpers

    def _admin(
        self,
        cmd: AdminCommand,
        status: AdminStatus,
        error: str | None = None,
        message: str = "",
        details: dict[str, Any] | None = None,
    ) -> None:
        self.fx.admin.append(
            AdminResult(
                cmd.request_id,
                cmd.TYPE,
                status,
                error,
                message,
                json.dumps(details or {}, separators=(",", ":"), sort_keys=True),
            )
        )

    def _write_topic_znode(self, topic: str) -> None:
        assignment = {tp.partition: self.ctx.assignment(tp) for tp in self.ctx.partitions_for_topic(topic)}
        self.fx.zk.append(
            ZkWrite(ZkOp.SET, topic_path(topic), encode_topic_znode(assignment, self.ctx.topic_ids.get(topic)))
        )

    def _partition_states(
        self, tps: Sequence[TopicPartition], target: PartitionState, strategy: ElectionStrategy | None = None
    ) -> dict[TopicPartition, str]:
        return partition_machine.apply(
            self.ctx, self.fx, tps, target, strategy, default_unclean=self.config.unclean_leader_election_enable
        )

    def _replica_states(self, replicas: Sequence[PartitionReplica], target: ReplicaState) -> None:
        replica_machine.apply(self.ctx, self.fx, replicas, target)

    def _needs_leader(self, tp: TopicPartition) -> bool:
        """Whether a partition takes part in leader elections: not when its topic is queued for deletion
        (Kafka's rule), except while the partition is being reassigned — the deletion waits for that
        reassignment, which cannot finish without a leader to bring the new replicas into the ISR."""
        return tp.topic not in self.ctx.topics_to_be_deleted or tp in self.ctx.partitions_being_reassigned

    def trigger_online_partition_state_change(self, topic: str | None = None) -> dict[TopicPartition, str]:
        """New and Offline partitions (not queued for deletion, see :meth:`_needs_leader`) -> Online with the
        offline strategy; returns the failures."""
        ctx = self.ctx
        tps = sort_tps(
            tp
            for tp in ctx.offline_or_new_partitions
            if self._needs_leader(tp) and (topic is None or tp.topic == topic)
        )
        return self._partition_states(tps, PartitionState.ONLINE, ElectionStrategy.OFFLINE)

    def _send_update_metadata(self, brokers: Iterable[int], tps: Iterable[TopicPartition] = ()) -> None:
        self.fx.batch.add_update_metadata(self.ctx, brokers, tps)

    # ------------------------------------------------------------------ brokers

    def on_broker_startup(self, new_brokers: list[int]) -> None:
        ctx = self.ctx
        for b in new_brokers:
            ctx.replicas_on_offline_dirs.pop(b, None)
        existing = sorted(set(ctx.live_brokers) - set(new_brokers))
        self._send_update_metadata(existing)
        with_leaders = [tp for tp in ctx.partition_leadership if tp.topic not in ctx.topics_to_be_deleted]
        self._send_update_metadata(new_brokers, with_leaders)
        replicas = ctx.replicas_on_brokers(new_brokers)
        self._replica_states(replicas, ReplicaState.ONLINE)
        self.trigger_online_partition_state_change()
        new_set = set(new_brokers)
        self.maybe_resume_reassignments(lambda _tp, ra: any(r in new_set for r in ra.target_replicas))
        to_resume = {pr.topic for pr in replicas if pr.topic in ctx.topics_to_be_deleted}
        if to_resume:
            deletion.resume_deletion_for_topics(ctx, self.fx, to_resume)

    def on_broker_failure(self, dead: list[int]) -> None:
        for b in dead:
            self.ctx.replicas_on_offline_dirs.pop(b, None)
        self.on_replicas_become_offline(self.ctx.replicas_on_brokers(dead))

    def on_replicas_become_offline(self, offline: list[PartitionReplica]) -> None:
        ctx = self.ctx
        for_deletion = [pr for pr in offline if pr.topic in ctx.topics_to_be_deleted]
        not_for_deletion = [pr for pr in offline if pr.topic not in ctx.topics_to_be_deleted]
        live = ctx.live_broker_ids
        dirs = ctx.replicas_on_offline_dirs
        with_offline_leader = []
        for tp, li in ctx.partition_leadership.items():
            leader = li.leader_and_isr.leader
            if (leader not in live or (leader in dirs and tp in dirs[leader])) and self._needs_leader(tp):
                with_offline_leader.append(tp)
        with_offline_leader.sort(key=lambda tp: (tp.topic, tp.partition))
        self._partition_states(with_offline_leader, PartitionState.OFFLINE)
        n_candidates = sum(1 for tp in ctx.offline_or_new_partitions if self._needs_leader(tp))
        failures = self.trigger_online_partition_state_change()
        self._replica_states(not_for_deletion, ReplicaState.OFFLINE)
        if for_deletion:
            deletion.fail_replica_deletion(ctx, self.fx, for_deletion)
        if not not_for_deletion and len(failures) == n_candidates:
            self._send_update_metadata(ctx.live_brokers.keys())

    def broker_startup(self, ev: BrokerStartup) -> None:
        ctx = self.ctx
        broker = Broker(ev.broker_id, ev.broker_epoch, ev.rack, ev.endpoints)
        existing = ctx.live_brokers.get(ev.broker_id)
        if existing is not None:
            if ev.broker_epoch <= existing.epoch:
                return
            # a bounced broker: Kafka handles it as a failure followed by a startup
            ctx.remove_live_broker(ev.broker_id)
            self.on_broker_failure([ev.broker_id])
        ctx.add_live_broker(broker)
        self.on_broker_startup([ev.broker_id])

    def broker_failure(self, ev: BrokerFailure) -> None:
        existing = self.ctx.live_brokers.get(ev.broker_id)
        if existing is None or (ev.broker_epoch >= 0 and ev.broker_epoch < existing.epoch):
            return
        self.ctx.remove_live_broker(ev.broker_id)
        self.on_broker_failure([ev.broker_id])

    def controlled_shutdown(self, ev: ControlledShutdown) -> None:
        ctx = self.ctx
        broker = ctx.live_brokers.get(ev.broker_id)
        if broker is None:
            self._shutdown_response(ev.broker_id, ERROR_CODES["BROKER_NOT_AVAILABLE"], [])
            return
        if ev.broker_epoch >= 0 and ev.broker_epoch < broker.epoch:
            self._shutdown_response(ev.broker_id, ERROR_CODES["STALE_BROKER_EPOCH"], [])
            return
        ctx.shutting_down_broker_ids.add(ev.broker_id)
        act_on = sort_tps(
            tp
            for tp in ctx.partitions_on_broker(ev.broker_id)
            if len(ctx.replicas(tp)) > 1 and tp in ctx.partition_leadership and tp.topic not in ctx.topics_to_be_deleted
        )
        led = [tp for tp in act_on if ctx.partition_leadership[tp].leader_and_isr.leader == ev.broker_id]
        followed = [tp for tp in act_on if ctx.partition_leadership[tp].leader_and_isr.leader != ev.broker_id]
        self._partition_states(led, PartitionState.ONLINE, ElectionStrategy.CONTROLLED_SHUTDOWN)
        for tp in followed:
            self.fx.batch.add_stop_replica(ctx, (ev.broker_id,), tp, delete=False)
        self._replica_states(
            [PartitionReplica(tp.topic, tp.partition, ev.broker_id) for tp in followed], ReplicaState.OFFLINE
        )
        self._shutdown_response(ev.broker_id, 0, ctx.partitions_led_by(ev.broker_id))

    def _shutdown_response(self, broker_id: int, error_code: int, remaining: list[TopicPartition]) -> None:
        body = {
            "errorCode": error_code,
            "remainingPartitions": [{"topicName": tp.topic, "partitionIndex": tp.partition} for tp in remaining],
        }
        self.fx.batch.responses.append(
            BrokerRequest(broker_id, RequestApi.CONTROLLED_SHUTDOWN_RESPONSE, json.dumps(body, separators=(",", ":")))
        )

    def log_dir_failure(self, ev: LogDirFailure) -> None:
        if ev.broker_id in self.ctx.live_brokers:
            self._replica_states(self.ctx.replicas_on_brokers([ev.broker_id]), ReplicaState.ONLINE)

    def leader_and_isr_response(self, ev: LeaderAndIsrResponse) -> None:
        ctx = self.ctx
        if ev.error_code != 0:
            return
        offline = set()
        online = set()
        for pe in ev.partitions:
            tp = TopicPartition(pe.topic, pe.partition)
            if tp not in ctx.partition_assignments:
                continue
            if pe.error_code == KAFKA_STORAGE_ERROR:
                offline.add(tp)
            elif pe.error_code == 0:
                online.add(tp)
        previous = ctx.replicas_on_offline_dirs.get(ev.broker_id, set())
        current = (previous - online) | offline
        if current:
            ctx.replicas_on_offline_dirs[ev.broker_id] = current
        else:
            ctx.replicas_on_offline_dirs.pop(ev.broker_id, None)
        new_offline = sorted(current - previous)
        if new_offline:
            prs = [PartitionReplica(tp.topic, tp.partition, ev.broker_id) for tp in new_offline]
            self.on_replicas_become_offline(prs)

    def stop_replica_response(self, ev: StopReplicaResponse) -> None:
        """Kafka's ``TopicDeletionStopReplicaResponseReceived``. Kafka's request batch passes on only the
        entries of topics whose deletion has *started* (``isTopicDeletionInProgress``): an answer about a
        topic merely queued for deletion (or not queued at all, or forgotten) is no replica-deletion
        outcome and changes nothing."""
        ctx = self.ctx
        entries = [
            (TopicPartition(pe.topic, pe.partition), pe.error_code)
            for pe in ev.partitions
            if pe.topic in ctx.topic_partitions and pe.topic in ctx.topics_with_deletion_started
        ]
        in_error = [tp for tp, code in entries if ev.error_code != 0 or code != 0]
        ok = [tp for tp, code in entries if not (ev.error_code != 0 or code != 0)]
        if in_error:
            deletion.fail_replica_deletion(
                ctx, self.fx, [PartitionReplica(tp.topic, tp.partition, ev.broker_id) for tp in in_error]
            )
        if ok:
            deletion.complete_replica_deletion(
                ctx, self.fx, [PartitionReplica(tp.topic, tp.partition, ev.broker_id) for tp in ok]
            )

    # ------------------------------------------------------------------ AlterPartition

    def alter_partition(self, ev: AlterPartition) -> None:
        """Kafka's ``processAlterPartition`` (ZooKeeper mode), for one partition, checks in Kafka's order:

        1. the sender must be registered at exactly ``broker_epoch`` (-1 included: Kafka compares for
           equality) -> else ``STALE_BROKER_EPOCH`` for the whole request;
        2. a proposal by topic id (``topic_id`` set: AlterPartition v2+) names the topic this controller
           holds under that id -> else ``UNKNOWN_TOPIC_ID``;
        3. ``leader_recovery_state`` is RECOVERED (0) or RECOVERING (1) -> else Kafka's
           ``LeaderRecoveryState.of`` throws and the whole request is answered ``UNKNOWN_SERVER_ERROR``;
        4. the partition has a leader and ISR -> else ``UNKNOWN_TOPIC_OR_PARTITION``;
        5. :meth:`_validate_alter` (epochs, idempotent repeat, recovery transitions, eligibility).

        Nothing invalid is ever written. Like Kafka, every partition that got past 1–3 is sent in an
        UpdateMetadata to every registered broker, whatever its answer."""
        ctx = self.ctx
        tp = TopicPartition(ev.topic, ev.partition)
        broker = ctx.live_brokers.get(ev.broker_id)
        if broker is None or ev.broker_epoch != broker.epoch:
            self._alter_response(ev, ERROR_CODES["STALE_BROKER_EPOCH"], None, None)
            return
        if ev.topic_id is not None and ctx.topic_ids.get(ev.topic) != ev.topic_id:
            self._alter_response(ev, 0, ERROR_CODES["UNKNOWN_TOPIC_ID"], None)
            return
        if ev.leader_recovery_state not in (RECOVERED, RECOVERING):
            self._alter_response(ev, ERROR_CODES["UNKNOWN_SERVER_ERROR"], None, None)
            return
        self._alter_one(ev, tp)
        self._send_update_metadata(ctx.live_brokers.keys(), (tp,))

    def _alter_one(self, ev: AlterPartition, tp: TopicPartition) -> None:
        ctx = self.ctx
        li = ctx.partition_leadership.get(tp)
        if li is None or tp not in ctx.partition_assignments:
            self._alter_response(ev, 0, ERROR_CODES["UNKNOWN_TOPIC_OR_PARTITION"], None)
            return
        cur = li.leader_and_isr
        proposed = LeaderAndIsr(ev.broker_id, ev.new_isr, ev.leader_epoch, ev.partition_epoch, ev.leader_recovery_state)
        error = self._validate_alter(tp, cur, proposed, by_topic_id=ev.topic_id is not None)
        if error is not None and error != "SAME":
            self._alter_response(ev, 0, ERROR_CODES[error], None)
            return
        if error == "SAME":
            self._alter_response(ev, 0, 0, cur)
        else:
            self._write_alter(ev, tp, cur)
        # Kafka checks every answered-with-a-state partition for a reassignment it may complete
        if tp in ctx.partitions_being_reassigned:
            self.maybe_complete_reassignment(tp)

    def _write_alter(self, ev: AlterPartition, tp: TopicPartition, cur: LeaderAndIsr) -> None:
        ctx = self.ctx
        new = LeaderAndIsr(cur.leader, ev.new_isr, cur.leader_epoch, cur.partition_epoch, ev.leader_recovery_state)
        self.fx.zk.append(
            ZkWrite(
                ZkOp.SET,
                partition_state_path(tp.topic, tp.partition),
                encode_partition_state(new, ctx.epoch),
                cur.partition_epoch,
            )
        )
        ctx.put_leadership(tp, new.with_partition_epoch(cur.partition_epoch + 1), ctx.epoch)
        self._alter_response(ev, 0, 0, ctx.partition_leadership[tp].leader_and_isr)

    def _validate_alter(
        self, tp: TopicPartition, cur: LeaderAndIsr, new: LeaderAndIsr, *, by_topic_id: bool = False
    ) -> str | None:
        """Kafka's checks in Kafka's order; then livectl's own (the sender must be the leader, the ISR
        must hold the leader and only distinct replicas: KRaft's rules, see the README), then Kafka's
        KIP-841 eligibility (``INELIGIBLE_REPLICA`` from v2, the topic-id versions; before that
        ``OPERATION_NOT_ATTEMPTED``). ``"SAME"``: already in the proposed state (Kafka's
        ``equalsAllowStalePartitionEpoch``), answered with the current state."""
        if new.partition_epoch > cur.partition_epoch or new.leader_epoch > cur.leader_epoch:
            return "NOT_CONTROLLER"
        if new.leader_epoch < cur.leader_epoch:
            return "FENCED_LEADER_EPOCH"
        if (
            new.leader == cur.leader
            and new.leader_epoch == cur.leader_epoch
            and new.isr == cur.isr
            and new.leader_recovery_state == cur.leader_recovery_state
        ):
            return "SAME"
        if new.partition_epoch < cur.partition_epoch:
            return "INVALID_UPDATE_VERSION"
        if new.leader_recovery_state == RECOVERING and len(new.isr) > 1:
            return "INVALID_REQUEST"
        if cur.leader_recovery_state == RECOVERED and new.leader_recovery_state == RECOVERING:
            return "INVALID_REQUEST"
        if new.leader != cur.leader:
            return "NOT_LEADER_OR_FOLLOWER"
        replicas = self.ctx.replicas(tp)
        if new.leader not in new.isr or len(set(new.isr)) != len(new.isr) or any(r not in replicas for r in new.isr):
            return "INVALID_REQUEST"
        live = self.ctx.live_broker_ids
        if any(r not in live for r in new.isr):
            return "INELIGIBLE_REPLICA" if by_topic_id else "OPERATION_NOT_ATTEMPTED"
        return None

    def _alter_response(
        self, ev: AlterPartition, top_error: int, part_error: int | None, lai: LeaderAndIsr | None
    ) -> None:
        topics: list[dict[str, Any]] = []
        if part_error is not None:
            part: dict[str, Any] = {"partitionIndex": ev.partition, "errorCode": part_error}
            if lai is not None:
                part.update(
                    leaderId=lai.leader,
                    leaderEpoch=lai.leader_epoch,
                    isr=list(lai.isr),
                    partitionEpoch=lai.partition_epoch,
                    leaderRecoveryState=lai.leader_recovery_state,
                )
            else:
                part.update(leaderId=-1, leaderEpoch=-1, isr=[], partitionEpoch=-1, leaderRecoveryState=0)
            if ev.correlation_id >= 0:
                part["correlationId"] = ev.correlation_id
            topics.append(
                {
                    "topicName": ev.topic,
                    "topicId": ev.topic_id or self.ctx.topic_ids.get(ev.topic, "AAAAAAAAAAAAAAAAAAAAAA"),
                    "partitions": [part],
                }
            )
        body = {"errorCode": top_error, "throttleTimeMs": 0, "topics": topics}
        self.fx.batch.responses.append(
            BrokerRequest(ev.broker_id, RequestApi.ALTER_PARTITION_RESPONSE, json.dumps(body, separators=(",", ":")))
        )

    # ------------------------------------------------------------------ topics

    def on_new_partition_creation(self, tps: list[TopicPartition]) -> None:
        replicas = self.ctx.replicas_for_partitions(tps)
        self._partition_states(tps, PartitionState.NEW)
        self._replica_states(replicas, ReplicaState.NEW)
        self._partition_states(tps, PartitionState.ONLINE, ElectionStrategy.OFFLINE)
        self._replica_states(replicas, ReplicaState.ONLINE)

    def _placement_brokers(self) -> list[BrokerRack]:
        return [BrokerRack(b.id, b.rack) for b in sorted(self.ctx.live_brokers.values(), key=lambda b: b.id)]

    def create_topic(self, cmd: CreateTopic) -> None:
        ctx = self.ctx
        if cmd.topic in ctx.topic_partitions:
            msg = f"Topic '{cmd.topic}' already exists."
            if cmd.topic in ctx.topics_to_be_deleted:
                msg = f"Topic '{cmd.topic}' is marked for deletion."
            self._admin(cmd, AdminStatus.ERROR, "TOPIC_ALREADY_EXISTS", msg)
            return
        configs = dict(cmd.configs)
        bad = _invalid_config(configs)
        if bad is not None:
            self._admin(cmd, AdminStatus.ERROR, "INVALID_CONFIG", bad)
            return
        if cmd.replica_assignment:
            # Kafka's CreateTopics does not check that the brokers named are registered (ZkAdminManager:
            # "unlike in add-partitions case"); a partition none of whose brokers is up stays New
            problem = validate_manual_assignment(cmd.replica_assignment, None, len(cmd.replica_assignment[0]))
            if problem is not None:
                self._admin(cmd, AdminStatus.ERROR, "INVALID_REPLICA_ASSIGNMENT", problem)
                return
            placed = dict(enumerate(cmd.replica_assignment))
        else:
            brokers = self._placement_brokers()
            try:
                placed = assign_replicas(
                    brokers,
                    cmd.partitions,
                    cmd.replication_factor,
                    start_index=stable_start_index(cmd.topic, len(brokers)),
                )
            except PlacementError as e:
                self._admin(cmd, AdminStatus.ERROR, e.error, str(e))
                return
        topic_id = _topic_id(cmd.topic, cmd.request_id)
        too_big = _topic_znode_problem(cmd.topic, {p: ReplicaAssignment(tuple(r)) for p, r in placed.items()}, topic_id)
        if too_big is not None:
            self._admin(cmd, AdminStatus.ERROR, "INVALID_PARTITIONS", too_big)
            return
        ctx.topic_ids[cmd.topic] = topic_id
        ctx.topic_configs[cmd.topic] = configs
        if UNCLEAN_CONFIG in configs:
            ctx.unclean_leader_election[cmd.topic] = configs[UNCLEAN_CONFIG] == "true"
        tps = [TopicPartition(cmd.topic, p) for p in sorted(placed)]
        for tp in tps:
            ctx.set_assignment(tp, ReplicaAssignment(tuple(placed[tp.partition])))
        self.fx.zk.append(
            # Kafka writes topic configs with setOrCreate: a config left by an earlier topic is overwritten
            ZkWrite(ZkOp.UPSERT, topic_config_path(cmd.topic), encode_topic_config(configs), make_parents=True)
        )
        self.fx.zk.append(
            ZkWrite(
                ZkOp.CREATE,
                topic_path(cmd.topic),
                encode_topic_znode({tp.partition: ctx.assignment(tp) for tp in tps}, topic_id),
                make_parents=True,
            )
        )
        self.on_new_partition_creation(tps)
        self._admin(
            cmd,
            AdminStatus.OK,
            details={"topic_id": topic_id, "partitions": {str(p): list(r) for p, r in sorted(placed.items())}},
        )

    def create_partitions(self, cmd: CreatePartitions) -> None:
        ctx = self.ctx
        if cmd.topic not in ctx.topic_partitions:
            self._admin(cmd, AdminStatus.ERROR, "UNKNOWN_TOPIC_OR_PARTITION", f"Topic '{cmd.topic}' does not exist.")
            return
        if cmd.topic in ctx.topics_to_be_deleted:
            self._admin(cmd, AdminStatus.ERROR, "INVALID_TOPIC_EXCEPTION", "The topic is queued for deletion.")
            return
        existing = ctx.partitions_for_topic(cmd.topic)
        if any(tp in ctx.partitions_being_reassigned for tp in existing):
            # Kafka refuses too (ReassignmentInProgressException): while a partition is being reassigned its
            # replica list is target + origin, which is not the topic's replication factor
            self._admin(
                cmd,
                AdminStatus.ERROR,
                "REASSIGNMENT_IN_PROGRESS",
                f"A partition reassignment is in progress for the topic '{cmd.topic}'.",
            )
            return
        n_existing = len(existing)
        to_add = cmd.total_count - n_existing
        if to_add <= 0:
            self._admin(
                cmd,
                AdminStatus.ERROR,
                "INVALID_PARTITIONS",
                f"Topic currently has {n_existing} partitions, {cmd.total_count} would not be an increase.",
            )
            return
        first = ctx.replicas(existing[0]) if existing else ()
        rf = len(first)
        if cmd.replica_assignment:
            problem: str | None = None
            if len(cmd.replica_assignment) != to_add:
                problem = (
                    f"Increasing the number of partitions by {to_add} but {len(cmd.replica_assignment)} "
                    "assignments provided."
                )
            else:
                problem = validate_manual_assignment(cmd.replica_assignment, set(ctx.live_brokers), rf)
            if problem is not None:
                self._admin(cmd, AdminStatus.ERROR, "INVALID_REPLICA_ASSIGNMENT", problem)
                return
            placed = {n_existing + i: tuple(r) for i, r in enumerate(cmd.replica_assignment)}
        else:
            brokers = self._placement_brokers()
            ids = [b.id for b in brokers]
            start = next((i for i, b in enumerate(ids) if first and b >= first[0]), 0)
            try:
                placed = assign_replicas(brokers, to_add, rf, start_index=start, start_partition_id=n_existing)
            except PlacementError as e:
                self._admin(cmd, AdminStatus.ERROR, e.error, str(e))
                return
        grown = {tp.partition: ctx.assignment(tp) for tp in existing}
        grown.update((p, ReplicaAssignment(tuple(r))) for p, r in placed.items())
        too_big = _topic_znode_problem(cmd.topic, grown, ctx.topic_ids.get(cmd.topic))
        if too_big is not None:
            self._admin(cmd, AdminStatus.ERROR, "INVALID_PARTITIONS", too_big)
            return
        tps = [TopicPartition(cmd.topic, p) for p in sorted(placed)]
        for tp in tps:
            ctx.set_assignment(tp, ReplicaAssignment(placed[tp.partition]))
        self._write_topic_znode(cmd.topic)
        self.on_new_partition_creation(tps)
        self._admin(cmd, AdminStatus.OK, details={"partitions": {str(p): list(r) for p, r in sorted(placed.items())}})

    def delete_topic(self, cmd: DeleteTopic) -> None:
        ctx = self.ctx
        if cmd.topic not in ctx.topic_partitions:
            self._admin(cmd, AdminStatus.ERROR, "UNKNOWN_TOPIC_OR_PARTITION", f"Topic '{cmd.topic}' does not exist.")
            return
        if not self.config.delete_topic_enable:
            self._admin(cmd, AdminStatus.ERROR, "TOPIC_DELETION_DISABLED", "Topic deletion is disabled.")
            return
        self.pending_deletions.setdefault(cmd.request_id, set()).add(cmd.topic)
        if cmd.topic in ctx.topics_to_be_deleted:
            self._admin(cmd, AdminStatus.IN_PROGRESS, message="Topic deletion is already in progress.")
            return
        self.fx.zk.append(ZkWrite(ZkOp.CREATE, delete_topic_path(cmd.topic), None, make_parents=True))
        reassigning = any(tp.topic == cmd.topic for tp in ctx.partitions_being_reassigned)
        ctx.topics_to_be_deleted.add(cmd.topic)
        if reassigning:
            deletion.mark_topic_ineligible_for_deletion(ctx, [cmd.topic])
        deletion.resume_deletions(ctx, self.fx)
        if cmd.topic in ctx.topic_partitions:
            self._admin(cmd, AdminStatus.IN_PROGRESS, message="Topic deletion started.")

    def alter_topic_config(self, cmd: AlterTopicConfig) -> None:
        ctx = self.ctx
        if cmd.topic not in ctx.topic_partitions:
            self._admin(cmd, AdminStatus.ERROR, "UNKNOWN_TOPIC_OR_PARTITION", f"Topic '{cmd.topic}' does not exist.")
            return
        configs = dict(ctx.topic_configs.get(cmd.topic, {}))
        configs.update(cmd.configs)
        for name in cmd.delete_configs:
            configs.pop(name, None)
        bad = _invalid_config(configs)
        if bad is not None:
            self._admin(cmd, AdminStatus.ERROR, "INVALID_CONFIG", bad)
            return
        ctx.topic_configs[cmd.topic] = configs
        self.fx.zk.append(
            ZkWrite(ZkOp.UPSERT, topic_config_path(cmd.topic), encode_topic_config(configs), make_parents=True)
        )
        if UNCLEAN_CONFIG not in configs:
            ctx.unclean_leader_election.pop(cmd.topic, None)
        if UNCLEAN_CONFIG in configs:
            enabled = configs[UNCLEAN_CONFIG].strip().lower() == "true"
            ctx.unclean_leader_election[cmd.topic] = enabled
            if enabled:
                self.trigger_online_partition_state_change(cmd.topic)
        self._admin(cmd, AdminStatus.OK)

    # ------------------------------------------------------------------ reassignment

    def _validate_replicas(self, tp: TopicPartition, replicas: Sequence[int], check_live: bool = True) -> str | None:
        if not replicas:
            return "Empty replica list specified in partition reassignment."
        if len(set(replicas)) != len(replicas):
            return f"Duplicate replica ids in partition reassignment replica list: {list(replicas)}"
        if any(r < 0 for r in replicas):
            return f"Invalid broker id in replica list: {list(replicas)}"
        adding = self.ctx.assignment(tp).reassign_to(replicas).adding_replicas
        live = self.ctx.live_broker_ids
        if check_live and not set(adding) <= live:
            return (
                f"Replica assignment has brokers that are not alive. Replica list: {list(adding)}, "
                f"live broker list: {sorted(live)}"
            )
        return None

    def _trigger_reassignment(
        self, tp: TopicPartition, target: Sequence[int] | None, check_live: bool = True
    ) -> tuple[str, str] | None:
        """Validate and start (or cancel, ``target`` None) one reassignment; an error name and message,
        or ``None`` when accepted. ``check_live`` False (the ZooKeeper path, as Kafka's
        ``maybeTriggerPartitionReassignment``): target brokers that are down are waited for."""
        ctx = self.ctx
        if tp not in ctx.partition_assignments or tp.topic in ctx.topics_to_be_deleted:
            return "UNKNOWN_TOPIC_OR_PARTITION", "The partition does not exist."
        current = ctx.assignment(tp)
        if target is not None:
            problem = self._validate_replicas(tp, target, check_live)
            if problem is not None:
                return "INVALID_REPLICA_ASSIGNMENT", problem
            reassignment = current.reassign_to(target)
        elif current.is_being_reassigned:
            reassignment = current.reassign_to(current.origin_replicas)
        else:
            return "NO_REASSIGNMENT_IN_PROGRESS", "No reassignment in progress."
        for rid, tps in self.pending_reassignments.items():
            if tp in tps:
                tps.discard(tp)
                self.interrupted.setdefault(rid, {})[str(tp)] = "superseded" if target is not None else "cancelled"
        self.on_partition_reassignment(tp, reassignment)
        return None

    def reassign_partitions(self, cmd: ReassignPartitions | CancelReassignment) -> None:
        results: dict[str, dict[str, str]] = {}
        accepted: set[TopicPartition] = set()
        items: list[tuple[TopicPartition, Sequence[int] | None]]
        if isinstance(cmd, ReassignPartitions):
            items = [(TopicPartition(t.topic, t.partition), t.replicas) for t in cmd.partitions]
        else:
            items = [(tp, None) for tp in cmd.partitions]
        too_big = self._reassigned_znodes_too_big(items)
        for tp, target in items:
            if tp.topic in too_big:
                results[str(tp)] = {"error": "INVALID_REPLICA_ASSIGNMENT", "message": too_big[tp.topic]}
                continue
            self.zk_reassignments.discard(tp)
            err = self._trigger_reassignment(tp, target)
            if err is None:
                accepted.add(tp)
                results[str(tp)] = {"error": "NONE"}
            else:
                results[str(tp)] = {"error": err[0], "message": err[1]}
        if not accepted:
            first = next(iter(results.values()))
            self._admin(cmd, AdminStatus.ERROR, first["error"], first.get("message", ""), {"partitions": results})
            return
        still = {tp for tp in accepted if tp in self.ctx.partitions_being_reassigned}
        if still:
            self.pending_reassignments[cmd.request_id] = still
            self._admin(cmd, AdminStatus.IN_PROGRESS, details={"partitions": results})
        else:
            self._admin(cmd, AdminStatus.OK, details={"partitions": results})
        self._maybe_clear_zk_reassignment_path()

    def _reassigned_znodes_too_big(
        self, items: Sequence[tuple[TopicPartition, Sequence[int] | None]]
    ) -> dict[str, str]:
        """Topics whose znode, with every reassignment of ``items`` started (the replicas listed as target
        + origin, adding and removing), would be over what ZooKeeper accepts: topic -> the reason."""
        ctx = self.ctx
        by_topic: dict[str, dict[int, ReplicaAssignment]] = {}
        for tp, target in items:
            if target is None or tp not in ctx.partition_assignments:
                continue
            by_topic.setdefault(tp.topic, {})[tp.partition] = ctx.assignment(tp).reassign_to(target)
        out: dict[str, str] = {}
        for topic, changed in by_topic.items():
            prospective = {tp.partition: ctx.assignment(tp) for tp in ctx.partitions_for_topic(topic)}
            prospective.update(changed)
            problem = _topic_znode_problem(topic, prospective, ctx.topic_ids.get(topic))
            if problem is not None:
                out[topic] = problem
        return out

    def is_reassignment_complete(self, tp: TopicPartition, ra: ReplicaAssignment) -> bool:
        if not ra.is_being_reassigned:
            return True
        lai = self.ctx.leader_and_isr(tp)
        return lai is not None and set(ra.target_replicas) <= set(lai.isr)

    def on_partition_reassignment(self, tp: TopicPartition, reassignment: ReplicaAssignment) -> None:
        """KIP-455 ``onPartitionReassignment``. Not complete (target not all in the ISR): write RS (with
        adding / removing) to ``/brokers/topics/<t>``, stop replicas a superseded reassignment no longer
        needs, bump the leader epoch and send LeaderAndIsr to RS, adding replicas -> New. Complete:
        adding -> Online, RS := TRS in memory, move the leader into TRS if needed (else bump the epoch),
        removing replicas -> Offline -> deleted, write RS = TRS last, forget the reassignment,
        UpdateMetadata, resume a deletion of the topic."""
        ctx = self.ctx
        deletion.mark_topic_ineligible_for_deletion(ctx, [tp.topic])
        current = ctx.assignment(tp)
        lai = ctx.leader_and_isr(tp)
        unneeded_isr = [r for r in current.replicas if r not in reassignment.replicas and lai and r in lai.isr]
        if lai is not None and unneeded_isr and set(lai.isr) <= set(unneeded_isr):
            # livectl: Kafka would drop the whole ISR at once here (superseding or cancelling a
            # reassignment) and leave an ISR of non-replicas; keep those replicas as removing ones
            # until the target has caught up.
            reassignment = ReplicaAssignment(
                (*reassignment.replicas, *unneeded_isr),
                reassignment.adding_replicas,
                (*reassignment.removing_replicas, *unneeded_isr),
            )
        if current != reassignment:
            ctx.set_assignment(tp, reassignment)
            self._write_topic_znode(tp.topic)
            unneeded = [r for r in current.replicas if r not in reassignment.replicas]
            if unneeded:
                self._stop_removed_replicas(tp, unneeded)
        ctx.partitions_being_reassigned.add(tp)
        adding = reassignment.adding_replicas
        removing = reassignment.removing_replicas
        if not self.is_reassignment_complete(tp, reassignment):
            self._update_leader_epoch_and_send_request(tp, reassignment)
            self._replica_states([PartitionReplica(tp.topic, tp.partition, r) for r in adding], ReplicaState.NEW)
            return
        self._replica_states([PartitionReplica(tp.topic, tp.partition, r) for r in adding], ReplicaState.ONLINE)
        completed = reassignment.completed()
        ctx.set_assignment(tp, completed)
        self._move_reassigned_leader_if_required(tp, completed)
        self._stop_removed_replicas(tp, list(removing))
        self._write_topic_znode(tp.topic)
        ctx.partitions_being_reassigned.discard(tp)
        self.zk_reassignments.discard(tp)
        self._send_update_metadata(ctx.live_brokers.keys(), (tp,))
        deletion.resume_deletion_for_topics(ctx, self.fx, [tp.topic])

    def _update_leader_epoch_and_send_request(self, tp: TopicPartition, ra: ReplicaAssignment) -> None:
        ctx = self.ctx
        li = ctx.partition_leadership.get(tp)
        if li is None or li.controller_epoch > ctx.epoch:
            self.fx.fail(tp, ctx.partition_state(tp), PartitionState.ONLINE, "Failed to update the leader epoch")
            return
        cur = li.leader_and_isr
        new = cur.new_epoch()
        self.fx.zk.append(
            ZkWrite(
                ZkOp.SET,
                partition_state_path(tp.topic, tp.partition),
                encode_partition_state(new, ctx.epoch),
                cur.partition_epoch,
            )
        )
        ctx.put_leadership(tp, new.with_partition_epoch(cur.partition_epoch + 1), ctx.epoch)
        self.fx.batch.add_leader_and_isr(ctx, ra.replicas, tp, ctx.partition_leadership[tp], ra, is_new=False)

    def _move_reassigned_leader_if_required(self, tp: TopicPartition, ra: ReplicaAssignment) -> None:
        lai = self.ctx.leader_and_isr(tp)
        leader = lai.leader if lai is not None else NO_LEADER
        if leader in ra.replicas and self.ctx.is_replica_online(leader, tp):
            self._update_leader_epoch_and_send_request(tp, ra)
        else:
            self._partition_states([tp], PartitionState.ONLINE, ElectionStrategy.REASSIGN)

    def _stop_removed_replicas(self, tp: TopicPartition, removed: list[int]) -> None:
        prs = [PartitionReplica(tp.topic, tp.partition, r) for r in removed]
        for target in (
            ReplicaState.OFFLINE,
            ReplicaState.DELETION_STARTED,
            ReplicaState.DELETION_SUCCESSFUL,
            ReplicaState.NON_EXISTENT,
        ):
            self._replica_states(prs, target)

    def maybe_complete_reassignment(self, tp: TopicPartition) -> None:
        ra = self.ctx.assignment(tp)
        if self.is_reassignment_complete(tp, ra):
            self.on_partition_reassignment(tp, ra)

    def maybe_resume_reassignments(self, should_resume: Callable[[TopicPartition, ReplicaAssignment], bool]) -> None:
        for tp in sorted(self.ctx.partitions_being_reassigned):
            ra = self.ctx.assignment(tp)
            if should_resume(tp, ra):
                self.on_partition_reassignment(tp, ra)

    def _maybe_clear_zk_reassignment_path(self) -> None:
        if self._had_zk_reassignments and not self.zk_reassignments:
            self.fx.zk.append(ZkWrite(ZkOp.DELETE, REASSIGN_PARTITIONS, None, ANY_VERSION))
            self._had_zk_reassignments = False

    # ------------------------------------------------------------------ elections

    def elect_leaders(self, cmd: ElectLeaders) -> None:
        ctx = self.ctx
        all_partitions = not cmd.partitions
        tps = sorted(ctx.partition_assignments) if all_partitions else list(cmd.partitions)
        results: dict[str, dict[str, str]] = {}
        electable: list[TopicPartition] = []
        for tp in tps:
            if tp not in ctx.partition_assignments:
                results[str(tp)] = {"error": "UNKNOWN_TOPIC_OR_PARTITION", "message": "The partition does not exist."}
            elif tp.topic in ctx.topics_to_be_deleted:
                results[str(tp)] = {"error": "INVALID_TOPIC_EXCEPTION", "message": "The topic is being deleted"}
            elif not self._election_needed(tp, cmd.election_type):
                if not all_partitions:
                    results[str(tp)] = {"error": "ELECTION_NOT_NEEDED", "message": "Leader election not needed"}
            else:
                electable.append(tp)
        if cmd.election_type is ElectionType.PREFERRED:
            strategy, fail_error = ElectionStrategy.PREFERRED, "PREFERRED_LEADER_NOT_AVAILABLE"
        else:
            strategy, fail_error = ElectionStrategy.OFFLINE_UNCLEAN, "ELIGIBLE_LEADERS_NOT_AVAILABLE"
        failed = self._partition_states(electable, PartitionState.ONLINE, strategy)
        for tp in electable:
            if tp in failed:
                results[str(tp)] = {"error": fail_error, "message": failed[tp]}
            else:
                results[str(tp)] = {"error": "NONE"}
        errors = [r for r in results.values() if r["error"] not in ("NONE", "ELECTION_NOT_NEEDED")]
        if errors:
            self._admin(cmd, AdminStatus.ERROR, errors[0]["error"], errors[0]["message"], {"partitions": results})
        else:
            self._admin(cmd, AdminStatus.OK, details={"partitions": results})

    def _election_needed(self, tp: TopicPartition, kind: ElectionType) -> bool:
        lai = self.ctx.leader_and_isr(tp)
        if lai is None:
            return True
        if kind is ElectionType.PREFERRED:
            replicas = self.ctx.replicas(tp)
            return not replicas or lai.leader != replicas[0]
        return lai.leader == NO_LEADER or lai.leader not in self.ctx.live_broker_ids

    def can_preferred_replica_be_leader(self, tp: TopicPartition) -> bool:
        ctx = self.ctx
        lai = ctx.leader_and_isr(tp)
        if lai is None:
            return False
        replicas = ctx.replicas(tp)
        live = {r for r in replicas if ctx.is_replica_online(r, tp)}
        return preferred_leader(replicas, lai.isr, live) is not None

    def auto_rebalance(self, ev: AutoRebalanceTick) -> None:
        if not self.config.auto_leader_rebalance_enable or not ev.brokers:
            return
        candidates = auto_rebalance_candidates(self.ctx, ev.brokers)
        good = [tp for tp in candidates if self.can_preferred_replica_be_leader(tp)]
        self._partition_states(good, PartitionState.ONLINE, ElectionStrategy.PREFERRED)

    # ------------------------------------------------------------------ failover

    def failover(self, ev: ControllerFailover) -> None:
        snap = ev.snapshot
        self.ctx = ctx = _context_from_snapshot(ev.controller_id, snap)
        self._offline_reset = frozenset(snap.offline_replica_topics)
        fx = self.fx
        to_delete = set(snap.topics_to_delete)
        if self.config.delete_topic_enable:
            offline_topics = {
                tp.topic
                for tp in ctx.partition_assignments
                if any(not ctx.is_replica_online(r, tp) for r in ctx.replicas(tp))
            }
            reassigning_topics = {tp.topic for tp in ctx.partitions_being_reassigned}
            ctx.topics_to_be_deleted = set(to_delete)
            ctx.topics_ineligible_for_deletion = (offline_topics | reassigning_topics) & to_delete
        else:
            for t in sorted(to_delete):
                fx.zk.append(ZkWrite(ZkOp.DELETE, delete_topic_path(t), None, ANY_VERSION))
        self._send_update_metadata(ctx.live_brokers.keys())
        # replica state machine startup
        online: list[PartitionReplica] = []
        offline: list[PartitionReplica] = []
        for tp in sorted(ctx.partition_assignments):
            for r in ctx.replicas(tp):
                pr = PartitionReplica(tp.topic, tp.partition, r)
                if ctx.is_replica_online(r, tp):
                    ctx.put_replica_state(pr, ReplicaState.ONLINE)
                    online.append(pr)
                else:
                    ctx.put_replica_state(pr, ReplicaState.DELETION_INELIGIBLE)
                    offline.append(pr)
        self._replica_states(online, ReplicaState.ONLINE)
        self._replica_states(offline, ReplicaState.OFFLINE)
        # partition state machine startup
        for tp in ctx.partition_assignments:
            li = ctx.partition_leadership.get(tp)
            if li is None:
                ctx.put_partition_state(tp, PartitionState.NEW)
            elif ctx.is_replica_online(li.leader_and_isr.leader, tp):
                ctx.put_partition_state(tp, PartitionState.ONLINE)
            else:
                ctx.put_partition_state(tp, PartitionState.OFFLINE)
        self.trigger_online_partition_state_change()
        # reassignments: the legacy path first (it takes precedence), then those in topic znodes
        self.zk_reassignments = set()
        legacy: set[TopicPartition] = set()
        for target in snap.pending_reassignments:
            tp = TopicPartition(target.topic, target.partition)
            legacy.add(tp)
            self.zk_reassignments.add(tp)
            if self._trigger_reassignment(tp, target.replicas, check_live=False) is not None:
                self.zk_reassignments.discard(tp)
        self.zk_reassignments &= ctx.partitions_being_reassigned
        self._had_zk_reassignments = bool(snap.pending_reassignments)
        self._maybe_clear_zk_reassignment_path()
        self.maybe_resume_reassignments(lambda tp, _ra: tp not in legacy)
        deletion.resume_deletions(ctx, fx)
        # pending preferred elections
        pending = [
            tp
            for tp in snap.pending_preferred_elections
            if tp in ctx.partition_assignments
            and tp.topic not in ctx.topics_to_be_deleted
            and self._election_needed(tp, ElectionType.PREFERRED)
        ]
        self._partition_states(sorted(set(pending)), PartitionState.ONLINE, ElectionStrategy.PREFERRED)
        if snap.pending_preferred_elections:
            fx.zk.append(ZkWrite(ZkOp.DELETE, PREFERRED_REPLICA_ELECTION, None, ANY_VERSION))

    # ------------------------------------------------------------------ ZooKeeper admin paths, live

    def _read_under_this_epoch(self, controller_epoch: int) -> bool:
        """Whether a watcher event was read by this controller (see :class:`core.events.ZkReassignment`):
        one read under an earlier epoch is covered by the failover snapshot this controller loaded."""
        return self.ctx.controller_id >= 0 and controller_epoch == self.ctx.epoch

    def zk_reassignment(self, ev: ZkReassignment) -> None:
        """Kafka's ``processZkPartitionReassignment``: each entry is started as by the API, except that
        target brokers that are down are not refused (the reassignment waits for them); entries that
        cannot be started (unknown partition, topic being deleted, znode too big) are dropped. The path
        is deleted once this bucket's entries are done (see the module docstring)."""
        if not self._read_under_this_epoch(ev.controller_epoch):
            return
        self._had_zk_reassignments = True
        items = [(TopicPartition(t.topic, t.partition), t.replicas) for t in ev.partitions]
        too_big = self._reassigned_znodes_too_big(items)
        for tp, target in items:
            if tp.topic in too_big:
                continue
            self.zk_reassignments.add(tp)
            if self._trigger_reassignment(tp, target, check_live=False) is not None:
                self.zk_reassignments.discard(tp)
        self.zk_reassignments &= self.ctx.partitions_being_reassigned
        self._maybe_clear_zk_reassignment_path()

    def zk_preferred_election(self, ev: ZkPreferredElection) -> None:
        """Kafka's ``processReplicaLeaderElection`` for the ZooKeeper trigger: partitions that exist, are
        not being deleted and are not led by their preferred replica get a preferred election (one that
        cannot happen is reported as a failed transition), then the path is deleted."""
        if not self._read_under_this_epoch(ev.controller_epoch):
            return
        ctx = self.ctx
        electable = {
            tp
            for tp in ev.partitions
            if tp in ctx.partition_assignments
            and tp.topic not in ctx.topics_to_be_deleted
            and self._election_needed(tp, ElectionType.PREFERRED)
        }
        self._partition_states(sorted(electable), PartitionState.ONLINE, ElectionStrategy.PREFERRED)
        self.fx.zk.append(ZkWrite(ZkOp.DELETE, PREFERRED_REPLICA_ELECTION, None, ANY_VERSION))

    def zk_topic_deletion(self, ev: ZkTopicDeletion) -> None:
        """Kafka's ``processTopicDeletion`` for one child of ``/admin/delete_topics``: an unknown topic's
        znode is deleted; with ``delete.topic.enable`` false the znode is deleted and nothing else; else
        the topic is queued (ineligible while a partition of it is being reassigned) and deletion
        resumes. A topic already queued is left as it is."""
        if not self._read_under_this_epoch(ev.controller_epoch):
            return
        ctx = self.ctx
        if ev.topic not in ctx.topic_partitions or not self.config.delete_topic_enable:
            self.fx.zk.append(ZkWrite(ZkOp.DELETE, delete_topic_path(ev.topic), None, ANY_VERSION))
            return
        if ev.topic in ctx.topics_to_be_deleted:
            return
        ctx.topics_to_be_deleted.add(ev.topic)
        if any(tp.topic == ev.topic for tp in ctx.partitions_being_reassigned):
            deletion.mark_topic_ineligible_for_deletion(ctx, [ev.topic])
        deletion.resume_deletions(ctx, self.fx)

    def zk_topic_change(self, ev: ZkTopicChange) -> None:
        """Kafka's ``processTopicChange`` / ``processPartitionModifications``: partitions of the znode the
        controller does not know are created (``onNewPartitionCreation``; a partition none of whose
        replicas is live stays New until one is). For a topic queued for deletion they are not created
        and the znode is restored to the controller's assignment."""
        if not self._read_under_this_epoch(ev.controller_epoch):
            return
        ctx = self.ctx
        new = [(TopicPartition(ev.topic, p), reps) for p, reps in ev.partitions]
        new = [(tp, reps) for tp, reps in new if tp not in ctx.partition_assignments]
        if not new:
            return
        if ev.topic in ctx.topics_to_be_deleted:
            self._write_topic_znode(ev.topic)
            return
        if ev.topic not in ctx.topic_partitions:
            ctx.topic_partitions.setdefault(ev.topic, set())
            if ev.topic_id:
                ctx.topic_ids[ev.topic] = ev.topic_id
            configs = dict(ev.configs)
            ctx.topic_configs[ev.topic] = configs
            if configs.get(UNCLEAN_CONFIG) in ("true", "false"):
                ctx.unclean_leader_election[ev.topic] = configs[UNCLEAN_CONFIG] == "true"
        tps = sorted(tp for tp, _ in new)
        for tp, reps in new:
            ctx.set_assignment(tp, ReplicaAssignment(tuple(reps)))
        self.on_new_partition_creation(tps)

    def zk_log_dir_events(self, ev: ZkLogDirEvents) -> None:
        """Kafka's ``processLogDirEventNotification``: ``onBrokerLogDirFailure`` for the brokers named,
        then the notification znodes are deleted."""
        if not self._read_under_this_epoch(ev.controller_epoch):
            return
        for broker in sorted({b for _, b in ev.notifications}):
            self.log_dir_failure(LogDirFailure(broker))
        for name, _ in ev.notifications:
            self.fx.zk.append(ZkWrite(ZkOp.DELETE, f"{LOG_DIR_EVENT_NOTIFICATION}/{name}", None, ANY_VERSION))

    def cluster_config_changed(self, ev: ClusterConfigChanged) -> None:
        """The controller configs changed (:mod:`core.cluster_config`). Unclean leader election turned on
        for the cluster elects the offline partitions it now allows (Kafka's
        ``processUncleanLeaderElectionEnable``)."""
        if not self._read_under_this_epoch(ev.controller_epoch):
            return
        was_unclean = self.config.unclean_leader_election_enable
        changes: dict[str, Any] = dict(controller_fields(ev.configs))
        self.config = replace(self.config, **changes)
        if self.config.unclean_leader_election_enable and not was_unclean:
            self.trigger_online_partition_state_change()

    # ------------------------------------------------------------------ admin completion

    def tick(self, _ev: Tick) -> None:
        deletion.resume_deletions(self.ctx, self.fx)

    def partition_states_read(self, ev: PartitionStatesRead) -> None:
        """Kafka's retry after a ``BadVersion`` on a partition-state update: take the znode as read, then
        redo what the partition still needs (see :class:`core.events.PartitionStatesRead`)."""
        ctx = self.ctx
        adopted: list[TopicPartition] = []
        for partition, z in ev.states:
            tp = TopicPartition(ev.topic, partition)
            if tp not in ctx.partition_assignments:
                continue  # deleted since
            if z.controller_epoch > ctx.epoch:
                # Kafka aborts here: a newer controller wrote it, and this one will find itself fenced
                self.fx.fail(
                    tp,
                    ctx.partition_state(tp),
                    ctx.partition_state(tp),
                    f"the state znode was written by controller epoch {z.controller_epoch}, "
                    f"newer than this controller's {ctx.epoch}",
                )
                continue
            la = LeaderAndIsr(z.leader, z.isr, z.leader_epoch, z.zk_version, z.leader_recovery_state)
            ctx.put_leadership(tp, la, z.controller_epoch)
            adopted.append(tp)
        if not adopted:
            return
        live = ctx.live_broker_ids
        deleting = ctx.topics_to_be_deleted
        offline_leader = [
            tp
            for tp in adopted
            if ctx.partition_state(tp) in (PartitionState.ONLINE, PartitionState.OFFLINE)
            and ctx.partition_leadership[tp].leader_and_isr.leader not in live
            and tp.topic not in deleting
        ]
        self._partition_states(offline_leader, PartitionState.OFFLINE)
        self.trigger_online_partition_state_change()
        for tp in adopted:
            la = ctx.partition_leadership[tp].leader_and_isr
            dead = [r for r in la.isr if r not in live]
            if la.leader not in live or not dead or tp.topic in deleting:
                continue
            for r in dead:
                remove_replica_from_isr(ctx, self.fx, PartitionReplica(tp.topic, tp.partition, r))
            recipients = [r for r in ctx.replicas(tp) if r in live]
            self.fx.batch.add_leader_and_isr(
                ctx, recipients, tp, ctx.partition_leadership[tp], ctx.assignment(tp), is_new=False
            )
        self._send_update_metadata(ctx.live_brokers.keys(), adopted)
        again = set(adopted)
        self.maybe_resume_reassignments(lambda tp, _ra: tp in again)

    def topic_creation_refused(self, ev: TopicCreationRefused) -> None:
        """Take the topic someone else created in place of this controller's refused creation (see
        :class:`core.events.TopicCreationRefused`). Only while the bucket still holds its own creation
        (same topic id): a topic deleted or created again since is left as it is."""
        ctx = self.ctx
        if ctx.topic_ids.get(ev.topic) != ev.refused_topic_id:
            return
        ctx.remove_topic(ev.topic)
        ctx.topic_configs.pop(ev.topic, None)
        ctx.unclean_leader_election.pop(ev.topic, None)
        z = ev.znode
        if z is None:
            return
        adding, removing = dict(z.adding_replicas), dict(z.removing_replicas)
        ctx.topic_partitions.setdefault(ev.topic, set())
        if z.topic_id:
            ctx.topic_ids[ev.topic] = z.topic_id
        if ev.configs:
            ctx.topic_configs[ev.topic] = dict(ev.configs)
            if UNCLEAN_CONFIG in ctx.topic_configs[ev.topic]:
                ctx.unclean_leader_election[ev.topic] = ctx.topic_configs[ev.topic][UNCLEAN_CONFIG] == "true"
        tps = []
        for p, reps in z.partitions:
            tp = TopicPartition(ev.topic, p)
            ra = ReplicaAssignment(tuple(reps), tuple(adding.get(p, ())), tuple(removing.get(p, ())))
            ctx.set_assignment(tp, ra)
            tps.append(tp)
        states = dict(ev.states)
        fresh = [tp for tp in tps if tp.partition not in states]
        for tp in tps:
            st = states.get(tp.partition)
            if st is None:
                continue
            lai = LeaderAndIsr(st.leader, st.isr, st.leader_epoch, st.zk_version, st.leader_recovery_state)
            ctx.put_leadership(tp, lai, st.controller_epoch)
            ctx.put_partition_state(
                tp, PartitionState.ONLINE if ctx.is_replica_online(st.leader, tp) else PartitionState.OFFLINE
            )
        # partitions without a state znode are created as Kafka's onNewPartitionCreation does
        self.on_new_partition_creation(fresh)
        adopted = [tp for tp in tps if tp.partition in states]
        online = [PartitionReplica(tp.topic, tp.partition, r) for tp in adopted for r in ctx.replicas(tp)]
        for pr in online:
            live = ctx.is_replica_online(pr.replica, TopicPartition(pr.topic, pr.partition))
            ctx.put_replica_state(pr, ReplicaState.ONLINE if live else ReplicaState.DELETION_INELIGIBLE)
        self._replica_states([pr for pr in online if ctx.replica_state(pr) is ReplicaState.ONLINE], ReplicaState.ONLINE)
        self._replica_states(
            [pr for pr in online if ctx.replica_state(pr) is ReplicaState.DELETION_INELIGIBLE], ReplicaState.OFFLINE
        )
        self.trigger_online_partition_state_change(ev.topic)
        self._send_update_metadata(ctx.live_brokers.keys(), adopted)

    def check_admin_completions(self) -> None:
        ctx = self.ctx
        self.zk_reassignments &= ctx.partitions_being_reassigned
        self._maybe_clear_zk_reassignment_path()
        for rid in sorted(self.pending_reassignments):
            tps = self.pending_reassignments[rid]
            tps.intersection_update(ctx.partitions_being_reassigned)
            if not tps:
                del self.pending_reassignments[rid]
                self.fx.admin.append(_reassignment_outcome(rid, self.interrupted.pop(rid, {})))
        for rid in sorted(self.pending_deletions):
            topics = self.pending_deletions[rid]
            topics.intersection_update(ctx.topic_partitions)
            if not topics:
                del self.pending_deletions[rid]
                self.fx.admin.append(AdminResult(rid, DeleteTopic.TYPE, AdminStatus.OK, None, "Topic deleted."))

    def handle(self, ev: Event) -> None:
        handler = _HANDLERS.get(type(ev))
        if handler is not None:
            handler(self, ev)
        self.check_admin_completions()


_HANDLERS: dict[type[Event], Callable[[_Controller, Any], None]] = {
    BrokerStartup: _Controller.broker_startup,
    BrokerFailure: _Controller.broker_failure,
    ControlledShutdown: _Controller.controlled_shutdown,
    LogDirFailure: _Controller.log_dir_failure,
    LeaderAndIsrResponse: _Controller.leader_and_isr_response,
    StopReplicaResponse: _Controller.stop_replica_response,
    AlterPartition: _Controller.alter_partition,
    CreateTopic: _Controller.create_topic,
    CreatePartitions: _Controller.create_partitions,
    DeleteTopic: _Controller.delete_topic,
    AlterTopicConfig: _Controller.alter_topic_config,
    ReassignPartitions: _Controller.reassign_partitions,
    CancelReassignment: _Controller.reassign_partitions,
    ElectLeaders: _Controller.elect_leaders,
    AutoRebalanceTick: _Controller.auto_rebalance,
    ControllerFailover: _Controller.failover,
    PartitionStatesRead: _Controller.partition_states_read,
    TopicCreationRefused: _Controller.topic_creation_refused,
    Tick: _Controller.tick,
    ZkReassignment: _Controller.zk_reassignment,
    ZkPreferredElection: _Controller.zk_preferred_election,
    ZkTopicDeletion: _Controller.zk_topic_deletion,
    ZkTopicChange: _Controller.zk_topic_change,
    ZkLogDirEvents: _Controller.zk_log_dir_events,
    ClusterConfigChanged: _Controller.cluster_config_changed,
}


def step(state: ControllerState, events: Iterable[Event]) -> tuple[ControllerState, list[Decision]]:
    """Apply ``events`` in order to a copy of ``state``; return the new state and the decisions."""
    c = _Controller(state)
    for ev in events:
        c.handle(ev)
    decisions = c.decisions()
    return c.state(), decisions


@dataclass(frozen=True)
class Quarantined:
    """An event :func:`step_isolating` left out because handling it raised: its index in the events
    given, and the exception as text."""

    index: int
    error: str


def step_isolating(
    state: ControllerState, events: Iterable[Event]
) -> tuple[ControllerState, list[Decision], list[Quarantined]]:
    """:func:`step`, except that an event whose handling raises (a bug: bad input is refused before it
    gets here) costs only itself. The step is run again from ``state`` without that event, so the result
    is exactly that of a step over the other events — nothing the failing event half-did survives — and,
    ``step`` being pure and deterministic, a replayed micro-batch leaves out the same events with the same
    outcome. Returns the new state, the decisions and the events left out (in order)."""
    todo = list(events)
    errors: dict[int, str] = {}
    while True:
        c = _Controller(state)
        current = -1
        try:
            for current, ev in enumerate(todo):
                if current not in errors:
                    c.handle(ev)
        except Exception as exc:
            errors[current] = f"{type(exc).__name__}: {exc}"[:2000]
            continue
        decisions = c.decisions()
        return c.state(), decisions, [Quarantined(i, errors[i]) for i in sorted(errors)]


# --------------------------------------------------------------------------- helpers


def _reassignment_outcome(request_id: str, interrupted: dict[str, str]) -> AdminResult:
    """The final answer of a reassignment request: ``ok`` when every partition reached its target;
    ``error`` ``REASSIGNMENT_CANCELLED`` / ``REASSIGNMENT_SUPERSEDED`` (one entry per such partition in
    the details) when a later cancellation or reassignment replaced some of them — never "completed"."""
    if not interrupted:
        return AdminResult(request_id, ReassignPartitions.TYPE, AdminStatus.OK, None, "Reassignment completed.")
    words = {"cancelled": "cancelled", "superseded": "superseded by a newer reassignment"}
    partitions = {
        tp: {"error": f"REASSIGNMENT_{how.upper()}", "message": f"The reassignment of {tp} was {words[how]}."}
        for tp, how in sorted(interrupted.items())
    }
    kinds = sorted(set(interrupted.values()))
    error = "REASSIGNMENT_CANCELLED" if kinds == ["cancelled"] else "REASSIGNMENT_SUPERSEDED"
    message = "; ".join(p["message"] for p in partitions.values())
    details = json.dumps({"partitions": partitions}, separators=(",", ":"), sort_keys=True)
    return AdminResult(request_id, ReassignPartitions.TYPE, AdminStatus.ERROR, error, message, details)


def _invalid_config(configs: dict[str, str]) -> str | None:
    """Kafka's ``LogConfig.validate``: unknown names, bad values (``INVALID_CONFIG``)."""
    return topic_configs_problem(configs)


def _topic_znode_problem(topic: str, assignment: dict[int, ReplicaAssignment], topic_id: str | None) -> str | None:
    """Why ``/brokers/topics/<topic>`` with ``assignment`` cannot be written (ZooKeeper refuses data over
    its ``jute.maxbuffer``, and the controller could then never record the topic), or ``None``."""
    size = len(encode_topic_znode(assignment, topic_id).encode())
    if size <= lim.MAX_ZNODE_BYTES:
        return None
    return (
        f"The znode of topic '{topic}' would be {size} bytes, over the {lim.MAX_ZNODE_BYTES} bytes one znode may "
        f"hold (ZooKeeper's jute.maxbuffer is {lim.JUTE_MAXBUFFER} bytes)."
    )


def _topic_id(topic: str, request_id: str) -> str:
    """A deterministic Kafka-style topic id (base64url of 16 bytes, no padding)."""
    digest = hashlib.sha256(f"livectl-topic-id\0{topic}\0{request_id}".encode()).digest()[:16]
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


#: the topic id a ``create_topic`` command gives its topic (the shell matches a refused creation to it)
topic_id_for = _topic_id


def _context_from_snapshot(controller_id: int, snap: ZkSnapshot) -> ControllerContext:
    ctx = ControllerContext(
        controller_id=controller_id, epoch=snap.controller_epoch, epoch_zk_version=snap.controller_epoch_zk_version
    )
    for b in snap.brokers:
        ctx.add_live_broker(b)
    for tz in snap.topics:
        adding = dict(tz.adding_replicas)
        removing = dict(tz.removing_replicas)
        ctx.topic_partitions.setdefault(tz.topic, set())
        if tz.topic_id:
            ctx.topic_ids[tz.topic] = tz.topic_id
        for p, reps in tz.partitions:
            tp = TopicPartition(tz.topic, p)
            ra = ReplicaAssignment(tuple(reps), tuple(adding.get(p, ())), tuple(removing.get(p, ())))
            ctx.set_assignment(tp, ra)
            if ra.is_being_reassigned:
                ctx.partitions_being_reassigned.add(tp)
    for tp, st in snap.partition_states:
        if tp in ctx.partition_assignments:
            ctx.put_leadership(
                tp,
                LeaderAndIsr(st.leader, st.isr, st.leader_epoch, st.zk_version, st.leader_recovery_state),
                st.controller_epoch,
            )
    for topic, cfg in snap.topic_configs:
        if topic in ctx.topic_partitions:
            ctx.topic_configs[topic] = dict(cfg)
            v = dict(cfg).get(UNCLEAN_CONFIG)
            if v is not None:
                ctx.unclean_leader_election[topic] = v == "true"
    return ctx


def auto_rebalance_candidates(ctx: ControllerContext, brokers: Iterable[int]) -> list[TopicPartition]:
    """Partitions (not queued for deletion) whose preferred replica is one of ``brokers`` but whose
    leader is another broker — what ``checkAndTriggerAutoLeaderRebalance`` re-elects."""
    wanted = set(brokers)
    out = []
    for tp, ra in ctx.partition_assignments.items():
        if not ra.replicas or ra.replicas[0] not in wanted or tp.topic in ctx.topics_to_be_deleted:
            continue
        lai = ctx.leader_and_isr(tp)
        if lai is not None and lai.leader != ra.replicas[0]:
            out.append(tp)
    return sorted(out)


def imbalance(state: ControllerState) -> dict[int, tuple[int, int]]:
    """Per preferred broker: (partitions not led by it, partitions it prefers) in this bucket — the
    driver sums these across buckets, divides and compares with
    ``leader.imbalance.per.broker.percentage`` (see :func:`brokers_over_imbalance`)."""
    ctx = state.context
    out: dict[int, list[int]] = {}
    for tp, ra in ctx.partition_assignments.items():
        if not ra.replicas or tp.topic in ctx.topics_to_be_deleted:
            continue
        counts = out.setdefault(ra.replicas[0], [0, 0])
        counts[1] += 1
        lai = ctx.leader_and_isr(tp)
        if lai is not None and lai.leader != ra.replicas[0]:
            counts[0] += 1
    return {b: (c[0], c[1]) for b, c in sorted(out.items())}


def brokers_over_imbalance(counts: dict[int, tuple[int, int]], percentage: int) -> tuple[int, ...]:
    """Brokers whose imbalance ratio exceeds ``percentage`` / 100 (Kafka's strict comparison)."""
    return tuple(b for b, (bad, total) in sorted(counts.items()) if total and bad / total > percentage / 100)


def metrics(state: ControllerState) -> dict[str, int]:
    """Kafka's controller gauges for this bucket (sum them across buckets)."""
    ctx = state.context
    offline = sum(
        1
        for tp, st in ctx.partition_states.items()
        if st is PartitionState.OFFLINE and tp.topic not in ctx.topics_with_deletion_started
    )
    imbalanced = 0
    for tp, li in ctx.partition_leadership.items():
        if tp.topic in ctx.topics_to_be_deleted:
            continue
        target = ctx.assignment(tp).target_replicas
        if target and li.leader_and_isr.leader != target[0]:
            imbalanced += 1
    # Kafka's broker-side UnderReplicatedPartitions, seen from the controller: ISR smaller than the
    # partition's full replica set (during a reassignment that set includes the adding replicas)
    under_replicated = sum(
        1
        for tp, li in ctx.partition_leadership.items()
        if tp.topic not in ctx.topics_to_be_deleted and len(li.leader_and_isr.isr) < len(ctx.assignment(tp).replicas)
    )
    to_delete = 0
    ineligible = 0
    for topic in ctx.topics_to_be_deleted:
        for pr in ctx.replicas_for_topic(topic):
            st = ctx.replica_state(pr)
            if st is not ReplicaState.DELETION_SUCCESSFUL:
                to_delete += 1
            if st is ReplicaState.DELETION_INELIGIBLE:
                ineligible += 1
    return {
        "OfflinePartitionsCount": offline,
        "PreferredReplicaImbalanceCount": imbalanced,
        "GlobalTopicCount": len(ctx.topic_partitions),
        "GlobalPartitionCount": len(ctx.partition_assignments),
        "TopicsToDeleteCount": len(ctx.topics_to_be_deleted),
        "ReplicasToDeleteCount": to_delete,
        "TopicsIneligibleToDeleteCount": len(ctx.topics_ineligible_for_deletion),
        "ReplicasIneligibleToDeleteCount": ineligible,
        "UnderReplicatedPartitions": under_replicated,
        "ReassigningPartitions": len(ctx.partitions_being_reassigned),
    }


__all__ = [
    "ControllerConfig",
    "ControllerState",
    "PartitionTarget",
    "Quarantined",
    "auto_rebalance_candidates",
    "brokers_over_imbalance",
    "imbalance",
    "initial_state",
    "metrics",
    "step",
    "step_isolating",
]
