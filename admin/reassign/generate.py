"""``--generate``: propose an assignment of the given topics over ``--broker-list`` (Kafka's rack-aware
placement, the same start index for a topic every time)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from admin import files
from admin.common import (
    EXIT_OK,
    OperationFailedError,
    UsageError,
    ints,
    zk_connect,
)
from admin.reassign.state import current_assignment
from admin.zkread import connect
from core.errors import FormatError
from core.model import TopicPartition


def generate(args: argparse.Namespace, path: Path, broker_list: tuple[int, ...]) -> int:
    from core.placement import BrokerRack, PlacementError, assign_replicas, stable_start_index

    topics = files.read_topics_to_move(path)
    with connect(zk_connect(args)) as zk:
        registered = zk.brokers()
        current = current_assignment(zk, topics)
        try:
            cordoned = set(zk.cordoned())
        except FormatError as e:
            raise OperationFailedError(f"/livectl/cordoned_brokers is not livectl's JSON: {e}") from None
    unknown = sorted(set(broker_list) - set(registered))
    if unknown:
        known = ints(sorted(registered))
        raise UsageError("--broker-list", f"unknown broker(s) {ints(unknown)}; registered: {known}")
    racks = [BrokerRack(b, None if args.disable_rack_aware else registered[b].rack) for b in sorted(set(broker_list))]
    skipped = sorted(cordoned & set(broker_list))
    if skipped:
        # stderr: stdout is the two JSON documents tools parse
        print(
            f"Skipping cordoned broker(s) {ints(skipped)} of --broker-list: no new replica goes there.", file=sys.stderr
        )
    free = len(racks) - len(skipped)
    proposed: dict[TopicPartition, tuple[int, ...]] = {}
    for t in topics:
        parts = sorted(tp for tp in current if tp.topic == t)
        rf = len(current[parts[0]]) if parts else 0
        try:
            placed = assign_replicas(racks, len(parts), rf, start_index=stable_start_index(t, free), cordoned=cordoned)
        except PlacementError as e:
            raise OperationFailedError(f"{e.error}: {e}") from None
        for tp in parts:
            proposed[tp] = placed[tp.partition]
    print("Current partition replica assignment")
    print(files.reassignment_json(current))
    print()
    print("Proposed partition reassignment configuration")
    print(files.reassignment_json(proposed))
    return EXIT_OK
