"""The controller's answer to a reassignment request: publish it and wait for the first answer, and read
the per-partition outcomes of an answer (``elect`` reads them too)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping

from admin.common import (
    NotFinishedError,
    OperationFailedError,
    bootstrap_server,
    kafka_config,
    refusal_message,
    timeout_message,
    validated,
    waits,
)
from admin.publish import ResultFollower, publish_command
from core.decisions import AdminResult, AdminStatus
from core.events import AdminCommand
from core.kafka.error_codes import KafkaError as Errors


def open_follower(args: argparse.Namespace) -> ResultFollower | None:
    """The results follower, opened before the command is sent; none with ``--no-wait``."""
    if not waits(args):
        return None
    return ResultFollower.open(bootstrap_server(args), args.admin_results_topic, kafka_config(args))


def submit(args: argparse.Namespace, command: AdminCommand, follower: ResultFollower | None) -> AdminResult | None:
    """Publish ``command`` and wait (up to ``--timeout``) for the controller's first answer, read with
    ``follower`` (opened before, so that no answer is missed; kept open for :func:`follow`). Without a
    follower (``--no-wait``) nothing is awaited: ``None``."""

    command = validated(command).command
    bootstrap, config = bootstrap_server(args), kafka_config(args)
    publish_command(bootstrap, args.admin_topic, command, command.request_id, config)
    print(f"Submitted {command.TYPE} (request {command.request_id}).", file=sys.stderr)
    if follower is None:
        return None
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        got = follower.poll(command.request_id)
        if got is not None:
            if got.status is AdminStatus.ERROR and not failed_partitions(got):
                raise OperationFailedError(refusal_message(got), got)
            return got
    raise NotFinishedError(timeout_message(command.request_id, args.timeout))


def partition_outcomes(result: AdminResult) -> list[tuple[str, str, str]]:
    """``(partition, error or "NONE", message)`` of every partition in the answer's details."""
    parts = result.details.get("partitions")
    if not isinstance(parts, Mapping):
        return []
    out = []
    for tp, r in sorted(parts.items()):
        if isinstance(r, Mapping):
            out.append((str(tp), str(r.get("error") or Errors.NONE.name), str(r.get("message", ""))))
    return out


def failed_partitions(result: AdminResult) -> list[tuple[str, str, str]]:
    """``(partition, error, message)`` of every partition the answer reports as failed."""
    return [o for o in partition_outcomes(result) if o[1] != Errors.NONE.name]
