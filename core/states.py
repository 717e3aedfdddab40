"""Partition and replica states with Kafka's valid previous states.

Partition states (``PartitionStateMachine``), each with the states it may come from:

* ``NewPartition`` <- {NonExistentPartition}: replicas assigned, no leader yet.
* ``OnlinePartition`` <- {NewPartition, OnlinePartition, OfflinePartition}: a leader was elected.
* ``OfflinePartition`` <- {NewPartition, OnlinePartition, OfflinePartition}: the leader died.
* ``NonExistentPartition`` <- {OfflinePartition}: never created, or deleted.

Replica states (``ReplicaStateMachine``):

* ``NewReplica`` <- {NonExistentReplica}
* ``OnlineReplica`` <- {NewReplica, OnlineReplica, OfflineReplica, ReplicaDeletionIneligible}
* ``OfflineReplica`` <- {NewReplica, OnlineReplica, OfflineReplica, ReplicaDeletionIneligible}
* ``ReplicaDeletionStarted`` <- {OfflineReplica}
* ``ReplicaDeletionSuccessful`` <- {ReplicaDeletionStarted}
* ``ReplicaDeletionIneligible`` <- {OfflineReplica, ReplicaDeletionStarted}
* ``NonExistentReplica`` <- {ReplicaDeletionSuccessful}

A transition from a state not listed leaves the state unchanged and is reported by the machines as a
per-item :class:`core.decisions.StateChangeFailure`, never raised.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from types import MappingProxyType


class PartitionState(Enum):
    NON_EXISTENT = "NonExistentPartition"
    NEW = "NewPartition"
    ONLINE = "OnlinePartition"
    OFFLINE = "OfflinePartition"

    @property
    def valid_previous_states(self) -> frozenset[PartitionState]:
        return PARTITION_VALID_PREVIOUS[self]

    def __str__(self) -> str:
        return self.value


class ReplicaState(Enum):
    NEW = "NewReplica"
    ONLINE = "OnlineReplica"
    OFFLINE = "OfflineReplica"
    DELETION_STARTED = "ReplicaDeletionStarted"
    DELETION_SUCCESSFUL = "ReplicaDeletionSuccessful"
    DELETION_INELIGIBLE = "ReplicaDeletionIneligible"
    NON_EXISTENT = "NonExistentReplica"

    @property
    def valid_previous_states(self) -> frozenset[ReplicaState]:
        return REPLICA_VALID_PREVIOUS[self]

    def __str__(self) -> str:
        return self.value


_P = PartitionState
_R = ReplicaState

PARTITION_VALID_PREVIOUS: Mapping[PartitionState, frozenset[PartitionState]] = MappingProxyType(
    {
        _P.NEW: frozenset({_P.NON_EXISTENT}),
        _P.ONLINE: frozenset({_P.NEW, _P.ONLINE, _P.OFFLINE}),
        _P.OFFLINE: frozenset({_P.NEW, _P.ONLINE, _P.OFFLINE}),
        _P.NON_EXISTENT: frozenset({_P.OFFLINE}),
    }
)

REPLICA_VALID_PREVIOUS: Mapping[ReplicaState, frozenset[ReplicaState]] = MappingProxyType(
    {
        _R.NEW: frozenset({_R.NON_EXISTENT}),
        _R.ONLINE: frozenset({_R.NEW, _R.ONLINE, _R.OFFLINE, _R.DELETION_INELIGIBLE}),
        _R.OFFLINE: frozenset({_R.NEW, _R.ONLINE, _R.OFFLINE, _R.DELETION_INELIGIBLE}),
        _R.DELETION_STARTED: frozenset({_R.OFFLINE}),
        _R.DELETION_SUCCESSFUL: frozenset({_R.DELETION_STARTED}),
        _R.DELETION_INELIGIBLE: frozenset({_R.OFFLINE, _R.DELETION_STARTED}),
        _R.NON_EXISTENT: frozenset({_R.DELETION_SUCCESSFUL}),
    }
)


def is_valid_partition_transition(current: PartitionState, target: PartitionState) -> bool:
    return current in PARTITION_VALID_PREVIOUS[target]


def is_valid_replica_transition(current: ReplicaState, target: ReplicaState) -> bool:
    return current in REPLICA_VALID_PREVIOUS[target]
