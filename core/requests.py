"""Broker request batching and the JSON bodies of :class:`core.decisions.BrokerRequest`.

One :class:`RequestBatch` collects the requests of one ``step`` (Kafka's
``ControllerBrokerRequestBatch``) and :meth:`RequestBatch.flush` turns them into decisions: all
LeaderAndIsr requests (brokers ascending), then all UpdateMetadata, then all StopReplica, then the
controller's answers to broker requests. Requests to brokers that are not registered (live or shutting
down) are dropped. Every LeaderAndIsr for a partition also adds UpdateMetadata for it to every
registered broker. Adding the same partition twice for a broker keeps the latest state (``isNew`` and
``deletePartition`` stay true once set).

Bodies (JSON objects, Kafka's field names; stable — simulated brokers read them):

LeaderAndIsr::

    {"controllerId", "controllerEpoch", "brokerEpoch", "type": 0,
     "topicStates": [{"topicName", "topicId", "partitionStates": [{"partitionIndex", "controllerEpoch",
        "leader", "leaderEpoch", "isr", "partitionEpoch", "replicas", "addingReplicas",
        "removingReplicas", "isNew", "leaderRecoveryState"}]}],
     "liveLeaders": [{"brokerId", "hostName", "port"}]}

UpdateMetadata (``leader`` and ``leaderEpoch`` are -2 for topics queued for deletion)::

    {"controllerId", "controllerEpoch", "brokerEpoch",
     "topicStates": [{"topicName", "topicId", "partitionStates": [{"partitionIndex", "controllerEpoch",
        "leader", "leaderEpoch", "isr", "zkVersion", "replicas", "offlineReplicas"}]}],
     "liveBrokers": [{"id", "endpoints": [{"port", "host", "listener", "securityProtocol"}], "rack"}]}

``securityProtocol`` is Kafka's numeric id (PLAINTEXT 0, SSL 1, SASL_PLAINTEXT 2, SASL_SSL 3).
An UpdateMetadata with empty ``topicStates`` only announces the live brokers. Each bucket sends the
UpdateMetadata of its own partitions; the shell may merge bodies per broker by concatenating
``topicStates`` (the ``liveBrokers`` lists are identical across buckets).

StopReplica (``leaderEpoch`` -2 for topics queued for deletion, -1 when unknown)::

    {"controllerId", "controllerEpoch", "brokerEpoch",
     "topicStates": [{"topicName", "partitionStates": [{"partitionIndex", "leaderEpoch", "deletePartition"}]}]}

ControlledShutdownResponse — one per bucket; the driver merges by concatenating
``remainingPartitions`` (errorCode: the first non-zero one)::

    {"errorCode", "remainingPartitions": [{"topicName", "partitionIndex"}]}

AlterPartitionResponse::

    {"errorCode", "throttleTimeMs": 0, "topics": [{"topicName", "topicId", "partitions": [{"partitionIndex",
        "errorCode", "leaderId", "leaderEpoch", "isr", "partitionEpoch", "leaderRecoveryState",
        "correlationId"}]}]}

(``correlationId`` only when the AlterPartition carried one: it stands in for the request header's
correlation id, which lets a leader tell the answer to its proposal in flight from a stale one.)
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from core.context import ControllerContext
from core.decisions import AdminResult, BrokerRequest, Decision, StateChangeFailure, ZkWrite
from core.kafka.requests import SECURITY_PROTOCOL_IDS, ZERO_UUID, RequestApi
from core.model import (
    EPOCH_DURING_DELETE,
    LEADER_DURING_DELETE,
    NO_EPOCH,
    Broker,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)


def _ints(xs: Iterable[int]) -> str:
    return "[" + ",".join(map(str, xs)) + "]"


def _b(v: bool) -> str:
    return "true" if v else "false"


def _leader_and_isr_state(
    tp: TopicPartition, li: LeaderIsrAndControllerEpoch, ra: ReplicaAssignment, is_new: bool
) -> str:
    lai = li.leader_and_isr
    return (
        f'{{"partitionIndex":{tp.partition},"controllerEpoch":{li.controller_epoch},"leader":{lai.leader},'
        f'"leaderEpoch":{lai.leader_epoch},"isr":{_ints(lai.isr)},"partitionEpoch":{lai.partition_epoch},'
        f'"replicas":{_ints(ra.replicas)},"addingReplicas":{_ints(ra.adding_replicas)},'
        f'"removingReplicas":{_ints(ra.removing_replicas)},"isNew":{_b(is_new)},'
        f'"leaderRecoveryState":{lai.leader_recovery_state}}}'
    )


def update_metadata_state(ctx: ControllerContext, tp: TopicPartition) -> str | None:
    """The UpdateMetadata partition state of ``tp`` now (``None`` without leadership)."""
    li = ctx.partition_leadership.get(tp)
    if li is None:
        return None
    lai = li.leader_and_isr
    replicas = ctx.replicas(tp)
    offline = [r for r in replicas if not ctx.is_replica_online(r, tp)]
    if tp.topic in ctx.topics_to_be_deleted:
        leader, epoch = LEADER_DURING_DELETE, EPOCH_DURING_DELETE
    else:
        leader, epoch = lai.leader, lai.leader_epoch
    return (
        f'{{"partitionIndex":{tp.partition},"controllerEpoch":{li.controller_epoch},"leader":{leader},'
        f'"leaderEpoch":{epoch},"isr":{_ints(lai.isr)},"zkVersion":{lai.partition_epoch},'
        f'"replicas":{_ints(replicas)},"offlineReplicas":{_ints(offline)}}}'
    )


def _group_by_topic(ctx: ControllerContext, states: dict[TopicPartition, str], with_id: bool = True) -> str:
    by_topic: dict[str, list[tuple[int, str]]] = {}
    for tp, s in states.items():
        by_topic.setdefault(tp.topic, []).append((tp.partition, s))
    out = []
    for topic in sorted(by_topic):
        parts = ",".join(s for _, s in sorted(by_topic[topic]))
        tid = f',"topicId":"{ctx.topic_ids.get(topic, ZERO_UUID)}"' if with_id else ""
        out.append(f'{{"topicName":{json.dumps(topic)}{tid},"partitionStates":[{parts}]}}')
    return "[" + ",".join(out) + "]"


def _live_brokers_json(ctx: ControllerContext) -> str:
    brokers = []
    for b in sorted(ctx.live_brokers.values(), key=lambda b: b.id):
        brokers.append(
            {
                "id": b.id,
                "endpoints": [
                    {
                        "port": e.port,
                        "host": e.host,
                        "listener": e.listener,
                        "securityProtocol": SECURITY_PROTOCOL_IDS.get(e.security_protocol, 0),
                    }
                    for e in b.endpoints
                ],
                "rack": b.rack,
            }
        )
    return json.dumps(brokers, separators=(",", ":"))


def _leader_node(b: Broker) -> dict[str, Any]:
    host, port = (b.endpoints[0].host, b.endpoints[0].port) if b.endpoints else ("", -1)
    return {"brokerId": b.id, "hostName": host, "port": port}


@dataclass
class RequestBatch:
    """Requests collected during one step; see the module docstring."""

    leader_and_isr: dict[int, dict[TopicPartition, tuple[str, int]]] = field(default_factory=dict)
    update_metadata_brokers: set[int] = field(default_factory=set)
    update_metadata_partitions: dict[TopicPartition, str] = field(default_factory=dict)
    stop_replica: dict[int, dict[TopicPartition, tuple[int, bool]]] = field(default_factory=dict)
    responses: list[BrokerRequest] = field(default_factory=list)
    _new: set[tuple[int, TopicPartition]] = field(default_factory=set)

    def add_leader_and_isr(
        self,
        ctx: ControllerContext,
        broker_ids: Iterable[int],
        tp: TopicPartition,
        li: LeaderIsrAndControllerEpoch,
        assignment: ReplicaAssignment,
        *,
        is_new: bool,
    ) -> None:
        """Kafka's ``addLeaderAndIsrRequestForBrokers`` (also UpdateMetadata to every broker)."""
        state_new: str | None = None
        state_old: str | None = None
        for b in broker_ids:
            if b < 0:
                continue
            per = self.leader_and_isr.setdefault(b, {})
            key = (b, tp)
            new = is_new or key in self._new
            if new:
                self._new.add(key)
                if state_new is None:
                    state_new = _leader_and_isr_state(tp, li, assignment, True)
                per[tp] = (state_new, li.leader_and_isr.leader)
            else:
                if state_old is None:
                    state_old = _leader_and_isr_state(tp, li, assignment, False)
                per[tp] = (state_old, li.leader_and_isr.leader)
        self.add_update_metadata(ctx, ctx.live_brokers.keys(), (tp,))

    def add_update_metadata(
        self, ctx: ControllerContext, broker_ids: Iterable[int], tps: Iterable[TopicPartition]
    ) -> None:
        """Kafka's ``addUpdateMetadataRequestForBrokers``; partition states are taken now."""
        self.update_metadata_brokers.update(b for b in broker_ids if b >= 0)
        for tp in tps:
            s = update_metadata_state(ctx, tp)
            if s is not None:
                self.update_metadata_partitions[tp] = s

    def add_stop_replica(
        self, ctx: ControllerContext, broker_ids: Iterable[int], tp: TopicPartition, *, delete: bool
    ) -> None:
        """Kafka's ``addStopReplicaRequestForBrokers``."""
        if tp.topic in ctx.topics_to_be_deleted:
            epoch = EPOCH_DURING_DELETE
        else:
            li = ctx.partition_leadership.get(tp)
            epoch = li.leader_and_isr.leader_epoch if li is not None else NO_EPOCH
        for b in broker_ids:
            if b < 0:
                continue
            per = self.stop_replica.setdefault(b, {})
            prev = per.get(tp)
            per[tp] = (epoch, delete or (prev is not None and prev[1]))

    def is_empty(self) -> bool:
        return not (self.leader_and_isr or self.update_metadata_brokers or self.stop_replica or self.responses)

    def flush(self, ctx: ControllerContext) -> list[BrokerRequest]:
        """The batched requests, in Kafka's order, to registered brokers only; empties the batch."""
        out: list[BrokerRequest] = []
        live = ctx.live_brokers
        head = f'"controllerId":{ctx.controller_id},"controllerEpoch":{ctx.epoch}'
        for b in sorted(self.leader_and_isr):
            if b not in live:
                continue
            entries = self.leader_and_isr[b]
            states = {tp: s for tp, (s, _) in entries.items()}
            leader_ids = {leader for _, leader in entries.values()}
            leaders = [_leader_node(live[x]) for x in sorted(leader_ids) if x in live]
            body = (
                f'{{{head},"brokerEpoch":{live[b].epoch},"type":0,"topicStates":{_group_by_topic(ctx, states)},'
                f'"liveLeaders":{json.dumps(leaders, separators=(",", ":"))}}}'
            )
            out.append(BrokerRequest(b, RequestApi.LEADER_AND_ISR, body))
        if self.update_metadata_brokers:
            topic_states = _group_by_topic(ctx, self.update_metadata_partitions)
            live_json = _live_brokers_json(ctx)
            for b in sorted(self.update_metadata_brokers):
                if b not in live:
                    continue
                body = (
                    f'{{{head},"brokerEpoch":{live[b].epoch},"topicStates":{topic_states},"liveBrokers":{live_json}}}'
                )
                out.append(BrokerRequest(b, RequestApi.UPDATE_METADATA, body))
        for b in sorted(self.stop_replica):
            if b not in live:
                continue
            sstates = {
                tp: f'{{"partitionIndex":{tp.partition},"leaderEpoch":{e},"deletePartition":{_b(d)}}}'
                for tp, (e, d) in self.stop_replica[b].items()
            }
            body = f'{{{head},"brokerEpoch":{live[b].epoch},"topicStates":{_group_by_topic(ctx, sstates, False)}}}'
            out.append(BrokerRequest(b, RequestApi.STOP_REPLICA, body))
        # answers to a broker's own request go out even if it has just been fenced
        out.extend(self.responses)
        self.leader_and_isr = {}
        self.update_metadata_brokers = set()
        self.update_metadata_partitions = {}
        self.stop_replica = {}
        self.responses = []
        self._new = set()
        return out


@dataclass
class Effects:
    """Everything one step decides, in order: ZooKeeper writes, the request batch, admin results and
    per-item failures. :meth:`decisions` flattens them (ZooKeeper writes first, as Kafka writes
    ZooKeeper before it sends requests)."""

    zk: list[ZkWrite] = field(default_factory=list)
    batch: RequestBatch = field(default_factory=RequestBatch)
    admin: list[AdminResult] = field(default_factory=list)
    failures: list[StateChangeFailure] = field(default_factory=list)

    def fail(self, item: object, from_state: object, to_state: object, reason: str) -> None:
        self.failures.append(StateChangeFailure(str(item), str(from_state), str(to_state), reason))

    def decisions(self, ctx: ControllerContext) -> list[Decision]:
        out: list[Decision] = [*self.zk, *self.batch.flush(ctx), *self.admin, *self.failures]
        self.zk = []
        self.admin = []
        self.failures = []
        return out
