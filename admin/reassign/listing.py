"""``--list`` / ``--describe``: the reassignments in progress, and those still queued in the legacy
``/admin/reassign_partitions`` znode."""

from __future__ import annotations

import argparse
import json

from admin.common import (
    ints,
    zk_connect,
)
from admin.reassign.state import in_progress
from admin.zkread import connect
from core.model import TopicPartition


def list_reassignments(args: argparse.Namespace) -> int:

    with connect(zk_connect(args)) as zk:
        moving = in_progress(zk)
        legacy = zk.pending_reassignments()
    if args.output == "json":
        doc = [
            {
                "topic": m.tp.topic,
                "partition": m.tp.partition,
                "replicas": list(m.replicas),
                "adding_replicas": list(m.adding),
                "removing_replicas": list(m.removing),
            }
            for m in sorted(moving.values(), key=lambda m: m.tp)
        ]
        queued = [{"topic": t.topic, "partition": t.partition, "replicas": list(t.replicas)} for t in legacy]
        print(json.dumps({"reassignments": doc, "queued": queued}, indent=2))
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
    return 0
