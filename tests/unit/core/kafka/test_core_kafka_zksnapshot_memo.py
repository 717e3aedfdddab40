"""Decoding a snapshot with a memo of an earlier decode gives the same snapshot, reuses what is unchanged
and forgets what is gone."""

from __future__ import annotations

import pytest

from core.kafka.zksnapshot import snapshot_from_znodes
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
