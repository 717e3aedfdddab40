"""Profile: the Python cost of one bucket's ``applyInPandasWithState`` call, without Spark.

The controller query runs :func:`streaming.query.stateful.step_bucket` once per bucket per micro-batch. With
the shipped 8 buckets, each holds 1/8 of the partitions (100k partitions: 12.5k per bucket), and local[2]
runs two buckets at a time. This script builds one bucket's state as the query holds it (10 brokers,
replication factor 3, Kafka's default placement, all online) and times, in this process, the parts of
one call that handles a broker failure, plus the driver's side of ``foreachBatch``:

* ``load_state`` — zstd-decompress + JSON parse + ``ControllerState.from_dict`` of the bucket's blob;
* ``step`` — ``core.controller.step(state, [BrokerFailure(1)])``;
* ``dump_state`` — ``to_dict`` + JSON + zstd of the new state (written back to the state store);
* ``decision_rows`` — the decisions as JSON rows (the call's output);
* ``dispatch decode`` — the driver decoding those rows once (:func:`streaming.query.dispatch.decode_row`);
* ``failover load`` — reading the bucket's failover snapshot file and stepping ``ControllerFailover`` (the
  takeover / cold-start batch);
* ``tick call`` — the whole call in a batch that leaves the bucket unchanged, beside what it cost when such
  a call re-serialised the state;
* ``failover call`` — the whole call of a failover batch's bucket (its failover reference and a tick in,
  the snapshot slice read from the shipped file, on an empty state), first as one call, then part by part
  in the same process so that the parts account for every second of it: reading the file, decoding it,
  the ``ControllerFailover`` step, the state dump, the decision rows, metrics, the output frame (large
  payloads packed: :func:`streaming.query.stateful.output_frame`) and its Arrow conversion (what
  ``applyInPandasWithState``'s serializer does with the frame), CPU and wall seconds; with ``--profile``
  also the call's top functions (cProfile). ``--trees A,B`` runs it in fresh processes importing each
  source tree in turn (A B B A ...), for a before/after in one session;
* ``whole call`` — the whole call as a Python worker makes it, with ``--held`` buckets' states cached and
  the collector as in a worker, in fresh processes: the collector paused during the call (shipped) and
  running (before), alternating, CPU seconds per call (the parts above run after ``gc.collect()``, which
  hides the collector's cost).

The per-batch floor of the query is about ``buckets / 2`` times the per-bucket sum (2 cores).

Run: ``.venv/bin/python bench/bucket_cost.py [--partitions 100000] [--buckets 8]``; the failover call
alone: ``--failover-call [--profile] [--trees /path/to/main,/path/to/branch --rounds 2]``.
``--failure-call --state-not-cached`` times a broker failure's call whose worker has not cached the bucket's
state (Spark gave the bucket's task to the other Python worker): the call decodes the stored blob.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
if "--tree" in sys.argv:  # a fresh process of --trees: import that source tree's code (its _common puts
    # its own root first on the path)
    _tree = sys.argv[sys.argv.index("--tree") + 1]
    sys.path[:0] = [str(Path(_tree) / "bench"), _tree]

from _common import RESULTS_DIR, machine_info, write_results
from core_step import build_state

from core import controller
from core import decisions as dc
from core import events as ev
from core.kafka.request_encoding import encode_body
from core.kafka.zkdata import encode_partition_state, encode_topic_znode
from core.kafka.zksnapshot import snapshot_from_znodes
from core.model import Broker
from core.snapshot import ZkSnapshot
from streaming.query import failover
from streaming.query.dispatch import decode_row
from streaming.query.stateful import decision_rows, dump_state, load_state
from streaming.runtime.checkpoint_fs import MemoryCheckpointStore
from streaming.runtime.collector import gc_paused


def _decode_rows(payloads: list[str]) -> list[dc.Decision]:
    with gc_paused():  # as the dispatcher decodes them
        return [decode_row(p) for p in payloads]


def timed(fn: Any, *a: Any) -> tuple[Any, float]:
    gc.collect()
    t0 = time.perf_counter()
    out = fn(*a)
    return out, time.perf_counter() - t0


def snapshot_for(
    state: controller.ControllerState, dead: frozenset[int] = frozenset(), to_delete: tuple[str, ...] = ()
) -> ZkSnapshot:
    """The ZooKeeper snapshot a new controller would read for this bucket's topics; the brokers of ``dead``
    not registered (their replicas offline), the topics of ``to_delete`` under ``/admin/delete_topics``."""
    ctx = state.context
    znodes: dict[str, tuple[str | None, int]] = {f"/admin/delete_topics/{t}": (None, 0) for t in to_delete}
    by_topic: dict[str, dict[int, Any]] = {}
    for tp, ra in ctx.partition_assignments.items():
        by_topic.setdefault(tp.topic, {})[tp.partition] = ra
    for topic, parts in by_topic.items():
        znodes[f"/brokers/topics/{topic}"] = (encode_topic_znode(parts, None), 0)
    for tp, li in ctx.partition_leadership.items():
        znodes[f"/brokers/topics/{tp.topic}/partitions/{tp.partition}/state"] = (
            encode_partition_state(li.leader_and_isr, 1),
            0,
        )
    brokers = [Broker(b.id, b.epoch, b.rack, b.endpoints) for b in ctx.live_brokers.values() if b.id not in dead]
    return snapshot_from_znodes(znodes, brokers, 2, 1)


def cached_load(bucket: int, fmt: int, size: int, blob: bytes) -> controller.ControllerState:
    """The bucket's whole state as a worker's call gets it: from the worker's cache when the blob is the one
    cached, else decoded (context included) and cached (:func:`streaming.query.stateful.whole_state`)."""
    from streaming.query import stateful

    return stateful.whole_state(bucket, fmt, size, blob)


class _GroupState:
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
                gs = _GroupState(cached[b])
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
        gs = _GroupState(stored)
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


def whole_call_ab(args: argparse.Namespace) -> dict[str, Any]:
    """:func:`whole_call` in fresh processes, collector paused and running alternately (ABBA ...); medians."""
    import statistics
    import subprocess

    runs: dict[str, list[dict[str, float]]] = {"paused": [], "running": []}
    for r in range(args.rounds):
        for mode in ("paused", "running") if r % 2 == 0 else ("running", "paused"):
            cmd = [sys.executable, __file__, "--partitions", str(args.partitions), "--buckets", str(args.buckets)]
            cmd += ["--held", str(args.held), "--calls", str(args.calls), "--whole-call-only", mode]
            done = subprocess.run(cmd, check=True, capture_output=True, text=True)
            runs[mode].append(json.loads(done.stdout.strip().splitlines()[-1]))
    out: dict[str, Any] = {"whole_call_buckets_held": args.held, "whole_call_runs_per_mode": args.rounds}
    for mode, got in runs.items():
        for k in ("cpu_s_per_call", "wall_s_per_call"):
            out[f"whole_call_{k}_collector_{mode}"] = statistics.median(g[k] for g in got)
    out["whole_call_cpu_ratio_paused_to_running"] = round(
        out["whole_call_cpu_s_per_call_collector_paused"] / out["whole_call_cpu_s_per_call_collector_running"], 3
    )
    return out


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

    class _Empty(_GroupState):
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
        part("metrics_and_imbalance", lambda: (controller.metrics(new_state), controller.imbalance(new_state)))
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
    gs = _GroupState(stored)
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
                {**controller.metrics(new_state), "imbalance": controller.imbalance(new_state)}, default=list
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
        (out,) = stateful.step_bucket((0,), iter([frame]), _GroupState(stored))
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
    gs: _GroupState
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

        class _Empty(_GroupState):
            @property
            def exists(self) -> bool:
                return False

        gs = _Empty(())
    else:
        before, events = _failure_events(scenario)
        if before:
            state, _ = controller.step(state, before)
        stateful.forget_states()
        gs = _GroupState(stateful.dump_state(state))
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


def failure_call_trees(args: argparse.Namespace) -> dict[str, Any]:
    """:func:`failure_call` in fresh processes per source tree, alternating (A B B A ...); medians, and
    whether each tree gave the same output and state bytes."""
    import statistics
    import subprocess

    trees = args.trees.split(",")
    runs: dict[str, list[dict[str, Any]]] = {t: [] for t in trees}
    for r in range(args.rounds):
        for tree in trees if r % 2 == 0 else list(reversed(trees)):
            cmd = [sys.executable, __file__, "--partitions", str(args.partitions), "--buckets", str(args.buckets)]
            cmd += ["--failure-call-only", "--scenario", args.scenario, "--tree", tree]
            cmd += ["--state-not-cached"] if args.state_not_cached else []
            done = subprocess.run(cmd, check=True, capture_output=True, text=True)
            got = json.loads(done.stdout.strip().splitlines()[-1])
            if not str(got["core_file"]).startswith(str(Path(tree).resolve())):
                raise SystemExit(f"the run for {tree} imported {got['core_file']}")
            print(f"{tree}: whole call {got['whole_call_cpu_s']:.3f} s CPU", file=sys.stderr)
            runs[tree].append(got)
    out: dict[str, Any] = {"failure_call_rounds": args.rounds, "order": "A B B A ...", "scenario": args.scenario}
    out["state_cached"] = not args.state_not_cached
    hashes = set()
    for tree, got in runs.items():
        med: dict[str, Any] = {"core_file": got[0]["core_file"]}
        for k in ("whole_call_cpu_s", "whole_call_wall_s", "arrow_after_call_cpu_s", "parts_cpu_sum_s"):
            med[k] = statistics.median(g[k] for g in got)
        med["parts_cpu_s"] = {p: statistics.median(g["parts_cpu_s"][p] for g in got) for p in got[0]["parts_cpu_s"]}
        med["runs_whole_call_cpu_s"] = [g["whole_call_cpu_s"] for g in got]
        med["output_hash"], med["state_hash"] = got[0]["output_hash"], got[0]["state_hash"]
        hashes.update((g["output_hash"], g["state_hash"]) for g in got)
        out[tree] = med
    out["same_bytes_in_every_run"] = len(hashes) == 1
    base = out[trees[0]]["whole_call_cpu_s"]
    for tree in trees[1:]:
        out[f"ratio_whole_call_cpu_{Path(tree).name}_to_{Path(trees[0]).name}"] = round(
            out[tree]["whole_call_cpu_s"] / base, 3
        )
    return out


def failover_call_trees(args: argparse.Namespace) -> dict[str, Any]:
    """:func:`failover_call` in fresh processes per source tree, alternating (A B B A ...); medians."""
    import statistics
    import subprocess

    trees = args.trees.split(",")
    runs: dict[str, list[dict[str, Any]]] = {t: [] for t in trees}
    for r in range(args.rounds):
        for tree in trees if r % 2 == 0 else list(reversed(trees)):
            cmd = [sys.executable, __file__, "--partitions", str(args.partitions), "--buckets", str(args.buckets)]
            cmd += ["--failover-call-only", "--tree", tree]
            done = subprocess.run(cmd, check=True, capture_output=True, text=True)
            got = json.loads(done.stdout.strip().splitlines()[-1])
            if not str(got["core_file"]).startswith(str(Path(tree).resolve())):
                raise SystemExit(f"the run for {tree} imported {got['core_file']}")
            print(f"{tree}: whole call {got['whole_call_cpu_s']:.2f} s CPU", file=sys.stderr)
            runs[tree].append(got)
    out: dict[str, Any] = {"failover_call_rounds": args.rounds, "order": "A B B A ..."}
    for tree, got in runs.items():
        med: dict[str, Any] = {"core_file": got[0]["core_file"]}
        for k in ("whole_call_cpu_s", "whole_call_wall_s", "call_then_arrow_cpu_s", "parts_cpu_sum_s"):
            med[k] = statistics.median(g[k] for g in got)
        med["parts_cpu_s"] = {p: statistics.median(g["parts_cpu_s"][p] for g in got) for p in got[0]["parts_cpu_s"]}
        med["runs_whole_call_cpu_s"] = [g["whole_call_cpu_s"] for g in got]
        med["output_hash"], med["state_hash"] = got[0].get("output_hash"), got[0].get("state_hash")
        out[tree] = med
    out["same_bytes_in_every_run"] = (
        len({(g.get("output_hash"), g.get("state_hash")) for t in trees for g in runs[t]}) == 1
    )
    base = out[trees[0]]["whole_call_cpu_s"]
    for tree in trees[1:]:
        out[f"ratio_whole_call_cpu_{Path(tree).name}_to_{Path(trees[0]).name}"] = round(
            out[tree]["whole_call_cpu_s"] / base, 3
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=100_000, help="cluster size")
    ap.add_argument("--buckets", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=2, help="whole-call processes per mode, alternating (ABBA)")
    ap.add_argument("--held", type=int, default=4, help="buckets' states one Python worker keeps (8 / 2 cores)")
    ap.add_argument("--calls", type=int, default=2, help="whole-call rounds per process (failure + return each)")
    ap.add_argument("--whole-call-only", choices=["paused", "running"], help=argparse.SUPPRESS)
    ap.add_argument("--failover-call", action="store_true", help="only the failover call's parts")
    ap.add_argument("--profile", action="store_true", help="with --failover-call: cProfile's top functions")
    ap.add_argument("--trees", help="with --failover-call: source trees to compare, comma-separated")
    ap.add_argument("--failover-call-only", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--failure-call", action="store_true", help="only a broker failure's call, part by part")
    ap.add_argument("--scenario", choices=FAILURE_SCENARIOS, default="failure", help="with --failure-call")
    ap.add_argument("--failure-call-only", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument(
        "--state-not-cached",
        action="store_true",
        help="with --failure-call: the bucket's state not in the worker's cache (the call decodes its blob)",
    )
    ap.add_argument("--output", help="with --failure-call: the results' name (default bucket_cost_failure_call)")
    ap.add_argument(
        "--hashes",
        action="store_true",
        help="the SHA-256 of every output row and of the state for each of HASH_SCENARIOS (with --tree: that tree's)",
    )
    ap.add_argument("--tree", help=argparse.SUPPRESS)
    args = ap.parse_args()
    per_bucket = args.partitions // args.buckets
    if args.hashes:
        import core

        state = build_state(10, per_bucket, 3, 100)
        hashes = {"core_file": core.__file__, "partitions_per_bucket": per_bucket}
        hashes.update({s: scenario_hashes(state, s) for s in HASH_SCENARIOS})
        print(json.dumps(hashes, indent=1))
        return
    if args.failover_call and args.trees:
        res = {"benchmark": "bucket_cost_failover_call", "machine": machine_info(), "partitions": args.partitions}
        res.update(buckets=args.buckets, partitions_per_bucket=per_bucket, **failover_call_trees(args))
        print(json.dumps({k: v for k, v in res.items() if k != "machine"}, indent=2))
        write_results(args.output or "bucket_cost_failover_call", res)
        return
    if args.failure_call and args.trees:
        res = {"benchmark": "bucket_cost_failure_call", "machine": machine_info(), "partitions": args.partitions}
        res.update(buckets=args.buckets, partitions_per_bucket=per_bucket, **failure_call_trees(args))
        print(json.dumps({k: v for k, v in res.items() if k != "machine"}, indent=2))
        write_results(args.output or "bucket_cost_failure_call", res)
        return
    state = build_state(10, per_bucket, 3, 100)
    if args.failure_call_only or args.failure_call:
        got = failure_call(state, args.profile, args.scenario, cached=not args.state_not_cached)
        if args.failure_call_only:
            print(json.dumps(got))
            return
        profile_text = got.pop("profile_tottime_top30", "")
        print(json.dumps(got, indent=2))
        print(profile_text)
        name = args.output or "bucket_cost_failure_call"
        write_results(name, {"machine": machine_info(), "partitions": args.partitions, **got})
        return
    if args.failover_call_only or args.failover_call:
        got = failover_call(state, args.profile)
        if args.failover_call_only:
            print(json.dumps(got))
            return
        profile_text = got.pop("profile_tottime_top25", "")
        print(json.dumps(got, indent=2))
        print(profile_text)
        write_results("bucket_cost_failover_call", {"machine": machine_info(), "partitions": args.partitions, **got})
        return
    if args.whole_call_only:
        print(json.dumps(whole_call(state, args.calls, args.held, args.whole_call_only == "paused")))
        return
    fmt, size, blob = dump_state(state)
    out: dict[str, Any] = {
        "benchmark": "bucket_cost",
        "machine": machine_info(),
        "partitions": args.partitions,
        "buckets": args.buckets,
        "partitions_per_bucket": per_bucket,
        "state_json_bytes": size,
        "state_blob_bytes": len(blob),
    }
    loaded, out["load_state_s"] = timed(load_state, fmt, size, blob)
    (new_state, decisions), out["step_s"] = timed(controller.step, loaded, [ev.BrokerFailure(1, 1001)])
    _, out["dump_state_s"] = timed(dump_state, new_state)
    rows, out["decision_rows_s"] = timed(decision_rows, 0, decisions)
    payloads = [r[3] for r in rows]
    _, out["dispatch_decode_s"] = timed(lambda: _decode_rows(payloads))
    out["decisions"] = len(decisions)
    out["zk_writes"] = sum(isinstance(d, dc.ZkWrite) for d in decisions)
    out["output_json_bytes"] = sum(len(p) for p in payloads)
    per_call = out["load_state_s"] + out["step_s"] + out["dump_state_s"] + out["decision_rows_s"]
    out["per_bucket_call_s"] = round(per_call, 3)
    out["batch_floor_s_2_cores"] = round(per_call * args.buckets / 2, 3)

    # the failover batch: read the bucket's snapshot file and step ControllerFailover on an empty state
    # (the checkpoint in memory: on executors the slice is read from the copy the driver shipped)
    snap = snapshot_for(state)
    if snap.partition_states:
        store = MemoryCheckpointStore()
        ref = failover.write_snapshot(store, 1000, snap, 1)
        loaded_fo, t_file = timed(failover.load_bucket_failover, ref, 0, failover.StoreSnapshots(store))
        (fo_state, fo_decisions), t_step = timed(controller.step, controller.ControllerState(), [loaded_fo])
        _, t_dump = timed(dump_state, fo_state)
        fo_rows, t_rows = timed(decision_rows, 0, fo_decisions)
        out["failover_file_load_s"] = round(t_file, 3)
        out["failover_step_s"] = round(t_step, 3)
        out["failover_dump_state_s"] = round(t_dump, 3)
        out["failover_decision_rows_s"] = round(t_rows, 3)
        out["failover_decisions"] = len(fo_decisions)
        out["failover_output_json_bytes"] = sum(len(r[3]) for r in fo_rows)
        reqs = [d for d in fo_decisions if isinstance(d, dc.BrokerRequest)]
        out["failover_largest_request_bytes"] = max((len(encode_body(r.body)) for r in reqs), default=0)
    out.update(tick_call(state))
    out.update(whole_call_ab(args))
    for k, v in list(out.items()):
        if isinstance(v, float):
            out[k] = round(v, 3)
    print(json.dumps({k: v for k, v in out.items() if k != "machine"}, indent=2))
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    write_results("bucket_cost", out)


if __name__ == "__main__":
    main()
