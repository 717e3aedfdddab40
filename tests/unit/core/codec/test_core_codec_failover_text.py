"""The failover slice's direct encoder writes the very text of the generic event encoder: the files a new
controller writes are read by buckets (and replayed batches) that decode them with ``event_from_json``."""

from __future__ import annotations

import dataclasses

import pytest

from core.codec.events import event_from_json, event_to_json
from core.codec.snapshot import StateTexts, encode_failover_json, remember_state_texts
from core.events import ControllerFailover
from core.model import Broker, Endpoint, PartitionTarget, TopicPartition
from core.snapshot import PartitionStateZnode, TopicZnode, ZkSnapshot

pytestmark = pytest.mark.unit


def _snapshot(n_topics: int) -> ZkSnapshot:
    topics = []
    states = []
    for i in range(n_topics):
        name = f"t{i}" if i % 3 else f"t.ö-{i}"  # a name json.dumps escapes
        topics.append(
            TopicZnode(
                name,
                tuple((p, (1, 2, 3)) for p in range(4)),
                ((0, (4,)),) if i % 2 == 0 else (),
                ((1, (2,)),) if i % 3 == 0 else (),
                None if i % 2 else f"id{i}",
                i,
            )
        )
        states += [
            (TopicPartition(name, p), PartitionStateZnode(p - 1, p, tuple(range(1, p + 1)), 3, p, int(p == 2)))
            for p in range(4)
        ]
    return ZkSnapshot(
        7,
        6,
        (Broker(1, 10, "r1", (Endpoint("PLAINTEXT", "h", 9092), Endpoint("SSL", "h", 9093, "SSL"))), Broker(2, 11)),
        tuple(topics),
        tuple(states),
        (PartitionTarget("t1", 0, (1, 2)),),
        ("t2",),
        (TopicPartition("t1", 1),),
        (("t1", (("a", "b"), ("c", 'ü"\\x'))),),
        ("t4",),
    )


@pytest.mark.parametrize("n_topics", [0, 1, 12])
def test_the_direct_encoder_writes_the_generic_text(n_topics: int) -> None:
    snap = _snapshot(n_topics)
    text = encode_failover_json(1000, snap)
    assert text == event_to_json(ControllerFailover(1000, snap))
    assert event_from_json(text) == ControllerFailover(1000, snap)


def test_an_empty_snapshot() -> None:
    snap = ZkSnapshot(0, -1, (), (), ())
    assert encode_failover_json(1, snap) == event_to_json(ControllerFailover(1, snap))


def test_remembered_state_texts_give_the_same_text_and_follow_the_snapshot() -> None:
    snap = _snapshot(12)
    texts: StateTexts = {}
    remember_state_texts(snap, texts)
    assert len(texts) == len(snap.partition_states) + len(snap.topics)
    assert encode_failover_json(1000, snap, texts) == event_to_json(ControllerFailover(1000, snap))
    # the next read: one state rewritten (a new entry object), the others the same objects, a topic's gone
    old = snap.partition_states
    tp, st = old[5]
    changed = (tp, dataclasses.replace(st, leader_epoch=st.leader_epoch + 1, zk_version=st.zk_version + 1))
    states = (*old[:5], changed, *old[6:-4])
    later = dataclasses.replace(snap, partition_states=states, controller_epoch=8)
    # before it is remembered, the stale text of an entry is never used: the new entry is encoded
    assert encode_failover_json(1000, later, texts) == event_to_json(ControllerFailover(1000, later))
    kept = dict(texts)
    remember_state_texts(later, texts)
    # the gone and the replaced entries forgotten; the topic znodes (here the same objects) kept
    assert set(texts) == {id(e) for e in states} | {id(t) for t in later.topics}
    assert all(texts[id(e)][1] is kept[id(e)][1] for e in states if e is not changed)  # not encoded again
    assert encode_failover_json(1000, later, texts) == event_to_json(ControllerFailover(1000, later))
    # an equal entry that is another object is encoded afresh (the memo goes by identity)
    copy = dataclasses.replace(
        later, partition_states=tuple((TopicPartition(t.topic, t.partition), s) for t, s in states)
    )
    assert encode_failover_json(1000, copy, texts) == event_to_json(ControllerFailover(1000, copy))
