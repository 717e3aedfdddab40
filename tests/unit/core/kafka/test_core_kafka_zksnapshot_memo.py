"""Decoding a snapshot with a memo of an earlier decode gives the same snapshot, reuses what is unchanged
and forgets what is gone."""

from __future__ import annotations

import json

import pytest

from core.kafka.zksnapshot import TopicBlock, snapshot_from_znodes
from core.model import Broker

pytestmark = pytest.mark.unit

STATE = '{"version":1,"leader":1,"leader_epoch":%d,"controller_epoch":2,"isr":[1]}'


def _tree(epoch_of_t0: int, with_u: bool = True) -> dict[str, tuple[str | None, int]]:
    tree: dict[str, tuple[str | None, int]] = {
        "/brokers/topics/t": ('{"version":2,"partitions":{"0":[1],"1":[1]}}', 0),
        "/brokers/topics/t/partitions/0/state": (STATE % epoch_of_t0, epoch_of_t0),
        "/brokers/topics/t/partitions/1/state": (STATE % 0, 0),
    }
    if with_u:
        tree["/brokers/topics/u"] = ('{"version":2,"partitions":{"0":[1]}}', 3)
        tree["/brokers/topics/u/partitions/0/state"] = (STATE % 0, 0)
    return tree


def test_a_memo_changes_nothing_but_the_work() -> None:
    brokers = [Broker(1, 5)]
    memo: dict[str, tuple[str, int, object]] = {}
    first = snapshot_from_znodes(_tree(0), brokers, 2, 1, memo)
    assert first == snapshot_from_znodes(_tree(0), brokers, 2, 1)
    assert len(memo) == 5
    kept = memo["/brokers/topics/t/partitions/1/state"][2]

    second = snapshot_from_znodes(_tree(4, with_u=False), brokers, 2, 1, memo)
    assert second == snapshot_from_znodes(_tree(4, with_u=False), brokers, 2, 1)
    assert dict(second.partition_states)[first.partition_states[0][0]].leader_epoch == 4
    assert memo["/brokers/topics/t/partitions/1/state"][2] is kept  # unchanged: not decoded again
    assert sorted(memo) == sorted(_tree(4, with_u=False))  # u is forgotten


def _topic_tree(names: dict[str, int], epoch: int = 0) -> dict[str, tuple[str | None, int]]:
    tree: dict[str, tuple[str | None, int]] = {}
    for name, n in names.items():
        topic = {"version": 2, "partitions": {str(p): [1] for p in range(n)}}
        tree[f"/brokers/topics/{name}"] = (json.dumps(topic), 0)
        for p in range(n):
            tree[f"/brokers/topics/{name}/partitions/{p}/state"] = (STATE % epoch, epoch)
    return tree


def _of_topics(tree: dict[str, tuple[str | None, int]], names: set[str]) -> dict[str, tuple[str | None, int]]:
    return {p: v for p, v in tree.items() if p.split("/")[3] in names}


def test_blocks_of_unchanged_topics_give_the_snapshot_all_the_znodes_give() -> None:
    """Topics whose names order differently as names and as path prefixes ("a" < "a-b" but "a-b/" < "a/"),
    partitions past 9 (path order "1", "10", "11", "2"): the snapshot assembled from blocks is the same
    snapshot, in the same order, as one decode of every znode."""
    brokers = [Broker(1, 5)]
    names = {"a": 12, "a-b": 2, "a.b": 1, "ab": 3, "b": 0}
    tree = _topic_tree(names)
    tree["/admin/delete_topics/ab"] = (None, 0)
    memo: dict[str, tuple[str, int, object]] = {}
    blocks: dict[str, TopicBlock] = {}
    first = snapshot_from_znodes(tree, brokers, 2, 1, memo, blocks=blocks)
    assert first == snapshot_from_znodes(tree, brokers, 2, 1)
    assert sorted(blocks) == sorted(names) and len(memo) == len(names) + sum(names.values())

    # "a" and "ab" changed; the others come as blocks, their znodes left out
    tree.update(_topic_tree({"a": 12, "ab": 3}, epoch=3))
    given = {t: b for t, b in blocks.items() if t not in ("a", "ab")}
    second = snapshot_from_znodes(
        _of_topics(tree, {"a", "ab"}) | {"/admin/delete_topics/ab": (None, 0)}, brokers, 2, 1, memo, blocks=given
    )
    assert second == snapshot_from_znodes(tree, brokers, 2, 1)
    assert [t.topic for t in second.topics] == ["a", "a-b", "a.b", "ab", "b"]
    assert second.topics_to_delete == ("ab",)
    assert sorted(given) == sorted(names)  # every topic's block, for the next call
    assert len(memo) == len(names) + sum(names.values())  # the replaced entries, not both


def test_a_topic_gone_leaves_neither_block_nor_memo_entries() -> None:
    brokers = [Broker(1, 5)]
    tree = _topic_tree({"t": 2, "u": 3})
    memo: dict[str, tuple[str, int, object]] = {}
    blocks: dict[str, TopicBlock] = {}
    snapshot_from_znodes(tree, brokers, 2, 1, memo, blocks=blocks)
    kept = {"t": blocks["t"]}
    after = snapshot_from_znodes({}, brokers, 2, 1, memo, blocks=kept)
    assert after == snapshot_from_znodes(_of_topics(tree, {"t"}), brokers, 2, 1)
    assert sorted(kept) == ["t"] and sorted(memo) == sorted(_of_topics(tree, {"t"}))
