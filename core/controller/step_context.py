"""The working copy of one step that every handler of :mod:`core.controller` operates on.

:class:`StepContext` holds the bucket's controller context (copied once per step), the configs, the
admin bookkeeping and the step's :class:`core.request_batch.Effects`; the handlers (one module per concern,
as Kafka's ``KafkaController`` groups its ``process*`` and ``on*`` methods) mutate it in place.
:meth:`StepContext.state` and :meth:`StepContext.decisions` are the step's results.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from core import offline_replicas, partition_machine, replica_machine
from core.controller.state import ControllerState
from core.decisions import ANY_VERSION, AdminResult, AdminStatus, Decision, ZkOp, ZkWrite
from core.election import ElectionStrategy
from core.events import AdminCommand
from core.kafka.zkdata import REASSIGN_PARTITIONS, encode_topic_znode, topic_path
from core.model import PartitionReplica, TopicPartition
from core.request_batch import Effects
from core.states import PartitionState, ReplicaState

__all__ = ["UNCLEAN_CONFIG", "StepContext"]

UNCLEAN_CONFIG = "unclean.leader.election.enable"


class StepContext:
    """Mutable working copy used inside one ``step``."""

    def __init__(self, state: ControllerState) -> None:
        self.ctx = state.context.copy()
        self.config = state.config
        #: request id -> partitions whose reassignment (or cancellation) it still waits for
        self.pending_reassignments = {k: set(v) for k, v in state.pending_reassignments.items()}
        #: request id -> topics whose deletion it still waits for
        self.pending_deletions = {k: set(v) for k, v in state.pending_deletions.items()}
        #: partitions started from the legacy ``/admin/reassign_partitions`` path and not finished
        self.zk_reassignments = set(state.zk_reassignments)
        #: whether ``/admin/reassign_partitions`` holds entries of this bucket (deleted once none is left)
        self.had_zk_reassignments = bool(self.zk_reassignments)
        #: request id -> partition -> "superseded" / "cancelled"
        self.interrupted = {k: dict(v) for k, v in state.interrupted_reassignments.items()}
        #: an ``elect-leaders --all`` waits for the rebalance passes (:mod:`core.leader_balance`)
        self.preferred_all_queued = state.preferred_all_queued
        #: the brokers no new replica is placed on (:mod:`core.cordon`)
        self.cordoned: frozenset[int] = state.cordoned_brokers
        self.fx = Effects()
        self._offline_before = offline_replicas.record(self.ctx)
        #: on failover, the topics ZooKeeper holds a record of (the new context knows no failed dir)
        self.offline_reset: frozenset[str] | None = None

    def decisions(self) -> list[Decision]:
        """The step's decisions, with the writes that keep ``/livectl/offline_replicas`` in step with the
        context (:mod:`core.offline_replicas`)."""
        after = offline_replicas.record(self.ctx)
        self.fx.zk.extend(offline_replicas.writes(self._offline_before, after, self.offline_reset))
        return self.fx.decisions(self.ctx)

    def state(self) -> ControllerState:
        return ControllerState(
            self.ctx,
            self.config,
            {k: frozenset(v) for k, v in self.pending_reassignments.items()},
            {k: frozenset(v) for k, v in self.pending_deletions.items()},
            frozenset(self.zk_reassignments),
            {k: dict(v) for k, v in self.interrupted.items()},
            self.preferred_all_queued,
            self.cordoned,
        )

    # ------------------------------------------------------------------ effects shared by the handlers

    def admin(
        self,
        cmd: AdminCommand,
        status: AdminStatus,
        error: str | None = None,
        message: str = "",
        details: dict[str, Any] | None = None,
    ) -> None:
        """Answer an admin command."""
        self.fx.admin.append(AdminResult(cmd.request_id, cmd.TYPE, status, error, message, details or {}))

    def write_topic_znode(self, topic: str) -> None:
        """``/brokers/topics/<topic>`` as the context assigns it (at any version: a version the context knows
        is one more after it)."""
        assignment = {tp.partition: self.ctx.assignment(tp) for tp in self.ctx.partitions_for_topic(topic)}
        self.fx.zk.append(
            ZkWrite(ZkOp.SET, topic_path(topic), encode_topic_znode(assignment, self.ctx.topic_ids.get(topic)))
        )
        known = self.ctx.topic_znode_versions.get(topic)
        if known is not None:
            self.ctx.topic_znode_versions[topic] = known + 1

    def partition_states(
        self, tps: Sequence[TopicPartition], target: PartitionState, strategy: ElectionStrategy | None = None
    ) -> dict[TopicPartition, str]:
        """The partition state machine with the cluster's unclean default; returns the failures."""
        return partition_machine.apply(
            self.ctx, self.fx, tps, target, strategy, default_unclean=self.config.unclean_leader_election_enable
        )

    def replica_states(self, replicas: Sequence[PartitionReplica], target: ReplicaState) -> None:
        replica_machine.apply(self.ctx, self.fx, replicas, target)

    def trigger_online_partition_state_change(self, topic: str | None = None) -> dict[TopicPartition, str]:
        """:func:`core.partition_machine.trigger_online_partition_state_change` with the cluster's
        unclean default; returns the failures."""
        return partition_machine.trigger_online_partition_state_change(
            self.ctx, self.fx, topic, default_unclean=self.config.unclean_leader_election_enable
        )

    def send_update_metadata(self, brokers: Iterable[int], tps: Iterable[TopicPartition] = ()) -> None:
        self.fx.batch.add_update_metadata(self.ctx, brokers, tps)

    def maybe_clear_zk_reassignment_path(self) -> None:
        """Delete ``/admin/reassign_partitions`` once this bucket's entries of it are done."""
        if self.had_zk_reassignments and not self.zk_reassignments:
            self.fx.zk.append(ZkWrite(ZkOp.DELETE, REASSIGN_PARTITIONS, None, ANY_VERSION))
            self.had_zk_reassignments = False

    def read_under_this_epoch(self, controller_epoch: int) -> bool:
        """Whether a watcher event was read by this controller (see :class:`core.zk_path_events.ZkReassignment`):
        one read under an earlier epoch is covered by the failover snapshot this controller loaded."""
        return self.ctx.controller_id >= 0 and controller_epoch == self.ctx.epoch
