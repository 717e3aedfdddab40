"""``--verify``: the status of each partition of the file (completed, in progress, missing, mismatch), the
data moved of those in progress (:mod:`admin.reassign.moved`) and, once none is moving, the throttles cleared
(exit 0 done, 3 still moving, 1 missing or mismatched)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from admin import files
from admin.common import (
    ints,
    zk_connect,
)
from admin.reassign import moved
from admin.reassign.state import in_progress
from admin.reassign.throttles import clear_throttles
from admin.zkread import connect
from core.model import NO_LEADER, TopicPartition
from core.move_progress import MovingPartition, waiting, waiting_text


def verify(args: argparse.Namespace, path: Path) -> int:

    targets = files.read_reassignment(path, "verify")
    rows: list[dict[str, Any]] = []
    with connect(zk_connect(args)) as zk:
        legacy = {TopicPartition(t.topic, t.partition) for t in zk.pending_reassignments()}
        znodes = {t: zk.topic(t) for t in sorted({x.topic for x in targets})}
        moving = in_progress(zk, [t for t, z in znodes.items() if z is not None])
        states = {
            TopicPartition(t.topic, t.partition): zk.partition_state(t.topic, t.partition)
            for t in targets
            if TopicPartition(t.topic, t.partition) in moving
        }
        live = set(zk.brokers())
    for t in targets:
        tp = TopicPartition(t.topic, t.partition)
        znode = znodes[t.topic]
        replicas = dict(znode.partitions).get(t.partition) if znode is not None else None
        row: dict[str, Any] = {"topic": t.topic, "partition": t.partition, "target": list(t.replicas)}
        if replicas is None:
            row |= {"status": "missing", "message": f"Partition {tp} does not exist."}
        elif tp in moving or tp in legacy:
            m = moving.get(tp)
            st = states.get(tp)
            adding_out = [r for r in (m.adding if m else ()) if st is None or r not in st.isr]
            waiting_for, not_alive = waiting(m.target if m else (), st.isr if st else (), live)
            message = f"Reassignment of partition {tp} is still in progress."
            if not_alive:  # it cannot complete until they are back
                message += f" Not done: {waiting_text(waiting_for, not_alive)}."
            row |= {"status": "in_progress", "message": message}
            row |= {"adding_not_in_isr": adding_out, "waiting_for": list(waiting_for), "not_alive": list(not_alive)}
        elif replicas == t.replicas:
            row |= {"status": "completed", "message": f"Reassignment of partition {tp} is completed."}
        else:
            row |= {
                "status": "mismatch",
                "message": f"There is no active reassignment of partition {tp}, but replica set is "
                f"{ints(replicas)} rather than {ints(t.replicas)}.",
            }
        row["replicas"] = list(replicas) if replicas is not None else None
        rows.append(row)
    pending = any(r["status"] == "in_progress" for r in rows)
    mismatch = any(r["status"] in ("missing", "mismatch") for r in rows)
    targeted = {TopicPartition(r["topic"], r["partition"]) for r in rows if r["status"] == "in_progress"}
    movers = [
        MovingPartition(
            tp.topic,
            tp.partition,
            st.leader if st is not None else NO_LEADER,
            m.adding,
            m.target,
            st.isr if st is not None else (),
        )
        for tp, m in sorted(moving.items())
        if tp in targeted and m.adding
        for st in [states.get(tp)]
    ]
    by_tp, totals = moved.progress(args, movers, live)
    for r in rows:
        if (p := by_tp.get(TopicPartition(r["topic"], r["partition"]))) is not None:
            r["progress"] = p.to_dict()
    if args.output == "json":
        print(json.dumps({"partitions": rows, "progress": totals.to_dict()}, indent=2))
    else:
        print("Status of partition reassignment:")
        for r in rows:
            print(r["message"])
        if by_tp:
            moved.print_progress(sorted(by_tp.items()), totals)
    if not pending and not args.preserve_throttles:
        if args.output == "json":
            with _stdout_to(sys.stderr):
                clear_throttles(args, sorted({t.topic for t in targets}))
        else:
            print()
            clear_throttles(args, sorted({t.topic for t in targets}))
    if mismatch:
        return 1
    return 3 if pending else 0


class _stdout_to:  # noqa: N801 - used as a context manager, like contextlib's redirect_stdout
    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.saved: TextIO | None = None

    def __enter__(self) -> None:
        self.saved, sys.stdout = sys.stdout, self.stream

    def __exit__(self, *exc: object) -> None:
        assert self.saved is not None
        sys.stdout = self.saved
