"""Kafka's admin APIs to the controller as livectl's admin commands, and livectl's admin results as their
responses, without a broker: each request (kio entities, read back from their wire form as the endpoint reads
them) becomes commands livectl's own decoder takes, and each answer the response Kafka's controller gives, at
the request's version. (Kafka's own tools against the channel: tests/e2e/test_kafka_admin_tools.py.)"""

from __future__ import annotations

import base64
import datetime
import itertools
import json
import uuid
from collections.abc import Mapping
from typing import Any

import pytest
from kio_wire import kio_module, wire

from channel.admin_apis import (
    ADMIN_SERVED,
    WHOLE_REQUEST,
    AdminApi,
    AdminAsk,
    CreateDefaults,
    TopicRef,
    admin_request_type,
)
from channel.admin_requests import admin_request
from channel.admin_results import admin_response, item_answers, timed_out
from channel.answers import SERVED, api_versions_response, request_type
from core.codec.events import event_from_json
from core.decisions import AdminResult, AdminStatus
from core.events import (
    CancelReassignment,
    CreatePartitions,
    CreateTopic,
    DeleteTopic,
    ElectLeaders,
    ReassignPartitions,
)
from core.model import ElectionType, PartitionTarget, TopicPartition

pytestmark = pytest.mark.unit

TID = base64.urlsafe_b64encode(uuid.UUID(int=7).bytes).decode().rstrip("=")


def _ms(n: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=n)


def _ids() -> Any:
    counter = itertools.count(1)
    return lambda: f"r{next(counter)}"


def _ask(api_key: int, version: int, request: Any, **kw: Any) -> AdminAsk:
    return admin_request(api_key, version, wire(request), _ids(), **kw)


def _commands(ask: AdminAsk) -> dict[str, Any]:
    """Each command as livectl's controller decodes it."""
    return {rid: event_from_json(text) for rid, text in ask.commands}


def _result(
    rid: str,
    status: AdminStatus,
    error: str | None = None,
    message: str = "",
    details: Mapping[str, Any] | None = None,
) -> AdminResult:
    return AdminResult(rid, "command", status, error, message, dict(details or {}))


def _respond(ask: AdminAsk, results: list[AdminResult]) -> Any:
    answers: dict[Any, Any] = {}
    for r in results:
        answers.update(item_answers(ask, r.request_id, r))
    return wire(admin_response(ask, answers))


def _codes(entries: Any, name: str = "name") -> dict[Any, tuple[int, str | None]]:
    return {getattr(e, name): (int(e.error_code.value), e.error_message) for e in entries}


# ---------------------------------------------------------------------------------------------- the endpoint


def test_the_endpoint_serves_the_admin_apis_at_kafka_39s_versions() -> None:
    kafka_39 = {19: range(0, 8), 20: range(0, 7), 37: range(0, 4), 43: range(0, 3), 45: range(0, 1)}
    assert dict(ADMIN_SERVED) == kafka_39
    for api_key, versions in ADMIN_SERVED.items():
        assert SERVED[api_key] == versions
        for v in versions:
            cls = request_type(api_key, v)
            assert cls is admin_request_type(api_key, v) and int(cls.__api_key__) == api_key
            assert int(cls.__version__) == v
    advertised = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in api_versions_response(3).api_keys}
    assert advertised[AdminApi.CREATE_TOPICS] == (0, 7) and advertised[AdminApi.ALTER_PARTITION_REASSIGNMENTS] == (0, 0)
    assert advertised[AdminApi.ELECT_LEADERS] == (0, 2) and advertised[AdminApi.DELETE_TOPICS] == (0, 6)
    assert advertised[AdminApi.CREATE_PARTITIONS] == (0, 3)


# ---------------------------------------------------------------------------------------------- CreateTopics


def _create_request(version: int, *topics: Any, validate_only: bool = False, timeout_ms: int = 30_000) -> Any:
    m = kio_module("create_topics", version, "request")
    extra = {"validate_only": validate_only} if version >= 1 else {}
    return m.CreateTopicsRequest(topics=tuple(topics), timeout=_ms(timeout_ms), **extra)


def _topic(
    version: int,
    name: str,
    partitions: int = -1,
    rf: int = -1,
    *,
    assignment: dict[int, list[int]] | None = None,
    configs: dict[str, str | None] | None = None,
) -> Any:
    m = kio_module("create_topics", version, "request")
    return m.CreatableTopic(
        name=name,
        num_partitions=partitions,
        replication_factor=rf,
        assignments=tuple(
            m.CreatableReplicaAssignment(partition_index=p, broker_ids=tuple(b)) for p, b in (assignment or {}).items()
        ),
        configs=tuple(m.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()),
    )


def test_create_topics_becomes_one_create_topic_per_topic_with_kafkas_defaults_for_minus_one() -> None:
    request = _create_request(
        7,
        _topic(7, "orders", configs={"retention.ms": "1000"}),
        _topic(7, "fixed", assignment={0: [1, 2], 1: [2, 3]}),
        _topic(7, "sized", 6, 3),
    )
    ask = _ask(AdminApi.CREATE_TOPICS, 7, request, defaults=CreateDefaults(num_partitions=4, replication_factor=2))
    assert ask.items == ("orders", "fixed", "sized") and ask.timeout_ms == 30_000 and not ask.validate_only
    assert _commands(ask) == {
        "r1": CreateTopic("r1", "orders", 4, 2, (), (("retention.ms", "1000"),)),
        "r2": CreateTopic("r2", "fixed", 2, 2, ((1, 2), (2, 3)), ()),
        "r3": CreateTopic("r3", "sized", 6, 3, (), ()),
    }
    assert dict(ask.covers) == {"r1": ("orders",), "r2": ("fixed",), "r3": ("sized",)}


def test_create_topics_answers_with_what_livectl_created_or_its_refusal() -> None:
    request = _create_request(7, _topic(7, "orders", 2, 2, configs={"retention.ms": "1000"}), _topic(7, "taken", 1, 1))
    ask = _ask(AdminApi.CREATE_TOPICS, 7, request)
    created = _result("r1", AdminStatus.OK, details={"topic_id": TID, "partitions": {"0": [1, 2], "1": [2, 3]}})
    exists = _result("r2", AdminStatus.ERROR, "TOPIC_ALREADY_EXISTS", "Topic 'taken' already exists.")
    response = _respond(ask, [created, exists])
    by_name = {t.name: t for t in response.topics}
    ok = by_name["orders"]
    assert int(ok.error_code.value) == 0 and ok.error_message is None
    assert ok.topic_id == uuid.UUID(int=7) and int(ok.num_partitions) == 2 and int(ok.replication_factor) == 2
    assert [(c.name, c.value, int(c.config_source)) for c in ok.configs] == [("retention.ms", "1000", 1)]
    refused = by_name["taken"]
    assert (int(refused.error_code.value), refused.error_message) == (36, "Topic 'taken' already exists.")
    assert int(refused.num_partitions) == -1 and refused.configs is None and refused.topic_id is None
    assert [t.name for t in response.topics] == ["orders", "taken"]


@pytest.mark.parametrize("version", range(0, 8))
def test_create_topics_every_version_round_trips(version: int) -> None:
    ask = _ask(AdminApi.CREATE_TOPICS, version, _create_request(version, _topic(version, "t", 1, 1)))
    assert [type(c) for c in _commands(ask).values()] == [CreateTopic]
    response = _respond(ask, [_result("r1", AdminStatus.ERROR, "INVALID_REPLICATION_FACTOR", "x")])
    assert int(response.topics[0].error_code.value) == 38
    assert getattr(response.topics[0], "error_message", "x") == "x"  # v0 carries no message


def test_create_topics_validate_only_is_a_dry_run_and_gets_no_topic_id() -> None:
    ask = _ask(AdminApi.CREATE_TOPICS, 7, _create_request(7, _topic(7, "t", 3, 1), validate_only=True))
    (command,) = _commands(ask).values()
    assert command == CreateTopic("r1", "t", 3, 1, (), (), dry_run=True)
    details = {"topic_id": TID, "partitions": {"0": [1], "1": [2], "2": [3]}, "dry_run": []}
    response = _respond(ask, [_result("r1", AdminStatus.OK, details=details)])
    (t,) = response.topics
    assert int(t.error_code.value) == 0 and t.topic_id is None and int(t.num_partitions) == 3


def test_create_topics_refusals_of_the_request_itself_are_kafkas() -> None:
    request = _create_request(
        7,
        _topic(7, "twice", 1, 1),
        _topic(7, "twice", 2, 1),
        _topic(7, "nulls", 1, 1, configs={"retention.ms": None, "cleanup.policy": None}),
        _topic(7, "both", 2, -1, assignment={0: [1]}),
    )
    ask = _ask(AdminApi.CREATE_TOPICS, 7, request)
    assert ask.commands == ()
    answers = _codes(_respond(ask, []).topics)
    assert answers["twice"] == (
        42,
        "Create topics request contains multiple entries for the following topics: twice",
    )
    assert answers["nulls"] == (40, "Null value not supported for topic configs: retention.ms,cleanup.policy")
    assert answers["both"] == (
        42,
        "Both numPartitions or replicationFactor and replicasAssignments were set. "
        "Both cannot be used at the same time.",
    )


def test_create_topics_livectls_decoder_refuses_what_it_would_reject_with_its_kafka_error() -> None:
    request = _create_request(
        7,
        _topic(7, "no partitions", 1, 1),
        _topic(7, "zero", 0, 1),
        _topic(7, "norf", 1, 0),
        _topic(7, "gaps", assignment={0: [1], 2: [2]}),
        _topic(7, "ok", 1, 1),
    )
    ask = _ask(AdminApi.CREATE_TOPICS, 7, request)
    assert [type(c).__name__ for c in _commands(ask).values()] == ["CreateTopic"]
    assert dict(ask.covers) == {"r5": ("ok",)}
    answers = _codes(_respond(ask, [_result("r5", AdminStatus.OK, details={"partitions": {"0": [1]}})]).topics)
    assert answers["no partitions"][0] == 17  # INVALID_TOPIC_EXCEPTION
    assert answers["zero"][0] == 37 and answers["norf"][0] == 38
    assert answers["gaps"][0] == 39 and "numbered 0..1" in str(answers["gaps"][1])
    assert answers["ok"] == (0, None)


def test_a_command_refused_at_livectls_edge_answers_with_the_limits_kafka_error() -> None:
    ask = _ask(AdminApi.CREATE_TOPICS, 7, _create_request(7, _topic(7, "t", 1, 1)))
    rejected = _result(
        "r1",
        AdminStatus.ERROR,
        "INVALID_REQUEST",
        "INVALID_PARTITIONS: partitions: 1 partitions of 1 replicas need more than one znode",
        {"kafka_error": "INVALID_PARTITIONS"},
    )
    (t,) = _respond(ask, [rejected]).topics
    assert (int(t.error_code.value), t.error_message) == (
        37,
        "partitions: 1 partitions of 1 replicas need more than one znode",
    )
    internal = _result("r1", AdminStatus.ERROR, "UNKNOWN_SERVER_ERROR", "boom", {"kafka_error": "x"})
    (t,) = _respond(ask, [internal]).topics
    assert (int(t.error_code.value), t.error_message) == (-1, "boom")


def test_timeout_zero_answers_what_livectl_accepted_request_timed_out_as_zkadminmanager() -> None:
    request = _create_request(7, _topic(7, "a", 1, 1), _topic(7, "b", 1, 1), timeout_ms=0)
    ask = _ask(AdminApi.CREATE_TOPICS, 7, request)
    answers = _codes(
        _respond(
            ask,
            [
                _result("r1", AdminStatus.OK, details={"partitions": {"0": [1]}}),
                _result("r2", AdminStatus.ERROR, "TOPIC_ALREADY_EXISTS", "Topic 'b' already exists."),
            ],
        ).topics
    )
    assert answers == {"a": (7, None), "b": (36, "Topic 'b' already exists.")}
    dry = _ask(AdminApi.CREATE_TOPICS, 7, _create_request(7, _topic(7, "a", 1, 1), timeout_ms=0, validate_only=True))
    (t,) = _respond(dry, [_result("r1", AdminStatus.OK, details={"partitions": {"0": [1]}})]).topics
    assert int(t.error_code.value) == 0


def test_an_unanswered_command_times_out_per_item() -> None:
    ask = _ask(AdminApi.CREATE_TOPICS, 7, _create_request(7, _topic(7, "a", 1, 1), _topic(7, "b", 1, 1)))
    answers = {**item_answers(ask, "r1", _result("r1", AdminStatus.OK)), **timed_out(ask, "r2", 30_000)}
    got = _codes(wire(admin_response(ask, answers)).topics)
    assert got["a"] == (0, None)
    assert got["b"][0] == 7 and "request id r2" in str(got["b"][1]) and "30000 ms" in str(got["b"][1])


# ---------------------------------------------------------------------------------------------- DeleteTopics


def _delete_request(version: int, *names: str, ids: tuple[tuple[str | None, uuid.UUID | None], ...] = ()) -> Any:
    m = kio_module("delete_topics", version, "request")
    if version >= 6:
        states = [m.DeleteTopicState(name=n, topic_id=None) for n in names]
        states += [m.DeleteTopicState(name=n, topic_id=i) for n, i in ids]
        return m.DeleteTopicsRequest(topics=tuple(states), timeout=_ms(30_000))
    return m.DeleteTopicsRequest(topic_names=names, timeout=_ms(30_000))


@pytest.mark.parametrize("version", range(0, 7))
def test_delete_topics_is_answered_when_livectl_started_the_deletion(version: int) -> None:
    ask = _ask(AdminApi.DELETE_TOPICS, version, _delete_request(version, "a", "b", "c", "a"))
    assert _commands(ask) == {"r1": DeleteTopic("r1", "a"), "r2": DeleteTopic("r2", "b"), "r3": DeleteTopic("r3", "c")}
    response = _respond(
        ask,
        [
            _result("r1", AdminStatus.IN_PROGRESS, message="Topic deletion started."),
            _result("r2", AdminStatus.ERROR, "UNKNOWN_TOPIC_OR_PARTITION", "Topic 'b' does not exist."),
            _result("r3", AdminStatus.ERROR, "TOPIC_DELETION_DISABLED", "Topic deletion is disabled."),
        ],
    )
    got = {r.name: int(r.error_code.value) for r in response.responses}
    # v0-2 clients know no TOPIC_DELETION_DISABLED: Kafka answers them INVALID_REQUEST
    assert got == {"a": 0, "b": 3, "c": 73 if version >= 3 else 42}
    if version >= 5:
        assert {r.name: r.error_message for r in response.responses}["b"] == "Topic 'b' does not exist."


def test_delete_topics_v6_by_id() -> None:
    names = {TID: "known"}
    request = _delete_request(6, ids=((None, uuid.UUID(int=7)), (None, uuid.UUID(int=9)), (None, None)))
    ask = _ask(AdminApi.DELETE_TOPICS, 6, request, topic_names=names.get)
    assert _commands(ask) == {"r1": DeleteTopic("r1", "known")}
    response = _respond(ask, [_result("r1", AdminStatus.OK)])
    got = {(r.name, r.topic_id): int(r.error_code.value) for r in response.responses}
    assert got == {("known", uuid.UUID(int=7)): 0, (None, uuid.UUID(int=9)): 100, (None, None): 100}


def test_delete_topics_v6_naming_a_topic_by_both_refuses_the_whole_request_as_kafka_39() -> None:
    request = _delete_request(6, "plain", ids=(("both", uuid.UUID(int=7)),))
    ask = _ask(AdminApi.DELETE_TOPICS, 6, request, topic_names={TID: "both"}.get)
    assert ask.commands == ()
    response = _respond(ask, [])
    assert {r.name: int(r.error_code.value) for r in response.responses} == {"plain": 42, "both": 42}
    assert {r.error_message for r in response.responses} == {"Topic name and topic ID can not both be specified."}
    assert TopicRef("plain") in ask.items


# ---------------------------------------------------------------------------------------------- CreatePartitions


def _partitions_request(
    version: int, *topics: tuple[str, int, list[list[int]] | None], validate_only: bool = False
) -> Any:
    m = kio_module("create_partitions", version, "request")
    return m.CreatePartitionsRequest(
        topics=tuple(
            m.CreatePartitionsTopic(
                name=n,
                count=c,
                assignments=None if a is None else tuple(m.CreatePartitionsAssignment(broker_ids=tuple(b)) for b in a),
            )
            for n, c, a in topics
        ),
        timeout=_ms(30_000),
        validate_only=validate_only,
    )


@pytest.mark.parametrize("version", range(0, 4))
def test_create_partitions_becomes_create_partitions(version: int) -> None:
    request = _partitions_request(version, ("t", 5, [[1, 2], [2, 3]]), ("u", 4, None), ("d", 2, None), ("d", 3, None))
    ask = _ask(AdminApi.CREATE_PARTITIONS, version, request)
    assert _commands(ask) == {
        "r1": CreatePartitions("r1", "t", 5, ((1, 2), (2, 3))),
        "r2": CreatePartitions("r2", "u", 4, ()),
    }
    response = _respond(
        ask,
        [
            _result("r1", AdminStatus.OK),
            _result(
                "r2",
                AdminStatus.ERROR,
                "REASSIGNMENT_IN_PROGRESS",
                "A partition reassignment is in progress for the topic 'u'.",
            ),
        ],
    )
    assert _codes(response.results) == {
        "t": (0, None),
        "u": (60, "A partition reassignment is in progress for the topic 'u'."),
        "d": (42, "Duplicate topic in request."),
    }


def test_create_partitions_validate_only_is_a_dry_run() -> None:
    ask = _ask(AdminApi.CREATE_PARTITIONS, 3, _partitions_request(3, ("t", 5, None), validate_only=True))
    assert _commands(ask) == {"r1": CreatePartitions("r1", "t", 5, (), dry_run=True)}
    refused = _result("r1", AdminStatus.ERROR, "INVALID_PARTITIONS", "no increase")
    assert _codes(_respond(ask, [refused]).results) == {"t": (37, "no increase")}


# ---------------------------------------------------------------------------------------------- ElectLeaders


def _elect_request(version: int, partitions: dict[str, list[int]] | None, election: int = 0) -> Any:
    m = kio_module("elect_leaders", version, "request")
    tps = (
        None
        if partitions is None
        else tuple(m.TopicPartitions(topic=t, partitions=tuple(p)) for t, p in partitions.items())
    )
    extra = {"election_type": election} if version >= 1 else {}
    return m.ElectLeadersRequest(topic_partitions=tps, timeout=_ms(30_000), **extra)


def _elected(response: Any) -> dict[str, tuple[int, str | None]]:
    return {
        f"{r.topic}-{p.partition_id}": (int(p.error_code.value), p.error_message)
        for r in response.replica_election_results
        for p in r.partition_result
    }


@pytest.mark.parametrize("version", range(0, 3))
def test_elect_leaders_of_listed_partitions(version: int) -> None:
    election = 1 if version >= 1 else 0
    ask = _ask(AdminApi.ELECT_LEADERS, version, _elect_request(version, {"my-topic": [0, 1, 2, 0], "x": [0]}, election))
    kind = ElectionType.UNCLEAN if election else ElectionType.PREFERRED
    tps = (
        TopicPartition("my-topic", 0),
        TopicPartition("my-topic", 1),
        TopicPartition("my-topic", 2),
        TopicPartition("x", 0),
    )
    assert _commands(ask) == {"r1": ElectLeaders("r1", kind, tps)}
    details = {
        "partitions": {
            "my-topic-0": {"error": "NONE"},
            "my-topic-1": {"error": "ELECTION_NOT_NEEDED", "message": "Leader election not needed"},
            "my-topic-2": {"error": "PREFERRED_LEADER_NOT_AVAILABLE", "message": "Failed to elect leader"},
            "x-0": {"error": "UNKNOWN_TOPIC_OR_PARTITION", "message": "The partition does not exist."},
        }
    }
    response = _respond(ask, [_result("r1", AdminStatus.ERROR, "PREFERRED_LEADER_NOT_AVAILABLE", "", details)])
    assert _elected(response) == {
        "my-topic-0": (0, None),
        "my-topic-1": (84, "Leader election not needed"),
        "my-topic-2": (80, "Failed to elect leader"),
        "x-0": (3, "The partition does not exist."),
    }
    if version >= 1:
        assert int(response.error_code.value) == 0


def test_elect_leaders_of_every_partition_lists_what_livectl_answered() -> None:
    ask = _ask(AdminApi.ELECT_LEADERS, 2, _elect_request(2, None))
    assert _commands(ask) == {"r1": ElectLeaders("r1", ElectionType.PREFERRED, ())}
    assert ask.every_partition and ask.covers == {"r1": ()}
    details = {
        "partitions": {"t-1": {"error": "NONE"}, "u-0": {"error": "PREFERRED_LEADER_NOT_AVAILABLE", "message": "m"}}
    }
    response = _respond(ask, [_result("r1", AdminStatus.ERROR, "PREFERRED_LEADER_NOT_AVAILABLE", "m", details)])
    assert _elected(response) == {"t-1": (0, None), "u-0": (80, "m")}
    late = wire(admin_response(ask, timed_out(ask, "r1", 500)))
    assert int(late.error_code.value) == 7 and late.replica_election_results == ()
    assert WHOLE_REQUEST not in ask.items


def test_elect_leaders_of_no_partition_elects_nothing() -> None:
    ask = _ask(AdminApi.ELECT_LEADERS, 2, _elect_request(2, {}))
    assert ask.commands == () and wire(admin_response(ask, {})).replica_election_results == ()


def test_elect_leaders_with_an_unknown_election_type() -> None:
    ask = _ask(AdminApi.ELECT_LEADERS, 1, _elect_request(1, {"t": [0]}, election=5))
    assert ask.commands == ()
    assert _elected(_respond(ask, [])) == {"t-0": (42, "Unknown election type: 5")}
    every = _ask(AdminApi.ELECT_LEADERS, 2, _elect_request(2, None, election=5))
    response = _respond(every, [])
    assert every.commands == () and int(response.error_code.value) == 42 and response.replica_election_results == ()


# ------------------------------------------------------------------------------- AlterPartitionReassignments


def _reassign_request(partitions: dict[str, dict[int, list[int] | None]]) -> Any:
    m = kio_module("alter_partition_reassignments", 0, "request")
    return m.AlterPartitionReassignmentsRequest(
        timeout=_ms(30_000),
        topics=tuple(
            m.ReassignableTopic(
                name=t,
                partitions=tuple(
                    m.ReassignablePartition(partition_index=p, replicas=None if r is None else tuple(r))
                    for p, r in ps.items()
                ),
            )
            for t, ps in partitions.items()
        ),
    )


def _moved(response: Any) -> dict[str, tuple[int, str | None]]:
    return {
        f"{t.name}-{p.partition_index}": (int(p.error_code.value), p.error_message)
        for t in response.responses
        for p in t.partitions
    }


def test_alter_partition_reassignments_starts_and_cancels() -> None:
    request = _reassign_request({"t": {0: [2, 3], 1: None, 2: [1, 1], 3: [3, 1]}, "u": {0: None}})
    ask = _ask(AdminApi.ALTER_PARTITION_REASSIGNMENTS, 0, request)
    assert _commands(ask) == {
        "r1": ReassignPartitions("r1", (PartitionTarget("t", 0, (2, 3)), PartitionTarget("t", 3, (3, 1)))),
        "r2": CancelReassignment("r2", (TopicPartition("t", 1), TopicPartition("u", 0))),
    }
    started = _result(
        "r1",
        AdminStatus.IN_PROGRESS,
        details={
            "partitions": {
                "t-0": {"error": "NONE"},
                "t-3": {
                    "error": "INVALID_REPLICA_ASSIGNMENT",
                    "message": "Replica assignment has brokers that are not alive.",
                },
            }
        },
    )
    cancelled = _result(
        "r2",
        AdminStatus.ERROR,
        "NO_REASSIGNMENT_IN_PROGRESS",
        "No reassignment in progress.",
        {
            "partitions": {
                "t-1": {"error": "NONE"},
                "u-0": {"error": "NO_REASSIGNMENT_IN_PROGRESS", "message": "No reassignment in progress."},
            }
        },
    )
    response = _respond(ask, [started, cancelled])
    assert int(response.error_code.value) == 0 and response.error_message is None
    got = _moved(response)
    assert got["t-0"] == (0, None) and got["t-1"] == (0, None)
    assert got["t-3"] == (39, "Replica assignment has brokers that are not alive.")
    assert got["u-0"] == (85, "No reassignment in progress.")
    # the replica list livectl's rule refuses (a broker twice) is answered by the channel, the others go on
    assert got["t-2"][0] == 39 and "partition t-2" in str(got["t-2"][1])
    assert list(got) == ["t-0", "t-1", "t-2", "t-3", "u-0"]


def test_alter_partition_reassignments_a_command_refused_whole_answers_each_partition() -> None:
    ask = _ask(AdminApi.ALTER_PARTITION_REASSIGNMENTS, 0, _reassign_request({"t": {0: [2], 1: [3]}}))
    refused = _result("r1", AdminStatus.ERROR, "UNKNOWN_SERVER_ERROR", "internal", {})
    assert _moved(_respond(ask, [refused])) == {"t-0": (-1, "internal"), "t-1": (-1, "internal")}


def test_a_result_of_another_request_answers_nothing() -> None:
    ask = _ask(AdminApi.ALTER_PARTITION_REASSIGNMENTS, 0, _reassign_request({"t": {0: [2]}}))
    assert item_answers(ask, "elsewhere", _result("elsewhere", AdminStatus.OK)) == {}


def test_commands_are_livectls_json() -> None:
    ask = _ask(AdminApi.CREATE_TOPICS, 7, _create_request(7, _topic(7, "t", 1, 1), validate_only=True))
    ((rid, text),) = ask.commands
    assert json.loads(text) == {
        "version": 1,
        "type": "create_topic",
        "request_id": rid,
        "topic": "t",
        "partitions": 1,
        "replication_factor": 1,
        "configs": {},
        "dry_run": True,
    }
