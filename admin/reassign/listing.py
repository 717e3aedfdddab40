"""``--list`` / ``--describe``: the reassignments in progress with the data they moved
(:mod:`admin.reassign.moved`), and those still queued in the legacy ``/admin/reassign_partitions`` znode."""

from __future__ import annotations

import argparse
import json
from collections.abc import Collection, Sequence

from admin.common import (
    ints,
    zk_connect,
)
from admin.reassign import moved
from admin.reassign.state import in_progress
from admin.zkread import connect
from core.model import NO_LEADER, TopicPartition
from core.move_progress import MovingPartition, waiting, waiting_text


def list_reassignments(args: argparse.Namespace) -> int:

    with connect(zk_connect(args)) as zk:
        moving = in_progress(zk)
        legacy = zk.pending_reassignments()
        states = {tp: st for tp in moving if (st := zk.partition_state(tp.topic, tp.partition)) is not None}
        live = set(zk.brokers())
    isrs = {tp: st.isr for tp, st in states.items()}
    movers = [
        MovingPartition(
            tp.topic, tp.partition, st.leader if st else NO_LEADER, m.adding, m.target, st.isr if st else ()
        )
        for tp, m in sorted(moving.items())
        if m.adding
        for st in [states.get(tp)]
    ]
    by_tp, totals = moved.progress(args, movers, live)
    if args.output == "json":
        doc = [
            {
                "topic": m.tp.topic,
                "partition": m.tp.partition,
                "replicas": list(m.replicas),
                "adding_replicas": list(m.adding),
                "removing_replicas": list(m.removing),
                **_waiting_fields(m.target, isrs.get(m.tp, ()), live),
                **({"progress": p.to_dict()} if (p := by_tp.get(m.tp)) is not None else {}),
            }
            for m in sorted(moving.values(), key=lambda m: m.tp)
        ]
        queued = [{"topic": t.topic, "partition": t.partition, "replicas": list(t.replicas)} for t in legacy]
        print(json.dumps({"reassignments": doc, "queued": queued, "progress": totals.to_dict()}, indent=2))
        return 0
    if not moving and not legacy:
        print("No partition reassignments found.")
        return 0
    print("Current partition reassignments:")
    for m in sorted(moving.values(), key=lambda m: m.tp):
        line = f"{m.tp}: replicas: {ints(m.replicas)}. adding: {ints(m.adding)}. removing: {ints(m.removing)}."
        waiting_for, not_alive = waiting(m.target, isrs.get(m.tp, ()), live)
        if not_alive:  # the move cannot complete until they are back: say so where it is listed
            line += f" Not done: {waiting_text(waiting_for, not_alive)}."
        print(line)
    for t in legacy:
        tp = TopicPartition(t.topic, t.partition)
        if tp not in moving:
            print(f"{tp}: queued in /admin/reassign_partitions, target: {ints(t.replicas)}.")
    if by_tp:
        moved.print_progress(sorted(by_tp.items()), totals)
    return 0


def _waiting_fields(target: Sequence[int], isr: Sequence[int], live: Collection[int]) -> dict[str, list[int]]:
    """The target replicas not in the ISR (the move completes when there are none) and those whose broker is
    not alive (it cannot complete until they are back)."""
    waiting_for, not_alive = waiting(target, isr, live)
    return {"waiting_for": list(waiting_for), "not_alive": list(not_alive)}
