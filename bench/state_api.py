"""Benchmark: one bucket's state through Spark's state store, kept as one blob (``applyInPandasWithState``, as
livectl keeps it) beside a ``MapState`` keyed by partition (Spark 4's ``transformWithStateInPandas``), for
micro-batches that each change 1 % of the bucket's partitions.

One local SparkSession (``local[2]``, the shipped ``spark-defaults.conf``: the RocksDB state store provider,
which ``transformWithStateInPandas`` requires, with changelog checkpointing; one shuffle partition: one
bucket) runs two streaming queries side by side, each on a file source of its own that gets the same
Parquet file per micro-batch (``bucket, op, topic, partition``):

* ``blob`` — ``groupBy(bucket).applyInPandasWithState``, the state livectl's own: a
  :class:`core.controller.ControllerState` of ``--partitions`` partitions (:func:`aged_state`: 10 brokers, RF 3,
  100 partitions per topic, leaders and epochs spread as a cluster's history spreads them; 1.1 MB stored at
  100k), stored as :func:`streaming.query.stateful.dump_state` makes it (compact JSON, zstd) and read back as
  a bucket's step reads it (:func:`streaming.query.stateful.whole_state`: the worker's cache of the decoded
  state when the stored blob is the one it cached, else a decode). A batch
  copies the context (as ``core.controller.step`` does), gives each changed partition a new leader and epochs,
  and stores the whole state again;
* ``map`` — ``groupBy(bucket).transformWithStateInPandas`` with a ``MapState`` ``(topic, partition) → entry``,
  the entry the partition's part of the same JSON (:func:`core.context_codec.context_to_dict`, ~100 bytes). A
  batch reads each changed partition's entry (``getValue``), gives it the same new leadership and writes it back
  (``updateValue``); the other 99 % are not touched.

Batch 0 (``op = load``) builds the state in the worker and stores it whole (the map side: one ``updateValue``
per partition) — what a cold start into a new checkpoint writes. Every later batch changes the same
``--fraction`` of the partitions on both sides (a fixed pseudo-random sample per batch). The last batch
(``op = reload``) reads the whole stored state back into a ``ControllerState`` as a worker that does not hold
it would (blob: the decode; map: every entry through the map's iterator), what a bucket costs when its task
lands on another Python worker or after a restart; it writes nothing. The two queries take
turns, batch by batch, in the order A B B A …, so both see the same machine; the first ``--warmup`` change
batches are left out of the medians. Per batch and side:

* ``trigger_s`` — the micro-batch's ``triggerExecution`` from the query's progress (planning, the job, the
  state store's commit, the sink); ``wall_s`` — file in place → ``processAllAvailable`` back;
* ``read_s`` / ``apply_s`` / ``write_s`` — the Python worker's own parts: the state read (blob: from the
  cache or decoded; map: the ``getValue`` calls), the change, the state write (blob: encode and ``update``;
  map: the ``updateValue`` calls);
* ``changelog_kb`` — the bytes of the batch's RocksDB changelog files in the checkpoint (what the state store
  wrote for the batch; RocksDB's background snapshots every 10 versions are summed apart, ``snapshot_mb``),
  and the progress's ``stateOperators`` (``commitTimeMs``, ``numRowsUpdated``, the RocksDB metrics) in the
  results file;
* the Python worker's resident memory after the call (``worker_rss_mb``; the workers serve both queries, so a
  worker that ran the blob side also holds its cached state), and at the end the peak resident memory
  (``VmHWM``) of the Spark JVM (driver and executor in local mode) and of the Python workers.

Prints every batch, the medians and the ratio map / blob of the median ``trigger_s`` (and of the worker's
time); writes ``bench/results/state_api-<stamp>.json`` with the machine and the load average.

Run: ``nice -n 10 .venv/bin/python -m bench state_api`` (100k partitions, 1 %, 2 warm-up + 8 timed batches
per side: a few minutes); 500k: ``… state_api --partitions 500000 --conf spark.driver.memory=6g`` (the load
batch alone writes 500k map entries one call each).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import os
import random
import statistics
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from bench.harness import ROOT, machine_info, print_table, spark_session, wait_quiet, work_dir, write_results
from bench.harness.procstat import cmdline, descendants, parents
from bench.harness.spark import add_scale_options, parse_confs

BLOB = "blob"
MAP = "map"
SIDES = (BLOB, MAP)
OP_LOAD = "load"
OP_CHANGE = "change"
#: the last batch: each side reads its whole stored state back as a worker that does not hold it would
OP_RELOAD = "reload"
#: the partitions of a topic in the benchmark's cluster (:func:`bench.harness.workloads.build_state`)
PER_TOPIC = 100
BROKERS = 10
RF = 3
BUCKET = 0

INPUT_SCHEMA = "bucket int, op string, topic string, partition int"
#: what each side's Python worker reports per batch
OUTPUT_SCHEMA = (
    "side string, rows long, read_s double, apply_s double, write_s double, "
    "state_bytes long, decoded boolean, worker_rss_kib long, worker_hwm_kib long"
)
MAP_KEY_SCHEMA = "topic string, partition int"
MAP_VALUE_SCHEMA = "entry string"


# --------------------------------------------------------------------------------------------- pure parts


def topic_partition(index: int, per_topic: int = PER_TOPIC) -> tuple[str, int]:
    """The ``index``-th partition of the bucket as :func:`bench.harness.workloads.build_state` names it."""
    return f"topic-{index // per_topic:05d}", index % per_topic


def aged_state(n: int, seed: int = 7) -> Any:
    """The bucket's state at the start: :func:`bench.harness.workloads.build_state`'s ``n`` partitions (10
    brokers, RF 3, 100 per topic), each with a history: its leader anywhere in its ISR and leader and partition
    epochs of a few hundred, drawn from ``seed``. A state just built has every partition at epoch 0 led by its
    first replica: its JSON compresses 80× (12 MB to 150 kB at 100k), a cluster's that has lived far less."""
    from bench.harness.workloads import build_state
    from core.model import LeaderAndIsr

    state = build_state(BROKERS, n, RF, PER_TOPIC)
    rng = random.Random(seed)
    ctx = state.context
    for tp, held in list(ctx.partition_leadership.items()):
        li = held.leader_and_isr
        epoch = rng.randrange(1, 500)
        aged = LeaderAndIsr(rng.choice(li.isr), li.isr, epoch, epoch + rng.randrange(0, 50), li.leader_recovery_state)
        ctx.put_leadership(tp, aged, held.controller_epoch)
    return state


def changed_partitions(n: int, fraction: float, batch: int, seed: int = 43) -> list[int]:
    """The partitions batch ``batch`` changes: ``fraction`` of ``n`` (at least one), a sample fixed by the
    batch number, sorted."""
    k = max(1, round(n * fraction))
    return sorted(random.Random(seed * 1_000_003 + batch).sample(range(n), k))


def next_leadership(leader: int, isr: Sequence[int], leader_epoch: int, partition_epoch: int) -> tuple[int, int, int]:
    """A partition's change: the leader moves to the ISR's next replica (cyclically; the same one when it
    is alone or not in the ISR's order), the leader epoch and the partition epoch (the znode version) each
    one up. Returns (leader, leader_epoch, partition_epoch)."""
    isr = list(isr)
    new_leader = isr[(isr.index(leader) + 1) % len(isr)] if leader in isr else (isr[0] if isr else leader)
    return new_leader, leader_epoch + 1, partition_epoch + 1


def bumped_entry(entry: list[Any]) -> list[Any]:
    """A partition's entry of :func:`core.context_codec.context_to_dict` (``[replicas, adding, removing,
    [leader, isr, leader_epoch, partition_epoch, recovery, controller_epoch], state, replica_states]``) with
    :func:`next_leadership` applied; the input is not changed."""
    lead = list(entry[3])
    lead[0], lead[2], lead[3] = next_leadership(lead[0], lead[1], lead[2], lead[3])
    return [*entry[:3], lead, *entry[4:]]


def changelog_bytes(state_dir: Path, version: int) -> int:
    """The bytes of the RocksDB changelog files of state version ``version`` (batch ``version - 1``) under a
    checkpoint's ``state`` folder (every operator and partition; the file system's hidden checksum files
    left out)."""
    if not state_dir.is_dir():
        return 0
    return sum(p.stat().st_size for p in state_dir.rglob(f"{version}.changelog") if p.is_file())


def folder_bytes(state_dir: Path) -> int:
    """The bytes of every file under a checkpoint's ``state`` folder (changelogs, snapshot archives, SST
    files, metadata; the file system's hidden checksum files left out)."""
    if not state_dir.is_dir():
        return 0
    return sum(p.stat().st_size for p in state_dir.rglob("*") if p.is_file() and not p.name.startswith("."))


def operator_sum(operators: Sequence[dict[str, Any]], metric: str) -> int:
    """A metric of a progress's ``stateOperators`` summed over them: a top-level one (``commitTimeMs``) or
    one of their ``customMetrics`` (``rocksdbTotalBytesWritten``); absent counts 0."""
    return sum(int(o.get(metric, o.get("customMetrics", {}).get(metric, 0))) for o in operators)


def summarize(runs: Sequence[dict[str, Any]], warmup: int) -> dict[str, Any]:
    """The medians per side over the change batches after the first ``warmup``, and the ratios map / blob
    of the median trigger time and of the median worker time (read + apply + write)."""
    keys = (
        "trigger_s",
        "wall_s",
        "read_s",
        "apply_s",
        "write_s",
        "worker_s",
        "changelog_kb",
        "rocksdb_written_kb",
        "commit_ms",
        "worker_rss_mb",
    )
    timed = [r for r in runs if r["op"] == OP_CHANGE and r["batch"] > warmup]
    med: dict[str, dict[str, float]] = {}
    for side in SIDES:
        mine = [r for r in timed if r["side"] == side]
        med[side] = {k: round(statistics.median(r[k] for r in mine), 4) for k in keys} if mine else {}
        med[side]["batches"] = len(mine)
    ratios = {}
    for k in ("trigger_s", "worker_s", "changelog_kb", "rocksdb_written_kb"):
        a, b = med[BLOB].get(k), med[MAP].get(k)
        ratios[f"{k}_map_to_blob"] = round(b / a, 3) if a and b is not None else None
    return {"medians": med, **ratios}


# --------------------------------------------------------------------------------------------- worker side


def _proc_status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def blob_step(n: int) -> Any:
    """The ``applyInPandasWithState`` function of the blob side (state ``format, size, blob`` as livectl's)."""

    def step(key: tuple[Any, ...], frames: Iterator[pd.DataFrame], state: Any) -> Iterator[pd.DataFrame]:
        from core.model import LeaderAndIsr, TopicPartition
        from streaming.query import stateful

        frame = pd.concat(list(frames), ignore_index=True)
        bucket = int(key[0])
        t0 = time.perf_counter()
        decoded = False
        if (frame["op"] == OP_LOAD).any():
            stateful.forget_states(bucket)
            current = aged_state(n)
        elif (frame["op"] == OP_RELOAD).any():  # a worker without the state: the blob decoded, nothing written
            stateful.forget_states(bucket)
            fmt, size, blob = state.get
            current = stateful.whole_state(bucket, int(fmt), int(size), bytes(blob))
            if len(current.context.partition_assignments) != n:
                raise RuntimeError("the decoded state lost partitions")
            t1 = time.perf_counter()
            yield _report(BLOB, 0, read_s=t1 - t0, apply_s=0.0, write_s=0.0, nbytes=len(blob), decoded=True)
            return
        else:
            fmt, size, blob = state.get
            cached = stateful.cached_state(bucket)
            current = stateful.whole_state(bucket, int(fmt), int(size), bytes(blob))
            decoded = current is not cached  # else the worker's cache held this very blob's state
        t1 = time.perf_counter()
        ctx = current.context.copy()
        changes = frame[frame["op"] == OP_CHANGE]
        for topic, p in zip(changes["topic"], changes["partition"], strict=True):
            tp = TopicPartition(str(topic), int(p))
            held = ctx.partition_leadership[tp]
            li = held.leader_and_isr
            leader, le, pe = next_leadership(li.leader, li.isr, li.leader_epoch, li.partition_epoch)
            new = LeaderAndIsr(leader, li.isr, le, pe, li.leader_recovery_state)
            ctx.put_leadership(tp, new, held.controller_epoch)
        new_state = dataclasses.replace(current, context=ctx)
        t2 = time.perf_counter()
        dumped = stateful.dump_state(new_state)
        state.update(dumped)
        stateful.cache_state(bucket, dumped[2], new_state)
        t3 = time.perf_counter()
        yield _report(
            BLOB, len(changes), read_s=t1 - t0, apply_s=t2 - t1, write_s=t3 - t2, nbytes=len(dumped[2]), decoded=decoded
        )

    return step


def _report(side: str, rows: int, *, read_s: float, apply_s: float, write_s: float, nbytes: int, decoded: bool) -> Any:
    return pd.DataFrame(
        {
            "side": [side],
            "rows": [rows],
            "read_s": [read_s],
            "apply_s": [apply_s],
            "write_s": [write_s],
            "state_bytes": [nbytes],
            "decoded": [decoded],
            "worker_rss_kib": [_proc_status_kib("VmRSS")],
            "worker_hwm_kib": [_proc_status_kib("VmHWM")],
        }
    )


def map_processor(n: int) -> Any:
    """The ``StatefulProcessor`` of the map side (a new instance per call: Spark pickles it to the workers)."""
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

    class PartitionMap(StatefulProcessor):
        def init(self, handle: StatefulProcessorHandle) -> None:
            self.parts = handle.getMapState("partitions", MAP_KEY_SCHEMA, MAP_VALUE_SCHEMA)

        def handleInputRows(  # noqa: N802 (Spark's name)
            self,
            key: Any,
            rows: Iterator[Any],
            timerValues: Any,  # noqa: N803
        ) -> Iterator[pd.DataFrame]:
            import orjson

            from core.context_codec import context_to_dict

            frame = pd.concat(list(rows), ignore_index=True)
            read_s = apply_s = write_s = 0.0
            written = 0
            if (frame["op"] == OP_RELOAD).any():
                # every entry through the map's iterator into the same state object the blob side decodes (the
                # rest of the state, brokers and the like, would be a value state of its own: one call)
                from bench.harness.workloads import build_state
                from core.controller import ControllerState

                skeleton = build_state(BROKERS, 0, RF, PER_TOPIC).to_dict()
                t0 = time.perf_counter()
                topics: dict[str, dict[str, Any]] = {}
                for (topic, p), (entry,) in self.parts.iterator():
                    written += len(entry)
                    topics.setdefault(topic, {})[str(p)] = orjson.loads(entry)
                whole = ControllerState.from_dict({**skeleton, "context": {**skeleton["context"], "topics": topics}})
                read_s = time.perf_counter() - t0
                if len(whole.context.partition_assignments) != n:
                    raise RuntimeError("the map state lost partitions")
                yield _report(MAP, 0, read_s=read_s, apply_s=0.0, write_s=0.0, nbytes=written, decoded=True)
                return
            if (frame["op"] == OP_LOAD).any():
                t0 = time.perf_counter()
                topics = context_to_dict(aged_state(n).context)["topics"]
                t1 = time.perf_counter()
                for topic, parts in topics.items():
                    for p, entry in parts.items():
                        value = orjson.dumps(entry).decode()
                        written += len(value)
                        self.parts.updateValue((topic, int(p)), (value,))
                apply_s, write_s = t1 - t0, time.perf_counter() - t1
                changed = 0
            else:
                changes = frame[frame["op"] == OP_CHANGE]
                keys = [(str(t), int(p)) for t, p in zip(changes["topic"], changes["partition"], strict=True)]
                t0 = time.perf_counter()
                held = [self.parts.getValue(k) for k in keys]
                t1 = time.perf_counter()
                values = [orjson.dumps(bumped_entry(orjson.loads(h[0]))).decode() for h in held if h is not None]
                if len(values) != len(keys):
                    raise RuntimeError(f"{len(keys) - len(values)} changed partitions missing from the map state")
                t2 = time.perf_counter()
                for k, v in zip(keys, values, strict=True):
                    written += len(v)
                    self.parts.updateValue(k, (v,))
                read_s, apply_s, write_s = t1 - t0, t2 - t1, time.perf_counter() - t2
                changed = len(keys)
            yield _report(MAP, changed, read_s=read_s, apply_s=apply_s, write_s=write_s, nbytes=written, decoded=False)

        def close(self) -> None:
            pass

    return PartitionMap()


# --------------------------------------------------------------------------------------------- driver side


@dataclasses.dataclass
class Side:
    name: str
    inbox: Path
    checkpoint: Path
    query: Any = None
    reports: dict[int, dict[str, Any]] = dataclasses.field(default_factory=dict)


def start_query(spark: Any, side: Side, n: int) -> None:
    from pyspark.sql.streaming.state import GroupStateTimeout

    source = spark.readStream.schema(INPUT_SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(side.inbox))
    grouped = source.groupBy("bucket")
    if side.name == BLOB:
        from streaming.query.stateful import STATE_SCHEMA

        out = grouped.applyInPandasWithState(
            blob_step(n), OUTPUT_SCHEMA, STATE_SCHEMA, "append", GroupStateTimeout.NoTimeout
        )
    else:
        out = grouped.transformWithStateInPandas(map_processor(n), OUTPUT_SCHEMA, "Append", "None")

    def collect(frame: Any, batch_id: int) -> None:
        for row in frame.collect():
            side.reports[batch_id] = row.asDict()

    side.query = (
        out.writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(side.checkpoint))
        .queryName(f"state_api_{side.name}")
        .start()
    )


def batch_frame(op: str, n: int, fraction: float, batch: int) -> pa.Table:
    if op != OP_CHANGE:
        rows = [(BUCKET, op, "", -1)]
    else:
        rows = [(BUCKET, OP_CHANGE, *topic_partition(i)) for i in changed_partitions(n, fraction, batch)]
    return pa.table(
        {
            "bucket": pa.array([r[0] for r in rows], pa.int32()),
            "op": pa.array([r[1] for r in rows], pa.string()),
            "topic": pa.array([r[2] for r in rows], pa.string()),
            "partition": pa.array([r[3] for r in rows], pa.int32()),
        }
    )


def run_batch(side: Side, table: pa.Table, op: str, batch: int, staging: Path) -> dict[str, Any]:
    """Puts batch ``batch``'s file in the side's source folder (whole, by a rename), waits for the query to
    have processed it, and returns the batch's figures."""
    staged = staging / f"{side.name}-{batch:05d}.parquet"
    pq.write_table(table, staged)
    t0 = time.perf_counter()
    os.replace(staged, side.inbox / staged.name)
    side.query.processAllAvailable()
    wall = time.perf_counter() - t0
    progress = next(
        (p for p in reversed(side.query.recentProgress) if p["batchId"] == batch and p["numInputRows"] > 0), None
    )
    if progress is None or batch not in side.reports:
        raise RuntimeError(f"{side.name}: batch {batch} has no progress or no report")
    report = side.reports[batch]
    operators = progress.get("stateOperators", [])
    worker_s = report["read_s"] + report["apply_s"] + report["write_s"]
    return {
        "side": side.name,
        "batch": batch,
        "op": op,
        "rows": report["rows"],
        "trigger_s": progress["durationMs"].get("triggerExecution", 0) / 1000,
        "add_batch_s": progress["durationMs"].get("addBatch", 0) / 1000,
        "wall_s": round(wall, 4),
        "read_s": round(report["read_s"], 4),
        "apply_s": round(report["apply_s"], 4),
        "write_s": round(report["write_s"], 4),
        "worker_s": round(worker_s, 4),
        "decoded": report["decoded"],
        "state_value_kb": round(report["state_bytes"] / 1024, 1),
        "changelog_kb": round(changelog_bytes(side.checkpoint / "state", batch + 1) / 1024, 1),
        "worker_rss_mb": round(report["worker_rss_kib"] / 1024, 1),
        "worker_hwm_mb": round(report["worker_hwm_kib"] / 1024, 1),
        "rocksdb_written_kb": round(operator_sum(operators, "rocksdbTotalBytesWritten") / 1024, 1),
        "updates_ms": operator_sum(operators, "allUpdatesTimeMs"),
        "commit_ms": operator_sum(operators, "commitTimeMs"),
        "state_operators": operators,
    }


def peak_kib(pid: int) -> int:
    """``pid``'s peak resident memory (``VmHWM`` of proc(5)), 0 when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        return 0
    return 0


def memory_peaks() -> dict[str, float]:
    """Peak resident memory (MiB) of this driver's Python, its Spark JVM, and the largest Python worker."""
    below = descendants(os.getpid(), parents())
    jvms = [p for p in below if (args := cmdline(p)) and os.path.basename(args[0]) == "java"]
    workers = [p for p in below if p not in jvms]
    return {
        "driver_python_mb": round(peak_kib(os.getpid()) / 1024, 1),
        "jvm_mb": round(sum(peak_kib(p) for p in jvms) / 1024, 1),
        "largest_python_worker_mb": round(max((peak_kib(p) for p in workers), default=0) / 1024, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--partitions", type=int, default=100_000, help="partitions of the bucket (a multiple of 100)")
    ap.add_argument("--fraction", type=float, default=0.01, help="of the partitions each batch changes")
    ap.add_argument("--warmup", type=int, default=2, help="change batches per side left out of the medians")
    ap.add_argument("--batches", type=int, default=8, help="change batches per side in the medians")
    ap.add_argument("--no-wait-quiet", action="store_true")
    add_scale_options(ap)
    args = ap.parse_args()
    if args.partitions <= 0 or args.partitions % PER_TOPIC:
        raise SystemExit(f"--partitions must be a positive multiple of {PER_TOPIC}")
    if importlib.util.find_spec("google.protobuf") is None:  # pyspark's state client speaks protobuf
        raise SystemExit("transformWithStateInPandas needs protobuf: scripts/setup installs it (dev extra)")
    # the workers import this module (the functions and the processor are pickled by reference)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    load = None if args.no_wait_quiet else wait_quiet()
    folder = work_dir("livectl-bench-state-api-")
    staging = folder / "staging"
    staging.mkdir()
    sides = {}
    for name in SIDES:
        (folder / name / "in").mkdir(parents=True)
        sides[name] = Side(name, folder / name / "in", folder / name / "checkpoint")
    spark, startup_s = spark_session(1, parse_confs(args.conf))
    runs: list[dict[str, Any]] = []
    try:
        for side in sides.values():
            start_query(spark, side, args.partitions)
        total = 1 + args.warmup + args.batches + 1
        for batch in range(total):
            op = OP_LOAD if batch == 0 else OP_RELOAD if batch == total - 1 else OP_CHANGE
            table = batch_frame(op, args.partitions, args.fraction, batch)
            order = SIDES if batch % 2 == 0 else SIDES[::-1]  # A B, B A, A B, ...
            for name in order:
                run = run_batch(sides[name], table, op, batch, staging)
                run["load_average_1m"] = round(os.getloadavg()[0], 2)
                runs.append(run)
                print(
                    f"batch {batch} {name}: trigger {run['trigger_s']:.3f} s, worker {run['worker_s']:.3f} s, "
                    f"changelog {run['changelog_kb']:,.1f} kB, load {run['load_average_1m']}",
                    flush=True,
                )
        peaks = memory_peaks()
        machine = machine_info(spark=spark)
        for side in sides.values():
            side.query.stop()
    finally:
        spark.stop()
    stored = {name: folder_bytes(s.checkpoint / "state") for name, s in sides.items()}
    summary = summarize(runs, args.warmup)
    columns = {
        "batch": "batch",
        "side": "side",
        "rows": "rows",
        "trigger s": "trigger_s",
        "worker s": "worker_s",
        "read s": "read_s",
        "apply s": "apply_s",
        "write s": "write_s",
        "changelog kB": "changelog_kb",
        "RocksDB written kB": "rocksdb_written_kb",
        "commit ms": "commit_ms",
        "worker RSS MB": "worker_rss_mb",
        "decoded": "decoded",
        "load 1m": "load_average_1m",
    }
    print_table(list(columns), [[r[k] for k in columns.values()] for r in runs])
    loads = {name: next(r for r in runs if r["side"] == name and r["op"] == OP_LOAD) for name in SIDES}
    print(
        "load batch (state written whole): "
        + "; ".join(f"{n} {r['trigger_s']:.2f} s, changelog {r['changelog_kb']:,.0f} kB" for n, r in loads.items())
    )
    reloads = {name: next(r for r in runs if r["side"] == name and r["op"] == OP_RELOAD) for name in SIDES}
    print(
        "reload batch (the whole state read back, as a worker without it): "
        + "; ".join(f"{n} {r['read_s']:.2f} s in the worker, {r['trigger_s']:.2f} s batch" for n, r in reloads.items())
    )
    print("state folder at the end: " + "; ".join(f"{n} {b / 1e6:.2f} MB" for n, b in stored.items()))
    for name in SIDES:
        print(f"medians {name}: {summary['medians'][name]}")
    print(
        f"map / blob: trigger {summary['trigger_s_map_to_blob']}, worker {summary['worker_s_map_to_blob']}, "
        f"changelog {summary['changelog_kb_map_to_blob']}, RocksDB written {summary['rocksdb_written_kb_map_to_blob']}"
    )
    print(f"peak memory (MiB, both sides' run): {peaks}; load average {os.getloadavg()}")
    path = write_results(
        "state_api",
        {
            "benchmark": "state_api",
            "partitions": args.partitions,
            "fraction": args.fraction,
            "warmup": args.warmup,
            "batches": args.batches,
            "conf": parse_confs(args.conf),
            "machine": machine,
            "load_average_waited": load,
            "load_average_end": list(os.getloadavg()),
            "spark_startup_s": round(startup_s, 1),
            "runs": runs,
            "state_folder_bytes": stored,
            "peak_memory_mb": peaks,
            **summary,
        },
    )
    print(f"results: {path}")


if __name__ == "__main__":
    main()
