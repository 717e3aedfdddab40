"""The JSON form of a :class:`~core.context.ControllerContext` (a bucket's stored state holds it:
:meth:`core.controller.ControllerState.to_dict`): :func:`context_to_dict` writes it, compact and per topic;
:func:`context_from_dict` reads it back whole, :func:`context_head` only who controls and in which epoch.
Both directions are built for a 100k-partition bucket: equal values are encoded and decoded once."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from core.context import ControllerContext
from core.errors import DecodeStoppedError
from core.model import (
    Broker,
    Endpoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    PartitionReplica,
    ReplicaAssignment,
    TopicPartition,
)
from core.states import PartitionState, ReplicaState


def context_to_dict(ctx: ControllerContext) -> dict[str, Any]:
    """A JSON-able dict (see :func:`context_from_dict`); compact, per topic. Partitions with equal values
    may share the lists and dicts that encode them: serialise it, do not change it."""
    # one pass over each partition container, into dicts by plain (topic, partition) keys: a tuple's
    # hash and equality run in C, a dataclass's in Python (the dump reads each partition thrice).
    # A replica state's entry is its partition's (in assignment order) when the replica is assigned
    # there, else a stray. Enum values by ``_value_`` (``.value`` is a Python-level property).
    assignment_of = {(tp.topic, tp.partition): ra for tp, ra in ctx.partition_assignments.items()}
    states_of: dict[tuple[str, int], dict[int, str]] = {}
    stray: list[list[Any]] = []
    for pr, st in ctx.replica_states.items():
        key = (pr.topic, pr.partition)
        ra_ = assignment_of.get(key)
        if ra_ is not None and pr.replica in ra_.replicas:
            of_partition = states_of.get(key)
            if of_partition is None:  # (not setdefault: its default dict would be made for every replica)
                of_partition = states_of[key] = {}
            of_partition[pr.replica] = st._value_
        else:
            stray.append([pr.topic, pr.partition, pr.replica, st._value_])
    lead_of = {(tp.topic, tp.partition): li for tp, li in ctx.partition_leadership.items()}
    pstate_of = {(tp.topic, tp.partition): st._value_ for tp, st in ctx.partition_states.items()}
    no_assignment = ReplicaAssignment(())
    non_existent = PartitionState.NON_EXISTENT.value
    # equal values (partitions share a few hundred replica lists; leaderships repeat until elections spread
    # their epochs) are encoded once, by their content in tuple keys (hashed in C)
    ra_enc: dict[tuple[Any, ...], list[list[int]]] = {}
    lead_enc: dict[tuple[Any, ...], list[Any]] = {}
    rstates_enc: dict[tuple[tuple[int, ...], tuple[tuple[int, str], ...]], dict[str, str]] = {}
    no_rstates: dict[str, str] = {}
    topics: dict[str, Any] = {}
    for topic in sorted(ctx.topic_partitions):
        parts: dict[str, Any] = {}
        for p in sorted(ctx.topic_partitions[topic]):
            key = (topic, p)
            ra = assignment_of.get(key) or no_assignment
            rs = ra.replicas
            ra_key = (rs, ra.adding_replicas, ra.removing_replicas)
            ra_lists = ra_enc.get(ra_key)
            if ra_lists is None:
                ra_lists = ra_enc[ra_key] = [list(rs), list(ra.adding_replicas), list(ra.removing_replicas)]
            li = lead_of.get(key)
            lead: list[Any] | None = None
            if li is not None:
                l_ = li.leader_and_isr
                lead_key = (
                    l_.leader,
                    l_.isr,
                    l_.leader_epoch,
                    l_.partition_epoch,
                    l_.leader_recovery_state,
                    li.controller_epoch,
                )
                lead = lead_enc.get(lead_key)
                if lead is None:
                    lead = lead_enc[lead_key] = [lead_key[0], list(l_.isr), *lead_key[2:]]
            got = states_of.get(key)
            if got is None:
                rstates = no_rstates
            else:
                rkey = (rs, tuple(got.items()))
                rstates_ = rstates_enc.get(rkey)
                if rstates_ is None:
                    rstates_ = rstates_enc[rkey] = {str(r): got[r] for r in rs if r in got}
                rstates = rstates_
            parts[str(p)] = [*ra_lists, lead, pstate_of.get(key, non_existent), rstates]
        topics[topic] = parts
    return {
        "controller_id": ctx.controller_id,
        "epoch": ctx.epoch,
        "epoch_zk_version": ctx.epoch_zk_version,
        "live_brokers": [
            [
                b.id,
                b.epoch,
                b.rack,
                [[e.listener, e.host, e.port, e.security_protocol] for e in b.endpoints],
            ]
            for b in sorted(ctx.live_brokers.values(), key=lambda b: b.id)
        ],
        "shutting_down": sorted(ctx.shutting_down_broker_ids),
        "topics": topics,
        "stray_replica_states": stray,
        "topic_ids": dict(sorted(ctx.topic_ids.items())),
        "offline_dirs": {
            str(b): [[tp.topic, tp.partition] for tp in sorted(s)] for b, s in ctx.replicas_on_offline_dirs.items()
        },
        "to_delete": sorted(ctx.topics_to_be_deleted),
        "ineligible": sorted(ctx.topics_ineligible_for_deletion),
        "deletion_started": sorted(ctx.topics_with_deletion_started),
        "reassigning": [[tp.topic, tp.partition] for tp in sorted(ctx.partitions_being_reassigned)],
        "unclean": dict(sorted(ctx.unclean_leader_election.items())),
        "configs": {t: dict(sorted(c.items())) for t, c in sorted(ctx.topic_configs.items())},
        "topic_versions": dict(sorted(ctx.topic_znode_versions.items())),
    }


#: enum members by their JSON value (``Enum(value)`` is a Python-level call through the metaclass)
_PARTITION_STATE_OF: Mapping[str, PartitionState] = MappingProxyType({s.value: s for s in PartitionState})
_REPLICA_STATE_OF: Mapping[str, ReplicaState] = MappingProxyType({s.value: s for s in ReplicaState})


def context_head(d: dict[str, Any]) -> ControllerContext:
    """The context of :func:`context_to_dict`'s ``d`` with only its head decoded: who controls and in
    which epoch (``controller_id``, ``epoch``, ``epoch_zk_version``), nothing else — for a step that replaces
    the context before reading it (a controller failover)."""
    return ControllerContext(
        controller_id=int(d["controller_id"]), epoch=int(d["epoch"]), epoch_zk_version=int(d["epoch_zk_version"])
    )


def context_from_dict(d: dict[str, Any], stop: Callable[[], bool] | None = None) -> ControllerContext:
    """Inverse of :func:`context_to_dict`: a context equal (``==``, every index included) to the one
    dumped, its maps in the same order. ``stop`` (when given) is asked before each topic; once it answers
    true the decode ends with :class:`core.errors.DecodeStoppedError`.

    Built in bulk (a bucket's state is decoded whenever its Python worker has not cached it): the index of
    partitions by broker is filled once per distinct replica set (:meth:`ControllerContext.index_assigned`)
    rather than once per partition, and equal assignments and leaderships share one frozen value (a bucket's
    partitions have a few hundred distinct replica lists; leaderships repeat until elections spread their
    epochs)."""
    ctx = context_head(d)
    for bid, bepoch, rack, eps in d["live_brokers"]:
        ctx.live_brokers[bid] = Broker(bid, bepoch, rack, tuple(Endpoint(l_, h, p, s) for l_, h, p, s in eps))
    ctx.shutting_down_broker_ids = set(d["shutting_down"])
    assignments = ctx.partition_assignments
    leaderships = ctx.partition_leadership
    replica_states = ctx.replica_states
    put_partition_state = ctx.put_partition_state
    partition_state_of = _PARTITION_STATE_OF
    replica_state_of = _REPLICA_STATE_OF
    new_replica = PartitionReplica
    # the replica states' keys (broker ids as JSON object keys) -> the ids
    broker_of: dict[str, int] = {}
    # interned values: JSON lists -> the tuple / frozen value equal to them
    assignment_of: dict[tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]], ReplicaAssignment] = {}
    leadership_of: dict[tuple[int, tuple[int, ...], int, int, int, int], LeaderIsrAndControllerEpoch] = {}
    replicas_of: dict[tuple[int, ...], tuple[int, ...]] = {(): ()}
    # replica set RS -> its partitions, indexed once per RS at the end
    on_replicas: dict[tuple[int, ...], list[TopicPartition]] = {}
    for topic, parts in d["topics"].items():
        if stop is not None and stop():
            raise DecodeStoppedError("the context's decode was stopped")
        ctx.topic_partitions[topic] = set()
        for p_str, (reps, adding, removing, lead, pstate, rstates) in parts.items():
            p = int(p_str)
            tp = TopicPartition(topic, p)
            rs = tuple(reps)
            key = (rs, tuple(adding), tuple(removing))
            ra = assignment_of.get(key)
            if ra is None:
                rs = replicas_of.setdefault(rs, rs)
                ra = assignment_of[key] = ReplicaAssignment(
                    rs, replicas_of.setdefault(key[1], key[1]), replicas_of.setdefault(key[2], key[2])
                )
            assignments[tp] = ra
            group = on_replicas.get(ra.replicas)
            if group is None:
                on_replicas[ra.replicas] = [tp]
            else:
                group.append(tp)
            if lead is not None:
                leader, isr, le, pe, lrs, ce = lead
                isr_ = tuple(isr)
                lkey = (leader, isr_, le, pe, lrs, ce)
                li = leadership_of.get(lkey)
                if li is None:
                    isr_ = replicas_of.setdefault(isr_, isr_)
                    li = leadership_of[lkey] = LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, isr_, le, pe, lrs), ce)
                leaderships[tp] = li
            put_partition_state(tp, partition_state_of[pstate])
            for r, st in rstates.items():
                b = broker_of.get(r)
                if b is None:
                    b = broker_of[r] = int(r)
                replica_states[new_replica(topic, p, b)] = replica_state_of[st]
    for rs, tps in on_replicas.items():
        ctx.index_assigned(set(tps), rs)
    for topic, p, r, st in d["stray_replica_states"]:
        ctx.replica_states[PartitionReplica(topic, p, r)] = replica_state_of[st]
    ctx.topic_ids = dict(d["topic_ids"])
    ctx.replicas_on_offline_dirs = {
        int(b): {TopicPartition(t, p) for t, p in tps} for b, tps in d["offline_dirs"].items()
    }
    ctx.topics_to_be_deleted = set(d["to_delete"])
    ctx.topics_ineligible_for_deletion = set(d["ineligible"])
    ctx.topics_with_deletion_started = set(d["deletion_started"])
    ctx.partitions_being_reassigned = {TopicPartition(t, p) for t, p in d["reassigning"]}
    ctx.unclean_leader_election = {t: bool(v) for t, v in d["unclean"].items()}
    ctx.topic_configs = {t: dict(c) for t, c in d["configs"].items()}
    # absent from a state stored before the versions were kept: every version unknown
    ctx.topic_znode_versions = {t: int(v) for t, v in d.get("topic_versions", {}).items()}
    return ctx
