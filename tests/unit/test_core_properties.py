"""Hypothesis: random clusters, random event sequences, Kafka's invariants after every step."""

from __future__ import annotations

import json
from typing import Any

import pytest
from core_support import Cluster, startup
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.controller import ControllerConfig
from core.decisions import AdminResult, AdminStatus, ZkOp, ZkWrite
from core.events import (
    AlterTopicConfig,
    BrokerFailure,
    CancelReassignment,
    ControlledShutdown,
    CreateTopic,
    DeleteTopic,
    ElectLeaders,
    Event,
    ReassignPartitions,
)
from core.model import ElectionType, PartitionTarget, TopicPartition

pytestmark = pytest.mark.unit

ACTIONS = (
    "fail",
    "start",
    "catch_up",
    "shutdown",
    "reassign",
    "cancel",
    "elect",
    "unclean",
    "delete",
    "ack",
    "failover",
    "unclean_config",
)


@st.composite
def scenarios(draw: Any) -> tuple[int, list[tuple[int, int]], list[tuple[str, int, int, list[int]]]]:
    n = draw(st.integers(3, 5))
    topics = draw(st.lists(st.tuples(st.integers(1, 3), st.integers(1, 3)), min_size=1, max_size=3))
    topics = [(p, min(rf, n)) for p, rf in topics]
    actions = draw(
        st.lists(
            st.tuples(
                st.sampled_from(ACTIONS),
                st.integers(0, 10),
                st.integers(0, 10),
                st.lists(st.integers(0, n - 1), min_size=1, max_size=3, unique=True),
            ),
            max_size=25,
        )
    )
    return n, topics, actions


class Checker:
    def __init__(self, c: Cluster) -> None:
        self.c = c
        self.epochs: dict[str, int] = {}
        self.deleted: set[str] = set()

    def run(self, *events: Event, alter: bool = False, unclean_ok: set[str] | None = None) -> None:
        c = self.c
        before = dict(c.zk.nodes)
        ds = events and c.run(*events) if alter else c.run(*events)
        self.check_step(before, [d for d in (ds or []) if isinstance(d, ZkWrite)], alter, unclean_ok or set())

    def check_step(self, before: dict[str, Any], writes: list[ZkWrite], alter: bool, unclean_ok: set[str]) -> None:
        ctx = self.c.ctx
        for w in writes:
            if w.path.endswith("/state") and w.op in (ZkOp.SET, ZkOp.CREATE):
                new = json.loads(w.data or "")
                assert new["isr"], f"empty ISR written to {w.path}"
                old_raw = before.get(w.path)
                topic = w.path.split("/")[3]
                if old_raw and old_raw[0]:
                    old = json.loads(old_raw[0])
                    if new["leader"] != old["leader"] or (new["isr"] != old["isr"] and not alter):
                        assert new["leader_epoch"] > old["leader_epoch"], (w.path, old, new)
                    assert new["leader_epoch"] >= old["leader_epoch"]
                    if new["leader"] >= 0 and new["leader"] not in old["isr"]:
                        assert topic in unclean_ok or ctx.unclean_enabled(topic), f"unclean election on {topic}"
                before[w.path] = (w.data, 0)
        for tp, li in ctx.partition_leadership.items():
            lai = li.leader_and_isr
            assert lai.leader == -1 or lai.leader in lai.isr, (tp, lai)
            assert lai.isr and set(lai.isr) <= set(ctx.replicas(tp)), (tp, lai, ctx.assignment(tp))
            key = str(tp)
            assert lai.leader_epoch >= self.epochs.get(key, 0)
            self.epochs[key] = lai.leader_epoch
        for topic in list(self.deleted):
            if topic in ctx.topic_partitions:
                self.deleted.discard(topic)
                continue
            assert not any(p.startswith(f"/brokers/topics/{topic}") for p in self.c.zk.nodes)
            assert not any(pr.topic == topic for pr in ctx.replica_states)
            for k in [k for k in self.epochs if k.startswith(topic + "-")]:
                del self.epochs[k]

    def catch_up_all(self) -> None:
        ctx = self.c.ctx
        for tp in sorted(ctx.partition_leadership):
            lai = self.c.ctx.leader_and_isr(tp)
            if lai is None or lai.leader < 0 or lai.leader not in self.c.ctx.live_broker_ids:
                continue
            live = self.c.ctx.live_broker_ids
            if all(r in lai.isr for r in self.c.ctx.replicas(tp) if r in live):
                continue
            before = dict(self.c.zk.nodes)
            self.c.catch_up(tp)
            self.check_step(before, [d for d in self.c.decisions if isinstance(d, ZkWrite)], True, set())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_random_event_sequences_keep_kafkas_invariants(
    scenario: tuple[int, list[tuple[int, int]], list[tuple[str, int, int, list[int]]]],
) -> None:
    n, topics, actions = scenario
    c = Cluster.start(list(range(n)), ControllerConfig())
    chk = Checker(c)
    for i, (parts, rf) in enumerate(topics):
        chk.run(CreateTopic(f"c{i}", f"t{i}", parts, rf))
    epoch = 1000
    targets: dict[TopicPartition, tuple[int, ...]] = {}
    for step_no, (action, a, b, brokers) in enumerate(actions):
        ctx = c.ctx
        topic_names = sorted(ctx.topic_partitions)
        tps = sorted(ctx.partition_assignments)
        tp = tps[a % len(tps)] if tps else None
        broker = brokers[0]
        if action == "fail":
            chk.run(BrokerFailure(broker))
        elif action == "start":
            epoch += 1
            chk.run(startup(broker, epoch=epoch))
        elif action == "catch_up":
            chk.catch_up_all()
        elif action == "shutdown" and broker in ctx.live_brokers:
            chk.run(ControlledShutdown(broker, ctx.live_brokers[broker].epoch))
        elif action == "reassign" and tp is not None:
            chk.run(ReassignPartitions(f"r{step_no}", (PartitionTarget(tp.topic, tp.partition, tuple(brokers)),)))
            if any(isinstance(d, AdminResult) and d.status is not AdminStatus.ERROR for d in c.decisions):
                targets[tp] = tuple(brokers)
        elif action == "cancel" and tp is not None:
            chk.run(CancelReassignment(f"x{step_no}", (tp,)))
            targets.pop(tp, None)
        elif action == "elect" and tp is not None:
            chk.run(ElectLeaders(f"e{step_no}", ElectionType.PREFERRED, (tp,)))
        elif action == "unclean" and tp is not None:
            chk.run(ElectLeaders(f"u{step_no}", ElectionType.UNCLEAN, (tp,)), unclean_ok={tp.topic})
        elif action == "delete" and topic_names:
            t = topic_names[b % len(topic_names)]
            chk.run(DeleteTopic(f"d{step_no}", t))
            chk.deleted.add(t)
        elif action == "ack":
            before = dict(c.zk.nodes)
            c.ack_stop_replicas()
            chk.check_step(before, [d for d in c.decisions if isinstance(d, ZkWrite)], False, set())
        elif action == "failover":
            before = dict(c.zk.nodes)
            c.failover()
            chk.check_step(before, [d for d in c.decisions if isinstance(d, ZkWrite)], False, set())
        elif action == "unclean_config" and topic_names:
            t = topic_names[b % len(topic_names)]
            chk.run(AlterTopicConfig(f"a{step_no}", t, (("unclean.leader.election.enable", "true"),)))
    # bring every broker back and let the brokers catch up: every reassignment finishes
    for broker in range(n):
        if broker not in c.ctx.live_brokers or broker in c.ctx.shutting_down_broker_ids:
            if broker in c.ctx.shutting_down_broker_ids:
                chk.run(BrokerFailure(broker))
            epoch += 1
            chk.run(startup(broker, epoch=epoch))
    for _ in range(4):
        chk.catch_up_all()
    for tp in c.ctx.partition_assignments:
        if tp.topic in c.ctx.topics_to_be_deleted:
            continue  # elections skip topics queued for deletion; Kafka can stall these too
        ra = c.ctx.assignment(tp)
        assert not ra.is_being_reassigned, (tp, ra)
        if tp in targets:
            assert ra.replicas == targets[tp], (tp, ra, targets[tp])
    assert all(tp.topic in c.ctx.topics_to_be_deleted for tp in c.ctx.partitions_being_reassigned)
