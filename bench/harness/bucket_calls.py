"""One bucket's ``applyInPandasWithState`` calls as a Python worker makes them, without Spark, part by part
(:mod:`bench.bucket_cost`): a broker failure's and a failover's call, a tick, the whole call with the
collector paused or running, and the hashes that say two source trees decide alike."""

from __future__ import annotations

import cProfile
import gc
import hashlib
import json
import time
from typing import Any

from bench.harness.workloads import snapshot_for
from core import controller
from core import decisions as dc
from core import events as ev
from streaming.query import failover
from streaming.query.batch_rows import decode_row
from streaming.runtime.checkpoint_fs import MemoryCheckpointStore
from streaming.runtime.collector import gc_paused


def decode_payloads(payloads: list[str]) -> list[dc.Decision]:
    """Decision-row payloads decoded as the driver's dispatcher decodes them."""
    with gc_paused():  # as the dispatcher decodes them
        return [decode_row(p) for p in payloads]


def timed(fn: Any, *a: Any) -> tuple[Any, float]:
    """``fn(*a)`` and its wall seconds, after a full collection."""
    gc.collect()
    t0 = time.perf_counter()
    out = fn(*a)
    return out, time.perf_counter() - t0


def cached_load(bucket: int, fmt: int, size: int, blob: bytes) -> controller.ControllerState:
    """The bucket's whole state as a worker's call gets it: from the worker's cache when the blob is the one
    cached, else decoded (context included) and cached (:func:`streaming.query.stateful.whole_state`)."""
    from streaming.query import stateful

    return stateful.whole_state(bucket, fmt, size, blob)


class GroupState:
    """What ``applyInPandasWithState`` hands the function: ``exists``, ``get``, ``update``."""

    def __init__(self, value: tuple[Any, ...]) -> None:
        self.value = value

    @property
    def exists(self) -> bool:
        return True

    @property
    def get(self) -> tuple[Any, ...]:
        return self.value

    def update(self, value: tuple[Any, ...]) -> None:
        self.value = value


def whole_call(state: controller.ControllerState, calls: int, held: int, paused: bool) -> dict[str, float]:
    """The whole ``step_bucket`` call as a Python worker makes it — the bucket's state from the worker's
    cache, its routed rows in, the pandas frame out, then the frame to Arrow as Spark's serializer does —
    with the collector as in a worker (no ``gc.collect()`` between calls), ``held`` buckets' states cached
    in the process (the buckets one worker runs), ``calls`` rounds of a broker failure then its return in
    each bucket. ``paused``: the collector off during the call (the shipped code), else running (the
    code before). Returns CPU seconds of this process per call (the collections a paused call defers are
    paid by the later calls, so the total counts them) and wall seconds per call."""
    import pandas as pd
    import pyarrow as pa

    from core.codec.events import event_to_json
    from core.model import Endpoint
    from streaming.query import stateful
    from streaming.query.routing import KIND_EVENT

    cached = [stateful.dump_state(state)]
    for _ in range(held - 1):  # the other buckets of the worker: same size, their own objects
        cached.append(stateful.dump_state(stateful.load_state(*cached[0])))
    for b, dumped in enumerate(cached):
        cached_load(b, *dumped)
    payloads = [
        event_to_json(ev.BrokerFailure(1, 1001)),
        event_to_json(ev.BrokerStartup(1, 1002, None, (Endpoint("PLAINTEXT", "broker1", 9092),))),
    ]
    columns = ["bucket", "ts", "src", "offset", "sub", "kind", "payload"]
    ts, n = 0, 0
    c0, w0 = time.process_time(), time.perf_counter()
    for _ in range(calls):
        for payload in payloads:
            for b in range(held):
                ts += 1
                gs = GroupState(cached[b])
                frame = pd.DataFrame([(b, ts, "bench/0", ts, 0, KIND_EVENT, payload)], columns=columns)
                if paused:
                    (out,) = stateful.step_bucket((b,), iter([frame]), gs)
                else:
                    out = stateful.decide_rows(b, frame, gs, None, None, config=None)
                pa.RecordBatch.from_pandas(out, preserve_index=False)
                cached[b] = gs.value
                n += 1
    return {"cpu_s_per_call": (time.process_time() - c0) / n, "wall_s_per_call": (time.perf_counter() - w0) / n}


def tick_call(state: controller.ControllerState) -> dict[str, float]:
    """A bucket's call in a batch that does not touch it (ticks only: all buckets but one for an admin
    command): the whole ``step_bucket`` call now (the unchanged state is compared, not re-serialised or
    re-written), beside the ``dump_state`` every such call made before; CPU seconds, median of 5."""
    import statistics

    import pandas as pd

    from core.codec.events import event_to_json
    from streaming.query import stateful
    from streaming.query.routing import KIND_TICK

    stored = stateful.dump_state(state)
    cached_load(0, *stored)
    calls, dumps = [], []
    for i in range(5):
        gs = GroupState(stored)
        text = event_to_json(ev.Tick(1000 + i))
        frame = pd.DataFrame(
            [(0, 1000 + i, "~tick", 0, 0, KIND_TICK, text)],
            columns=["bucket", "ts", "src", "offset", "sub", "kind", "payload"],
        )
        c0 = time.process_time()
        list(stateful.step_bucket((0,), iter([frame]), gs))
        c1 = time.process_time()
        stateful.dump_state(state)
        dumps.append(time.process_time() - c1)
        calls.append(c1 - c0)
        assert gs.value is stored  # not re-written
    return {
        "tick_call_cpu_s": statistics.median(calls),
        "tick_call_cpu_s_before": statistics.median(calls) + statistics.median(dumps),
    }


def failover_call(state: controller.ControllerState, profile: bool) -> dict[str, Any]:
    """One failover batch's bucket call (see the module docstring), CPU and wall seconds per part."""
    import io
    import pstats

    import pandas as pd
    import pyarrow as pa

    import core
    from core.codec.events import event_from_json, event_to_json
    from streaming.query import stateful
    from streaming.query.routing import KIND_FAILOVER_REF, KIND_TICK

    store = MemoryCheckpointStore()
    ref = failover.write_snapshot(store, 1000, snapshot_for(state), 1)
    files = failover.StoreSnapshots(store)
    folder = str(ref["path"])
    frame = pd.DataFrame(
        [
            (0, 5, "livectl.failover/0", 1, 0, KIND_FAILOVER_REF, failover.ref_to_json(ref)),
            (0, 6, "~tick", 0, 0, KIND_TICK, event_to_json(ev.Tick(6))),
        ],
        columns=["bucket", "ts", "src", "offset", "sub", "kind", "payload"],
    )

    class _Empty(GroupState):
        @property
        def exists(self) -> bool:
            return False

    def to_arrow(out: pd.DataFrame) -> int:
        sink = pa.BufferOutputStream()
        batch = pa.RecordBatch.from_pandas(out, preserve_index=False)
        with pa.ipc.new_stream(sink, batch.schema) as w:
            w.write_batch(batch)
        return int(sink.tell())

    res: dict[str, Any] = {"core_file": core.__file__}
    gc.collect()
    c0, w0 = time.process_time(), time.perf_counter()
    (out,) = stateful.step_bucket((0,), iter([frame]), _Empty(()), None, files)
    c1, w1 = time.process_time(), time.perf_counter()
    res["arrow_bytes"] = to_arrow(out)
    c2 = time.process_time()
    res["whole_call_cpu_s"], res["whole_call_wall_s"] = c1 - c0, w1 - w0
    res["call_then_arrow_cpu_s"] = c2 - c0
    res["output_rows"], res["output_payload_bytes"] = len(out), int(sum(len(p) for p in _payloads(out)))
    res["output_hash"] = _rows_hash(out)
    del out
    parts: dict[str, float] = {}
    walls: dict[str, float] = {}

    def part(name: str, fn: Any, *a: Any, **kw: Any) -> Any:
        c, w = time.process_time(), time.perf_counter()
        got = fn(*a, **kw)
        parts[name], walls[name] = time.process_time() - c, time.perf_counter() - w
        return got

    gc.collect()
    with gc_paused():  # as the call runs
        text = part("read_file", files.read, folder, 0)
        fo = part("decode_snapshot", event_from_json, text)
        new_state, decisions, _ = part(
            "failover_step", controller.step_isolating, controller.ControllerState(), [fo, ev.Tick(6)]
        )
        dumped = part("dump_state", stateful.dump_state, new_state)
        rows = part("decision_rows", stateful.decision_rows, 0, decisions)
        part("metrics_and_imbalance", controller.metrics_and_imbalance, new_state)
        out = part("output_frame", _output_frame, rows)
        part("arrow_ipc", to_arrow, out)
    res["state_json_bytes"], res["state_blob_bytes"] = dumped[1], len(dumped[2])
    res["state_hash"] = hashlib.blake2b(dumped[2], digest_size=16).hexdigest()
    res["parts_cpu_s"] = parts
    res["parts_wall_s"] = walls
    res["parts_cpu_sum_s"] = sum(parts.values())
    if profile:
        prof = cProfile.Profile()
        gc.collect()
        prof.enable()
        (out,) = stateful.step_bucket((0,), iter([frame]), _Empty(()), None, files)
        to_arrow(out)
        prof.disable()
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(25)
        res["profile_tottime_top25"] = buf.getvalue()
        buf = io.StringIO()
        # who makes the calls at the top (a builtin's callers are not in the table above)
        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_callers(3)
        res["profile_callers_top3"] = buf.getvalue()
    return res


#: the broker-failure call's scenarios: the events of the call, on a bucket where every broker is live
FAILURE_SCENARIOS = ("failure", "double_failure", "return")


def _failure_events(scenario: str) -> tuple[list[ev.Event], list[ev.Event]]:
    """(events run before the timed call, to put the bucket in its state; the timed call's events)."""
    from core.model import Endpoint

    fail1, fail2 = ev.BrokerFailure(1, 1001), ev.BrokerFailure(2, 1002)
    if scenario == "failure":
        return [], [fail1]
    if scenario == "double_failure":
        return [], [fail1, fail2]
    if scenario == "return":
        return [fail1], [ev.BrokerStartup(1, 2001, None, (Endpoint("PLAINTEXT", "broker1", 9092),))]
    raise ValueError(f"scenario must be one of {FAILURE_SCENARIOS}, got {scenario!r}")


def failure_call(
    state: controller.ControllerState, profile: bool, scenario: str = "failure", cached: bool = True
) -> dict[str, Any]:
    """One broker failure's bucket call as a Python worker makes it (see the module docstring): the bucket's
    state in the worker's cache (decoded from its stored blob by an earlier call; with ``cached`` false not
    there: another worker ran the bucket last, so the call decodes the blob), the liveness event's row
    and the batch's tick in, the whole ``step_bucket`` call timed first (collector paused inside, as
    shipped), then what the re-enabled collector does next (the worker's Arrow serialisation of the
    output: where a deferred pass lands), then each part of the call again in the same process, CPU and
    wall seconds; ``--profile`` adds cProfile's top functions of the call."""
    import io
    import pstats

    import pandas as pd
    import pyarrow as pa

    import core
    from core.codec.events import event_to_json
    from streaming.query import stateful
    from streaming.query.failover_refs import applicable_events, events_of
    from streaming.query.routing import KIND_EVENT, KIND_TICK

    before, events = _failure_events(scenario)
    if before:
        state, _ = controller.step(state, before)
    stored = stateful.dump_state(state)
    stateful.forget_states()
    cached_load(0, *stored)  # the worker's cache, as an earlier call of this bucket left it
    cached_state = stateful.cached_state(0)
    assert cached_state is not None
    rows_in = [
        (0, 5 + i, "livectl.broker-events/0", 10 + i, 0, KIND_EVENT, event_to_json(e)) for i, e in enumerate(events)
    ]
    rows_in.append((0, 9, "~tick", 0, 0, KIND_TICK, event_to_json(ev.Tick(9))))
    frame = pd.DataFrame(rows_in, columns=["bucket", "ts", "src", "offset", "sub", "kind", "payload"])

    def to_arrow(out: pd.DataFrame) -> int:
        sink = pa.BufferOutputStream()
        batch = pa.RecordBatch.from_pandas(out, preserve_index=False)
        with pa.ipc.new_stream(sink, batch.schema) as w:
            w.write_batch(batch)
        return int(sink.tell())

    res: dict[str, Any] = {"core_file": core.__file__, "scenario": scenario, "state_cached": cached}
    if not cached:
        stateful.forget_states()
    gc.collect()
    gs = GroupState(stored)
    c0, w0 = time.process_time(), time.perf_counter()
    (out,) = stateful.step_bucket((0,), iter([frame]), gs)
    c1, w1 = time.process_time(), time.perf_counter()
    res["arrow_bytes"] = to_arrow(out)
    c2 = time.process_time()
    res["whole_call_cpu_s"], res["whole_call_wall_s"] = c1 - c0, w1 - w0
    res["arrow_after_call_cpu_s"] = c2 - c1  # includes any collection the paused call deferred
    c3 = time.process_time()
    gc.collect()
    res["full_collection_after_cpu_s"] = time.process_time() - c3
    res["gc_tracked_objects"] = len(gc.get_objects())
    res["output_rows"], res["output_payload_bytes"] = len(out), int(sum(len(p) for p in _payloads(out)))
    res["output_hash"] = _rows_hash(out)
    res["state_hash"] = hashlib.blake2b(gs.value[2], digest_size=16).hexdigest()
    del out
    parts: dict[str, float] = {}
    walls: dict[str, float] = {}

    def part(name: str, fn: Any, *a: Any, **kw: Any) -> Any:
        c, w = time.process_time(), time.perf_counter()
        got = fn(*a, **kw)
        parts[name], walls[name] = time.process_time() - c, time.perf_counter() - w
        return got

    stateful.cache_state(0, stored[2], cached_state)
    if not cached:
        stateful.forget_states()
    gc.collect()
    with gc_paused():  # as the call runs
        current = part("state_from_cache" if cached else "state_decode", cached_load, 0, *stored)
        got_events, skipped = part("events_of", events_of, 0, frame, current.context.epoch, None, loaded=True)
        kept, refused = part("applicable_events", applicable_events, current, got_events)
        new_state, decisions, _ = part("step", controller.step_isolating, current, kept)
        part("state_compare", lambda: new_state != current)
        dumped = part("dump_state", stateful.dump_state, new_state)
        part("state_digest", stateful.state_digest, dumped[2])
        rows = part("decision_rows", stateful.decision_rows, 0, [*refused, *decisions, *skipped])
        part(
            "metrics_and_imbalance",
            lambda: json.dumps(
                {**(both := controller.metrics_and_imbalance(new_state))[0], "imbalance": both[1]}, default=list
            ),
        )
        out = part("output_frame", _output_frame, rows)
        part("arrow_ipc", to_arrow, out)
    res["decisions"] = len(decisions)
    res["zk_writes"] = sum(isinstance(d, dc.ZkWrite) for d in decisions)
    res["state_json_bytes"], res["state_blob_bytes"] = dumped[1], len(dumped[2])
    res["parts_cpu_s"] = parts
    res["parts_wall_s"] = walls
    res["parts_cpu_sum_s"] = sum(parts.values())
    if profile:
        prof = cProfile.Profile()
        stateful.cache_state(0, stored[2], cached_state)
        gc.collect()
        prof.enable()
        (out,) = stateful.step_bucket((0,), iter([frame]), GroupState(stored))
        to_arrow(out)
        prof.disable()
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(30)
        res["profile_tottime_top30"] = buf.getvalue()
    return res


#: the scenarios of ``--hashes``: failover calls (every broker live; broker 1 not registered and the first
#: two topics queued for deletion) and the broker-failure calls of :data:`FAILURE_SCENARIOS`
HASH_SCENARIOS = ("failover", "failover_dead_broker", *FAILURE_SCENARIOS)


def scenario_hashes(state: controller.ControllerState, scenario: str) -> dict[str, Any]:
    """The equality contract of a change to the bucket call: the whole ``step_bucket`` call of ``scenario``
    as a Python worker makes it, and the SHA-256 of each output row (every column, in order) and of the
    new state's JSON (before zstd). Two trees decide alike when every hash is equal."""
    import pandas as pd

    from core.codec.events import event_to_json
    from streaming.query import stateful
    from streaming.query.routing import KIND_EVENT, KIND_FAILOVER_REF, KIND_TICK

    columns = ["bucket", "ts", "src", "offset", "sub", "kind", "payload"]
    files: Any = None
    gs: GroupState
    if scenario.startswith("failover"):
        topics = sorted({tp.topic for tp in state.context.partition_assignments})
        snap = (
            snapshot_for(state)
            if scenario == "failover"
            else snapshot_for(state, dead=frozenset({1}), to_delete=tuple(topics[:2]))
        )
        store = MemoryCheckpointStore()
        ref = failover.write_snapshot(store, 1000, snap, 1)
        files = failover.StoreSnapshots(store)
        rows_in = [
            (0, 5, "livectl.failover/0", 1, 0, KIND_FAILOVER_REF, failover.ref_to_json(ref)),
            (0, 6, "~tick", 0, 0, KIND_TICK, event_to_json(ev.Tick(6))),
        ]

        class _Empty(GroupState):
            @property
            def exists(self) -> bool:
                return False

        gs = _Empty(())
    else:
        before, events = _failure_events(scenario)
        if before:
            state, _ = controller.step(state, before)
        stateful.forget_states()
        gs = GroupState(stateful.dump_state(state))
        rows_in = [
            (0, 5 + i, "livectl.broker-events/0", 10 + i, 0, KIND_EVENT, event_to_json(e)) for i, e in enumerate(events)
        ]
        rows_in.append((0, 9, "~tick", 0, 0, KIND_TICK, event_to_json(ev.Tick(9))))
    frame = pd.DataFrame(rows_in, columns=columns)
    (out,) = stateful.step_bucket((0,), iter([frame]), gs, None, files)
    _fmt, size, blob = gs.value
    import pyarrow as pa

    raw = pa.decompress(blob, decompressed_size=size, codec="zstd", asbytes=True)
    rows = [hashlib.sha256(repr(tuple(r)).encode()).hexdigest() for r in out.itertuples(index=False)]
    return {"rows": rows, "state": hashlib.sha256(raw).hexdigest(), "state_json_bytes": size}


def _output_frame(rows: list[list[Any]]) -> Any:
    """The bucket's output frame of ``rows`` (a tree before packing: the plain frame)."""
    import pandas as pd

    from streaming.query import stateful

    if hasattr(stateful, "output_frame"):
        return stateful.output_frame(rows)
    return pd.DataFrame(rows, columns=stateful.OUTPUT_COLUMNS)


def _payloads(out: Any) -> list[str]:
    """The output rows' payloads, the packed ones unpacked (a tree before packing has none)."""
    from streaming.query import stateful

    return stateful.payloads(out) if hasattr(stateful, "payloads") else list(out["payload"])


def _rows_hash(out: Any) -> str:
    """A digest of the output rows (every column, in order, a packed payload unpacked and its column left out:
    the rows before packing hash the same): equal for byte-identical outputs."""
    h = hashlib.blake2b(digest_size=16)
    rows = out.drop(columns=["packed"], errors="ignore").assign(payload=_payloads(out))
    for row in rows.itertuples(index=False):
        h.update(repr(tuple(row)).encode())
    return h.hexdigest()
