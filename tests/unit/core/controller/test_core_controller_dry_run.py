"""Dry runs (:mod:`core.controller.dry_run`): an admin command run dry leaves the bucket's state as it was,
reaches no sink, and answers with exactly the decisions the same command makes for real from that state."""

from __future__ import annotations

import dataclasses

import pytest
from core_support import Cluster, startup
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import core.events as ev
from core.codec.decisions import decision_from_json, decision_to_json
from core.codec.dry_run_details import read_dry_run
from core.codec.events import decode_event, encode_event, event_from_json, event_to_json
from core.controller import ControllerConfig, ControllerState, step
from core.decisions import AdminResult, AdminStatus, BrokerRequest, Decision, StateChangeFailure, ZkWrite
from core.errors import FormatError
from core.model import ElectionType, PartitionTarget, TopicPartition

pytestmark = pytest.mark.unit


def cluster() -> Cluster:
    """Six brokers; ``t`` (2 partitions on 1,2,3) and ``u`` (1 partition on 4,5,6) with 4 then stopped, so
    ``u-0`` is led by 5 (not its preferred leader)."""
    c = Cluster.start([1, 2, 3, 4, 5, 6], ControllerConfig(auto_leader_rebalance_enable=False))
    c.run(ev.CreateTopic("c-t", "t", replica_assignment=((1, 2, 3), (2, 3, 1))))
    c.run(ev.CreateTopic("c-u", "u", replica_assignment=((4, 5, 6),)))
    c.run(ev.BrokerFailure(4, 104))
    c.run(ev.BrokerStartup(4, 204, None, c.ctx.live_brokers[1].endpoints))
    return c


COMMANDS: list[ev.AdminCommand] = [
    ev.CreateTopic("x", "new", 3, 2),
    ev.CreateTopic("x", "new", 2, 2, ((1, 2), (2, 3))),
    ev.CreateTopic("x", "new", 1, 9),  # refused: more replicas than brokers
    ev.CreateTopic("x", "t", 1, 1),  # refused: exists
    ev.CreatePartitions("x", "t", 4),
    ev.CreatePartitions("x", "t", 1),  # refused: fewer
    ev.DeleteTopic("x", "t"),
    ev.ReassignPartitions("x", (PartitionTarget("t", 0, (4, 5, 6)), PartitionTarget("t", 1, (2, 3, 4)))),
    ev.ReassignPartitions("x", (PartitionTarget("t", 0, (1, 2, 9)),)),  # refused: no broker 9
    ev.CancelReassignment("x", (TopicPartition("t", 0),)),
    ev.ElectLeaders("x", ElectionType.PREFERRED, (TopicPartition("u", 0), TopicPartition("t", 0))),
    ev.ElectLeaders("x", ElectionType.PREFERRED),
    ev.AlterTopicConfig("x", "t", (("unclean.leader.election.enable", "true"),)),
    ev.AlterTopicConfig("x", "t", (("no.such.config", "1"),)),  # refused
]


def dry(cmd: ev.AdminCommand) -> ev.AdminCommand:
    return dataclasses.replace(cmd, dry_run=True)  # type: ignore[type-var]


def the_answer(decisions: list[Decision], rid: str = "x") -> AdminResult:
    (answer,) = [d for d in decisions if isinstance(d, AdminResult) and d.request_id == rid]
    return answer


@pytest.mark.parametrize("cmd", COMMANDS, ids=lambda c: f"{c.TYPE}")
def test_a_dry_run_changes_nothing_and_answers_the_real_steps_decisions(cmd: ev.AdminCommand) -> None:
    state = cluster().state
    after_dry, dry_decisions = step(state, [dry(cmd)])
    # nothing applied: the state is the same, the only decision is the answer (no write, no request)
    assert after_dry.to_dict() == state.to_dict()
    answer = the_answer(dry_decisions)
    assert dry_decisions == [answer]

    after_real, real_decisions = step(state, [cmd])
    report = read_dry_run(answer.details)
    assert report is not None
    assert list(report.decisions) == real_decisions  # decision for decision, in the step's order
    real_answer = [d for d in real_decisions if isinstance(d, AdminResult) and d.request_id == "x"][-1]
    assert (answer.status, answer.error, answer.message) == (real_answer.status, real_answer.error, real_answer.message)
    assert answer.command == cmd.TYPE
    # the partitions it would change, as the real step leaves them
    ctx = after_real.context
    for p in report.partitions:
        tp = TopicPartition(p.topic, p.partition)
        li = ctx.leader_and_isr(tp)
        assert p.state == ctx.partition_state(tp).value
        assert (p.leader, p.isr) == ((li.leader, li.isr) if li else (-1, ()))
        assert p.replicas == (ctx.replicas(tp) if tp in ctx.partition_assignments else ())
    if answer.status is AdminStatus.ERROR:
        assert not any(isinstance(d, ZkWrite | BrokerRequest) for d in report.decisions)
        assert report.partitions == ()


def test_the_refusal_and_its_reason_are_the_answer() -> None:
    (answer,) = step(cluster().state, [dry(ev.CreateTopic("x", "new", 1, 9))])[1]
    assert isinstance(answer, AdminResult)
    assert (answer.status, answer.error) == (AdminStatus.ERROR, "INVALID_REPLICATION_FACTOR")
    assert answer.message


def test_a_creation_shows_its_writes_requests_and_leaders() -> None:
    (answer,) = step(cluster().state, [dry(ev.CreateTopic("x", "new", replica_assignment=((1, 2), (2, 3))))])[1]
    assert isinstance(answer, AdminResult)
    report = read_dry_run(answer.details)
    assert report is not None
    paths = [d.path for d in report.decisions if isinstance(d, ZkWrite)]
    assert "/brokers/topics/new" in paths and "/brokers/topics/new/partitions/0/state" in paths
    lisr = {d.broker_id for d in report.decisions if isinstance(d, BrokerRequest) and d.api.name == "LEADER_AND_ISR"}
    assert lisr == {1, 2, 3}
    rows = {(p.partition, p.leader, p.isr, p.state) for p in report.partitions}
    assert rows == {(0, 1, (1, 2), "OnlinePartition"), (1, 2, (2, 3), "OnlinePartition")}


def test_in_stream_order_the_dry_run_sees_the_events_before_it_and_leaves_the_rest_alone() -> None:
    state = cluster().state
    before = ev.CreateTopic("a", "new", 2, 2)
    after = ev.ReassignPartitions("b", (PartitionTarget("t", 0, (4, 5, 6)),))
    probe = ev.CreatePartitions("x", "new", 3)
    with_dry, decisions = step(state, [before, dry(probe), after])
    without, plain = step(state, [before, after])
    assert with_dry.to_dict() == without.to_dict()
    assert [d for d in decisions if not (isinstance(d, AdminResult) and d.request_id == "x")] == plain
    # the dry run's decisions are those of the command right after ``before`` (it saw the new topic)
    mid, _ = step(state, [before])
    report = read_dry_run(the_answer(decisions).details)
    assert report is not None
    assert list(report.decisions) == step(mid, [probe])[1]
    assert the_answer(decisions).status is AdminStatus.OK


def test_a_dry_run_is_answered_through_the_states_bytes_too() -> None:
    state = ControllerState.from_bytes(cluster().state.to_bytes())
    cmd = ev.ReassignPartitions("x", (PartitionTarget("t", 0, (4, 5, 6)),))
    answer = the_answer(step(state, [dry(cmd)])[1])
    assert answer.status is AdminStatus.IN_PROGRESS
    report = read_dry_run(answer.details)
    assert report is not None
    (row,) = report.partitions
    assert (row.replicas, row.adding_replicas, row.removing_replicas) == ((4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3))
    assert not any(isinstance(d, StateChangeFailure) for d in report.decisions)


# ------------------------------------------------------------------------------------------------ the codec


@pytest.mark.parametrize("cmd", COMMANDS, ids=lambda c: f"{c.TYPE}")
def test_dry_run_travels_in_the_commands_json_and_is_absent_when_false(cmd: ev.AdminCommand) -> None:
    assert "dry_run" not in encode_event(cmd)
    assert encode_event(dry(cmd))["dry_run"] is True
    plain = decode_event(encode_event(cmd))
    assert isinstance(plain, ev.AdminCommand)
    assert not plain.dry_run
    assert event_from_json(event_to_json(dry(cmd))) == dry(plain)


def test_a_bad_dry_run_flag_is_refused_naming_the_field() -> None:
    with pytest.raises(FormatError) as e:
        decode_event({**encode_event(ev.DeleteTopic("x", "t")), "dry_run": "yes"})
    assert e.value.field == "dry_run"


def test_the_answer_round_trips_through_its_json() -> None:
    answer = the_answer(step(cluster().state, [dry(ev.CreatePartitions("x", "t", 4))])[1])
    again = decision_from_json(decision_to_json(answer))
    assert isinstance(again, AdminResult)
    assert read_dry_run(again.details) == read_dry_run(answer.details)
    assert read_dry_run(AdminResult("y", "delete_topic", AdminStatus.OK).details) is None


def test_a_malformed_dry_run_entry_is_refused_naming_it() -> None:
    details = {"dry_run": [], "dry_run_partitions": [{"topic": 1}]}
    bad = AdminResult("y", "create_topic", AdminStatus.OK, details=details)
    with pytest.raises(FormatError) as e:
        read_dry_run(bad.details)
    assert e.value.field.startswith("dry_run_partitions[0].")


# ------------------------------------------------------------------------------------------ random clusters

ACTIONS = ("create", "grow", "reassign", "cancel", "elect", "unclean", "delete", "config", "fail", "start", "ack")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.sampled_from(ACTIONS),
            st.integers(0, 10),
            st.lists(st.integers(1, 5), min_size=1, max_size=3, unique=True),
        ),
        min_size=1,
        max_size=20,
    )
)
def test_on_random_clusters_every_dry_run_is_the_real_step_and_changes_nothing(
    actions: list[tuple[str, int, list[int]]],
) -> None:
    c = Cluster.start([1, 2, 3, 4, 5])
    c.run(ev.CreateTopic("c0", "t0", 2, 2))
    epoch = 1000
    for n, (action, a, brokers) in enumerate(actions):
        tps = sorted(c.ctx.partition_assignments)
        topics = sorted(c.ctx.topic_partitions)
        tp = tps[a % len(tps)] if tps else TopicPartition("t0", 0)
        topic = topics[a % len(topics)] if topics else "t0"
        rid = f"r{n}"
        command: ev.AdminCommand | None = {
            "create": ev.CreateTopic(rid, f"t{n}", 1 + a % 3, len(brokers)),
            "grow": ev.CreatePartitions(rid, topic, 1 + a % 5),
            "reassign": ev.ReassignPartitions(rid, (PartitionTarget(tp.topic, tp.partition, tuple(brokers)),)),
            "cancel": ev.CancelReassignment(rid, (tp,)),
            "elect": ev.ElectLeaders(rid, ElectionType.PREFERRED, (tp,) if a % 2 else ()),
            "unclean": ev.ElectLeaders(rid, ElectionType.UNCLEAN, (tp,)),
            "delete": ev.DeleteTopic(rid, topic),
            "config": ev.AlterTopicConfig(rid, topic, (("unclean.leader.election.enable", "true"),)),
        }.get(action)
        if command is not None:
            state = c.state
            after, (answer,) = step(state, [dry(command)])
            assert after.to_dict() == state.to_dict()
            assert isinstance(answer, AdminResult)
            report = read_dry_run(answer.details)
            assert report is not None
            real = c.run(command)
            assert list(report.decisions) == real
        elif action == "fail":
            c.run(ev.BrokerFailure(brokers[0]))
        elif action == "start":
            epoch += 1
            c.run(startup(brokers[0], epoch=epoch))
        else:
            c.ack_stop_replicas()
