"""``--dry-run`` of the write commands: the command goes to the controller with ``"dry_run": true``
(:mod:`core.controller.dry_run`); every bucket it reaches runs the controller's own step for it on a copy of its
live state and applies nothing, and the driver merges the buckets' answers into one (one per request id and
micro-batch). This module sends it, waits for that answer and prints the decisions it carries: the ZooKeeper
writes, the requests per broker, the partitions as they would be after, the refusals with their reasons.

Exit 0 when the controller would carry the command out (``ok`` or ``in_progress``), 1 when it would refuse it
(its error and reason on stderr, the decisions still printed), 3 when no answer came within ``--timeout``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from admin.common import (
    EXIT_FAILED,
    EXIT_OK,
    NotFinishedError,
    ValidCommand,
    bootstrap_server,
    forbid,
    kafka_config,
    refusal_message,
    timeout_message,
    validated,
)
from admin.publish import Progress, ResultFollower, WaitTimeoutError, publish_command
from admin.reassign.answers import failed_partitions
from core.codec.decisions import encode_decision
from core.codec.dry_run_details import DryRun, read_dry_run
from core.decisions import AdminResult, AdminStatus, BrokerRequest, StateChangeFailure, ZkWrite
from core.errors import FormatError
from core.events import AdminCommand, ElectLeaders

HELP = (
    "ask the controller what it would decide, from its live state, and apply nothing: the ZooKeeper writes, the "
    "requests per broker, the resulting leaders and ISRs, the refusals with their reasons (exit 1 when it would "
    "refuse)"
)


def add_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dry-run", action="store_true", help=HELP)


def dry_running(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "dry_run", False))


def ask(args: argparse.Namespace, command: AdminCommand | ValidCommand, label: str) -> tuple[AdminResult, DryRun]:
    """Send ``command`` run dry and wait for the controller's (merged) answer; :class:`NotFinishedError` when
    none came within ``--timeout``."""
    forbid(args, ["--no-wait"], "with --dry-run (the answer is what a dry run is for)")
    plain = command.command if isinstance(command, ValidCommand) else command
    dry = validated(dataclasses.replace(plain, dry_run=True)).command  # type: ignore[type-var]
    bootstrap = bootstrap_server(args)
    config = kafka_config(args)
    follower = ResultFollower.open(bootstrap, args.admin_results_topic, config)
    try:
        publish_command(bootstrap, args.admin_topic, dry, dry.request_id, config)
        print(f"Submitted {dry.TYPE} as a dry run (request {dry.request_id}).", file=sys.stderr)
        try:
            result = follower.wait(dry.request_id, args.timeout, Progress(f"dry run: {label}"), until_final=False)
        except WaitTimeoutError as e:
            raise NotFinishedError(timeout_message(dry.request_id, args.timeout, e.last)) from None
    finally:
        follower.close()
    report = read_dry_run(result.details)
    if report is None and result.details.get("truncated") is True:
        size = result.details.get("original_bytes")
        print(
            f"The dry run's decisions were {size} bytes, over what one answer on the results topic may hold: only "
            "the controller's answer is shown.",
            file=sys.stderr,
        )
        return result, DryRun((), ())
    if report is None:
        raise FormatError("details", f"the answer to request {dry.request_id} carries no dry run")
    return result, report


def run(args: argparse.Namespace, command: AdminCommand | ValidCommand, label: str) -> int:
    """:func:`ask`, then print the answer (``--output json`` where the command has it); the exit code."""
    result, report = ask(args, command, label)
    if getattr(args, "output", "text") == "json":
        print(json.dumps(as_json(result, report), indent=2, sort_keys=True))
    else:
        for line in text_lines(result, report):
            print(line)
    if result.status is AdminStatus.ERROR:
        print(
            f"livectl {args.command}: dry run: the controller would refuse: {refusal_message(result)}", file=sys.stderr
        )
        return EXIT_FAILED
    return EXIT_OK


def as_json(result: AdminResult, report: DryRun) -> dict[str, Any]:
    """The answer as one JSON object, the decisions in core's JSON form
    (:func:`core.codec.decisions.encode_decision`). An ``elect_leaders`` answer also carries ``queued_elections``:
    the preferred elections it would queue for the leader-balance passes under
    ``leader.imbalance.max.leaders.per.interval`` (the buckets' sum; 0 when none), the count the text's
    ``N preferred leader elections queued`` line shows."""
    out: dict[str, Any] = {
        "request_id": result.request_id,
        "command": result.command,
        "would": result.status.value,
        "error": result.error,
        "message": result.message,
        "applied": False,
        "decisions": [encode_decision(d) for d in report.decisions],
        "partitions": [
            {f.name: list(v) if isinstance(v := getattr(p, f.name), tuple) else v for f in dataclasses.fields(p)}
            for p in report.partitions
        ],
    }
    if result.command == ElectLeaders.TYPE:
        count = result.details.get("queued")
        out["queued_elections"] = count if isinstance(count, int) else 0
    return out


def _ints(xs: Iterable[int]) -> str:
    return ",".join(map(str, xs)) or "-"


def _request_partitions(body: Mapping[str, Any]) -> list[str]:
    out = []
    for ts in body.get("topicStates", ()) or ():
        for ps in ts.get("partitionStates", ()) or ():
            name = f"{ts.get('topicName')}-{ps.get('partitionIndex')}"
            if "leader" in ps:
                name += f" (leader {ps['leader']}, isr {_ints(ps.get('isr', ()))})"
            elif ps.get("deletePartition"):
                name += " (delete)"
            out.append(name)
    return out


def text_lines(result: AdminResult, report: DryRun) -> list[str]:
    """The answer for people: what the controller would answer, then each kind of decision."""
    would = {AdminStatus.OK: "carry it out", AdminStatus.IN_PROGRESS: "start it (work that goes on after)"}
    head = f"Dry run of {result.command} (request {result.request_id}): "
    if result.status is AdminStatus.ERROR:
        lines = [head + f"the controller would refuse it: {refusal_message(result)}"]
    else:
        lines = [head + f"the controller would {would[result.status]}."]
        if result.message:
            # elect-leaders --all under leader.imbalance.max.leaders.per.interval: the count is the buckets' sum
            count = result.details.get("queued")
            lines.append(f"  {count} {result.message}" if isinstance(count, int) else f"  {result.message}")
    writes = [d for d in report.decisions if isinstance(d, ZkWrite)]
    lines.append(f"ZooKeeper writes ({len(writes)}):")
    for w in writes:
        version = f" (expected version {w.expected_version})" if w.expected_version >= 0 else ""
        lines.append(f"  {w.op.value} {w.path}{version}" + (f" {w.data}" if w.data is not None else ""))
    requests = [d for d in report.decisions if isinstance(d, BrokerRequest)]
    lines.append(f"Requests ({len(requests)}):")
    for r in requests:
        to = f"brokers {_ints(r.recipients())}" if r.shared else f"broker {r.broker_id}"
        parts = _request_partitions(r.body_json())
        lines.append(f"  {r.api.value} to {to}: " + ("; ".join(parts) if parts else "brokers only"))
    lines.append(f"Partitions after ({len(report.partitions)}):")
    for p in report.partitions:
        moving = (
            f" adding {_ints(p.adding_replicas)} removing {_ints(p.removing_replicas)}"
            if p.adding_replicas or p.removing_replicas
            else ""
        )
        lines.append(
            f"  {p.topic}-{p.partition} {p.state} replicas {_ints(p.replicas)}{moving} leader {p.leader} "
            f"leader epoch {p.leader_epoch} isr {_ints(p.isr)}"
        )
    refusals = _refusals(result, report)
    lines.append(f"Refusals ({len(refusals)}):")
    lines.extend(f"  {r}" for r in refusals)
    lines.append("Nothing was applied.")
    return lines


def _refusals(result: AdminResult, report: DryRun) -> list[str]:
    out = []
    if result.status is AdminStatus.ERROR:
        out.append(f"{result.command}: {refusal_message(result)}")
    out.extend(
        f"{tp}: {error}" + (f": {message}" if message else "") for tp, error, message in failed_partitions(result)
    )
    out.extend(
        f"{f.item}: {f.from_state} -> {f.to_state}: {f.reason}"
        for f in report.decisions
        if isinstance(f, StateChangeFailure)
    )
    return out
