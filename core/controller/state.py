"""The controller's state between steps: one bucket's :class:`ControllerState` and the broker configs
it runs with (:class:`ControllerConfig`), with the state's JSON form."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from core.context import ControllerContext
from core.context_codec import context_from_dict, context_to_dict
from core.errors import FormatError
from core.leader_balance import UNBOUNDED
from core.model import TopicPartition

__all__ = ["STATE_VERSION", "ControllerConfig", "ControllerState", "initial_state"]

STATE_VERSION = 1


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
    #: ``min.insync.replicas``, the cluster default (topics may override): the under-min-ISR figure only
    min_insync_replicas: int = 1
    #: ``leader.imbalance.max.leaders.per.interval`` (livectl's): the most leaders one rebalance pass and one
    #: ``elect-leaders --all`` batch move; Kafka's largest int (the default) is no bound (:mod:`core.leader_balance`)
    leader_imbalance_max_leaders_per_interval: int = UNBOUNDED


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
    #: an ``elect-leaders --all`` (preferred) waits under ``leader.imbalance.max.leaders.per.interval``: the
    #: rebalance passes move this bucket's movable preferred leaders until none is left
    preferred_all_queued: bool = False
    #: the brokers no new replica is placed on (:mod:`core.cordon`), as ZooKeeper last said
    cordoned_brokers: frozenset[int] = frozenset()

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "context": context_to_dict(self.context),
            "config": {f.name: getattr(self.config, f.name) for f in fields(self.config)},
            "pending_reassignments": {
                rid: [[tp.topic, tp.partition] for tp in sorted(tps)] for rid, tps in self.pending_reassignments.items()
            },
            "pending_deletions": {rid: sorted(ts) for rid, ts in self.pending_deletions.items()},
            "zk_reassignments": [[tp.topic, tp.partition] for tp in sorted(self.zk_reassignments)],
            "interrupted_reassignments": {
                rid: dict(sorted(v.items())) for rid, v in sorted(self.interrupted_reassignments.items())
            },
            "preferred_all_queued": self.preferred_all_queued,
            "cordoned_brokers": sorted(self.cordoned_brokers),
        }

    @staticmethod
    def from_dict(
        d: dict[str, Any], context: ControllerContext | None = None, stop: Callable[[], bool] | None = None
    ) -> ControllerState:
        """Inverse of :meth:`to_dict`; with ``context``, that context instead of decoding ``d``'s (the bulk of
        the cost: :func:`core.context_codec.context_head` where only the head is needed); ``stop``: see
        :func:`core.context_codec.context_from_dict`."""
        if d.get("version") != STATE_VERSION:
            raise FormatError("version", f"unsupported controller state version {d.get('version')}")
        return ControllerState(
            context_from_dict(d["context"], stop) if context is None else context,
            ControllerConfig(**d["config"]),
            {rid: frozenset(TopicPartition(t, p) for t, p in tps) for rid, tps in d["pending_reassignments"].items()},
            {rid: frozenset(ts) for rid, ts in d["pending_deletions"].items()},
            frozenset(TopicPartition(t, p) for t, p in d["zk_reassignments"]),
            {rid: dict(v) for rid, v in d.get("interrupted_reassignments", {}).items()},
            bool(d.get("preferred_all_queued", False)),
            frozenset(int(b) for b in d.get("cordoned_brokers", ())),
        )

    def to_bytes(self) -> bytes:
        return json.dumps(self.to_dict(), separators=(",", ":")).encode()

    @staticmethod
    def from_bytes(data: bytes) -> ControllerState:
        result: ControllerState = ControllerState.from_dict(json.loads(data))
        return result


def initial_state(config: ControllerConfig | None = None) -> ControllerState:
    return ControllerState(ControllerContext(), config or ControllerConfig())
