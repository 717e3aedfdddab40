"""The ZooKeeper sink against a real ZooKeeper: fencing, order, compare-and-set, replay, throughput.

Each test works under its own chroot, so every test sees an empty tree with its own
``/controller_epoch``. The in-memory fake is checked against the real sink on the same scenario.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient

from core.decisions import ZkOp, ZkWrite
from sinks.errors import ControllerFencedError, SinkUnavailableError
from sinks.memory import MemoryZkSink, MemoryZooKeeper
from sinks.ports import Fence
from sinks.zookeeper import ZooKeeperSink, progress_path

pytestmark = pytest.mark.integration


def _client(connect: str) -> KazooClient:
    c = KazooClient(hosts=connect, timeout=10)
    c.start(timeout=15)
    return c


@pytest.fixture
def zk(zk_connect: str) -> Iterator[KazooClient]:
    c = _client(zk_connect)
    yield c
    c.stop()
    c.close()


def _elect(zk: KazooClient, epoch: int = 1) -> Fence:
    zk.create("/controller_epoch", str(epoch).encode())
    return Fence(epoch, 0)


def _state(leader: int, epoch: int, isr: list[int]) -> str:
    return json.dumps({"controller_epoch": 1, "leader": leader, "version": 1, "leader_epoch": epoch, "isr": isr})


def _topic_writes(topic: str, partitions: int) -> list[ZkWrite]:
    assignment = {str(p): [1, 2, 3] for p in range(partitions)}
    out = [
        ZkWrite(
            ZkOp.CREATE,
            f"/brokers/topics/{topic}",
            json.dumps({"version": 3, "partitions": assignment, "adding_replicas": {}, "removing_replicas": {}}),
            make_parents=True,
        )
    ]
    out += [
        ZkWrite(ZkOp.CREATE, f"/brokers/topics/{topic}/partitions/{p}/state", _state(1, 0, [1, 2]), make_parents=True)
        for p in range(partitions)
    ]
    return out


def _tree(zk: KazooClient, path: str = "/") -> dict[str, tuple[bytes, int]]:
    """Every znode except the sink's bookkeeping, with data and version."""
    out: dict[str, tuple[bytes, int]] = {}
    for child in zk.get_children(path):
        p = f"{path.rstrip('/')}/{child}"
        if p.startswith("/livectl") or p.startswith("/zookeeper"):
            continue
        data, stat = zk.get(p)
        out[p] = (data, stat.version)
        out.update(_tree(zk, p))
    return out


def test_writes_are_applied_in_order_with_parents_cas_and_trees(zk: KazooClient) -> None:
    fence = _elect(zk)
    sink = ZooKeeperSink(zk, fence, "q", ops_per_transaction=10)
    writes = [
        *_topic_writes("a", 30),
        ZkWrite(ZkOp.SET, "/brokers/topics/a/partitions/0/state", _state(2, 1, [2, 3]), expected_version=0),
        # same path again in the same batch: must see the previous write's version
        ZkWrite(ZkOp.SET, "/brokers/topics/a/partitions/0/state", _state(3, 2, [3]), expected_version=1),
        ZkWrite(ZkOp.CREATE, "/admin/delete_topics/a", None, make_parents=True),
    ]
    result = sink.write_batch(0, writes)
    assert result.ok and result.applied == len(writes) and result.skipped == 0
    data, stat = zk.get("/brokers/topics/a/partitions/0/state")
    assert json.loads(data)["leader"] == 3 and stat.version == 2
    assert sorted(zk.get_children("/brokers/topics/a/partitions"), key=int) == [str(p) for p in range(30)]
    assert result.transactions >= 4  # 34 writes + 30 parent pairs in transactions of 8 writes
    # the count the replay wait watches grows with every transaction committed
    assert sink.transactions_committed == result.transactions

    deletion = [
        ZkWrite(ZkOp.DELETE_TREE, "/brokers/topics/a"),
        ZkWrite(ZkOp.DELETE, "/admin/delete_topics/a"),
        ZkWrite(ZkOp.DELETE_TREE, "/brokers/topics/never-existed"),
    ]
    before = sink.transactions_committed
    result = sink.write_batch(1, deletion)
    assert result.ok and result.applied == 3
    assert sink.transactions_committed == before + result.transactions
    assert zk.exists("/brokers/topics/a") is None
    assert zk.get_children("/admin/delete_topics") == []
    assert json.loads(zk.get(progress_path("q"))[0]) == {
        "version": 1,
        "batch_id": 1,
        "next": 3,
        "controller_epoch": 1,
    }


def test_a_tree_larger_than_one_transaction_is_deleted(zk: KazooClient) -> None:
    fence = _elect(zk)
    sink = ZooKeeperSink(zk, fence, "q", ops_per_transaction=20)
    assert sink.write_batch(0, _topic_writes("big", 50)).ok
    result = sink.write_batch(1, [ZkWrite(ZkOp.DELETE_TREE, "/brokers/topics/big")])
    assert result.ok and result.transactions >= 6  # 101 znodes, 18 per transaction
    assert zk.get_children("/brokers/topics") == []


def test_cas_failure_is_reported_and_the_rest_applied_in_order(zk: KazooClient) -> None:
    fence = _elect(zk)
    sink = ZooKeeperSink(zk, fence, "q", ops_per_transaction=10, max_in_flight=4)
    assert sink.write_batch(0, _topic_writes("t", 40)).ok
    # someone else changed partition 5 under us: the controller's CAS at version 0 must fail
    zk.set("/brokers/topics/t/partitions/5/state", _state(9, 9, [9]).encode())
    writes = [
        ZkWrite(ZkOp.SET, f"/brokers/topics/t/partitions/{p}/state", _state(2, 1, [2]), expected_version=0)
        for p in range(40)
    ] + [ZkWrite(ZkOp.CREATE, "/brokers/topics/t", "{}")]  # already exists: NodeExists
    result = sink.write_batch(1, writes)
    assert [(f.index, f.error) for f in result.failed] == [(5, "BadVersion"), (40, "NodeExists")]
    assert result.applied == 39 and not result.ok
    for p in range(40):
        data, stat = zk.get(f"/brokers/topics/t/partitions/{p}/state")
        assert json.loads(data)["leader"] == (9 if p == 5 else 2)
        assert stat.version == 1
    assert json.loads(zk.get(progress_path("q"))[0])["next"] == 41


def test_a_fenced_sink_raises_and_writes_nothing(zk: KazooClient) -> None:
    fence = _elect(zk)
    sink = ZooKeeperSink(zk, fence, "q")
    assert sink.write_batch(0, _topic_writes("t", 3)).ok
    zk.set("/controller_epoch", b"2")  # another controller was elected
    with pytest.raises(ControllerFencedError) as err:
        sink.write_batch(1, [ZkWrite(ZkOp.DELETE_TREE, "/brokers/topics/t"), *_topic_writes("u", 300)])
    assert err.value.expected_version == 0 and "BadVersion" in str(err.value)
    assert zk.exists("/brokers/topics/t") is not None
    assert zk.exists("/brokers/topics/u") is None


class _CrashingClient:
    """A real client that loses its connection after ``commits`` transactions (a fake, not a mock):
    the sink's process dies in the middle of a batch."""

    def __init__(self, client: KazooClient, commits: int) -> None:
        self._client = client
        self._left = commits

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def transaction(self) -> Any:
        t = self._client.transaction()
        real_commit = t.commit_async

        def commit_async() -> Any:
            if self._left <= 0:
                from kazoo.exceptions import ConnectionLoss

                raise ConnectionLoss("simulated crash")
            self._left -= 1
            return real_commit()

        t.commit_async = commit_async
        return t


def _reassign_batch() -> list[ZkWrite]:
    """A batch where order matters: per partition RS first, then RS = target, plus a CAS chain."""
    out: list[ZkWrite] = []
    for p in range(60):
        path = f"/brokers/topics/r/partitions/{p}/state"
        out.append(ZkWrite(ZkOp.SET, path, _state(1, 1, [1, 2, 3, 4]), expected_version=0))
        out.append(ZkWrite(ZkOp.SET, path, _state(4, 2, [4]), expected_version=1))
    out.append(ZkWrite(ZkOp.DELETE_TREE, "/brokers/topics/gone"))
    out.append(ZkWrite(ZkOp.CREATE, "/admin/reassign_done/r", "{}", make_parents=True))
    return out


@pytest.mark.parametrize("crash_after", [1, 3, 7])
def test_replay_after_a_crash_leaves_zookeeper_as_a_clean_run(zk_connect: str, crash_after: int) -> None:
    setup = _topic_writes("r", 60) + _topic_writes("gone", 20)

    # the clean run, in a sibling chroot
    base = _client(zk_connect.rsplit("/", 1)[0])
    clean_root = "/" + zk_connect.rsplit("/", 1)[1] + "-clean"
    base.ensure_path(clean_root)
    base.stop()
    clean = _client(zk_connect + "-clean")
    fence = _elect(clean)
    assert ZooKeeperSink(clean, fence, "q").write_batch(0, setup).ok
    clean_result = ZooKeeperSink(clean, fence, "q", ops_per_transaction=12).write_batch(1, _reassign_batch())
    assert clean_result.ok

    crashed = _client(zk_connect)
    fence = _elect(crashed)
    assert ZooKeeperSink(crashed, fence, "q").write_batch(0, setup).ok
    dying = ZooKeeperSink(_CrashingClient(crashed, crash_after), fence, "q", ops_per_transaction=12)
    with pytest.raises(SinkUnavailableError):
        dying.write_batch(1, _reassign_batch())
    # what was sent before the "crash" lands before anything the same session asks later (ZooKeeper answers
    # a session's requests in order): this read is the marker. Then a restart: a new sink replays batch 1
    crashed.sync("/")
    replayed = ZooKeeperSink(crashed, fence, "q", ops_per_transaction=12).write_batch(1, _reassign_batch())
    assert replayed.ok, replayed.failed
    assert replayed.skipped > 0 and replayed.skipped + replayed.applied == len(_reassign_batch())
    assert _tree(crashed) == _tree(clean)
    # and replaying a batch that is complete does nothing
    again = ZooKeeperSink(crashed, fence, "q").write_batch(1, _reassign_batch())
    assert (again.applied, again.skipped, again.transactions) == (0, len(_reassign_batch()), 0)
    # a lower batch id is a new run (a new checkpoint): nothing is skipped
    fresh = ZooKeeperSink(crashed, fence, "q").write_batch(0, [ZkWrite(ZkOp.CREATE, "/new-run", "{}")])
    assert (fresh.applied, fresh.skipped) == (1, 0)
    for c in (clean, crashed):
        c.stop()
        c.close()


def test_the_memory_fake_matches_the_real_sink(zk: KazooClient) -> None:
    fence = _elect(zk)
    mem = MemoryZooKeeper()
    mem.create("/controller_epoch", b"1")
    real_sink = ZooKeeperSink(zk, fence, "q", ops_per_transaction=7)
    fake_sink = MemoryZkSink(mem, fence, "q")
    batches = [
        _topic_writes("a", 12) + _topic_writes("b", 3),
        [
            ZkWrite(ZkOp.SET, "/brokers/topics/a/partitions/1/state", _state(2, 1, [2]), expected_version=0),
            ZkWrite(ZkOp.SET, "/brokers/topics/a/partitions/2/state", _state(2, 1, [2]), expected_version=5),
            ZkWrite(ZkOp.DELETE_TREE, "/brokers/topics/b"),
            ZkWrite(ZkOp.DELETE, "/brokers/topics/missing"),
            ZkWrite(ZkOp.CREATE, "/admin/delete_topics/b", None, make_parents=True),
        ],
    ]
    for i, batch in enumerate(batches):
        r1 = real_sink.write_batch(i, batch)
        r2 = fake_sink.write_batch(i, batch)
        assert (r1.applied, r1.skipped, r1.failed) == (r2.applied, r2.skipped, r2.failed)
    assert _tree(zk) == {p: v for p, v in mem.snapshot().items() if p != "/"}
    # the fake's crash switch, then a replay, also ends like a clean run
    mem2 = MemoryZooKeeper()
    mem2.create("/controller_epoch", b"1")
    with pytest.raises(SinkUnavailableError):
        MemoryZkSink(mem2, fence, "q", crash_after=5).write_batch(0, batches[0])
    assert MemoryZkSink(mem2, fence, "q").write_batch(0, batches[0]).skipped == 5
    mem3 = MemoryZooKeeper()
    mem3.create("/controller_epoch", b"1")
    MemoryZkSink(mem3, fence, "q").write_batch(0, batches[0])
    assert mem2.snapshot() == mem3.snapshot()


def test_a_batch_of_many_transactions_applies_every_fenced_write(zk: KazooClient) -> None:
    """A batch far larger than one transaction: every compare-and-set applied, each znode once (the write
    rate is measured by ``python -m bench``, beside the raw ZooKeeper rate, not asserted here)."""
    fence = _elect(zk)
    sink = ZooKeeperSink(zk, fence, "q")
    n = 3_000
    assert sink.write_batch(0, _topic_writes("many", n)).ok
    writes = [
        ZkWrite(ZkOp.SET, f"/brokers/topics/many/partitions/{p}/state", _state(2, 1, [2, 3]), expected_version=0)
        for p in range(n)
    ]
    result = sink.write_batch(1, writes)
    assert result.ok and result.applied == n
    for p in (0, n // 2, n - 1):
        data, stat = zk.get(f"/brokers/topics/many/partitions/{p}/state")
        assert stat.version == 1 and json.loads(data)["leader"] == 2


def test_a_replay_resumes_only_the_progress_of_its_own_checkpoint(zk: KazooClient) -> None:
    """Batch 0 of a new checkpoint cut after its first transaction: the restart on the same checkpoint
    resumes after it (a topic znode is not created twice, which would read as someone else's topic); a
    run on another checkpoint whose batch 0 meets that progress znode starts at write 0."""
    fence = _elect(zk)
    batch = _topic_writes("c", 30)
    dying = ZooKeeperSink(_CrashingClient(zk, 1), fence, "q", ops_per_transaction=12, checkpoint_id="a")
    with pytest.raises(SinkUnavailableError):
        dying.write_batch(0, batch)
    # the first transaction, sent before the "crash", is answered before this read on the same session
    assert zk.exists("/brokers/topics/c") is not None
    resumed = ZooKeeperSink(zk, fence, "q", ops_per_transaction=12, checkpoint_id="a").write_batch(0, batch)
    assert resumed.ok, resumed.failed
    assert resumed.skipped > 0 and resumed.skipped + resumed.applied == len(batch)
    assert json.loads(zk.get(progress_path("q"))[0])["checkpoint"] == "a"
    # another checkpoint's batch 0: the progress znode names batch 0 too, but it is not this run's
    other = ZooKeeperSink(zk, fence, "q", checkpoint_id="b").write_batch(0, [ZkWrite(ZkOp.CREATE, "/other", "{}")])
    assert (other.applied, other.skipped) == (1, 0) and other.ok
    assert json.loads(zk.get(progress_path("q"))[0])["checkpoint"] == "b"
