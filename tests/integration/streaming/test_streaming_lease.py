"""The controller lease against a real ZooKeeper: Kafka's election, standby, takeover, fencing."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient
from waiting import wait_until

from core.decisions import ZkOp, ZkWrite
from sinks.errors import ControllerFencedError
from sinks.ports import Fence
from sinks.zookeeper import ZooKeeperSink
from streaming.driver.lease import ControllerLease, LeaseTimeoutError, read_controller_id

pytestmark = pytest.mark.integration


@pytest.fixture
def clients(zk_connect: str) -> Iterator[list[KazooClient]]:
    made: list[KazooClient] = []

    def make() -> KazooClient:
        c = KazooClient(hosts=zk_connect, timeout=6)
        c.start(timeout=15)
        made.append(c)
        return c

    yield [make(), make(), make()]
    for c in made:
        c.stop()
        c.close()


def test_first_election_follows_kafka(clients: list[KazooClient]) -> None:
    a, _, observer = clients
    fence = ControllerLease(a, 7, clock_ms=lambda: 1234).acquire(timeout=5)
    assert fence == Fence(1, 1)  # /controller_epoch created with "0", then bumped to 1 in the multi-op
    data, stat = observer.get("/controller")
    assert json.loads(data) == {"version": 1, "brokerid": 7, "timestamp": "1234"}
    assert stat.ephemeralOwner == a.client_id[0]
    assert observer.get("/controller_epoch")[0] == b"1"


def test_epoch_continues_from_what_zookeeper_holds(clients: list[KazooClient]) -> None:
    a, _, observer = clients
    observer.create("/controller_epoch", b"7")
    observer.set("/controller_epoch", b"7")
    assert ControllerLease(a, 1).acquire(timeout=5) == Fence(8, 2)


def test_standby_takes_over_with_the_next_epoch_and_fences_the_old_controller(clients: list[KazooClient]) -> None:
    a, b, observer = clients
    lost: list[str] = []
    first = ControllerLease(a, 1, on_lost=lost.append)
    fence1 = first.acquire(timeout=5)
    ZooKeeperSink(observer, fence1, "q").write_batch(0, [ZkWrite(ZkOp.CREATE, "/brokers/ids", None, make_parents=True)])

    second = ControllerLease(b, 2)
    assert second.try_acquire() is None
    with pytest.raises(LeaseTimeoutError):
        second.acquire(timeout=0.5)
    won: list[Fence] = []
    waiter = threading.Thread(target=lambda: won.append(second.acquire(timeout=30)))
    waiter.start()
    waiter.join(1.0)
    assert waiter.is_alive() and not won  # standby while the first one lives

    a.stop()  # the first controller's session ends: /controller vanishes
    waiter.join(20)
    assert won == [Fence(fence1.controller_epoch + 1, fence1.epoch_zk_version + 1)]
    assert read_controller_id(observer) == 2
    assert first.lost and lost and "session" in lost[0]

    # a zombie still writing with the first fence (on any live session) is refused
    zombie = ZooKeeperSink(observer, fence1, "q")
    with pytest.raises(ControllerFencedError):
        zombie.write_batch(1, [ZkWrite(ZkOp.CREATE, "/brokers/ids/zombie", "{}")])
    assert observer.exists("/brokers/ids/zombie") is None
    # the new controller's sink writes fine
    assert ZooKeeperSink(observer, won[0], "q").write_batch(1, [ZkWrite(ZkOp.CREATE, "/brokers/ids/new", "{}")]).ok


def test_holder_is_told_when_its_controller_znode_goes_away(clients: list[KazooClient]) -> None:
    a, b, observer = clients
    lost = threading.Event()
    reasons: list[str] = []

    def on_lost(reason: str) -> None:
        reasons.append(reason)
        lost.set()

    lease = ControllerLease(a, 1, on_lost=on_lost)
    lease.acquire(timeout=5)
    observer.delete("/controller")  # e.g. an operator forcing a re-election, as with Kafka
    assert lost.wait(10) and lease.lost
    assert reasons == ["/controller was deleted"]
    assert ControllerLease(b, 2).acquire(timeout=5).controller_epoch == 2


def test_resign_lets_a_standby_in(clients: list[KazooClient]) -> None:
    """The resigning lease is lost before /controller goes: nothing it fences is written once a successor can
    win, and its own watch on /controller, which the delete or the successor's create fires on kazoo's thread,
    sees a lost lease and stays quiet (it once raced the release and said "now owned by ...", seen in CI)."""
    a, b, _ = clients
    first = ControllerLease(a, 1)
    first.acquire(timeout=5)
    second = ControllerLease(b, 2)
    won: list[Fence] = []
    waiter = threading.Thread(target=lambda: won.append(second.acquire(timeout=30)))
    waiter.start()
    lost_when_deleted: list[bool] = []
    # resigning deletes with a bounded wait (delete_async(...).get(timeout)): watch that call
    delete = a.delete_async

    def watched_delete(*args: Any, **kwargs: Any) -> Any:
        lost_when_deleted.append(first.lost)
        return delete(*args, **kwargs)

    a.delete_async = watched_delete
    try:
        first.release()
    finally:
        del a.delete_async
    waiter.join(10)
    assert lost_when_deleted == [True]
    assert won and won[0].controller_epoch == 2 and first.lost_reason == "resigned"


def test_a_standby_can_be_told_to_stop_waiting(clients: list[KazooClient]) -> None:
    a, b, _ = clients
    ControllerLease(a, 1).acquire(timeout=5)
    stop = threading.Event()
    result: list[Fence | None] = [Fence(0, 0)]
    waiter = threading.Thread(target=lambda: result.__setitem__(0, ControllerLease(b, 2).acquire(stop=stop)))
    waiter.start()
    stop.set()
    waiter.join(5)
    assert not waiter.is_alive() and result == [None]


def test_a_waiting_standby_tries_again_only_when_the_controller_znode_or_its_session_changes(
    clients: list[KazooClient],
) -> None:
    """Each try is a multi-op ZooKeeper logs even when it fails: a standby told it may be stopped (which wakes
    it every 0.2 s to look) tries once, then again only when /controller goes, or its session reconnects."""
    from kazoo.protocol.states import KazooState

    a, b, _ = clients
    first = ControllerLease(a, 1)
    first.acquire(timeout=5)
    tries: list[int] = []
    transaction = b.transaction

    def counted() -> object:
        tries.append(1)
        return transaction()

    b.transaction = counted
    second = ControllerLease(b, 2)
    stop = LookedAtStop()
    won: list[Fence | None] = []
    waiter = threading.Thread(target=lambda: won.append(second.acquire(stop=stop)))
    waiter.start()
    try:
        wait_until("the first try", lambda: len(tries) == 1, timeout=5)
        # seven wakes to look at the stop request. On the waiter's thread a try a wake led to would come before
        # its next look, so once it has looked eight more times any try of the seven wakes before is counted
        stop.wait_looks(stop.looks + 8, timeout=10)
        assert len(tries) == 1
        second.on_connection_state(KazooState.CONNECTED)  # a reconnection: watches may be gone, look again
        wait_until("the try after the reconnection", lambda: len(tries) == 2, timeout=5)
        first.release()
        waiter.join(10)
        assert won and won[0] is not None and won[0].controller_epoch == 2
    finally:
        stop.set()
        waiter.join(5)


class LookedAtStop(threading.Event):
    """A stop request that counts how often the waiter looked at it (:meth:`is_set`)."""

    def __init__(self) -> None:
        super().__init__()
        self.looks = 0
        self._looked = threading.Condition()

    def is_set(self) -> bool:
        with self._looked:
            self.looks += 1
            self._looked.notify_all()
        return super().is_set()

    def wait_looks(self, looks: int, timeout: float) -> None:
        with self._looked:
            assert self._looked.wait_for(lambda: self.looks >= looks, timeout), f"looked {self.looks} times"


def _kafka_broker_elects_itself(client: KazooClient, broker_id: int, *, replacing: bool = False) -> None:
    """What a ZooKeeper-mode Kafka broker writes, in its own session: its registration, then (Kafka's
    ``registerControllerAndIncrementControllerEpoch``) ``/controller`` and the epoch bump in one multi-op.
    ``replacing``: the current ``/controller`` deleted in the same multi-op (a new holder without a moment
    with no ``/controller``: the outcome of a race a broker won, with no race to lose in the test)."""
    client.ensure_path("/brokers/ids")
    if not client.exists(f"/brokers/ids/{broker_id}"):
        client.create(f"/brokers/ids/{broker_id}", b'{"version":5}', ephemeral=True)
    epoch_text, stat = client.get("/controller_epoch")
    txn = client.transaction()
    if replacing:
        txn.delete("/controller")
    controller = {"version": 2, "brokerid": broker_id, "timestamp": "1", "kraftControllerEpoch": -1}
    txn.create("/controller", json.dumps(controller).encode(), ephemeral=True)
    txn.set_data("/controller_epoch", str(int(epoch_text) + 1).encode(), version=stat.version)
    assert not any(isinstance(r, Exception) for r in txn.commit())


def test_take_over_from_kafka_spares_the_incumbent_and_livectl_controllers(
    clients: list[KazooClient], zk_connect: str
) -> None:
    a, b, observer = clients
    ControllerLease(a, 1).acquire(timeout=5)
    lease = ControllerLease(b, 2, take_over_from_kafka=True)
    # a livectl controller: no broker registration shares its session
    assert lease.kafka_broker_controller() is None
    assert lease.try_take_over_from_kafka(None) is None
    a.stop()
    wait_until("/controller gone", lambda: observer.exists("/controller") is None, timeout=10)
    broker = KazooClient(hosts=zk_connect, timeout=6)
    broker.start(timeout=15)
    try:
        _kafka_broker_elects_itself(broker, 7)
        held = lease.kafka_broker_controller()
        assert held is not None and held[0] == 7
        # the controller found when the wait began is never deposed
        assert lease.try_take_over_from_kafka(held[1].czxid) is None
        assert read_controller_id(observer) == 7
        # one elected after it is: one multi-op, the next epoch, the broker's registration untouched
        fence = lease.try_take_over_from_kafka(held[1].czxid - 1)
        assert fence == Fence(3, 3)
        data, stat = observer.get("/controller")
        assert json.loads(data)["brokerid"] == 2 and stat.ephemeralOwner == b.client_id[0]
        assert observer.get("/controller_epoch")[0] == b"3"
        assert observer.exists("/brokers/ids/7") is not None
    finally:
        broker.stop()
        broker.close()


def test_a_waiting_standby_taking_over_from_kafka_wins_the_re_election_a_broker_won(
    clients: list[KazooClient], zk_connect: str
) -> None:
    """The standby waits while the Kafka broker it found holds /controller; when another broker is elected
    (here one that replaced it at once, as if it had won the race for a deleted /controller), the standby
    takes /controller from it."""
    _, b, observer = clients
    brokers = [KazooClient(hosts=zk_connect, timeout=6) for _ in range(2)]
    for c in brokers:
        c.start(timeout=15)
    try:
        observer.ensure_path("/controller_epoch")
        observer.set("/controller_epoch", b"4")
        _kafka_broker_elects_itself(brokers[0], 1)
        lease = ControllerLease(b, 1000, take_over_from_kafka=True)
        won: list[Fence] = []
        waiter = threading.Thread(target=lambda: won.append(lease.acquire(timeout=30)))
        waiter.start()
        waiter.join(1.0)
        assert waiter.is_alive() and read_controller_id(observer) == 1  # the incumbent is not deposed
        _kafka_broker_elects_itself(brokers[1], 2, replacing=True)
        waiter.join(20)
        assert won and won[0].controller_epoch == 7  # 5: broker 1, 6: broker 2, 7: livectl
        data, stat = observer.get("/controller")
        assert json.loads(data)["brokerid"] == 1000 and stat.ephemeralOwner == b.client_id[0]
    finally:
        for c in brokers:
            c.stop()
            c.close()
