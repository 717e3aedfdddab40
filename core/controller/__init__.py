"""The controller (Kafka's ``KafkaController``) and ``step``, the streaming job's entry.

``step(state, events) -> (state, decisions)`` copies the bucket's :class:`ControllerState` once,
applies the events in order and returns the new state and the decisions: ZooKeeper writes (in order),
then the step's broker requests batched per broker (LeaderAndIsr, UpdateMetadata, StopReplica, then
answers to broker requests), then admin results, then per-item state-change failures. The input state
is never modified. Nothing raises per item: impossible commands get an :class:`AdminResult` with
Kafka's error name.

Operations, each with its ordered side effects (the semantics of Kafka 3.9's ZooKeeper-mode controller, the
last release with one; where releases differ, 3.9's):

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
* **auto leader rebalance** — preferred election for the partitions of the brokers named by the tick,
  reassignments in progress or not (3.9; before 3.4 none while any partition was being reassigned).
* **AlterPartition** — ISR changes from leaders, Kafka's validation and error codes, then
  UpdateMetadata and reassignment completion.
* **ISR-change notification** (leaders below inter-broker protocol 2.7 write their ISR to ZooKeeper
  themselves) — the state znodes as read taken where they are the leader's news (same leader and leader
  epoch, newer znode version), then UpdateMetadata and reassignment completion for those.
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

The package keeps each concern where Kafka's engineers look for it, every handler operating on one
:class:`~core.controller.step_context.StepContext`:

=================  ==========================================================================
``state``          :class:`ControllerState` / :class:`ControllerConfig`, the state between steps
``step_context``   the step's working copy and the effects the handlers share
``event_loop``     ``step``: each event to its handler, then finished admin requests answered
``brokers``        broker startup / failure / controlled shutdown, log-dir failures
``topics``         topic and partition creation, topic configs
``topic_deletion`` DeleteTopics, ``/admin/delete_topics``, StopReplica answers
``isr``            AlterPartition, ISR-change notifications, the retry of a refused state write
``reassignment``   KIP-455 reassignment, ``/admin/reassign_partitions``
``elections``      ElectLeaders, preferred / unclean / auto-rebalance elections
``failover``       the new controller's start from ZooKeeper
``metrics``        the controller gauges and leader-imbalance counts
``dry_run``        an admin command run dry: answered with what it would decide, nothing applied
=================  ==========================================================================

The state machines (:mod:`core.partition_machine`, :mod:`core.replica_machine`), topic deletion
(:mod:`core.deletion`) and the one leader/ISR write (:mod:`core.isr_write`) sit below the package.
"""

from __future__ import annotations

from core.controller.elections import auto_rebalance_candidates
from core.controller.event_loop import Quarantined, step, step_isolating
from core.controller.metrics import brokers_over_imbalance, imbalance, leader_moves, metrics, metrics_and_imbalance
from core.controller.state import ControllerConfig, ControllerState, initial_state
from core.controller.topics import topic_id_for
from core.model import PartitionTarget

__all__ = [
    "ControllerConfig",
    "ControllerState",
    "PartitionTarget",
    "Quarantined",
    "auto_rebalance_candidates",
    "brokers_over_imbalance",
    "imbalance",
    "initial_state",
    "leader_moves",
    "metrics",
    "metrics_and_imbalance",
    "step",
    "step_isolating",
    "topic_id_for",
]
