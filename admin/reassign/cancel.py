"""``--cancel``: reassign each partition of the file back to its origin (KIP-455's cancel), clear the
throttles unless ``--preserve-throttles`` once the controller answered (with ``--no-wait`` nothing is awaited
and the throttles stay: ``--verify`` clears them once nothing moves), and (``--wait``) follow."""

from __future__ import annotations

import argparse
from pathlib import Path

from admin import dry_run, files
from admin.common import (
    OperationFailedError,
    follows_to_end,
)
from admin.publish import ResultFollower, new_request_id
from admin.reassign.answers import failed_partitions, open_follower, submit
from admin.reassign.progress import follow
from admin.reassign.throttles import clear_throttles
from core.decisions import AdminStatus
from core.events import CancelReassignment


def cancel(args: argparse.Namespace, path: Path) -> int:
    command = files.cancel_command(path, new_request_id())
    if dry_run.dry_running(args):
        return dry_run.run(args, command, "cancel reassignment")
    follower = open_follower(args)
    if follower is None:
        submit(args, command, None)
        print(f"Cancellation of {len(command.partitions)} partition reassignment(s) submitted; the throttles stay "
              f"until `livectl reassign --verify` finds nothing moving.")  # fmt: skip
        return 0
    try:
        return _cancel(args, command, follower)
    finally:
        follower.close()


def _cancel(args: argparse.Namespace, command: CancelReassignment, follower: ResultFollower) -> int:
    partitions = command.partitions
    answer = submit(args, command, follower)
    assert answer is not None  # a follower was given: an answer or an exception
    failed = failed_partitions(answer)
    if failed:
        lines = [f"{tp}: {error}: {message}" if message else f"{tp}: {error}" for tp, error, message in failed]
        ok = [str(tp) for tp in partitions if str(tp) not in {f[0] for f in failed}]
        if ok:
            print("Successfully cancelled partition reassignments for: " + ",".join(ok))
        s = "s" if len(failed) > 1 else ""

        raise OperationFailedError(f"Error cancelling partition reassignment{s} for:\n" + "\n".join(lines))
    print("Successfully cancelled partition reassignments for: " + ",".join(str(tp) for tp in partitions))
    if not args.preserve_throttles:
        clear_throttles(args, command.topics())
    if follows_to_end(args) and answer.status is AdminStatus.IN_PROGRESS:
        return follow(args, command, [(tp, None) for tp in partitions], follower)
    return 0
