"""Request rows with their ``topicStates`` entries as text (:func:`core.codec.decision_rows.decision_row_text`):
the driver's lazy body equals the old decode, and every message, refusal, audit count and status line made
from it is what the rows of one JSON object gave (the earlier form, decoded whole)."""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Sequence
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from core import controller
from core import decisions as dc
from core import events as ev
from core.codec.decision_rows import decision_row_text, sorted_entries
from core.codec.decisions import decision_to_json
from core.context import ControllerContext
from core.controller import ControllerState
from core.errors import FormatError
from core.kafka.request_encoding import EncodeMemo
from core.kafka.requests import (
    RequestApi,
    SplicedBody,
    StopReplicaPartition,
    StopReplicaRequest,
    WireBody,
    partition_count,
)
from core.model import Broker, Endpoint, LeaderAndIsr, PartitionReplica, ReplicaAssignment, TopicPartition
from core.placement import BrokerRack, assign_replicas
from core.states import PartitionState, ReplicaState
from sinks.ports import FailedWrite, Fence, ZkCode
from sinks.requests import request_messages
from sinks.requests.merge import merge_spliced
from streaming.monitoring.audit_rows import AuditBatch, audit_rows
from streaming.monitoring.observability import describe_decision
from streaming.monitoring.request_digest import digest_requests, per_broker
from streaming.monitoring.state_change_log import STATE_CHANGE_LOGGER, log_state_changes
from streaming.query.batch_rows import decode_row
from streaming.query.refusals import classify, withhold

pytestmark = pytest.mark.unit


def _state(partitions: int, per_topic: int, prefix: str = "t") -> ControllerState:
    ctx = ControllerContext(controller_id=0, epoch=1, epoch_zk_version=0)
    for b in range(5):
        ctx.add_live_broker(Broker(b, 1000 + b, None, (Endpoint("PLAINTEXT", f"broker{b}", 9092),)))
    brokers = [BrokerRack(b) for b in range(5)]
    for t in range(partitions // per_topic):
        topic = f"{prefix}-{t:03d}"
        ctx.topic_ids[topic] = f"{t:022d}"
        for p, reps in assign_replicas(brokers, per_topic, 3, start_index=t % 5).items():
            tp = TopicPartition(topic, p)
            ctx.set_assignment(tp, ReplicaAssignment(reps))
            ctx.put_leadership(tp, LeaderAndIsr(reps[0], reps, 0, 0), 1)
            ctx.put_partition_state(tp, PartitionState.ONLINE)
            for r in reps:
                ctx.replica_states[PartitionReplica(topic, p, r)] = ReplicaState.ONLINE
    return ControllerState(ctx)


def _decisions(prefix: str, events: Sequence[ev.Event]) -> list[dc.Decision]:
    _, decisions = controller.step(_state(400, 20, prefix), events)
    return list(decisions)


def _rows(decisions: list[dc.Decision]) -> tuple[list[str], list[str]]:
    """(new rows, old rows) of the same decisions."""
    memo = EncodeMemo()
    return [decision_row_text(d, memo) for d in decisions], [decision_to_json(d) for d in decisions]


def _requests(rows: list[str]) -> list[dc.BrokerRequest]:
    return [d for d in map(decode_row, rows) if isinstance(d, dc.BrokerRequest)]


_FAILURE = [ev.BrokerFailure(1, 1001)]
_DOUBLE = [ev.BrokerFailure(1, 1001), ev.BrokerFailure(2, 1002)]


def test_a_request_row_is_its_entries_as_the_sink_writes_them() -> None:
    new, old = _rows(_decisions("a", _FAILURE))
    spliced = [r for r in new if "\n" in r]
    assert spliced, "the broker failure's requests have partition states"
    for row in spliced:
        head, *texts = row.split("\n")
        for text in texts:
            # each entry's text is exactly what orjson writes for it, keys sorted
            assert text.encode() == orjson.dumps(json.loads(text), option=orjson.OPT_SORT_KEYS)
        assert len(json.loads(head)["topic_entries"]) == len(texts)
    # decoded, the lazy body is the old decode's body, materialised
    for a, b in zip(_requests(new), _requests(old), strict=True):
        assert isinstance(a.body, WireBody) and isinstance(b.body, WireBody)
        assert (a.broker_id, a.api, a.addressees) == (b.broker_id, b.api, b.addressees)
        if isinstance(a.body.obj, SplicedBody):
            assert partition_count(a.body.obj) == partition_count(b.body.obj) > 0
        assert dict(a.body.obj) == b.body.obj
        assert (
            a.body.obj == b.body.obj
            and a.body.obj == SplicedBody(a.body.obj.head, a.body.obj.names, a.body.obj.counts, a.body.obj.texts)
            if isinstance(a.body.obj, SplicedBody)
            else True
        )


def _stop_replica(broker: int, topics: list[str]) -> dc.BrokerRequest:
    parts = tuple(StopReplicaPartition(t, p, 3, p % 2 == 0) for t in topics for p in range(4))
    return dc.BrokerRequest(broker, RequestApi.STOP_REPLICA, StopReplicaRequest(0, 1, 1000 + broker, parts))


def test_a_topic_name_that_is_not_plain_text_keeps_the_one_line_row() -> None:
    assert "\n" in decision_row_text(_stop_replica(1, ["plain-topic.1"]))
    for odd in ('we"ird', "caf\u00e9", "back\\slash", "tab\tbed"):
        r = _stop_replica(1, ["plain", odd])
        assert isinstance(r.body, StopReplicaRequest) and sorted_entries(r.body) is None
        assert decision_row_text(r) == decision_to_json(r)


@pytest.mark.parametrize("events", [_FAILURE, _DOUBLE, [ev.BrokerFailure(4, 1004)]])
@pytest.mark.parametrize("max_bytes", [1_500, 20_000, 10**7])
def test_messages_from_entries_as_text_are_byte_for_byte_the_same(events: list[ev.Event], max_bytes: int) -> None:
    # two buckets with their own topics, as routing gives them; at 1,500 bytes one topic entry is larger
    # than a message and is split at its partitions
    decisions = _decisions("a", events) + _decisions("b", events)
    new, old = _rows(decisions)
    fence = Fence(2, 1)
    spliced = _requests(new)
    got = request_messages("t", fence, 5, spliced, max_bytes, partitions=(0, 1, 2))
    # the entries were never parsed as a whole (only an entry cut at a part's edge, by the sink itself)
    assert all(not wire_object_of(r)._parsed for r in spliced if isinstance(wire_object_of(r), SplicedBody))
    want = request_messages("t", fence, 5, _requests(old), max_bytes, partitions=(0, 1, 2))
    assert [(m.key, m.value, m.headers, m.identity, m.partition) for m in got] == [
        (m.key, m.value, m.headers, m.identity, m.partition) for m in want
    ]
    apis = {m.headers[0][1] for m in got}
    assert {b"LeaderAndIsr", b"UpdateMetadata"} <= apis
    if max_bytes == 1_500:
        assert any(b'"part":' in m.value for m in got)


def test_the_same_topic_in_two_parts_merges_as_objects() -> None:
    # not expected (buckets own disjoint topics), but then the rows' entries are parsed and merged by name
    decisions = _decisions("a", _FAILURE) * 2
    new, old = _rows(decisions)
    reqs = _requests(new)
    lisr = [wire_object_of(r) for r in reqs if r.api is RequestApi.LEADER_AND_ISR and r.broker_id == 0]
    assert len(lisr) == 2 and merge_spliced(lisr) is None
    fence = Fence(2, 1)
    assert [m.value for m in request_messages("t", fence, 5, reqs, 3_000)] == [
        m.value for m in request_messages("t", fence, 5, _requests(old), 3_000)
    ]


def wire_object_of(r: dc.BrokerRequest) -> Any:
    assert isinstance(r.body, WireBody)
    return r.body.obj


def test_responses_and_stop_replica_are_the_same_messages() -> None:
    decisions = [*_decisions("a", _FAILURE), _stop_replica(1, ["a-000", "a-001"]), _stop_replica(2, ["b-000"])]
    decisions.append(
        dc.BrokerRequest(
            3, RequestApi.CONTROLLED_SHUTDOWN_RESPONSE, WireBody({"errorCode": 0, "remainingPartitions": []})
        )
    )
    new, old = _rows(decisions)
    assert any(r.api is RequestApi.STOP_REPLICA and isinstance(wire_object_of(r), SplicedBody) for r in _requests(new))
    fence = Fence(2, 1)
    assert [m.value for m in request_messages("t", fence, 5, _requests(new))] == [
        m.value for m in request_messages("t", fence, 5, _requests(old))
    ]


def test_a_refused_state_write_withholds_the_same_partitions_and_the_audit_counts_agree() -> None:
    decisions = _decisions("a", _FAILURE) + _decisions("b", _FAILURE)
    writes = [d for d in decisions if isinstance(d, dc.ZkWrite) and "/partitions/" in d.path]
    refused = [FailedWrite(0, writes[0], ZkCode.BAD_VERSION), FailedWrite(1, writes[-1], ZkCode.BAD_VERSION)]
    refusals = classify(refused)
    assert refusals.partitions
    new, old = _rows(decisions)
    kept_new, kept_old = withhold(_requests(new), refusals), withhold(_requests(old), refusals)
    assert [dict(wire_object_of(r)) for r in kept_new] == [wire_object_of(r) for r in kept_old]
    # the untouched requests keep their entries as text
    assert any(isinstance(wire_object_of(r), SplicedBody) for r in kept_new)
    fence = Fence(2, 1)
    assert [m.value for m in request_messages("t", fence, 5, kept_new, 5_000)] == [
        m.value for m in request_messages("t", fence, 5, kept_old, 5_000)
    ]
    a, b = digest_requests(kept_new), digest_requests(kept_old)
    assert [(d.partitions, d.parsed()) for d in a] == [(d.partitions, d.parsed()) for d in b]
    assert per_broker(a) == per_broker(b)
    assert [describe_decision(r) for r in kept_new] == [describe_decision(r) for r in kept_old]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"topic_entries": [["a-000", 4]]}, "topic_entries"),
        ({"topic_entries": [["a-000", -1], ["a-001", 4]]}, "topic_entries[0]"),
        ({"topic_entries": [["a-000", 4], [7, 4]]}, "topic_entries[1]"),
        ({"topic_entries": "x"}, "topic_entries"),
    ],
)
def test_a_bad_row_of_entries_is_refused_naming_the_field(change: dict[str, Any], field: str) -> None:
    head, *texts = decision_row_text(_stop_replica(1, ["a-000", "a-001"])).split("\n")
    bad = json.dumps({**json.loads(head), **change})
    with pytest.raises(FormatError) as e:
        decode_row("\n".join([bad, *texts]))
    assert str(e.value).startswith(f"{field}: ")


def test_lines_after_anything_but_a_request_with_empty_topic_states_are_refused() -> None:
    _, *texts = decision_row_text(_stop_replica(1, ["a-000"])).split("\n")
    result = decision_to_json(dc.StateChangeFailure("a-0", "Online", "Offline", "x"))
    with pytest.raises(FormatError) as e:
        decode_row("\n".join([result[:-1] + ',"topic_entries":[["a-000",4]]}', *texts]))
    assert str(e.value).startswith("body: ")


def test_a_spliced_body_is_a_mapping_of_the_whole_body() -> None:
    (r,) = _requests([decision_row_text(_stop_replica(1, ["a-000", "a-001"]))])
    body = wire_object_of(r)
    assert isinstance(body, SplicedBody) and not body._parsed
    assert body != {"other": 1} and not body._parsed  # told apart without parsing
    assert len(body) == len(dict(body)) and set(body) == set(body.head)
    assert body == dict(body) and body._parsed
    assert body.__eq__(5) is NotImplemented
    assert partition_count(body) == 8 == partition_count(dict(body))


def _audit(requests: list[dc.BrokerRequest], caplog: pytest.LogCaptureFixture) -> tuple[Any, list[str]]:
    """The state-change log's table and its lines (DEBUG: every partition state sent) for ``requests``."""
    when = dt.datetime(2026, 11, 24, 21, 0, tzinfo=dt.UTC)
    batch = AuditBatch(7, requests=requests)
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger=STATE_CHANGE_LOGGER):
        log_state_changes(batch, 2, 1, logging.getLogger(STATE_CHANGE_LOGGER))
    return audit_rows(batch, 2, 1, when), [r.getMessage() for r in caplog.records]


@pytest.mark.parametrize("events", [_FAILURE, _DOUBLE, [ev.BrokerFailure(4, 1004)]])
def test_the_audit_log_from_entries_as_text_is_the_parsed_entries_log(
    events: list[ev.Event], caplog: pytest.LogCaptureFixture
) -> None:
    decisions = [
        *_decisions("a", events),
        *_decisions("b", events),
        _stop_replica(1, ["a-000", "a-001"]),
        _stop_replica(2, ["a-000"]),
        dc.BrokerRequest(
            3,
            RequestApi.CONTROLLED_SHUTDOWN_RESPONSE,
            WireBody({"errorCode": 0, "remainingPartitions": [{"topicName": "a-000", "partitionIndex": 1}]}),
        ),
    ]
    new, old = _rows(decisions)
    spliced, parsed = _requests(new), _requests(old)
    digests = digest_requests(spliced)
    # the text path was taken for every LeaderAndIsr and StopReplica, without parsing their entries
    flat = [d for d in digests if d.request.api in (RequestApi.LEADER_AND_ISR, RequestApi.STOP_REPLICA)]
    assert flat and all(d.texts is not None and d.entries is None for d in flat)
    assert per_broker(digests) == per_broker(digest_requests(parsed))
    table, lines = _audit(spliced, caplog)
    want_table, want_lines = _audit(parsed, caplog)
    assert table.num_rows > 400 and table.equals(want_table)

    # the summaries (INFO) are the same; a DEBUG line writes the state in its body's key order, which is
    # sorted in a bucket's text and the encoder's in the one-object row
    def summaries(lines: list[str]) -> list[str]:
        return [line for line in lines if " partitions (micro-batch" in line or "ControlledShutdownResponse to" in line]

    assert len(summaries(lines)) >= 8 and summaries(lines) == summaries(want_lines)
    assert len(lines) == len(want_lines) > 400
    # one broker's requests in text and another's parsed: the same state sent to both is still one row
    mixed = [r if i % 2 else p for i, (r, p) in enumerate(zip(spliced, parsed, strict=True))]
    assert _audit(mixed, caplog)[0].equals(want_table)


def test_entries_as_text_not_as_expected_are_parsed(caplog: pytest.LogCaptureFixture) -> None:
    reqs = _requests(_rows(_decisions("a", _FAILURE))[0])
    body = next(wire_object_of(r) for r in reqs if r.api is RequestApi.LEADER_AND_ISR)
    assert isinstance(body, SplicedBody)
    # a count that does not match the entry's states, and an entry whose keys are not in sorted order
    entry = json.loads(body.texts[0])
    reordered = json.dumps({"topicName": entry["topicName"], **entry}, separators=(",", ":"))
    for odd in (
        SplicedBody(body.head, body.names, (body.counts[0] + 1, *body.counts[1:]), body.texts),
        SplicedBody(body.head, body.names, body.counts, (reordered, *body.texts[1:])),
    ):
        (d,) = digest_requests([dc.BrokerRequest(0, RequestApi.LEADER_AND_ISR, WireBody(odd))])
        assert d.texts is None and d.entries is not None
        assert (
            d.entries
            == digest_requests([dc.BrokerRequest(0, RequestApi.LEADER_AND_ISR, WireBody(dict(odd)))])[0].entries
        )


class _AcceptingZk:
    def write_batch(self, batch_id: int, writes: Any) -> Any:
        from sinks.ports import ZkBatchResult

        return ZkBatchResult(batch_id, len(writes), 0, (), 1)


def _frame(decisions: list[dc.Decision]) -> Any:
    import pandas as pd

    from streaming.query.stateful import decision_rows

    rows = decision_rows(0, decisions)
    return pd.DataFrame(
        {
            "bucket": [r[0] for r in rows],
            "seq": [r[1] for r in rows],
            "kind": [r[2] for r in rows],
            "payload": [r[3] for r in rows],
        }
    )


def test_the_dispatcher_makes_the_audit_rows_beside_the_request_sink_and_writes_them_after() -> None:
    import threading

    from sinks.memory import MemoryRequestSink
    from streaming.monitoring.audit_log import AuditLog, MemoryAuditFiles
    from streaming.monitoring.audit_rows import PreparedRows
    from streaming.query.dispatch import Dispatcher
    from streaming.runtime.checkpoint_fs import MemoryCheckpointStore

    events: list[str] = []
    when = dt.datetime(2026, 11, 24, 21, 0, tzinfo=dt.UTC)

    class Log(AuditLog):
        def prepare(self, batch: AuditBatch) -> PreparedRows:
            events.append(f"prepare on {threading.current_thread().name}")
            return super().prepare(batch)

    class Sink(MemoryRequestSink):
        def write_requests(self, batch_id: int, requests: Any) -> Any:
            events.append(f"requests, audit files written: {files.writes}")
            return super().write_requests(batch_id, requests)

    files = MemoryAuditFiles()
    log = Log(files, MemoryCheckpointStore(), 2, 1, clock=lambda: when)
    d = Dispatcher(_AcceptingZk(), Sink(Fence(2, 1)), audit=log)
    decisions = _decisions("a", _FAILURE)
    d.dispatch(_frame(decisions), 7)
    assert sorted(events) == ["prepare on livectl-audit-rows-7", "requests, audit files written: 0"]
    assert files.writes == 1 and log.last == "written"
    (blob,) = files.blobs.values()
    got = pq.read_table(pa.BufferReader(blob))
    # the rows the log makes in its own call, from the same decoded batch
    batch = AuditBatch(7, [x for x in decisions if isinstance(x, dc.ZkWrite)], (), _requests(_rows(decisions)[0]))
    want = audit_rows(batch, 2, 1, when)
    assert got.num_rows > 400 and got.equals(want)


def test_an_error_making_the_audit_rows_is_raised_by_the_batch_after_its_requests() -> None:
    from sinks.memory import MemoryRequestSink
    from streaming.monitoring.audit_log import AuditLog, MemoryAuditFiles
    from streaming.monitoring.audit_rows import PreparedRows
    from streaming.query.dispatch import Dispatcher
    from streaming.runtime.checkpoint_fs import MemoryCheckpointStore

    class Log(AuditLog):
        def prepare(self, batch: AuditBatch) -> PreparedRows:
            raise RuntimeError("no rows")

    files = MemoryAuditFiles()
    sink = MemoryRequestSink(Fence(2, 1))
    d = Dispatcher(_AcceptingZk(), sink, audit=Log(files, MemoryCheckpointStore(), 2, 1))
    with pytest.raises(RuntimeError, match="no rows"):
        d.dispatch(_frame(_decisions("a", _FAILURE)), 7)
    assert sink.messages and files.writes == 0


@pytest.mark.parametrize("events", [_FAILURE, _DOUBLE])
def test_the_request_rows_made_in_arrow_are_the_rows_made_in_python(
    events: list[ev.Event], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from streaming.monitoring import audit_rows

    new, old = _rows([*_decisions("a", events), *_decisions("b", events)])
    # one broker's LeaderAndIsr and StopReplica bodies as a bucket's text: the Arrow path
    flat = (RequestApi.LEADER_AND_ISR, RequestApi.STOP_REPLICA)
    spliced = [r for r in _requests(new) if r.api in flat or r.api is RequestApi.UPDATE_METADATA]
    parsed = [r for r in _requests(old) if r.api in flat or r.api is RequestApi.UPDATE_METADATA]
    digests = digest_requests(spliced)
    in_arrow = audit_rows.request_columns(digests)
    assert in_arrow is not None and len(in_arrow["kind"]) > 400
    table, _ = _audit(spliced, caplog)
    with monkeypatch.context() as m:
        m.setattr(audit_rows, "request_columns", lambda _digests: None)
        in_python, _ = _audit(spliced, caplog)
    want, _ = _audit(parsed, caplog)  # parsed entries: the Python path whatever the patch
    assert table.equals(in_python) and table.equals(want)
    # several brokers in one row, in the order sent
    brokers = table.column("brokers").to_pylist()
    assert any(b is not None and len(b) > 1 for b in brokers)


def test_a_state_sent_twice_to_one_broker_is_one_row_naming_it_once(caplog: pytest.LogCaptureFixture) -> None:
    from streaming.monitoring import audit_rows

    spliced = [r for r in _requests(_rows(_decisions("a", _FAILURE))[0]) if r.api is RequestApi.LEADER_AND_ISR]
    twice = [*spliced, spliced[0]]
    assert audit_rows.request_columns(digest_requests(twice)) is None  # the Python path dedupes
    table, _ = _audit(twice, caplog)
    once, _ = _audit(spliced, caplog)
    assert table.equals(once)


def test_a_state_text_without_a_readable_partition_index_takes_the_python_path(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from streaming.monitoring import audit_rows

    (r,) = [r for r in _requests(_rows(_decisions("a", _FAILURE))[0]) if r.api is RequestApi.LEADER_AND_ISR][:1]
    body = wire_object_of(r)
    assert isinstance(body, SplicedBody) and '"partitionIndex":0,' in body.texts[0]

    def with_first_text(text: str) -> list[dc.BrokerRequest]:
        odd = SplicedBody(body.head, body.names, body.counts, (text, *body.texts[1:]))
        return [dc.BrokerRequest(r.broker_id, r.api, WireBody(odd))]

    spaced = with_first_text(body.texts[0].replace('"partitionIndex":0,', '"partitionIndex": 0,', 1))
    keyless = with_first_text(body.texts[0].replace('"partitionIndex":0,', "", 1))
    assert audit_rows.request_columns(digest_requests([r])) is not None
    assert audit_rows.request_columns(digest_requests(spaced)) is None  # int() would read " 0": Python's
    assert audit_rows.request_columns(digest_requests(keyless)) is not None  # no index: both leave it empty
    for requests in (spaced, keyless):
        table, _ = _audit(requests, caplog)
        with monkeypatch.context() as m:
            m.setattr(audit_rows, "request_columns", lambda _digests: None)
            in_python, _ = _audit(requests, caplog)
        assert table.equals(in_python)
    assert None in _audit(keyless, caplog)[0].column("partition").to_pylist()


def test_the_states_are_counted_as_they_would_be_cut() -> None:
    from streaming.monitoring import request_digest

    bodies = [
        b
        for r in _requests(_rows([*_decisions("a", _DOUBLE), _stop_replica(1, ["a-000", "a-001"])])[0])
        if isinstance(b := wire_object_of(r), SplicedBody)
    ]
    assert bodies
    head, names = bodies[0].head, bodies[0].names[:1]
    opening = '{"partitionStates":['
    odd = [
        SplicedBody(head, names, (0,), (opening + '],"topicName":"t"}',)),  # no states, as expected
        SplicedBody(head, names, (0,), (opening + '{}],"topicName":"t"}',)),  # states, counted none
        SplicedBody(head, names, (1,), (opening + '{}],"topicName":"t"}',)),  # one empty state
        SplicedBody(head, names, (2,), (opening + '{"a":1},{"b":2}],"topicName":"t"}',)),
        SplicedBody(head, names, (3,), (opening + '{"a":1},{"b":2}],"topicName":"t"}',)),  # one short
        SplicedBody(head, names, (1,), (opening + '{"a":1}',)),  # no end
        SplicedBody(head, names, (1,), ('{"topicName":"t","partitionStates":[{"a":1}]}',)),  # other key order
    ]

    def counted(body: SplicedBody) -> int | None:
        spans = request_digest.state_spans(body)
        if spans is None:
            return None
        cut = request_digest.cut_states(body, spans)
        # as many pieces per entry as it counts, each entry's text cut where its spans say
        assert [len(states) for _t, states in cut] == list(body.counts), body.texts
        return sum(body.counts)

    assert all(counted(body) is not None for body in bodies)
    assert [counted(b) for b in odd] == [0, None, 1, 2, None, None, None]
