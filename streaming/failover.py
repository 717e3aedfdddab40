"""Controller failover: hand a ZooKeeper snapshot to every bucket through the input stream.

When the driver wins the controller lease (a cold start with an empty checkpoint, a restart, or a standby
taking over) it does what Kafka's ``onControllerFailover`` does first: read the cluster from ZooKeeper.
The snapshot can be far too large for a Kafka record (100k partitions ≈ 10 MB), so the driver

1. splits it by bucket and writes ``<checkpoint>/failover/epoch-<N>/bucket-<b>.json`` (each file the
   versioned JSON of a :class:`core.events.ControllerFailover` restricted to that bucket's topics;
   write-once: a replayed micro-batch reads exactly what the first attempt read), then
2. publishes a small reference record ``{"version":1,"type":"controller_failover_ref",
   "controller_id":…,"controller_epoch":…,"epoch_zk_version":…,"path":"<dir>"}`` to
   ``livectl.broker-events``.

The reference is routed to every bucket like any cluster-scoped event, at its place in the stream, so
events before it are handled by the previous controller's state and events after it by the new one.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from core import events as ev
from streaming.routing import bucket_of
from streaming.validation import FAILOVER_REF_TYPE


def split_snapshot(snapshot: ev.ZkSnapshot, num_buckets: int) -> list[ev.ZkSnapshot]:
    """The snapshot restricted to each bucket's topics; brokers and the controller epoch go to all."""

    def mine(topic: str, b: int) -> bool:
        return bucket_of(topic, num_buckets) == b

    out = []
    for b in range(num_buckets):
        out.append(
            replace(
                snapshot,
                topics=tuple(t for t in snapshot.topics if mine(t.topic, b)),
                partition_states=tuple(ps for ps in snapshot.partition_states if mine(ps[0].topic, b)),
                pending_reassignments=tuple(p for p in snapshot.pending_reassignments if mine(p.topic, b)),
                topics_to_delete=tuple(t for t in snapshot.topics_to_delete if mine(t, b)),
                pending_preferred_elections=tuple(
                    tp for tp in snapshot.pending_preferred_elections if mine(tp.topic, b)
                ),
                topic_configs=tuple(c for c in snapshot.topic_configs if mine(c[0], b)),
            )
        )
    return out


def failover_root(checkpoint_dir: str) -> str:
    """The folder (absolute) under which every epoch's snapshot of this checkpoint goes."""
    return str((Path(checkpoint_dir) / "failover").resolve())


def write_snapshot(
    checkpoint_dir: str, controller_id: int, snapshot: ev.ZkSnapshot, num_buckets: int
) -> dict[str, Any]:
    """Write the per-bucket files (once per epoch) and return the reference record to publish."""
    folder = Path(failover_root(checkpoint_dir)) / f"epoch-{snapshot.controller_epoch}"
    folder.mkdir(parents=True, exist_ok=True)
    for b, part in enumerate(split_snapshot(snapshot, num_buckets)):
        target = folder / f"bucket-{b}.json"
        if target.exists():  # write-once: a restarted driver with the same epoch keeps the first snapshot
            continue
        tmp = folder / f".bucket-{b}.json.tmp"
        tmp.write_text(ev.event_to_json(ev.ControllerFailover(controller_id, part)))
        os.replace(tmp, target)
    return {
        "version": 1,
        "type": FAILOVER_REF_TYPE,
        "controller_id": controller_id,
        "controller_epoch": snapshot.controller_epoch,
        "epoch_zk_version": snapshot.controller_epoch_zk_version,
        "num_buckets": num_buckets,
        "path": str(folder),
    }


def unusable_reason(ref: dict[str, Any], bucket: int, state_epoch: int, checkpoint_dir: str | None) -> str | None:
    """Why a reference cannot be applied to ``bucket`` (whose state holds ``state_epoch``), or ``None``."""
    epoch = int(ref.get("controller_epoch", -1))
    if epoch <= state_epoch:
        return f"stale: epoch {epoch} is not newer than the bucket's epoch {state_epoch}"
    folder = Path(str(ref.get("path", "")))
    if checkpoint_dir is not None and folder.parent.parent.resolve() != Path(checkpoint_dir).resolve():
        return f"written for another checkpoint ({folder}), not {checkpoint_dir}"
    if not (folder / f"bucket-{bucket}.json").is_file():
        return f"its snapshot {folder / f'bucket-{bucket}.json'} is gone"
    return None


def load_bucket_failover(ref: dict[str, Any], bucket: int) -> ev.ControllerFailover:
    """The :class:`ControllerFailover` event for ``bucket`` named by a reference record."""
    path = Path(str(ref["path"])) / f"bucket-{bucket}.json"
    event = ev.event_from_json(path.read_text())
    if not isinstance(event, ev.ControllerFailover):  # pragma: no cover - written by write_snapshot only
        raise TypeError(f"{path} holds a {type(event).__name__}, not a controller_failover")
    return event


def ref_to_json(ref: dict[str, Any]) -> str:
    return json.dumps(ref, separators=(",", ":"), sort_keys=True)
