"""``--execute`` (and ``--additional``): check the file against ZooKeeper, print the rollback assignment,
set the throttles, submit and wait for the controller's answer (none with ``--no-wait``), and (``--wait``)
follow."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from admin import dry_run, files
from admin.common import (
    OperationFailedError,
    UsageError,
    follows_to_end,
    forbid,
    ints,
    zk_connect,
)
from admin.publish import new_request_id
from admin.reassign.answers import failed_partitions, open_follower, submit
from admin.reassign.progress import follow
from admin.reassign.state import current_assignment, in_progress
from admin.reassign.throttles import set_throttles
from admin.zkread import connect
from core.decisions import AdminStatus
from core.events import ReassignPartitions
from core.model import PartitionTarget, TopicPartition

CANNOT_EXECUTE = (
    "Cannot execute because there is an existing partition assignment. Use --additional to override this and "
    "create a new partition assignment in addition to the existing one. The --additional flag can also be used "
    "to change the throttle by resubmitting the current reassignment."
)


def execute(args: argparse.Namespace, path: Path) -> int:

    for option in ("--throttle", "--replica-alter-log-dirs-throttle"):
        value = getattr(args, option.lstrip("-").replace("-", "_"))
        if value is not None and value < 0:
            raise UsageError(option, f"must be 0 or more bytes/s, got {value}")
    request_id = new_request_id()
    targets = files.read_reassignment(path, request_id)
    with connect(zk_connect(args)) as zk:
        registered = set(zk.brokers())
        topics = sorted({t.topic for t in targets})
        current = current_assignment(zk, topics)
        moving = in_progress(zk)
    for i, t in enumerate(targets):
        tp = TopicPartition(t.topic, t.partition)
        if tp not in current:
            raise UsageError(f"{path}: partitions[{i}].partition", f"partition {tp} does not exist")
        unknown = sorted(set(t.replicas) - registered)
        if unknown:
            raise UsageError(f"{path}: partitions[{i}].replicas", f"unknown broker(s) {ints(unknown)}")
    if moving and not args.additional:
        raise OperationFailedError(CANNOT_EXECUTE)
    if dry_run.dry_running(args):
        # the throttles are the tool's own ZooKeeper writes, not the controller's decisions
        forbid(args, ["--throttle", "--replica-alter-log-dirs-throttle"], "with --dry-run")
        return dry_run.run(args, ReassignPartitions(request_id, targets), "reassign")
    rollback = {TopicPartition(t.topic, t.partition): current[TopicPartition(t.topic, t.partition)] for t in targets}
    print("Current partition replica assignment")
    print()
    print(files.reassignment_json(rollback))
    print()
    print("Save this to use as the --reassignment-json-file option during rollback")
    if args.throttle is not None or args.replica_alter_log_dirs_throttle is not None:
        proposed = {TopicPartition(t.topic, t.partition): t.replicas for t in targets}
        set_throttles(args, proposed, current, moving)
    command = ReassignPartitions(request_id, targets)
    return _submit_and_follow(args, command, targets)


def _submit_and_follow(
    args: argparse.Namespace, command: ReassignPartitions, targets: Sequence[PartitionTarget]
) -> int:

    follower = open_follower(args)
    try:
        answer = submit(args, command, follower)
        if answer is None or follower is None:
            print(f"Reassignment of {len(targets)} partition(s) submitted.")
            return 0
        failed = failed_partitions(answer)
        if failed:
            lines = [f"{tp}: {error}: {message}" if message else f"{tp}: {error}" for tp, error, message in failed]
            raise OperationFailedError("Error reassigning partition(s):\n" + "\n".join(lines))
        names = ",".join(f"{t.topic}-{t.partition}" for t in targets)
        print(f"Successfully started partition reassignments for {names}")
        if not follows_to_end(args) or answer.status is AdminStatus.OK:
            return 0
        wanted = [(TopicPartition(t.topic, t.partition), t.replicas) for t in targets]
        return follow(args, command, wanted, follower)
    finally:
        if follower is not None:
            follower.close()
