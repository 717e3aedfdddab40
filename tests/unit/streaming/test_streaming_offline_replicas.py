"""The shell's share of ``/livectl/offline_replicas``: the failover snapshot lists the records and each
bucket gets only its own topics' (so that buckets never delete each other's records)."""

from __future__ import annotations

import pytest

from core import events as ev
from core.codec.events import event_from_json, event_to_json
from core.kafka.zksnapshot import snapshot_from_znodes
from core.model import Broker
from core.snapshot import ZkSnapshot
from streaming.query import failover, routing

pytestmark = pytest.mark.unit

BUCKETS = 4


def test_snapshot_lists_the_records_and_splits_them_by_bucket() -> None:
    names = [f"t{i}" for i in range(12)]
    znodes = {f"/livectl/offline_replicas/{t}": ('{"version":1,"partitions":{"0":[1]}}', 0) for t in names}
    znodes["/livectl/sink/q"] = ('{"version":1}', 3)  # livectl's other bookkeeping is no record
    snap = snapshot_from_znodes(znodes, [Broker(1, 7)], 2, 1)
    assert snap.offline_replica_topics == tuple(sorted(names))
    parts = failover.split_snapshot(snap, BUCKETS)
    assert sorted(t for p in parts for t in p.offline_replica_topics) == sorted(names)
    for b, part in enumerate(parts):
        assert all(routing.bucket_of(t, BUCKETS) == b for t in part.offline_replica_topics)


def test_failover_event_round_trips_the_record_list() -> None:
    snap = ZkSnapshot(2, 1, (Broker(1, 7),), (), (), offline_replica_topics=("a", "b"))
    event = ev.ControllerFailover(0, snap)
    assert event_from_json(event_to_json(event)) == event
    old_form = event_to_json(ev.ControllerFailover(0, ZkSnapshot(2, 1, (Broker(1, 7),), (), ())))
    assert ',"offline_replica_topics":[]' in old_form  # an event written before the field existed lacks it
    assert event_from_json(old_form.replace(',"offline_replica_topics":[]', "")) == ev.ControllerFailover(
        0, ZkSnapshot(2, 1, (Broker(1, 7),), (), ())
    )
