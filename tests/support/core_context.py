"""A hand-built controller context for the tests of the parts the controller's handlers share (the one
leader/ISR write, each state machine's startup, topic deletion's queue), and readers of their effects."""

from __future__ import annotations

import json
from collections.abc import Sequence

from core.context import ControllerContext
from core.decisions import BrokerRequest, ZkOp
from core.kafka.requests import RequestApi
from core.model import Broker, Endpoint, ReplicaAssignment, TopicPartition
from core.request_batch import Effects

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
T2 = TopicPartition("t", 2)


def cluster(live: tuple[int, ...], partitions: dict[TopicPartition, tuple[int, ...]]) -> ControllerContext:
    ctx = ControllerContext(controller_id=0, epoch=2)
    for b in live:
        ctx.add_live_broker(Broker(b, 10 + b, None, (Endpoint("PLAINTEXT", f"h{b}", 9000 + b),)))
    for tp, replicas in partitions.items():
        ctx.set_assignment(tp, ReplicaAssignment(replicas))
        ctx.topic_ids.setdefault(tp.topic, "AAAAAAAAAAAAAAAAAAAAAQ")
    return ctx


def state_writes(fx: Effects) -> dict[str, tuple[ZkOp, dict[str, object], int]]:
    return {w.path: (w.op, json.loads(w.data or "null"), w.expected_version) for w in fx.zk}


def sent(decisions: Sequence[object], api: RequestApi) -> list[int]:
    return sorted(d.broker_id for d in decisions if isinstance(d, BrokerRequest) and d.api is api)
