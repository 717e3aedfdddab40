"""The parts of a request body as the controller's context has them now (Kafka's
``ControllerBrokerRequestBatch`` builds them the same way): a partition's LeaderAndIsr and UpdateMetadata
states, the states of a request in order with their topics' current ids, the live brokers as UpdateMetadata
lists them and a leader's address as LeaderAndIsr lists it. :class:`core.request_batch.RequestBatch`
collects them into requests."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from operator import attrgetter
from typing import TypeVar

from core.context import ControllerContext
from core.kafka.requests import (
    SECURITY_PROTOCOL_IDS,
    ZERO_UUID,
    BrokerAddress,
    LisrPartitionState,
    MetadataBroker,
    MetadataEndpoint,
    MetadataPartitionState,
)
from core.model import (
    EPOCH_DURING_DELETE,
    LEADER_DURING_DELETE,
    Broker,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)


def leader_and_isr_state(
    tp: TopicPartition, li: LeaderIsrAndControllerEpoch, ra: ReplicaAssignment, is_new: bool, topic_id: str
) -> LisrPartitionState:
    """The LeaderAndIsr partition state of ``tp`` with leadership ``li`` and assignment ``ra``."""
    lai = li.leader_and_isr
    return LisrPartitionState(
        tp.topic,
        tp.partition,
        li.controller_epoch,
        lai.leader,
        lai.leader_epoch,
        lai.isr,
        lai.partition_epoch,
        ra.replicas,
        ra.adding_replicas,
        ra.removing_replicas,
        is_new,
        lai.leader_recovery_state,
        topic_id,
    )


def update_metadata_state(ctx: ControllerContext, tp: TopicPartition) -> MetadataPartitionState | None:
    """The UpdateMetadata partition state of ``tp`` now (``None`` without leadership)."""
    li = ctx.partition_leadership.get(tp)
    if li is None:
        return None
    return metadata_state(ctx, tp, li, ctx.replicas(tp), ctx.topic_ids.get(tp.topic, ZERO_UUID))


def metadata_state(
    ctx: ControllerContext,
    tp: TopicPartition,
    li: LeaderIsrAndControllerEpoch,
    replicas: tuple[int, ...],
    topic_id: str,
) -> MetadataPartitionState:
    """:func:`update_metadata_state` of ``tp`` given its leadership, replicas and topic id in ``ctx``."""
    lai = li.leader_and_isr
    if tp.topic in ctx.topics_to_be_deleted:
        leader, epoch = LEADER_DURING_DELETE, EPOCH_DURING_DELETE
    else:
        leader, epoch = lai.leader, lai.leader_epoch
    return MetadataPartitionState(
        tp.topic,
        tp.partition,
        li.controller_epoch,
        leader,
        epoch,
        lai.isr,
        lai.partition_epoch,
        replicas,
        ctx.offline_replicas(tp, replicas),
        topic_id,
    )


_S = TypeVar("_S", LisrPartitionState, MetadataPartitionState)


_TOPIC_PARTITION = attrgetter("topic", "partition")


def sorted_states(ctx: ControllerContext, states: Iterable[_S]) -> tuple[_S, ...]:
    """The states sorted by topic and partition, each with its topic's id as the context has it now."""
    out = sorted(states, key=_TOPIC_PARTITION)  # each state's topic and partition are its key's
    topic: str | None = None
    tid = ZERO_UUID
    for i, s in enumerate(out):
        if s.topic != topic:  # sorted: a topic's states are consecutive
            topic = s.topic
            tid = ctx.topic_ids.get(topic, ZERO_UUID)
        if s.topic_id != tid:  # the topic's id changed after the state was taken (rare: a deletion's end)
            out[i] = replace(s, topic_id=tid)
    return tuple(out)


def metadata_brokers(ctx: ControllerContext) -> tuple[MetadataBroker, ...]:
    """The live brokers as UpdateMetadata lists them (``liveBrokers``), by id."""
    return tuple(metadata_broker(b) for b in sorted(ctx.live_brokers.values(), key=lambda b: b.id))


def metadata_broker(b: Broker) -> MetadataBroker:
    """One registered broker as UpdateMetadata lists it."""
    endpoints = tuple(
        MetadataEndpoint(e.port, e.host, e.listener, SECURITY_PROTOCOL_IDS.get(e.security_protocol, 0))
        for e in b.endpoints
    )
    return MetadataBroker(b.id, endpoints, b.rack)


def leader_node(b: Broker) -> BrokerAddress:
    """A leader as LeaderAndIsr lists it (``liveLeaders``): its first endpoint, or none (port -1)."""
    host, port = (b.endpoints[0].host, b.endpoints[0].port) if b.endpoints else ("", -1)
    return BrokerAddress(b.id, host, port)
