"""The query's steps without Spark: prepare → per-bucket step (a fake GroupState) → dispatch to fakes.

Spark runs exactly these functions; here they are driven by hand so that the shell's contracts are
checked in milliseconds: order of effects, replay, fencing, failover hand-off, merged admin results.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from shell_pipeline import (
    ADMIN,
    BUCKETS,
    EVENTS,
    FakeGroupState,
    Pipeline,
    by_bucket,
    epoch_znode,
    snapshot_of,
    store_at,
)

from core import events as ev
from core.codec.events import event_to_json
from core.context import ControllerContext
from core.context_codec import context_from_dict
from sinks.memory import MemoryZooKeeper
from sinks.ports import Fence
from streaming.query import routing, stateful
from streaming.query.failover import StoreSnapshots
from streaming.query.validation import InputValidator

pytestmark = pytest.mark.unit


def test_create_topic_end_to_end_on_fakes(tmp_path: Path, validator: InputValidator) -> None:
    p = Pipeline.failed_over(tmp_path, validator)
    zk = p.zk
    out = p.run_batch(
        [
            (ADMIN, event_to_json(ev.CreateTopic("r1", "orders", 3, 2))),
            (ADMIN, "not json"),
        ]
    )
    # Kafka's znodes, created through the fenced sink
    topic = json.loads(zk.get("/brokers/topics/orders")[0])
    assert sorted(topic["partitions"]) == ["0", "1", "2"]
    for part in range(3):
        state = json.loads(zk.get(f"/brokers/topics/orders/partitions/{part}/state")[0])
        assert state["leader"] == topic["partitions"][str(part)][0] and state["leader_epoch"] == 0
    # requests: one LeaderAndIsr per broker, in Kafka's order per broker
    msgs = [m.value_json() for m in p.requests.messages if m.topic == "livectl.requests"]
    msgs = [m for m in msgs if m["batchId"] == 1]
    per_broker: dict[int, list[str]] = {}
    for m in msgs:
        # a shared UpdateMetadata (brokerId -1) is read by each of its addressees
        for b in [a["brokerId"] for a in m.get("addressees", ())] or [m["brokerId"]]:
            per_broker.setdefault(b, []).append(m["api"])
    for apis in per_broker.values():
        assert apis == sorted(apis, key=["LeaderAndIsr", "UpdateMetadata", "StopReplica"].index)
        assert apis.count("LeaderAndIsr") == 1
    results = [m.value_json() for m in p.requests.messages if m.topic == "livectl.admin-results"]
    assert {(r["request_id"], r["status"]) for r in results} == {("r1", "ok")}
    rejected = [m.value_json() for m in p.requests.messages if m.topic == "livectl.rejected"]
    assert len(rejected) == 1 and rejected[0]["payload"] == "not json"
    # one metrics row per bucket per batch; the dispatcher sums them
    assert (out["kind"] == stateful.KIND_METRICS).sum() == BUCKETS
    assert p.dispatcher.metrics["GlobalPartitionCount"] == 3
    assert p.dispatcher.metrics["GlobalTopicCount"] == 1
    assert p.dispatcher.metrics["ActiveControllerCount"] == 1


def test_history_before_the_first_failover_is_not_applied(tmp_path: Path, validator: InputValidator) -> None:
    zk = MemoryZooKeeper()
    epoch_znode(zk)
    p = Pipeline(tmp_path, zk, Fence(1, 0), validator)
    p.run_batch(
        [
            (ADMIN, event_to_json(ev.CreateTopic("old", "history", 1, 1))),
            (EVENTS, p.failover_ref(snapshot_of((1,)))),
            (ADMIN, event_to_json(ev.CreateTopic("new", "current", 1, 1))),
        ]
    )
    assert not zk.exists("/brokers/topics/history")
    assert zk.exists("/brokers/topics/current")
    results = {
        m.value_json()["request_id"]: m.value_json() for m in p.requests.messages if m.topic == "livectl.admin-results"
    }
    assert results["old"]["error"] == "NOT_CONTROLLER"
    assert results["new"]["status"] == "ok"


def test_state_round_trips_through_its_pyarrow_blob(tmp_path: Path, validator: InputValidator) -> None:
    p = Pipeline.failed_over(tmp_path, validator)
    p.run_batch([(ADMIN, event_to_json(ev.CreateTopic("r", "t", 4, 2)))])
    for s in p.states.values():
        if s.value is None:
            continue
        fmt, size, blob = s.value
        state = stateful.load_state(fmt, size, blob)
        assert stateful.dump_state(state) == s.value
        assert len(blob) < size  # compressed
    with pytest.raises(ValueError, match="format 99"):
        stateful.load_state(99, 0, b"")


def test_state_blobs_written_before_orjson_load_and_read_the_same(tmp_path: Path, validator: InputValidator) -> None:
    """Checkpoints made when the state was written with the standard library's ``json`` load unchanged
    (format 1 both), and the bytes written now are the same JSON."""
    import pyarrow as pa

    p = Pipeline.failed_over(tmp_path, validator)
    p.run_batch([(ADMIN, event_to_json(ev.CreateTopic("r", "t", 4, 2)))])
    states = [s.value for s in p.states.values() if s.value is not None]
    assert states
    for fmt, size, blob in states:
        state = stateful.load_state(fmt, size, blob)
        before = json.dumps(state.to_dict(), separators=(",", ":")).encode()  # how format 1 was written
        old_blob = pa.compress(before, codec="zstd", asbytes=True)
        assert stateful.load_state(1, len(before), old_blob) == state
        assert stateful.dump_state(state) == (1, len(before), pa.compress(before, codec="zstd", asbytes=True))


def test_a_batch_that_changes_nothing_leaves_the_stored_state_alone(tmp_path: Path, validator: InputValidator) -> None:
    class CountingState(FakeGroupState):
        def __init__(self, value: tuple[object, ...] | None) -> None:
            super().__init__()
            self.value = value
            self.updates = 0

        def update(self, value: tuple[object, ...]) -> None:
            self.updates += 1
            super().update(value)

    p = Pipeline.failed_over(tmp_path, validator)
    p.run_batch([(ADMIN, event_to_json(ev.CreateTopic("r", "t", 4, 2)))])
    counting = {b: CountingState(s.value) for b, s in p.states.items()}
    p.states.update(counting)
    before = {b: s.value for b, s in counting.items()}
    p.run_batch([])  # ticks only
    assert all(s.updates == 0 for s in counting.values())
    assert {b: s.value for b, s in counting.items()} == before
    p.run_batch([(ADMIN, event_to_json(ev.CreateTopic("r2", "u", 2, 2)))])
    changed = {b for b, s in counting.items() if s.updates}
    assert changed == {routing.bucket_of("u", BUCKETS)}
    for b in changed:  # the new blob holds the topic
        assert "u" in stateful.load_state(*counting[b].get).context.topic_partitions


def test_worker_state_cache_gives_what_decoding_gives(tmp_path: Path, validator: InputValidator) -> None:
    p = Pipeline.failed_over(tmp_path, validator)
    saved = {b: s.value for b, s in p.states.items()}
    records = [(ADMIN, event_to_json(ev.CreateTopic("r", "t", 3, 2)))]
    routed = pd.concat(
        [routing.prepare_frame(p.records(records), BUCKETS, ADMIN, validator), routing.tick_rows(1, BUCKETS)]
    )

    def run(cache_cleared: bool) -> list[str]:
        if cache_cleared:
            stateful.forget_states()
        out: list[str] = []
        for bucket, frame in by_bucket(routed):
            gs = FakeGroupState()
            gs.value = saved[int(bucket)]
            for df in stateful.step_bucket((bucket,), iter([frame]), gs, snapshots=StoreSnapshots(store_at(tmp_path))):
                out.extend(df["payload"])
        return out

    warm = run(cache_cleared=False)  # the cache holds batch 0's states: hits
    cold = run(cache_cleared=True)
    assert warm == cold and any("LeaderAndIsr" in x for x in warm)


def _takeover_batch(
    tmp_path: Path, validator: InputValidator, failover_first: bool
) -> tuple[dict[int, tuple[object, ...] | None], pd.DataFrame]:
    """Every bucket's stored state after a controller created topics, and the next controller's first batch:
    its failover reference (with ``failover_first``; then an admin command after it, as the source's barrier
    delivers them) or only a command."""
    first = Pipeline.failed_over(tmp_path, validator)
    zk = first.zk
    first.run_batch([(ADMIN, event_to_json(ev.CreateTopic(f"r{i}", f"t{i}", 4, 2))) for i in range(6)])
    saved = {b: s.value for b, s in first.states.items()}
    zk.set("/controller_epoch", b"2")
    records = [(ADMIN, event_to_json(ev.CreateTopic("r9", "late", 2, 2)))]
    if failover_first:
        records.append((EVENTS, first.failover_ref(snapshot_of((1, 2, 3), epoch=2, epoch_version=1))))
    routed = pd.concat(
        [routing.prepare_frame(first.records(records), BUCKETS, ADMIN, validator), routing.tick_rows(1, BUCKETS)]
    )
    return saved, routed


def _run_uncached(
    tmp_path: Path, saved: dict[int, tuple[object, ...] | None], routed: pd.DataFrame, summaries: bool
) -> tuple[list[list[object]], dict[int, tuple[object, ...] | None]]:
    """Each bucket's step on its saved state in a worker that has not cached it: rows (summary rows left
    out) and the states stored."""
    stateful.forget_states()
    rows: list[list[object]] = []
    states: dict[int, tuple[object, ...] | None] = {}
    for bucket, frame in by_bucket(routed):
        gs = FakeGroupState()
        gs.value = saved[int(bucket)]
        for df in stateful.step_bucket(
            (bucket,), iter([frame]), gs, snapshots=StoreSnapshots(store_at(tmp_path)), summaries=summaries
        ):
            rows.extend(r for r in df.values.tolist() if r[2] != "summary")
        states[int(bucket)] = gs.value
    return rows, states


@pytest.mark.parametrize("failover_first", [True, False])
def test_a_stored_context_is_decoded_only_when_the_step_reads_it(
    tmp_path: Path, validator: InputValidator, monkeypatch: pytest.MonkeyPatch, failover_first: bool
) -> None:
    from core.controller import state as state_module

    saved, routed = _takeover_batch(tmp_path, validator, failover_first)
    stored = [b for b, v in saved.items() if v is not None and b != routing.REJECTED_BUCKET]
    # with the summaries, which compare the step's elections with the stored context, it is always decoded
    whole_rows, whole_states = _run_uncached(tmp_path, saved, routed, summaries=True)
    decoded: list[object] = []

    def recording(d: dict[str, Any], stop: Callable[[], bool] | None = None) -> ControllerContext:
        decoded.append(d)
        return context_from_dict(d, stop)

    monkeypatch.setattr(state_module, "context_from_dict", recording)
    rows, states = _run_uncached(tmp_path, saved, routed, summaries=False)
    # the same decisions, rows and stored states either way ...
    assert rows == whole_rows and states == whole_states
    assert any("LeaderAndIsr" in str(r[3]) for r in rows)
    # ... and the stored contexts decoded only where no failover replaced them first
    assert len(decoded) == (0 if failover_first else len(stored))


def test_a_failover_that_raises_leaves_the_other_events_on_the_stored_context(
    tmp_path: Path, validator: InputValidator, monkeypatch: pytest.MonkeyPatch
) -> None:
    from core.controller import event_loop

    saved, routed = _takeover_batch(tmp_path, validator, failover_first=True)
    whole_rows, _ = _run_uncached(tmp_path, saved, routed, summaries=True)

    def broken(c: object, e: object) -> None:
        raise RuntimeError("a bug in the failover")

    monkeypatch.setattr(event_loop, "HANDLERS", {**event_loop.HANDLERS, ev.ControllerFailover: broken})
    broken_rows, broken_states = _run_uncached(tmp_path, saved, routed, summaries=True)
    rows, states = _run_uncached(tmp_path, saved, routed, summaries=False)
    # the failover quarantined, the command created its topic on the contexts the first controller left
    assert rows == broken_rows and states == broken_states and rows != whole_rows
    assert any("a bug in the failover" in str(r[3]) for r in rows)
    assert any('"late"' in str(r[3]) for r in rows)


def test_failover_references_of_other_runs_are_history(tmp_path: Path, validator: InputValidator) -> None:

    zk = MemoryZooKeeper()
    epoch_znode(zk)
    p = Pipeline(tmp_path, zk, Fence(1, 0), validator)
    gone = p.failover_ref(snapshot_of((1, 2), epoch=1))
    store_at(tmp_path).remove(json.loads(gone)["path"])  # an earlier run's checkpoint was deleted
    out = p.run_batch([(EVENTS, gone)])
    failures = [json.loads(x) for x in out[out["kind"] == stateful.KIND_FAILURE]["payload"]]
    assert len(failures) == BUCKETS and all("is gone" in f["reason"] for f in failures)
    current = p.failover_ref(snapshot_of((1, 2, 3), epoch=2))
    p.run_batch([(EVENTS, current), (ADMIN, event_to_json(ev.CreateTopic("r", "t", 1, 3)))])
    assert zk.exists("/brokers/topics/t")
    # the same reference met again (a replay of the topic) is stale now
    out = p.run_batch([(EVENTS, current)])
    failures = [json.loads(x) for x in out[out["kind"] == stateful.KIND_FAILURE]["payload"]]
    assert failures and all("stale" in f["reason"] for f in failures)
    assert p.dispatcher.metrics["GlobalTopicCount"] == 1


def test_large_payloads_leave_the_bucket_packed_and_come_back_the_same() -> None:
    small = "x" * (stateful.PACK_MIN_CHARS - 1)
    large = '{"a":"é"}\n' + "y" * stateful.PACK_MIN_CHARS  # non-ASCII: UTF-8 both ways
    zeros = (0,) * len(stateful.METRIC_COLUMNS)
    rows = [[0, i, stateful.KIND_REQUEST, p, *zeros] for i, p in enumerate([small, large])]
    out = stateful.output_frame([list(r) for r in rows])
    assert list(out.columns) == [*stateful.OUTPUT_COLUMNS, stateful.PACKED_COLUMN]
    assert out["payload"].tolist() == [small, ""]
    assert out[stateful.PACKED_COLUMN][0] is None
    packed = out[stateful.PACKED_COLUMN][1]
    assert isinstance(packed, bytes) and len(packed) < len(large) // 100
    assert stateful.payloads(out) == [small, large]
    # rows made without the column (tests, the dispatcher's own frames) are read as they are
    assert stateful.payloads(pd.DataFrame(rows, columns=stateful.OUTPUT_COLUMNS)) == [small, large]


def test_a_batch_of_packed_rows_dispatches_as_the_same_rows_unpacked(
    tmp_path: Path, validator: InputValidator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A topic of 1,500 partitions: each broker's LeaderAndIsr row is ~200 kB, sent packed; the ZooKeeper tree
    and every message are those of the same batches with nothing packed."""

    def run(tmp: Path) -> tuple[dict[str, tuple[bytes, int]], list[tuple[str, bytes, bytes]], int]:
        zk = MemoryZooKeeper()
        epoch_znode(zk)
        p = Pipeline(tmp, zk, Fence(1, 0), validator)
        p.run_batch([(EVENTS, p.failover_ref(snapshot_of((1, 2, 3))))])
        out = p.run_batch([(ADMIN, event_to_json(ev.CreateTopic("r", "wide", 1500, 3)))])
        packed = int(out[stateful.PACKED_COLUMN].notna().sum())
        tree = {path: node for path, node in zk.nodes.items() if "/wide" in path}
        return tree, [(m.topic, m.key, m.value) for m in p.requests.messages], packed

    tree, messages, packed = run(tmp_path / "packed")
    assert packed >= 3  # a LeaderAndIsr row per broker at least
    assert len([path for path in tree if path.endswith("/state")]) == 1500
    monkeypatch.setattr(stateful, "PACK_MIN_CHARS", 1 << 40)
    plain_tree, plain_messages, none = run(tmp_path / "plain")
    assert none == 0
    assert (tree, messages) == (plain_tree, plain_messages)
