"""Kafka's limits at the edge, and bad input costing only itself (issue 17, item 4).

The decoder and the core with plain values; the sinks' size limits on the message encoders; the
quarantine of an event whose handling raises; the merge of one batch's admin results.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from core_support import Cluster

from core import controller
from core import events as ev
from core import limits as lim
from core.codec.decisions import read_details
from core.codec.events import event_from_json
from core.codec.values import TOPIC_NAME_REGEX
from core.controller import ControllerConfig, event_loop, step_isolating
from core.decisions import AdminResult, AdminStatus
from core.errors import FormatError
from core.model import PartitionTarget, TopicPartition
from sinks.ports import Fence, Rejected
from sinks.requests import MAX_MESSAGE_BYTES, admin_result_messages, rejected_messages
from streaming.query.batch_rows import merge_admin_results

pytestmark = pytest.mark.unit


def decode(**fields: Any) -> ev.Event:
    return event_from_json(json.dumps({"version": 1, **fields}))


def refused(text: str) -> FormatError:
    with pytest.raises(FormatError) as e:
        event_from_json(text)
    return e.value


def admin(c: Cluster) -> list[AdminResult]:
    return [d for d in c.decisions if isinstance(d, AdminResult)]


# --------------------------------------------------------------------------- the poison pills


def test_lone_surrogate_request_id_is_refused_naming_the_field() -> None:
    for text in (
        '{"version":1,"type":"delete_topic","request_id":"\\ud800","topic":"t"}',
        '{"version":1,"type":"create_topic","request_id":"\\udfff","topic":"t","partitions":1,"replication_factor":1}',
    ):
        e = refused(text)
        assert e.field == "request_id" and "lone surrogate" in e.reason
        str(e).encode("utf-8")  # the reason itself can be written anywhere


def test_deep_nesting_and_non_json_are_format_errors_not_crashes() -> None:
    assert refused("[" * 100_000).field == "$"
    assert refused("x" * 600_000).field == "$"


def test_long_request_id_is_refused() -> None:
    e = refused(json.dumps({"version": 1, "type": "delete_topic", "request_id": "r" * 600_000, "topic": "t"}))
    assert e.field == "request_id" and f"at most {lim.MAX_REQUEST_ID_LENGTH}" in e.reason
    assert len(str(e)) < 200
    assert decode(type="delete_topic", request_id="r" * lim.MAX_REQUEST_ID_LENGTH, topic="t")


@pytest.mark.parametrize(
    ("fields", "field", "error"),
    [
        ({"partitions": 120_000, "replication_factor": 1}, "partitions", "INVALID_PARTITIONS"),
        ({"partitions": 2_147_483_648, "replication_factor": 1}, "partitions", "INVALID_PARTITIONS"),
        ({"partitions": 0, "replication_factor": 1}, "partitions", "INVALID_PARTITIONS"),
        ({"partitions": 1, "replication_factor": 32_768}, "replication_factor", "INVALID_REPLICATION_FACTOR"),
        ({"partitions": 1, "replication_factor": 10**40}, "replication_factor", "INVALID_REPLICATION_FACTOR"),
    ],
)
def test_partitions_and_replication_factor_within_kafka_and_one_znode(
    fields: dict[str, int], field: str, error: str
) -> None:
    e = refused(json.dumps({"version": 1, "type": "create_topic", "request_id": "r", "topic": "t", **fields}))
    assert (e.field, e.error) == (field, error)
    if fields["partitions"] == 120_000:
        assert "jute.maxbuffer" in e.reason


def test_create_partitions_total_count_bounded() -> None:
    for total in (2_147_483_648, 200_000):
        e = refused(
            json.dumps(
                {"version": 1, "type": "create_partitions", "request_id": "r", "topic": "t", "total_count": total}
            )
        )
        assert (e.field, e.error) == ("total_count", "INVALID_PARTITIONS")


@pytest.mark.parametrize("name", ["probe-d\n", ".", "..", "a" * 250, "", "a b", "caf\u00e9", "t\u0000"])
def test_topic_names_follow_kafka_in_full(name: str) -> None:
    e = refused(json.dumps({"version": 1, "type": "delete_topic", "request_id": "r", "topic": name}))
    assert (e.field, e.error) == ("topic", "INVALID_TOPIC_EXCEPTION")
    assert len(str(e)) < 400


@pytest.mark.parametrize("name", ["a" * 249, "...", "a.b_c-D9", "_"])
def test_legal_topic_names_pass(name: str) -> None:
    assert decode(type="delete_topic", request_id="r", topic=name) == ev.DeleteTopic("r", name)


def test_integers_beyond_kafka_types_are_refused() -> None:
    for fields, field in (
        ({"type": "broker_failure", "broker_id": 2**31}, "broker_id"),
        ({"type": "broker_startup", "broker_id": 1, "broker_epoch": 2**63}, "broker_epoch"),
        (
            {
                "type": "alter_partition",
                "broker_id": 1,
                "broker_epoch": 1,
                "topic": "t",
                "partition": 2**31,
                "leader_epoch": 0,
                "partition_epoch": 0,
                "new_isr": [1],
            },
            "partition",
        ),
    ):
        with pytest.raises(FormatError) as e:
            decode(**fields)
        assert e.value.field == field


def test_duplicates_name_the_field_and_the_partition() -> None:
    e = refused(
        json.dumps(
            {
                "version": 1,
                "type": "reassign_partitions",
                "request_id": "r",
                "partitions": [
                    {"topic": "t", "partition": 0, "replicas": [1, 2]},
                    {"topic": "t", "partition": 7, "replicas": [3, 1, 3]},
                ],
            }
        )
    )
    assert e.field == "partitions[1].replicas" and "t-7" in e.reason and "broker 3" in e.reason
    assert e.error == "INVALID_REPLICA_ASSIGNMENT"
    # an AlterPartition's ISR with a duplicate is no malformed record: the controller answers it
    # (INVALID_REQUEST), as Kafka's would answer it rather than drop it
    decode(
        type="alter_partition",
        broker_id=1,
        broker_epoch=1,
        topic="t",
        partition=4,
        leader_epoch=0,
        partition_epoch=0,
        new_isr=[1, 2, 2],
    )
    e3 = refused(
        json.dumps(
            {"version": 1, "type": "create_topic", "request_id": "r", "topic": "t", "replica_assignment": {"0": [1, 1]}}
        )
    )
    assert e3.field == "replica_assignment.0" and "partition 0" in e3.reason


def test_config_strings_are_bounded_and_valid() -> None:
    e = refused('{"version":1,"type":"alter_topic_config","request_id":"r","topic":"t","configs":{"a":"\\ud83d"}}')
    assert e.field == "configs.a"
    e = refused(
        json.dumps(
            {
                "version": 1,
                "type": "alter_topic_config",
                "request_id": "r",
                "topic": "t",
                "configs": {f"k{i}": "v" * 60_000 for i in range(20)},
            }
        )
    )
    assert e.field == "configs" and e.error == "INVALID_CONFIG"


def test_min_topic_znode_bytes_is_a_lower_bound() -> None:
    from core.kafka.zkdata import encode_topic_znode
    from core.model import ReplicaAssignment

    for n, rf in ((1, 1), (9, 3), (11, 10), (1234, 2), (10_000, 12)):
        assignment = {p: ReplicaAssignment(tuple(range(rf))) for p in range(n)}
        assert lim.min_topic_znode_bytes(n, rf) <= len(encode_topic_znode(assignment, None))
    assert lim.digits_total(1) == 1 and lim.digits_total(11) == 12 and lim.digits_total(101) == 193


# --------------------------------------------------------------------------- the core's own checks


def test_create_topic_whose_placed_znode_is_too_big_is_refused() -> None:
    brokers = [1_000_000 + b for b in range(4)]
    c = Cluster.start(brokers)
    # passes the decoder's lower bound (small ids) but not with these seven-digit broker ids
    cmd = ev.CreateTopic("big", "big", 40_000, 3)
    assert lim.min_topic_znode_bytes(40_000, 3) < lim.MAX_ZNODE_BYTES
    c.run(cmd)
    (r,) = admin(c)
    assert r.status is AdminStatus.ERROR and r.error == "INVALID_PARTITIONS" and "jute.maxbuffer" in r.message
    assert "big" not in c.ctx.topic_partitions and not c.zk.nodes


def test_create_partitions_refused_while_a_partition_is_reassigned() -> None:
    c = Cluster.start([1, 2, 3, 4, 5, 6])
    c.run(ev.CreateTopic("c", "t", 2, 3, ((1, 2, 3), (2, 3, 1))))
    c.run(ev.ReassignPartitions("r", (PartitionTarget("t", 0, (4, 5, 6)),)))
    assert c.ctx.replicas(TopicPartition("t", 0)) == (4, 5, 6, 1, 2, 3)
    c.run(ev.CreatePartitions("grow", "t", 4))
    (r,) = admin(c)
    assert (r.status, r.error) == (AdminStatus.ERROR, "REASSIGNMENT_IN_PROGRESS")
    assert "A partition reassignment is in progress" in r.message
    assert len(c.ctx.partitions_for_topic("t")) == 2
    # once it completes, the topic grows with its own replication factor
    c.catch_up(TopicPartition("t", 0))
    c.run(ev.CreatePartitions("grow2", "t", 4))
    (r,) = admin(c)
    assert r.status is AdminStatus.OK
    assert all(len(c.ctx.replicas(tp)) == 3 for tp in c.ctx.partitions_for_topic("t"))


class _Poison(ev.Event):
    """An event whose handler raises: stands for a bug in the controller."""

    TYPE = "poison"

    def topics(self) -> tuple[str, ...]:
        return ("t",)


def _explode(_c: object, _e: object) -> None:
    raise RuntimeError("a bug")


def test_an_event_that_raises_is_left_out_and_the_rest_applied(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(event_loop, "HANDLERS", {**event_loop.HANDLERS, _Poison: _explode})
    c = Cluster.start([1, 2, 3], ControllerConfig())
    events: list[ev.Event] = [
        ev.CreateTopic("a", "t", 2, 2),
        _Poison(),
        ev.CreateTopic("b", "u", 1, 1),
        _Poison(),
    ]
    state, decisions, quarantined = step_isolating(c.state, events)
    assert [q.index for q in quarantined] == [1, 3]
    assert all("RuntimeError: a bug" in q.error for q in quarantined)
    # exactly what a step without the poison gives, and the same again on a replay
    clean_state, clean = controller.step(c.state, [events[0], events[2]])
    assert (state, decisions) == (clean_state, clean)
    assert step_isolating(c.state, events)[:2] == (state, decisions)


# --------------------------------------------------------------------------- outputs fit one message


def test_rejected_copies_and_results_fit_the_producer_limit() -> None:
    fence = Fence(3, 0)
    big = '"' * 600_000  # every character escaped: 1.2 MB of JSON
    (m,) = rejected_messages("rej", fence, 1, [Rejected("a", 0, 5, big, ("payload_is_json_object: not JSON",))])
    assert len(m.value) <= MAX_MESSAGE_BYTES
    v = json.loads(m.value)
    assert v["payload_truncated"] is True and v["payload_chars"] == 600_000 and big.startswith(v["payload"])
    details = {"partitions": {f"t-{i}": {"error": "NONE"} for i in range(60_000)}}
    result = AdminResult("r", "reassign_partitions", AdminStatus.OK, None, "done", details)
    (m,) = admin_result_messages("res", fence, 1, [result])
    assert len(m.value) <= MAX_MESSAGE_BYTES
    v = json.loads(m.value)
    assert v["status"] == "ok" and v["truncated"]["fields"] == ["details"]
    assert read_details(v["details"])["truncated"] is True
    # small ones are untouched
    (m,) = admin_result_messages("res", fence, 1, [AdminResult("r", "c", AdminStatus.OK)])
    assert "truncated" not in json.loads(m.value)


# --------------------------------------------------------------------------- one final answer per command


def test_in_progress_then_ok_in_one_batch_gives_the_final_answer() -> None:
    started = AdminResult("r", "reassign_partitions", AdminStatus.IN_PROGRESS)
    done = AdminResult("r", "reassign_partitions", AdminStatus.OK, None, "Reassignment completed.")
    other_part = AdminResult("r", "reassign_partitions", AdminStatus.OK)
    (m,) = merge_admin_results([started, done, other_part], [2, 2, 3])
    assert m.status is AdminStatus.OK
    (m,) = merge_admin_results([started, done, started], [2, 2, 3])
    assert m.status is AdminStatus.IN_PROGRESS  # bucket 3's part is still going


def test_superseded_reassignment_in_the_same_step_is_answered_finally() -> None:
    c = Cluster.start([1, 2, 3, 4, 5, 6])
    c.run(ev.CreateTopic("c", "t", 1, 3, ((1, 2, 3),)))
    c.run(
        ev.ReassignPartitions("first", (PartitionTarget("t", 0, (4, 5, 6)),)),
        ev.ReassignPartitions("second", (PartitionTarget("t", 0, (1, 2, 4)),)),
    )
    merged = {r.request_id: r for r in merge_admin_results(admin(c), [0] * len(admin(c)))}
    # final, and honest: the first reassignment did not complete, the second replaced it
    assert (merged["first"].status, merged["first"].error) == (AdminStatus.ERROR, "REASSIGNMENT_SUPERSEDED")
    assert merged["second"].status is AdminStatus.IN_PROGRESS


# --------------------------------------------------------------------------- suite and decoder agree


def test_the_suite_and_the_decoder_agree_at_every_bound() -> None:
    from streaming.query.validation import SUITE_CONSTANTS, InputValidator, Rejection, flatten, load_suite

    _, expectations = load_suite()
    for e in expectations:  # every placeholder was filled in from core.limits
        assert not any(isinstance(v, str) and v.startswith("$") for v in e.kwargs.values()), e
        assert "$" not in e.reason, e
    regex = next(e.kwargs["regex"] for e in expectations if e.name == "topic_name_legal")
    assert regex == SUITE_CONSTANTS["$TOPIC_NAME_REGEX"] == TOPIC_NAME_REGEX

    def create(**kw: Any) -> str:
        return json.dumps({"version": 1, "type": "create_topic", "request_id": "r", "topic": "t", **kw})

    cases = [
        (create(partitions=1, replication_factor=1), True),
        (create(partitions=lim.MAX_PARTITIONS + 1, replication_factor=1), False),
        (create(partitions=0, replication_factor=1), False),
        (create(partitions=1, replication_factor=lim.MAX_REPLICATION_FACTOR + 1), False),
        (create(partitions=1, replication_factor=0), False),
        (json.dumps({"version": 1, "type": "delete_topic", "request_id": "r" * 256, "topic": "t"}), True),
        (json.dumps({"version": 1, "type": "delete_topic", "request_id": "r" * 257, "topic": "t"}), False),
        (json.dumps({"version": 1, "type": "delete_topic", "request_id": "", "topic": "t"}), False),
        (json.dumps({"version": 1, "type": "delete_topic", "request_id": "r", "topic": "a" * 249}), True),
        (json.dumps({"version": 1, "type": "delete_topic", "request_id": "r", "topic": "a" * 250}), False),
        (json.dumps({"version": 1, "type": "delete_topic", "request_id": "r", "topic": "x\n"}), False),
        (json.dumps({"version": 1, "type": "delete_topic", "request_id": "r", "topic": ".."}), False),
        (json.dumps({"version": 1, "type": "broker_failure", "broker_id": lim.MAX_BROKER_ID}), True),
        (json.dumps({"version": 1, "type": "broker_failure", "broker_id": lim.MAX_BROKER_ID + 1}), False),
        ('{"version":1,"type":"delete_topic","request_id":"\\ud800","topic":"t"}', False),
    ]
    validator = InputValidator()
    values = [text for text, _ in cases]
    sources = ["broker-events" if "broker_failure" in text else "admin" for text in values]
    failed = validator.failed_rows(flatten(values, sources))
    for i, (text, ok) in enumerate(cases):
        try:
            event_from_json(text)
            decoded = True
        except FormatError:
            decoded = False
        assert (i not in failed) == ok and decoded == ok, (text[:80], i in failed, decoded)
    outcomes = validator.check(values, sources)
    assert [not isinstance(o, Rejection) for o in outcomes] == [ok for _, ok in cases]
