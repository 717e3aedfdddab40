"""``step``: one bucket's events through the handlers, in order (Kafka's controller event loop, one
event at a time); and :func:`step_isolating`, which leaves out an event whose handling raises."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from core.controller import brokers, dry_run, elections, failover, isr, reassignment, topic_deletion, topics
from core.controller.state import ControllerState
from core.controller.step_context import StepContext
from core.decisions import Decision
from core.events import (
    AdminCommand,
    AlterPartition,
    AlterPartitionRequest,
    AlterTopicConfig,
    AutoRebalanceTick,
    BrokerFailure,
    BrokerModification,
    BrokerStartup,
    CancelReassignment,
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
)
from core.zk_path_events import (
    BrokersCordoned,
    ClusterConfigChanged,
    ZkIsrChange,
    ZkLogDirEvents,
    ZkPreferredElection,
    ZkReassignment,
    ZkTopicChange,
    ZkTopicDeletion,
)

__all__ = ["HANDLERS", "Quarantined", "step", "step_isolating"]

#: the handler of each event type (read-only); an event of a type not listed changes nothing
HANDLERS: Mapping[type[Event], Callable[[StepContext, Any], None]] = MappingProxyType(
    {
        BrokerStartup: brokers.broker_startup,
        BrokerFailure: brokers.broker_failure,
        BrokerModification: brokers.broker_modification,
        ControlledShutdown: brokers.controlled_shutdown,
        LogDirFailure: brokers.log_dir_failure,
        LeaderAndIsrResponse: brokers.leader_and_isr_response,
        StopReplicaResponse: topic_deletion.stop_replica_response,
        AlterPartition: isr.alter_partition,
        AlterPartitionRequest: isr.alter_partition_request,
        CreateTopic: topics.create_topic,
        CreatePartitions: topics.create_partitions,
        DeleteTopic: topic_deletion.delete_topic,
        AlterTopicConfig: topics.alter_topic_config,
        ReassignPartitions: reassignment.reassign_partitions,
        CancelReassignment: reassignment.reassign_partitions,
        ElectLeaders: elections.elect_leaders,
        AutoRebalanceTick: elections.auto_rebalance,
        ControllerFailover: failover.failover,
        PartitionStatesRead: isr.partition_states_read,
        TopicCreationRefused: topics.topic_creation_refused,
        Tick: topic_deletion.tick,
        ZkReassignment: reassignment.zk_reassignment,
        ZkPreferredElection: elections.zk_preferred_election,
        ZkTopicDeletion: topic_deletion.zk_topic_deletion,
        ZkTopicChange: topics.zk_topic_change,
        ZkLogDirEvents: brokers.zk_log_dir_events,
        ZkIsrChange: isr.zk_isr_change,
        ClusterConfigChanged: elections.cluster_config_changed,
        BrokersCordoned: brokers.brokers_cordoned,
    }
)


def handle(c: StepContext, ev: Event) -> None:
    """One event, then the admin requests it completed are answered. An admin command run dry is answered
    with what this would decide for it, and changes nothing (:mod:`core.controller.dry_run`)."""
    if isinstance(ev, AdminCommand) and ev.dry_run:
        dry_run.dry_run(c, ev, handle)
        return
    handler = HANDLERS.get(type(ev))
    if handler is not None:
        handler(c, ev)
    reassignment.complete_reassignment_requests(c)
    topic_deletion.complete_deletion_requests(c)


def step(state: ControllerState, events: Iterable[Event]) -> tuple[ControllerState, list[Decision]]:
    """Apply ``events`` in order to a copy of ``state``; return the new state and the decisions."""
    c = StepContext(state)
    for ev in events:
        handle(c, ev)
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
        c = StepContext(state)
        current = -1
        try:
            for current, ev in enumerate(todo):
                if current not in errors:
                    handle(c, ev)
        except Exception as exc:
            errors[current] = f"{type(exc).__name__}: {exc}"[:2000]
            continue
        decisions = c.decisions()
        return c.state(), decisions, [Quarantined(i, errors[i]) for i in sorted(errors)]
