"""Cordoned brokers (issue 44, item 1): no new replica is placed on them — topic creation and partition
addition skip them, replicas already there stay; the set comes from ``/livectl/cordoned_brokers`` in a new
controller's snapshot and, while it runs, from :class:`core.zk_path_events.BrokersCordoned`."""

from __future__ import annotations

import pytest
from core_support import Cluster, endpoint
from hypothesis import given
from hypothesis import strategies as st

from core.codec.events import event_from_json, event_to_json
from core.codec.snapshot import encode_failover_json
from core.controller import ControllerState
from core.cordon import CORDONED_BROKERS, decode_cordoned, encode_cordoned
from core.decisions import AdminResult, AdminStatus
from core.errors import FormatError
from core.events import ControllerFailover, CreatePartitions, CreateTopic
from core.kafka.zksnapshot import snapshot_from_znodes
from core.model import Broker
from core.placement import BrokerRack, PlacementError, assign_replicas
from core.zk_path_events import BrokersCordoned

pytestmark = pytest.mark.unit


def test_the_znode_form() -> None:
    assert CORDONED_BROKERS == "/livectl/cordoned_brokers"
    assert encode_cordoned([5, 3, 5]) == '{"version":1,"brokers":[3,5]}'
    assert decode_cordoned(encode_cordoned([5, 3])) == (3, 5)
    assert decode_cordoned(None) == decode_cordoned(b"") == ()
    for bad, field in (('{"version":2,"brokers":[]}', "version"), ('{"version":1,"brokers":[-1]}', "brokers")):
        with pytest.raises(FormatError) as e:
            decode_cordoned(bad)
        assert e.value.field == field


def test_placement_skips_cordoned_brokers() -> None:
    brokers = [BrokerRack(b) for b in (1, 2, 3, 4)]
    placed = assign_replicas(brokers, 12, 3, cordoned={2})
    assert all(2 not in r and len(set(r)) == 3 for r in placed.values())
    assert placed == assign_replicas([b for b in brokers if b.id != 2], 12, 3), "the same as without broker 2"
    racked = [BrokerRack(1, "a"), BrokerRack(2, "a"), BrokerRack(3, "b"), BrokerRack(4, "b")]
    placed = assign_replicas(racked, 8, 2, cordoned={3})
    assert all(3 not in r and {1, 2} & set(r) and 4 in r for r in placed.values()), "rack-aware over the others"
    with pytest.raises(PlacementError) as e:
        assign_replicas(brokers, 1, 3, cordoned={1, 2})
    assert e.value.error == "INVALID_REPLICATION_FACTOR"
    assert "larger than available brokers: 2 (2 cordoned: 1, 2)" in str(e.value)


@given(
    st.integers(2, 7).flatmap(lambda n: st.tuples(st.just(n), st.sets(st.integers(1, n), max_size=n - 1))),
    st.integers(1, 30),
)
def test_no_placement_names_a_cordoned_broker(brokers_and_cordoned: tuple[int, set[int]], partitions: int) -> None:
    n, cordoned = brokers_and_cordoned
    rf = min(2, n - len(cordoned))
    placed = assign_replicas([BrokerRack(b) for b in range(1, n + 1)], partitions, rf, cordoned=cordoned)
    assert len(placed) == partitions and all(not cordoned & set(r) for r in placed.values())


def _answers(c: Cluster) -> list[AdminResult]:
    return [d for d in c.decisions if isinstance(d, AdminResult)]


def test_creation_and_addition_skip_a_cordoned_broker_and_existing_replicas_stay() -> None:
    c = Cluster.start([1, 2, 3, 4])
    c.run(CreateTopic("c0", "before", 4, 2))
    before = {tp: c.ctx.replicas(tp) for tp in c.ctx.partitions_for_topic("before")}
    assert any(2 in r for r in before.values())
    c.run(BrokersCordoned(1, (2,)))
    assert c.state.cordoned_brokers == frozenset({2})
    assert {tp: c.ctx.replicas(tp) for tp in c.ctx.partitions_for_topic("before")} == before, "nothing moves"
    c.run(CreateTopic("c1", "t", 8, 3))
    assert [a.status for a in _answers(c)] == [AdminStatus.OK]
    assert all(2 not in c.ctx.replicas(tp) for tp in c.ctx.partitions_for_topic("t"))
    c.run(CreatePartitions("c2", "before", 8))
    added = [tp for tp in c.ctx.partitions_for_topic("before") if tp.partition >= 4]
    assert len(added) == 4 and all(2 not in c.ctx.replicas(tp) for tp in added)
    c.run(CreateTopic("c3", "explicit", replica_assignment=((2, 1),)))
    assert c.ctx.replicas(next(iter(c.ctx.partitions_for_topic("explicit")))) == (2, 1), "an explicit one stands"
    c.run(CreateTopic("c4", "wide", 1, 4))
    [refused] = _answers(c)
    assert refused.error == "INVALID_REPLICATION_FACTOR" and "1 cordoned: 2" in refused.message
    c.run(BrokersCordoned(1, ()))
    c.run(CreateTopic("c5", "wide", 1, 4))
    assert [a.status for a in _answers(c)] == [AdminStatus.OK], "uncordoned: broker 2 takes replicas again"


def test_an_event_read_under_another_epoch_is_dropped() -> None:
    c = Cluster.start([1, 2, 3])
    c.run(BrokersCordoned(7, (2,)))
    assert c.state.cordoned_brokers == frozenset()


def test_a_new_controller_reads_the_set_from_its_snapshot() -> None:
    znodes = {CORDONED_BROKERS: (encode_cordoned([3]), 4)}
    brokers = [Broker(b, 100 + b, None, endpoint(b)) for b in (1, 2, 3)]
    snap = snapshot_from_znodes(znodes, brokers, 2, 1)
    assert snap.cordoned_brokers == (3,)
    failover = ControllerFailover(0, snap)
    assert event_from_json(event_to_json(failover)) == failover
    assert encode_failover_json(0, snap) == event_to_json(failover)
    assert '"cordoned_brokers":[3]' in event_to_json(failover)
    c = Cluster.start([1, 2, 3])
    c.run(failover)
    assert c.state.cordoned_brokers == frozenset({3})
    assert ControllerState.from_bytes(c.state.to_bytes()).cordoned_brokers == frozenset({3})
    assert event_from_json(event_to_json(BrokersCordoned(2, (1, 3)))) == BrokersCordoned(2, (1, 3))
