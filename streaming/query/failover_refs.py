"""Which failover reference a bucket acts on, and which of its events a controller handles.

A bucket's micro-batch can hold ``failover_ref`` rows (a new controller wrote its ZooKeeper snapshot and
published where it is: :mod:`streaming.query.failover`) besides the events. :func:`events_of` turns the batch's
rows into core events in stream order and picks the one reference the bucket loads — the newest, and
only when it is newer than the bucket's controller epoch, was written for this query's checkpoint and its
snapshot file is there; where it goes relative to the other events depends on whether the bucket already
holds a cluster. :func:`applicable_events` leaves out what precedes a bucket's first failover: history
the snapshot already reflects.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from core import decisions as dc
from core import events as ev
from core.codec.events import event_from_json
from core.controller import ControllerState
from core.kafka.error_codes import KafkaError as Errors
from streaming.query import failover
from streaming.query.routing import KIND_EVENT, KIND_FAILOVER_REF, KIND_TICK

__all__ = ["Origin", "applicable_events", "events_of"]


#: where an event of a bucket's batch came from: (source ``topic/partition``, offset, the row's payload)
Origin = tuple[str, int, str]


def events_of(
    bucket: int,
    frame: pd.DataFrame,
    state_epoch: int = 0,
    checkpoint_dir: str | None = None,
    *,
    loaded: bool = False,
    origins: list[Origin] | None = None,
    snapshots: failover.SnapshotFiles | None = None,
) -> tuple[list[ev.Event], list[dc.StateChangeFailure]]:
    """The bucket's rows as core events, in stream order; at most one tick (the newest), last.

    Of the failover references only the newest one of the batch is used, and only if it is newer than the
    controller epoch the bucket already holds, was written for this query's checkpoint folder, and its
    snapshot file is there: a cold start that reads the topic from the beginning meets the references of
    earlier runs, which are history. Skipped references come back as failures, for the log.

    When the bucket has already ``loaded`` a cluster (a restart or a takeover on a used checkpoint), the
    chosen reference goes first and the batch's other events follow it in stream order: every record in
    that batch comes after the checkpoint's last planned micro-batch, so none was handled by any
    controller, and the new one handles them on the cluster it read from ZooKeeper (the source's failover
    barrier makes this batch the new controller's first; :mod:`streaming.source.kafka_source`). Handled before
    the snapshot, their writes could be missing from it and conflict with it afterwards.

    ``origins``, when given, is filled with the origin of each returned event (same order)."""
    files: failover.SnapshotFiles = snapshots if snapshots is not None else failover.ShippedSnapshots()
    ordered = frame.sort_values(["ts", "src", "offset", "sub"], kind="stable")
    items: list[tuple[str, Any]] = []
    item_origins: list[Origin] = []
    refs: list[dict[str, Any]] = []
    tick: ev.Tick | None = None
    tick_origin: Origin = ("~tick", 0, "")
    for kind, payload, src, offset in zip(
        ordered["kind"], ordered["payload"], ordered["src"], ordered["offset"], strict=True
    ):
        if kind == KIND_EVENT:
            items.append((kind, event_from_json(payload)))
            item_origins.append((str(src), int(offset), str(payload)))
        elif kind == KIND_FAILOVER_REF:
            ref = json.loads(payload)
            refs.append(ref)
            items.append((kind, ref))
            item_origins.append((str(src), int(offset), str(payload)))
        elif kind == KIND_TICK:
            t = event_from_json(payload)
            assert isinstance(t, ev.Tick)
            if tick is None or t.now_ms > tick.now_ms:
                tick = t
                tick_origin = (str(src), int(offset), str(payload))
    skipped: list[dc.StateChangeFailure] = []
    usable: list[dict[str, Any]] = []
    for ref in refs:
        reason = failover.unusable_reason(ref, bucket, state_epoch, checkpoint_dir, files)
        if reason is None:
            usable.append(ref)
        else:
            skipped.append(_skipped_ref(ref, reason))
    chosen = max(usable, key=lambda r: int(r["controller_epoch"])) if usable else None
    # a new checkpoint moved from another (streaming.driver.rebucket): the records before the reference in this
    # batch are those no controller handled yet, not history: like a takeover's, they follow the snapshot
    loaded = loaded or (chosen is not None and chosen.get("resumes") is True)
    for ref in usable:
        if ref is not chosen and chosen is not None:
            skipped.append(_skipped_ref(ref, f"superseded by epoch {chosen['controller_epoch']} in the same batch"))
    events: list[ev.Event] = []
    kept: list[Origin] = []

    def load(origin: Origin) -> None:
        assert chosen is not None
        try:
            events.append(failover.load_bucket_failover(chosen, bucket, files))
            kept.append(origin)
        except Exception as e:  # a damaged snapshot file must not stop the query in a loop
            skipped.append(_skipped_ref(chosen, f"its snapshot could not be read: {e!r}"[:2000]))

    if loaded and chosen is not None:
        load(next(o for (_, i), o in zip(items, item_origins, strict=True) if i is chosen))
    for (kind, item), origin in zip(items, item_origins, strict=True):
        if kind == KIND_EVENT:
            events.append(item)
            kept.append(origin)
        elif chosen is not None and item is chosen and not loaded:
            load(origin)
    if tick is not None:
        events.append(tick)
        kept.append(tick_origin)
    if origins is not None:
        origins.extend(kept)
    return events, skipped


def _skipped_ref(ref: dict[str, Any], reason: str) -> dc.StateChangeFailure:
    return dc.StateChangeFailure(
        f"controller_failover_ref epoch {ref.get('controller_epoch')}", "-", "ControllerFailover", reason
    )


def applicable_events(state: ControllerState, events: list[ev.Event]) -> tuple[list[ev.Event], list[dc.AdminResult]]:
    """Events that precede this bucket's first controller failover are history the ZooKeeper snapshot
    already reflects (a new Kafka controller reads ZooKeeper, it does not replay requests): they are not
    applied. An admin command among them is answered ``NOT_CONTROLLER`` so that its sender can retry."""
    if state.context.controller_id >= 0:
        return events, []
    for i, e in enumerate(events):
        if isinstance(e, ev.ControllerFailover):
            skipped = events[:i]
            kept = events[i:]
            break
    else:
        skipped, kept = events, []
    refused = [
        dc.AdminResult(
            e.request_id,
            e.TYPE,
            dc.AdminStatus.ERROR,
            Errors.NOT_CONTROLLER.name,
            "the controller had not loaded the cluster state yet; resubmit the command",
        )
        for e in skipped
        if isinstance(e, ev.AdminCommand)
    ]
    return kept, refused
