"""The workloads benchmarks share: a controller state of N brokers and partitions in Kafka's layout, its
ZooKeeper snapshot, the decisions of a broker failure or a failover for one bucket or several, and the
decision rows decoded as the driver decodes them."""

from __future__ import annotations

import gc
import time
from typing import Any

import orjson

from core import controller
from core import decisions as dc
from core import events as ev
from core.codec.decisions import decode_decision
from core.context import ControllerContext
from core.controller import ControllerState
from core.kafka.zkdata import encode_partition_state, encode_topic_znode
from core.kafka.zksnapshot import snapshot_from_znodes
from core.model import Broker, Endpoint, LeaderAndIsr, PartitionReplica, ReplicaAssignment, TopicPartition
from core.placement import BrokerRack, assign_replicas
from core.snapshot import ZkSnapshot
from core.states import PartitionState, ReplicaState
from streaming.query.batch_rows import decode_row
from streaming.query.stateful import decision_rows
from streaming.runtime.collector import gc_paused


def build_state(n_brokers: int, n_partitions: int, rf: int, per_topic: int) -> ControllerState:
    """A bucket's state: ``n_brokers`` live brokers, ``n_partitions`` partitions in topics of ``per_topic``
    (Kafka's default placement, replication factor ``rf``), every partition and replica online."""
    ctx = ControllerContext(controller_id=0, epoch=1, epoch_zk_version=0)
    for b in range(n_brokers):
        ctx.add_live_broker(Broker(b, 1000 + b, None, (Endpoint("PLAINTEXT", f"broker{b}", 9092),)))
    brokers = [BrokerRack(b) for b in range(n_brokers)]
    n_topics = n_partitions // per_topic
    for t in range(n_topics):
        topic = f"topic-{t:05d}"
        ctx.topic_ids[topic] = f"{t:022d}"
        placed = assign_replicas(brokers, per_topic, rf, start_index=t % n_brokers)
        for p, reps in placed.items():
            tp = TopicPartition(topic, p)
            ctx.set_assignment(tp, ReplicaAssignment(reps))
            ctx.put_leadership(tp, LeaderAndIsr(reps[0], reps, 0, 0), 1)
            ctx.put_partition_state(tp, PartitionState.ONLINE)
            for r in reps:
                ctx.replica_states[PartitionReplica(topic, p, r)] = ReplicaState.ONLINE
    return ControllerState(ctx)


def snapshot_for(
    state: controller.ControllerState, dead: frozenset[int] = frozenset(), to_delete: tuple[str, ...] = ()
) -> ZkSnapshot:
    """The ZooKeeper snapshot a new controller would read for this bucket's topics; the brokers of ``dead``
    not registered (their replicas offline), the topics of ``to_delete`` under ``/admin/delete_topics``."""
    ctx = state.context
    znodes: dict[str, tuple[str | None, int]] = {f"/admin/delete_topics/{t}": (None, 0) for t in to_delete}
    by_topic: dict[str, dict[int, Any]] = {}
    for tp, ra in ctx.partition_assignments.items():
        by_topic.setdefault(tp.topic, {})[tp.partition] = ra
    for topic, parts in by_topic.items():
        znodes[f"/brokers/topics/{topic}"] = (encode_topic_znode(parts, None), 0)
    for tp, li in ctx.partition_leadership.items():
        znodes[f"/brokers/topics/{tp.topic}/partitions/{tp.partition}/state"] = (
            encode_partition_state(li.leader_and_isr, 1),
            0,
        )
    brokers = [Broker(b.id, b.epoch, b.rack, b.endpoints) for b in ctx.live_brokers.values() if b.id not in dead]
    return snapshot_from_znodes(znodes, brokers, 2, 1)


def event_decisions(per_bucket: int, event: str) -> list[dc.Decision]:
    """One bucket's decisions for ``event``."""
    state = build_state(10, per_bucket, 3, 100)
    if event == "failover":
        _, decisions = controller.step(controller.ControllerState(), [ev.ControllerFailover(1000, snapshot_for(state))])
    elif event == "failure":
        _, decisions = controller.step(state, [ev.BrokerFailure(1, 1001)])
    elif event == "double":
        _, decisions = controller.step(state, [ev.BrokerFailure(1, 1001), ev.BrokerFailure(2, 1002)])
    elif event == "return":
        after, _ = controller.step(state, [ev.BrokerFailure(1, 1001)])
        _, decisions = controller.step(
            after, [ev.BrokerStartup(1, 2001, None, (Endpoint("PLAINTEXT", "broker1", 9092),))]
        )
    else:
        raise ValueError(f"unknown event {event!r}")
    return list(decisions)


def bucket_decisions(per_bucket: int, buckets: int, event: str, *, per_broker: bool = False) -> tuple[list[str], float]:
    """Decision-row payloads of ``buckets`` buckets (topic names made distinct per bucket), and the time
    one bucket took to encode its rows. ``per_broker``: the shared UpdateMetadata fanned out into one
    request per broker first (what the core built before it was shared: the baseline)."""
    state = build_state(10, per_bucket, 3, 100)
    if event == "failure":
        _, decisions = controller.step(state, [ev.BrokerFailure(1, 1001)])
    else:
        _, decisions = controller.step(controller.ControllerState(), [ev.ControllerFailover(1000, snapshot_for(state))])
    if per_broker:
        decisions = [r for d in decisions for r in (d.fan_out() if isinstance(d, dc.BrokerRequest) else [d])]
    gc.collect()
    t0 = time.perf_counter()
    payloads = [r[3] for r in decision_rows(0, decisions)]
    encode_s = time.perf_counter() - t0
    out: list[str] = []
    for b in range(buckets):
        out.extend(p.replace("topic-", f"b{b}-topic-") for p in payloads)
    return out, encode_s


def decode_rows(payloads: list[str], typed: bool = False) -> list[dc.Decision]:
    """The rows decoded as the dispatcher decodes them (collector paused); ``typed``: request bodies
    rebuilt into typed values as well."""
    with gc_paused():
        if typed:
            return [decode_decision(orjson.loads(x), typed=True) for x in payloads]
        return [decode_row(x) for x in payloads]
