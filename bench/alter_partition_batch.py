"""Profile: one micro-batch of AlterPartition records, part by part, without Spark or services.

A simulated broker killed and started again at 100k partitions (5 brokers, replication factor 3, topics of
100: the long run's cluster, ``bench/long_run``) leaves its ~60,000 follower replicas out of their ISRs; once it
is back, each partition's leader proposes its ISR with the broker in it: one AlterPartition record per partition
on ``livectl.broker-events``, read ``max_records_per_batch`` (10,000) per micro-batch. This script builds that
cluster's buckets as the query holds them (``--buckets``, 2 on ``local[2]``), applies the broker's failure and
return to each, makes the leaders' proposals as the simulated brokers write them
(:func:`core.codec.events.event_to_json` of :class:`core.events.AlterPartition`, by topic name, each leader's
interleaved with the others'), and times one micro-batch of the first ``--records`` of them through the query's
own functions:

* ``source rows`` — Kafka's records as the pandas frame ``prepare_frame`` gets (what Spark's Arrow does);
* ``validate`` — :meth:`InputValidator.check` (the input suite and the decoder, per record);
* ``route`` — the rest of :func:`streaming.query.routing.prepare_frame` (bucket keys, payloads re-encoded);
* per bucket, the stateful call as a Python worker makes it (its state cached in the worker), split into
  ``events_of`` (decode the routed rows), ``step`` (:func:`core.controller.step`), ``dump_state`` (the new
  state's blob), ``decision rows``, ``metrics`` (the bucket's gauges and imbalance over its whole state)
  and ``output frame``; beside it the whole call (:func:`streaming.query.stateful.step_bucket`) to check that
  the parts account for it;
* on the driver, ``to_pandas`` of the buckets' output (Arrow) and :meth:`streaming.query.dispatch.Dispatcher.dispatch`
  with a ZooKeeper sink that accepts every write (its count printed: ``python -m bench zk_sink_cost --writes N``
  times those on a real ZooKeeper) and the product's request building (:class:`sinks.memory.MemoryRequestSink`:
  merge, split, AlterPartitionResponses, UpdateMetadata); ``requests`` is the request sink's call, and
  ``requests (pairwise merge)`` the same call with the merge of before 2026-12-07 (bodies merged two at a
  time, quadratic in a broker's answers: :func:`pairwise_merge_bodies`), the baseline, its messages checked equal.

Each part is timed ``--repeat`` times (median, wall seconds after ``gc.collect()``). With several ``--records``
sizes it prints each part per partition beside the smallest size's: what a part costs per record and what
per batch whatever its size (the ratio column is seconds per record against the first size's, measured in
this run); below it the request sink's one-pass merge against the pairwise baseline. ``--profile`` adds
cProfile's top functions of the whole batch.

``--proposals-per-record N`` writes the proposals as the simulated brokers now do, each leader's as AlterPartition
requests of N partitions a record (``alter_partition_request``); 0 (the default) one record per proposal, as before.
``--records`` counts proposals either way, and the per-unit column is per proposal.

Run: ``.venv/bin/python -m bench alter_partition_batch [--partitions 100000] [--buckets 2]
[--records 1000,10000,60000] [--proposals-per-record 1000] [--repeat 3] [--profile]``.
"""

from __future__ import annotations

import argparse
import base64
import cProfile
import gc
import io
import json
import pstats
import statistics
import time
from collections.abc import Callable
from typing import Any

import pandas as pd
import pyarrow as pa

from bench.harness import machine_info, print_table, write_results
from bench.harness.bucket_calls import GroupState
from bench.harness.pairwise_merge import pairwise_merge_bodies
from core import controller
from core import events as ev
from core.codec.events import event_to_json
from core.context import ControllerContext
from core.controller import ControllerState
from core.model import Broker, Endpoint, LeaderAndIsr, PartitionReplica, ReplicaAssignment, TopicPartition
from core.placement import BrokerRack, assign_replicas
from core.states import PartitionState, ReplicaState
from simbrokers.alter_requests import as_requests
from sinks.memory import MemoryRequestSink
from sinks.ports import Fence
from sinks.requests import merge, messages
from streaming.query import routing, stateful
from streaming.query.dispatch import Dispatcher
from streaming.query.failover_refs import events_of
from streaming.runtime.collector import gc_paused

EVENTS = "livectl.broker-events"
ADMIN = "livectl.admin"
#: the broker killed and started again
BOUNCED = 1


def _endpoint(b: int) -> tuple[Endpoint, ...]:
    return (Endpoint("PLAINTEXT", f"broker{b}", 9092),)


def bucket_states(n_partitions: int, buckets: int, n_brokers: int, rf: int, per_topic: int) -> list[ControllerState]:
    """Each bucket's state: its topics (by the query's bucket hash), every broker live, Kafka's placement."""
    ctxs = [ControllerContext(controller_id=0, epoch=1, epoch_zk_version=0) for _ in range(buckets)]
    for ctx in ctxs:
        for b in range(n_brokers):
            ctx.add_live_broker(Broker(b, 1000 + b, None, _endpoint(b)))
    racks = [BrokerRack(b) for b in range(n_brokers)]
    for t in range(n_partitions // per_topic):
        topic = f"topic-{t:05d}"
        ctx = ctxs[routing.bucket_of(topic, buckets)]
        ctx.topic_ids[topic] = base64.urlsafe_b64encode(t.to_bytes(16, "big")).decode().rstrip("=")
        for p, reps in assign_replicas(racks, per_topic, rf, start_index=t % n_brokers).items():
            tp = TopicPartition(topic, p)
            ctx.set_assignment(tp, ReplicaAssignment(reps))
            ctx.put_leadership(tp, LeaderAndIsr(reps[0], reps, 0, 0), 1)
            ctx.put_partition_state(tp, PartitionState.ONLINE)
            for r in reps:
                ctx.replica_states[PartitionReplica(topic, p, r)] = ReplicaState.ONLINE
    return [ControllerState(ctx) for ctx in ctxs]


def bounced(state: ControllerState) -> ControllerState:
    """The bucket after :data:`BOUNCED` failed (out of every ISR, its leaderships moved) and registered again."""
    state, _ = controller.step(state, [ev.BrokerFailure(BOUNCED, 1000 + BOUNCED)])
    state, _ = controller.step(state, [ev.BrokerStartup(BOUNCED, 2000 + BOUNCED, None, _endpoint(BOUNCED))])
    return state


def proposals(states: list[ControllerState]) -> list[ev.AlterPartition]:
    """Each leader's proposal to take :data:`BOUNCED` back into the ISR of a partition it leads, one per partition
    as the simulated brokers send them (by topic name), interleaved across leaders (each has its own key)."""
    by_leader: dict[int, list[ev.AlterPartition]] = {}
    correlation = 0
    for state in states:
        ctx = state.context
        for tp, li in sorted(ctx.partition_leadership.items()):
            la = li.leader_and_isr
            replicas = ctx.replicas(tp)
            if BOUNCED not in replicas or BOUNCED in la.isr or la.leader < 0:
                continue
            correlation += 1
            isr = tuple(r for r in replicas if r in la.isr or r == BOUNCED)
            by_leader.setdefault(la.leader, []).append(
                ev.AlterPartition(
                    la.leader,
                    ctx.live_brokers[la.leader].epoch,
                    tp.topic,
                    tp.partition,
                    la.leader_epoch,
                    la.partition_epoch,
                    isr,
                    correlation_id=correlation,
                )
            )
    out: list[ev.AlterPartition] = []
    queues = [by_leader[b] for b in sorted(by_leader)]
    for i in range(max(map(len, queues))):
        out.extend(q[i] for q in queues if i < len(q))
    return out


def as_records(events: list[ev.AlterPartition], per_record: int) -> list[ev.Event]:
    """The proposals as the simulated brokers write them with ``--proposals-per-record``: 0, a record each, as
    they come; else each leader's as AlterPartition requests of ``per_record`` (:mod:`simbrokers.alter_requests`)."""
    if per_record == 0:
        return list(events)
    by_leader: dict[int, list[ev.Event]] = {}
    for e in events:
        by_leader.setdefault(e.broker_id, []).append(e)
    return [r for b in sorted(by_leader) for r in as_requests(by_leader[b], per_record)]


def source_records(events: list[ev.Event], topic_partitions: int = 1) -> pd.DataFrame:
    """Kafka's records as ``prepare_frame`` gets them (each leader's key on its own topic partition)."""
    return pd.DataFrame(
        {
            "topic": [EVENTS] * len(events),
            "partition": [getattr(e, "broker_id", 0) % topic_partitions for e in events],
            "offset": list(range(len(events))),
            "timestamp": [pd.Timestamp(1_700_000_000_000 + i, unit="ms") for i in range(len(events))],
            "value": [event_to_json(e).encode() for e in events],
        }
    )


class AcceptingZk:
    """A ZooKeeper sink that accepts every write (its own cost is ``zk_sink_cost``'s)."""

    def __init__(self) -> None:
        self.writes = 0

    def write_batch(self, batch_id: int, writes: Any) -> Any:
        from sinks.ports import ZkBatchResult

        self.writes = len(writes)
        return ZkBatchResult(batch_id, len(writes), 0, (), 1)

    def check_fence(self) -> None:
        return None


class TimedRequests(MemoryRequestSink):
    requests_s = 0.0

    def write_requests(self, batch_id: int, requests: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return super().write_requests(batch_id, requests)
        finally:
            self.requests_s = time.perf_counter() - t0


def _timed(took: dict[str, float], name: str, fn: Callable[..., Any], *a: Any, **kw: Any) -> Any:
    """``fn(*a, **kw)``, its wall seconds added to ``took[name]`` (a part of several buckets: their sum)."""
    t0 = time.perf_counter()
    out = fn(*a, **kw)
    took[name] = took.get(name, 0.0) + time.perf_counter() - t0
    return out


def metrics_row(bucket: int, state: ControllerState, seq: int) -> list[Any]:
    """The bucket's metrics row, as :func:`streaming.query.stateful.decide_rows` makes it."""
    m, counts = controller.metrics_and_imbalance(state)
    movable, queued = controller.leader_moves(state)
    payload = json.dumps(
        {
            **m,
            stateful.IMBALANCE_KEY: {str(b): list(c) for b, c in counts.items()},
            stateful.LEADER_MOVES_KEY: {"movable": {str(b): n for b, n in movable.items()}, "queued": queued},
        }
    )
    return [bucket, seq, stateful.KIND_METRICS, payload, *[int(m.get(c, 0)) for c in stateful.METRIC_COLUMNS]]


def bucket_parts(bucket: int, frame: pd.DataFrame, stored: tuple[Any, ...], samples: dict[str, float]) -> pd.DataFrame:
    """The bucket's call (:func:`streaming.query.stateful.decide_rows` for a loaded bucket, its state cached in the
    worker) part by part; returns its output frame."""
    current = stateful.whole_state(bucket, *stored)
    with gc_paused():
        events, skipped = _timed(samples, "events_of", events_of, bucket, frame, current.context.epoch, loaded=True)
        new_state, decisions = _timed(samples, "step", controller.step, current, events)
        _timed(samples, "dump_state", stateful.dump_state, new_state)
        rows = _timed(samples, "decision rows", stateful.decision_rows, bucket, [*decisions, *skipped])
        rows.append(_timed(samples, "metrics", metrics_row, bucket, new_state, len(rows)))
        out: pd.DataFrame = _timed(samples, "output frame", stateful.output_frame, rows)
        return out


def run_batch(
    states: list[ControllerState], stored: list[tuple[Any, ...]], records: pd.DataFrame, repeat: int
) -> tuple[dict[str, float], dict[str, int]]:
    """Median seconds of each part of one micro-batch of ``records``, and its counts."""
    n = len(states)
    validator = routing.shared_validator()
    samples: dict[str, list[float]] = {}
    counts: dict[str, int] = {}
    for _ in range(repeat):
        took: dict[str, float] = {}
        gc.collect()
        arrow = pa.Table.from_pandas(records, preserve_index=False)
        frame = _timed(took, "source rows", arrow.to_pandas)
        values = [bytes(v).decode() for v in frame["value"]]
        _timed(took, "validate", validator.check, values, ["broker-events"] * len(values))
        routed = _timed(took, "prepare_frame", routing.prepare_frame, frame, n, ADMIN, validator)
        outs = []
        for b in range(n):
            mine = routed[routed["bucket"] == b].reset_index(drop=True)
            tick = routing.tick_rows(1_700_000_100_000, n)
            mine = pd.concat([mine, tick[tick["bucket"] == b]], ignore_index=True)
            stateful.forget_states()
            stateful.whole_state(b, *stored[b])  # the worker's cache, as a loaded bucket's worker has it
            gs = GroupState(stored[b])
            t0 = time.perf_counter()
            (whole,) = stateful.step_bucket((b,), iter([mine]), gs)
            took["bucket call (whole)"] = took.get("bucket call (whole)", 0.0) + time.perf_counter() - t0
            stateful.forget_states()
            stateful.whole_state(b, *stored[b])
            outs.append(bucket_parts(b, mine, stored[b], took))
            assert len(whole) == len(outs[-1]), (len(whole), len(outs[-1]))  # the parts make the same rows
        out = pd.concat(outs, ignore_index=True)
        table = pa.Table.from_pandas(out, preserve_index=False)
        driver_frame = _timed(took, "to_pandas (driver)", table.to_pandas)
        zk, req = AcceptingZk(), TimedRequests(Fence(2, 1))
        _timed(took, "dispatch", Dispatcher(zk, req).dispatch, driver_frame, 7)
        took["requests"] = req.requests_s
        # the baseline in the same round: the same batch's messages with the pairwise merge, checked equal
        base = TimedRequests(Fence(2, 1))
        names = vars(messages)  # the sink's module's own name for the merge, swapped for this call only
        names["merge_bodies"] = pairwise_merge_bodies
        try:
            Dispatcher(AcceptingZk(), base).dispatch(driver_frame, 7)
        finally:
            names["merge_bodies"] = merge.merge_bodies
        took["requests (pairwise merge)"] = base.requests_s
        assert [(m.key, m.value) for m in base.messages] == [(m.key, m.value) for m in req.messages]
        for k, v in took.items():
            samples.setdefault(k, []).append(v)
        msgs = [m for m in req.messages if m.topic == req.requests_topic]
        counts = {
            "records": len(records),
            "routed rows": len(routed),
            "decision rows": len(out),
            "zk writes": zk.writes,
            "request messages": len(msgs),
            "request bytes": sum(len(m.value) for m in msgs),
        }
    med = {k: statistics.median(v) for k, v in samples.items()}
    med["route"] = med["prepare_frame"] - med["validate"]
    return med, counts


PARTS = [
    "source rows",
    "validate",
    "route",
    "events_of",
    "step",
    "dump_state",
    "decision rows",
    "metrics",
    "output frame",
    "bucket call (whole)",
    "to_pandas (driver)",
    "requests",
    "requests (pairwise merge)",
    "dispatch",
]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--partitions", type=int, default=100_000)
    p.add_argument("--brokers", type=int, default=5)
    p.add_argument("--buckets", type=int, default=2)
    p.add_argument("--records", default="1000,10000", help="micro-batch sizes in proposals, comma-separated")
    p.add_argument(
        "--proposals-per-record",
        type=int,
        default=0,
        help="0: a record per proposal (the form before requests); N: AlterPartition requests of N partitions",
    )
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--profile", action="store_true", help="cProfile's top functions of the largest batch")
    args = p.parse_args()
    t0 = time.perf_counter()
    states = [bounced(s) for s in bucket_states(args.partitions, args.buckets, args.brokers, 3, 100)]
    stored = [stateful.dump_state(s) for s in states]
    events = proposals(states)
    print(
        f"{args.partitions} partitions, {args.brokers} brokers, {args.buckets} buckets: broker {BOUNCED} back, "
        f"{len(events)} ISR proposals (set up in {time.perf_counter() - t0:.1f} s)"
    )
    sizes = [min(int(s), len(events)) for s in args.records.split(",")]
    results: dict[str, Any] = {}
    for size in sizes:
        records = source_records(as_records(events[:size], args.proposals_per_record))
        med, counts = run_batch(states, stored, records, args.repeat)
        results[str(size)] = {"median_s": med, "counts": counts}
        print(f"  {size} proposals: {counts}")
        results[str(size)]["merge_ratio"] = med["requests (pairwise merge)"] / med["requests"]
    base = str(sizes[0])
    head = ["part"] + [f"{s} prop (s)" for s in sizes] + [f"µs/prop @{s}" for s in sizes]
    if len(sizes) > 1:
        head.append(f"per prop @{sizes[-1]} / @{sizes[0]}")
    rows: list[list[Any]] = []
    for part in PARTS:
        row: list[Any] = [part]
        row += [f"{results[str(s)]['median_s'][part]:.3f}" for s in sizes]
        row += [f"{results[str(s)]['median_s'][part] / s * 1e6:.0f}" for s in sizes]
        if len(sizes) > 1:
            first = results[base]["median_s"][part] / sizes[0]
            last = results[str(sizes[-1])]["median_s"][part] / sizes[-1]
            row.append(f"{last / first:.2f}" if first > 0 else "-")
        rows.append(row)
    print(f"medians of {args.repeat}, wall seconds (bucket parts summed over the {args.buckets} buckets)")
    print_table(head, rows)
    for size in sizes:
        r = results[str(size)]
        print(
            f"request sink at {size} proposals: {r['median_s']['requests']:.3f} s, pairwise merge (before) "
            f"{r['median_s']['requests (pairwise merge)']:.3f} s: {r['merge_ratio']:.1f}x"
        )
    if args.profile:
        size = sizes[-1]
        prof = cProfile.Profile()
        prof.enable()
        run_batch(states, stored, source_records(as_records(events[:size], args.proposals_per_record)), 1)
        prof.disable()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(40)
        print(text.getvalue())
    path = write_results(
        "alter_partition_batch",
        {
            "machine": machine_info(),
            "partitions": args.partitions,
            "brokers": args.brokers,
            "buckets": args.buckets,
            "proposals": len(events),
            "proposals_per_record": args.proposals_per_record,
            "repeat": args.repeat,
            "batches": results,
        },
    )
    print(f"results: {path}")


if __name__ == "__main__":
    main()
