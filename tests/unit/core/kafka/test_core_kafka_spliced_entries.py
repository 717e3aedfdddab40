"""The form of the ``topicStates`` entries' text that :class:`core.kafka.requests.SplicedBody` states and its
readers rely on without parsing (the state-change log cuts LeaderAndIsr and StopReplica partition states out
of it): canonical sorted-key JSON whose partition states are flat — integers, booleans, arrays of integers.
Checked on every such request the core sends in a representative run and on bodies with every field set;
the state types' own fields are checked too, so a field of another kind fails here before it reaches the
encoder."""

from __future__ import annotations

import json
import typing
from typing import Any

import pytest
from core_support import every_api_requests

from core.codec.decision_rows import decision_row_text, decode_row_text, sorted_entries
from core.decisions import BrokerRequest
from core.kafka.requests import (
    LeaderAndIsrRequest,
    LisrPartitionState,
    MetadataPartitionState,
    RequestApi,
    RequestBody,
    SplicedBody,
    StopReplicaPartition,
    StopReplicaRequest,
    UpdateMetadataRequest,
    WireBody,
)
from core.model import EPOCH_DURING_DELETE, LEADER_DURING_DELETE

pytestmark = pytest.mark.unit

_BIG = 2**63 - 1
#: bodies with every field of a partition state set, extreme values included (the representative run
#: below leaves adding/removing replicas, topic ids and recovery states mostly at their defaults)
_EDGE_BODIES: list[RequestBody] = [
    LeaderAndIsrRequest(
        0,
        1,
        101,
        0,
        (
            LisrPartitionState("a", 0, 3, -1, 0, (), 0, (1,)),
            LisrPartitionState(
                "a", 7, _BIG, 2, _BIG, (2, 3), -5, (2, 3, 4), (4,), (1,), True, 1, "fPzmzu0y_L2k2TNhu7OvqA"
            ),
            LisrPartitionState("b.c-d_e", 2**31 - 1, 0, 0, -1, (0,), 1, (0, 5), (), (0,), False, 0),
        ),
        (),
    ),
    UpdateMetadataRequest(
        0,
        1,
        -1,
        (
            MetadataPartitionState("a", 0, 3, 1, 4, (1, 2), 7, (1, 2, 3)),
            MetadataPartitionState(
                "u", 2, 3, LEADER_DURING_DELETE, EPOCH_DURING_DELETE, (), _BIG, (1, 2), (2, 1), "AQIDBAUGBwgJCgsMDQ4PEA"
            ),
        ),
        (),
    ),
    StopReplicaRequest(
        0,
        1,
        102,
        tuple(
            StopReplicaPartition(t, p, e, d)
            for t, p, e, d in (("a", 0, -1, False), ("a", 1, -2, True), ("b", _BIG, _BIG, True))
        ),
    ),
]


def _bodies() -> list[RequestBody]:
    run = [
        r.body
        for r in every_api_requests()
        if isinstance(r.body, LeaderAndIsrRequest | UpdateMetadataRequest | StopReplicaRequest) and r.body.partitions
    ]
    assert {type(b) for b in run} == {LeaderAndIsrRequest, UpdateMetadataRequest, StopReplicaRequest}
    return [*run, *_EDGE_BODIES]


def _flat(value: Any) -> bool:
    """An integer, a boolean or an array of integers (no string, object, null, float)."""
    return type(value) in (int, bool) or (type(value) is list and all(type(x) is int for x in value))


_OPEN = '{"partitionStates":['
_API = {
    LeaderAndIsrRequest: RequestApi.LEADER_AND_ISR,
    UpdateMetadataRequest: RequestApi.UPDATE_METADATA,
    StopReplicaRequest: RequestApi.STOP_REPLICA,
}


@pytest.mark.parametrize("body", _bodies(), ids=lambda b: type(b).__name__)
def test_each_entry_text_is_sorted_key_json_with_flat_partition_states(body: RequestBody) -> None:
    entries = sorted_entries(body)
    assert entries, "plain topic names: the entries are text"
    for name, count, text in entries:
        entry = json.loads(text)
        # canonical: what orjson.dumps(entry, option=OPT_SORT_KEYS) writes (no spaces, keys sorted everywhere)
        assert text == json.dumps(entry, sort_keys=True, separators=(",", ":"))
        assert text.startswith(_OPEN) and entry["topicName"] == name
        states = entry["partitionStates"]
        assert len(states) == count > 0
        for s in states:
            assert type(s) is dict and all(_flat(v) for v in s.values()), s
            assert type(s["partitionIndex"]) is int
            if isinstance(body, LeaderAndIsrRequest):
                assert type(s["leader"]) is int
        # what flatness gives a reader of the text: the states are the pieces between "[{" and the first
        # "}]", cut at "},{", each its own sorted-key JSON
        inner = text[len(_OPEN) + 1 : text.index("}]", len(_OPEN))]
        pieces = inner.split("},{")
        assert [json.loads("{" + p + "}") for p in pieces] == states
        assert ["{" + p + "}" for p in pieces] == [json.dumps(s, sort_keys=True, separators=(",", ":")) for s in states]


def test_the_driver_keeps_those_texts_as_the_bucket_wrote_them() -> None:
    """A bucket's row and the :class:`SplicedBody` the driver reads from it carry the entries' text as is."""
    for body in _EDGE_BODIES:
        entries = sorted_entries(body)
        assert entries is not None
        head, *lines = decision_row_text(BrokerRequest(1, _API[type(body)], body)).split("\n")
        decoded = decode_row_text(json.loads(head), lines)
        assert isinstance(decoded, BrokerRequest) and isinstance(decoded.body, WireBody)
        spliced = decoded.body.obj
        assert isinstance(spliced, SplicedBody)
        assert spliced.texts == tuple(t for _n, _c, t in entries)
        assert spliced.counts == tuple(c for _n, c, _t in entries)


@pytest.mark.parametrize("cls", [LisrPartitionState, MetadataPartitionState, StopReplicaPartition])
def test_partition_state_fields_are_integers_booleans_or_integer_tuples(cls: type) -> None:
    """Every field of a partition state type is an integer, a boolean or a tuple of integers, but its topic
    and topic id, which the wire form puts on the topic's entry (a string there, not in a state)."""
    hints = typing.get_type_hints(cls)
    state_fields = {k: v for k, v in hints.items() if k not in ("topic", "topic_id")}
    assert state_fields
    odd = {k: v for k, v in state_fields.items() if v not in (int, bool, tuple[int, ...])}
    assert not odd, f"{cls.__name__}: a partition state field that is not flat: {odd}"
