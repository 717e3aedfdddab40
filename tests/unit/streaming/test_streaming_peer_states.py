"""Bucket states shared between an executor's Python workers (:mod:`streaming.peer_states`): a worker
decodes ahead the stored blobs the others wrote, and a step uses such a state only for the very blob
Spark gives it."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from shell_pipeline import ADMIN, EVENTS, FakeGroupState, Pipeline, epoch_znode, snapshot_of
from spark_conf import FakeSpark

from core import events as ev
from core.codec.events import event_to_json
from sinks.memory import MemoryZooKeeper
from sinks.ports import Fence
from streaming import peer_states, routing, stateful
from streaming.collector import collect_after_task
from streaming.peer_states import PeerStates, folder_for, read_blob, share_states_enabled, write_blob
from streaming.validation import InputValidator

pytestmark = pytest.mark.unit


def _stored_blobs(tmp_path: Path, validator: InputValidator) -> dict[int, tuple[Any, ...]]:
    """Every bucket's stored state after a failover and a topic created."""
    zk = MemoryZooKeeper()
    epoch_znode(zk)
    p = Pipeline(tmp_path, zk, Fence(1, 0), validator)
    p.run_batch([(EVENTS, p.failover_ref(snapshot_of((1, 2, 3))))])
    p.run_batch([(ADMIN, event_to_json(ev.CreateTopic("r", "t", 6, 2)))])
    return {b: s.value for b, s in p.states.items() if s.value is not None}


def _peers(cache: dict[int, tuple[bytes, Any]], decode: Any = stateful._decode_paused) -> PeerStates:
    return PeerStates(cache, stateful._digest, decode, spare=lambda: True, background=False)


def test_the_switch_reads_true_or_false_and_refuses_anything_else() -> None:
    assert share_states_enabled(FakeSpark()) is True
    assert share_states_enabled(FakeSpark({peer_states.SHARE_STATES_CONF: " FALSE "})) is False
    assert share_states_enabled(FakeSpark({peer_states.SHARE_STATES_CONF: "True"})) is True
    with pytest.raises(ValueError, match=r"spark\.livectl\.python\.shareStates: must be true or false, got 'yes'"):
        share_states_enabled(FakeSpark({peer_states.SHARE_STATES_CONF: "yes"}))


def test_blob_files_round_trip_and_a_short_or_missing_file_is_none(tmp_path: Path) -> None:
    folder = folder_for(str(tmp_path), "file:/ckpt/a")
    assert folder != folder_for(str(tmp_path), "file:/ckpt/b")
    assert folder == folder_for(str(tmp_path), "file:/ckpt/a")
    write_blob(folder, 3, 1, 99, b"blob-bytes")
    assert read_blob(folder / "bucket-3") == (1, 99, b"blob-bytes")
    write_blob(folder, 3, 1, 7, b"newer")  # replaced whole
    assert read_blob(folder / "bucket-3") == (1, 7, b"newer")
    assert [p.name for p in folder.iterdir()] == ["bucket-3"]  # no staging file left
    (folder / "bucket-4").write_bytes(b"\x00\x01")
    assert read_blob(folder / "bucket-4") is None
    assert read_blob(folder / "bucket-5") is None


def test_a_worker_decodes_the_others_blobs_and_its_step_then_finds_them(
    tmp_path: Path, validator: InputValidator
) -> None:
    blobs = _stored_blobs(tmp_path, validator)
    assert len(blobs) >= 2
    folder = tmp_path / "shared"
    for b, (fmt, size, blob) in blobs.items():
        write_blob(folder, b, int(fmt), int(size), bytes(blob))
    stateful._STATE_CACHE.clear()  # this worker ran none of them
    peers = _peers(stateful._STATE_CACHE)
    peers.step_started(folder)
    peers.step_ended()
    try:
        assert peers.decode_pending() == len(blobs)
        assert peers.decode_pending() == 0  # held now: not decoded again
        for b, (fmt, size, blob) in blobs.items():
            got, undecoded = stateful._stored(b, int(fmt), int(size), bytes(blob))
            assert undecoded is None  # a hit: the step decodes nothing
            assert got == stateful.load_state(int(fmt), int(size), bytes(blob))
    finally:
        stateful._STATE_CACHE.clear()


def test_a_state_is_used_only_for_the_blob_it_was_decoded_from(tmp_path: Path, validator: InputValidator) -> None:
    blobs = _stored_blobs(tmp_path, validator)
    bucket, (fmt, size, blob) = next(iter(blobs.items()))
    other = next(v for b, v in blobs.items() if b != bucket)
    folder = tmp_path / "shared"
    write_blob(folder, bucket, int(other[0]), int(other[1]), bytes(other[2]))  # another bucket's state, misnamed
    stateful._STATE_CACHE.clear()
    peers = _peers(stateful._STATE_CACHE)
    peers.step_started(folder)
    peers.step_ended()
    try:
        assert peers.decode_pending() == 1
        _, undecoded = stateful._stored(bucket, int(fmt), int(size), bytes(blob))
        assert undecoded is not None  # the blob Spark gives is not the one decoded: decoded from its own
        assert stateful._decoded(bucket, undecoded) == stateful.load_state(int(fmt), int(size), bytes(blob))
    finally:
        stateful._STATE_CACHE.clear()


def test_a_damaged_blob_is_left_to_the_step_and_not_retried(tmp_path: Path) -> None:
    folder = tmp_path / "shared"
    write_blob(folder, 0, stateful.STATE_FORMAT, 10, b"not zstd at all")
    calls: list[int] = []

    def decode(fmt: int, size: int, blob: bytes, stop: Any) -> Any:
        calls.append(fmt)
        return stateful.load_state(fmt, size, blob)

    cache: dict[int, tuple[bytes, Any]] = {}
    peers = _peers(cache, decode)
    peers.step_started(folder)
    peers.step_ended()
    assert peers.decode_pending() == 0
    assert peers.decode_pending() == 0
    assert calls == [stateful.STATE_FORMAT] and cache == {}


def test_nothing_is_decoded_once_a_step_began(tmp_path: Path) -> None:
    folder = tmp_path / "shared"
    for b in range(3):
        write_blob(folder, b, 1, 1, bytes([b]))
    peers = _peers({}, lambda fmt, size, blob, stop: blob)
    peers.step_started(folder)
    assert peers.decode_pending() == 0
    peers.step_ended()
    assert peers.decode_pending() == 3


def test_a_decoded_state_does_not_replace_one_a_step_stored_meanwhile(tmp_path: Path) -> None:
    folder = tmp_path / "shared"
    write_blob(folder, 0, 1, 1, b"old")
    cache: dict[int, tuple[bytes, Any]] = {}
    newer = (b"digest-of-the-step's-state", "the step's state")

    def decode(fmt: int, size: int, blob: bytes, stop: Any) -> Any:
        cache[0] = newer  # the worker's step stored bucket 0's new state while this decoded
        return "decoded"

    peers = _peers(cache, decode)
    peers.step_started(folder)
    peers.step_ended()
    assert peers.decode_pending() == 0
    assert cache[0] is newer


def test_a_step_waits_for_the_blob_being_decoded_instead_of_decoding_it_again(tmp_path: Path) -> None:
    folder = tmp_path / "shared"
    write_blob(folder, 0, 1, 1, b"blob")
    started, release = threading.Event(), threading.Event()

    def decode(fmt: int, size: int, blob: bytes, stop: Any) -> Any:
        started.set()
        release.wait(10)
        return "state"

    cache: dict[int, tuple[bytes, Any]] = {}
    peers = _peers(cache, decode)
    peers.step_started(folder)
    peers.step_ended()
    worker = threading.Thread(target=peers.decode_pending)
    worker.start()
    assert started.wait(10)
    waited: list[Any] = []

    def step_needs_it() -> None:
        peers.wait_for(0, stateful._digest(b"blob"))
        waited.append(cache.get(0))

    waiter = threading.Thread(target=step_needs_it)
    waiter.start()
    time.sleep(0.1)
    assert waited == []  # still decoding
    peers.wait_for(0, stateful._digest(b"another blob"))  # not this one: no wait
    release.set()
    worker.join(10)
    waiter.join(10)
    assert waited == [(stateful._digest(b"blob"), "state")]


def test_the_thread_decodes_after_a_quiet_spell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(peer_states, "QUIET_S", 0.05)
    folder = tmp_path / "shared"
    cache: dict[int, tuple[bytes, Any]] = {}
    peers = PeerStates(cache, stateful._digest, lambda fmt, size, blob, stop: blob.decode(), spare=lambda: True)
    peers.step_started(folder)
    peers.publish(0, (1, 1, b"mine"))
    peers.step_ended()
    write_blob(folder, 1, 1, 1, b"theirs")  # another worker's task ends later
    deadline = time.monotonic() + 10
    while len(cache) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert cache == {0: (stateful._digest(b"mine"), "mine"), 1: (stateful._digest(b"theirs"), "theirs")}
    peers.step_started(None)  # the thread stops looking; the folder stays


def test_a_step_that_stores_a_new_state_publishes_its_blob(tmp_path: Path, validator: InputValidator) -> None:
    zk = MemoryZooKeeper()
    epoch_znode(zk)
    p = Pipeline(tmp_path, zk, Fence(1, 0), validator)
    p.run_batch([(EVENTS, p.failover_ref(snapshot_of((1, 2, 3))))])
    folder = tmp_path / "shared"
    peers = _peers({})
    peers.step_started(folder)  # outside a Spark task the step keeps this folder
    peers.step_ended()
    routed = routing.prepare_frame(
        p.records([(ADMIN, event_to_json(ev.CreateTopic("r", "t", 6, 2)))]), len(p.states) - 1, ADMIN, validator
    )
    for bucket, frame in routed.groupby("bucket"):
        state: FakeGroupState = p.states[int(bucket)]
        before = state.value
        list(stateful.step_bucket((bucket,), iter([frame]), state, peers=peers))
        if state.value != before:
            fmt, size, blob = state.value  # type: ignore[misc]
            assert read_blob(folder / f"bucket-{int(bucket)}") == (int(fmt), int(size), bytes(blob))
    assert any(folder.iterdir())


def test_the_worker_settles_its_collector_after_a_pass_that_decoded(tmp_path: Path) -> None:
    folder = tmp_path / "shared"
    write_blob(folder, 0, 1, 1, b"a")
    settled: list[int] = []
    peers = PeerStates(
        {},
        stateful._digest,
        lambda fmt, size, blob, stop: blob,
        settle=lambda: settled.append(1),
        spare=lambda: True,
        background=False,
    )
    peers.step_started(folder)
    peers.step_ended()
    assert peers.decode_pending() == 1 and settled == [1]
    assert peers.decode_pending() == 0 and settled == [1]  # nothing new: nothing to settle


def test_collect_after_task_runs_the_daemons_task_end_collection(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys
    import types

    collected: list[str] = []

    class Collector:
        def collect(self, generation: int = 2) -> int:
            collected.append("task-end")
            return 0

    daemon = types.ModuleType("pyspark.daemon")
    daemon.gc = Collector()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pyspark.daemon", daemon)
    collect_after_task()
    assert collected == ["task-end"]


def test_nothing_is_decoded_while_no_core_is_free(tmp_path: Path) -> None:
    folder = tmp_path / "shared"
    write_blob(folder, 0, 1, 1, b"a")
    free = [False]
    cache: dict[int, tuple[bytes, Any]] = {}
    peers = PeerStates(
        cache, stateful._digest, lambda fmt, size, blob, stop: blob, spare=lambda: free[0], background=False
    )
    peers.step_started(folder)
    peers.step_ended()
    assert peers.decode_pending() == 0 and cache == {}
    free[0] = True
    assert peers.decode_pending() == 1 and cache == {0: (stateful._digest(b"a"), b"a")}


@pytest.mark.parametrize(
    ("samples", "cores", "expected"),
    [
        ([(0.0, 0.0), (100.0, 200.0)], 2, True),  # half of 2 cores idle: one core
        ([(0.0, 0.0), (50.0, 200.0)], 2, False),  # a quarter: half a core
        ([(0.0, 0.0), (90.0, 100.0)], 1, False),  # 0.9 of the only core
        ([None, None], 2, True),  # no /proc/stat: decode
        ([(5.0, 10.0), (5.0, 10.0)], 2, True),  # no time passed on the counters
    ],
)
def test_an_idle_core_is_read_from_the_machines_cpu_counters(
    monkeypatch: pytest.MonkeyPatch, samples: list[Any], cores: int, expected: bool
) -> None:
    it = iter(samples)
    monkeypatch.setattr(peer_states, "_cpu_times", lambda: next(it))
    monkeypatch.setattr(peer_states.os, "cpu_count", lambda: cores)
    assert peer_states.machine_has_idle_core(0.0) is expected


def test_the_machines_cpu_counters_are_read_where_linux_has_them() -> None:
    got = peer_states._cpu_times()
    if Path("/proc/stat").exists():
        assert got is not None and 0.0 <= got[0] <= got[1]
    else:
        assert got is None


def test_a_step_beginning_stops_a_decode_under_way_and_it_is_tried_again_later(
    tmp_path: Path, validator: InputValidator
) -> None:
    blobs = _stored_blobs(tmp_path, validator)
    bucket, (fmt, size, blob) = next(iter(blobs.items()))
    folder = tmp_path / "shared"
    write_blob(folder, bucket, int(fmt), int(size), bytes(blob))
    cache: dict[int, tuple[bytes, Any]] = {}
    peers = _peers(cache)
    peers.step_started(folder)
    peers.step_ended()
    asked: list[bool] = []

    def step_begins_during_the_decode(f: int, n: int, b: bytes, stop: Any) -> Any:
        peers.step_started(None)  # a task arrives while the context is being decoded
        try:
            return stateful._decode_paused(f, n, b, lambda: asked.append(stop()) or asked[-1])
        finally:
            peers.step_ended()

    peers._decode = step_begins_during_the_decode
    assert peers.decode_pending() == 0 and cache == {}
    assert asked == [True]  # stopped at its first topic
    peers._decode = stateful._decode_paused
    assert peers.decode_pending() == 1  # not taken for a damaged blob: decoded once the worker is idle again
    assert cache[bucket][1] == stateful.load_state(int(fmt), int(size), bytes(blob))


def test_a_file_dealt_with_is_not_read_again_until_it_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "shared"
    write_blob(folder, 0, 1, 1, b"a")
    write_blob(folder, 1, 1, 1, b"damaged")
    reads: list[str] = []
    real = peer_states.read_blob

    def counted(path: Path) -> Any:
        reads.append(path.name)
        return real(path)

    monkeypatch.setattr(peer_states, "read_blob", counted)

    def decode(fmt: int, size: int, blob: bytes, stop: Any) -> Any:
        if blob == b"damaged":
            raise ValueError("not a state")
        return blob

    cache: dict[int, tuple[bytes, Any]] = {}
    peers = PeerStates(cache, stateful._digest, decode, spare=lambda: True, background=False)
    peers.step_started(folder)
    peers.step_ended()
    assert peers.decode_pending() == 1 and sorted(reads) == ["bucket-0", "bucket-1"]
    assert peers.decode_pending() == 0 and len(reads) == 2  # neither read again
    write_blob(folder, 1, 1, 1, b"b")  # replaced: read and decoded
    assert peers.decode_pending() == 1 and reads[2:] == ["bucket-1"]
    assert cache[1] == (stateful._digest(b"b"), b"b")


def test_the_idle_core_watch_judges_the_time_since_its_last_reading(monkeypatch: pytest.MonkeyPatch) -> None:
    readings = iter([(0.0, 0.0), (150.0, 200.0), (160.0, 400.0)])  # (idle, total) jiffies
    monkeypatch.setattr(peer_states, "_cpu_times", lambda: next(readings))
    monkeypatch.setattr(peer_states.os, "cpu_count", lambda: 2)
    now = [0.0]
    watch = peer_states.IdleCoreWatch(window_s=0.2, clock=lambda: now[0])
    assert watch()  # nothing to judge yet
    now[0] = 0.1
    assert watch()  # within the window: the last verdict, no reading
    now[0] = 0.3
    assert watch()  # 150 of 200 jiffies idle on 2 cores: 1.5 cores idle
    now[0] = 0.6
    assert not watch()  # 10 of 200: 0.1 core idle
    now[0] = 0.7
    assert not watch()
