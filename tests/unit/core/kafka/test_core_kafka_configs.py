"""Kafka's topic / dynamic broker config validation (core.kafka.configs) and the controller refusing bad ones."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from core.codec.events import decode_event, encode_event
from core.controller import ControllerState, initial_state, step
from core.decisions import AdminResult, AdminStatus
from core.errors import FormatError
from core.events import AlterTopicConfig, BrokerStartup, CreateTopic
from core.kafka.configs import (
    TOPIC_CONFIGS,
    broker_configs_problem,
    config_problem,
    parse_throttled_replicas,
    topic_configs_problem,
)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("name", "value", "problem"),
    [
        ("foo", "bar", "Unknown topic config name: foo"),
        ("retention.ms", "", "Invalid value  for configuration retention.ms: Not a number of type LONG"),
        ("retention.ms", "-2", "Invalid value -2 for configuration retention.ms: Value must be at least -1"),
        ("retention.ms", "9223372036854775808", "Not a number of type LONG"),
        ("segment.bytes", "13", "Value must be at least 14"),
        ("segment.bytes", "2147483648", "Not a number of type INT"),
        ("min.insync.replicas", "0", "Value must be at least 1"),
        ("min.cleanable.dirty.ratio", "1.5", "Value must be no more than 1"),
        ("min.cleanable.dirty.ratio", "x", "Not a number of type DOUBLE"),
        ("unclean.leader.election.enable", "yes", "Expected value to be either true or false"),
        ("cleanup.policy", "compact,forever", "String must be one of: compact, delete (not forever)"),
        ("compression.type", "brotli", "String must be one of: uncompressed, zstd"),
        ("message.timestamp.type", "Now", "String must be one of: CreateTime, LogAppendTime"),
        ("leader.replication.throttled.replicas", "0:1,x", "must be the literal '*' or a list of replicas"),
    ],
)
def test_bad_topic_configs_are_named_with_the_reason(name: str, value: str, problem: str) -> None:
    got = topic_configs_problem({name: value})
    assert got is not None and problem in got


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("retention.ms", "-1"),
        ("retention.bytes", "-5"),
        ("cleanup.policy", "compact,delete"),
        ("min.cleanable.dirty.ratio", "0.5"),
        ("unclean.leader.election.enable", "TRUE"),
        ("leader.replication.throttled.replicas", "*"),
        ("follower.replication.throttled.replicas", "0:1,1:2"),
        ("follower.replication.throttled.replicas", ""),
        ("message.format.version", "2.1-IV0"),
    ],
)
def test_good_topic_configs_pass(name: str, value: str) -> None:
    assert config_problem(name, value, TOPIC_CONFIGS) is None


def test_compaction_lags_are_cross_checked_as_kafka_does() -> None:
    got = topic_configs_problem({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})
    assert got == "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"


def test_broker_configs() -> None:
    assert broker_configs_problem({"leader.replication.throttled.rate": "1000"}) is None
    assert broker_configs_problem({"follower.replication.throttled.rate": "-1"}) == (
        "Invalid value -1 for configuration follower.replication.throttled.rate: Value must be at least 0"
    )
    assert broker_configs_problem({"log.foo": "1"}) == "Unknown broker config name: log.foo"


def test_the_gentle_leader_balance_bound_is_a_broker_config() -> None:
    """``leader.imbalance.max.leaders.per.interval`` is read live from ``/config/brokers/<default>`` (issue 44,
    item 4): ``livectl configs --entity-default --alter`` takes it, with the controller's own range (at least 1,
    an INT), as Kafka's kafka-configs takes a custom broker config. Tried live, it was refused as unknown."""
    name = "leader.imbalance.max.leaders.per.interval"
    assert broker_configs_problem({name: "50"}) is None
    assert broker_configs_problem({name: "2147483647"}) is None
    assert broker_configs_problem({name: "0"}) == f"Invalid value 0 for configuration {name}: Value must be at least 1"
    assert (
        broker_configs_problem({name: "many"})
        == f"Invalid value many for configuration {name}: Not a number of type INT"
    )


def test_parse_throttled_replicas() -> None:
    assert parse_throttled_replicas("*") is None
    assert parse_throttled_replicas("0:1, 1:2") == frozenset({(0, 1), (1, 2)})
    assert parse_throttled_replicas("") == frozenset()


def _results(decisions: Sequence[object]) -> list[AdminResult]:
    return [d for d in decisions if isinstance(d, AdminResult)]


def _cluster() -> ControllerState:
    state, _ = step(initial_state(), [BrokerStartup(1, 10)])
    return state


def test_controller_refuses_unknown_and_bad_topic_configs() -> None:
    state = _cluster()
    state, out = step(state, [CreateTopic("c1", "t", 1, 1, (), (("retention.ms", ""),))])
    (res,) = _results(out)
    assert res.status is AdminStatus.ERROR and res.error == "INVALID_CONFIG" and "retention.ms" in res.message
    state, out = step(state, [CreateTopic("c2", "t", 1, 1, (), (("retention.ms", "1000"),))])
    assert _results(out)[0].status is AdminStatus.OK
    state, out = step(state, [AlterTopicConfig("a1", "t", (("foo", "bar"),))])
    (res,) = _results(out)
    assert (res.error, res.message) == ("INVALID_CONFIG", "Unknown topic config name: foo")


def test_controller_deletes_config_overrides() -> None:
    state = _cluster()
    configs = (("retention.ms", "1000"), ("unclean.leader.election.enable", "true"))
    state, _ = step(state, [CreateTopic("c", "t", 1, 1, (), configs)])
    state, out = step(state, [AlterTopicConfig("a", "t", (), ("unclean.leader.election.enable",))])
    assert _results(out)[0].status is AdminStatus.OK
    assert state.context.topic_configs["t"] == {"retention.ms": "1000"}
    assert "t" not in state.context.unclean_leader_election


def test_delete_configs_round_trip_and_validation() -> None:
    cmd = AlterTopicConfig("r", "t", (("retention.ms", "1"),), ("cleanup.policy",))
    assert decode_event(encode_event(cmd)) == cmd
    with pytest.raises(FormatError) as e:
        decode_event({"version": 1, "type": "alter_topic_config", "request_id": "r", "topic": "t", "configs": {}})
    assert e.value.field == "configs"
    both = {
        "version": 1,
        "type": "alter_topic_config",
        "request_id": "r",
        "topic": "t",
        "configs": {"a": "1"},
        "delete_configs": ["a"],
    }
    with pytest.raises(FormatError) as e:
        decode_event(both)
    assert e.value.field == "delete_configs"
