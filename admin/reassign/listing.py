"""``--list`` / ``--describe``: the reassignments in progress with the data they moved
(:mod:`admin.reassign.moved`), and those still queued in the legacy ``/admin/reassign_partitions`` znode."""

from __future__ import annotations

import argparse
import json

from admin.common import (
    ints,
    zk_connect,
)
from admin.reassign import moved
from admin.reassign.state import in_progress
from admin.zkread import connect
from core.model import NO_LEADER, TopicPartition
from core.move_progress import MovingPartition


def list_reassignments(args: argparse.Namespace) -> int:

    with connect(zk_connect(args)) as zk:
        moving = in_progress(zk)
        legacy = zk.pending_reassignments()
        leaders = {tp: st.leader for tp in moving if (st := zk.partition_state(tp.topic, tp.partition)) is not None}
    movers = [
        MovingPartition(tp.topic, tp.partition, leaders.get(tp, NO_LEADER), m.adding)
        for tp, m in sorted(moving.items())
        if m.adding
    ]
    by_tp, totals = moved.progress(args, movers)
    if args.output == "json":
        doc = [
            {
                "topic": m.tp.topic,
                "partition": m.tp.partition,
                "replicas": list(m.replicas),
                "adding_replicas": list(m.adding),
                "removing_replicas": list(m.removing),
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
        print(f"{m.tp}: replicas: {ints(m.replicas)}. adding: {ints(m.adding)}. removing: {ints(m.removing)}.")
    for t in legacy:
        tp = TopicPartition(t.topic, t.partition)
        if tp not in moving:
            print(f"{tp}: queued in /admin/reassign_partitions, target: {ints(t.replicas)}.")
    if by_tp:
        moved.print_progress(sorted(by_tp.items()), totals)
    return 0
