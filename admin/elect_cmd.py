"""``livectl elect-leaders`` (Kafka's ``kafka-leader-election``): preferred or unclean elections by the controller."""

from __future__ import annotations

import argparse
from pathlib import Path

from admin import dry_run, files
from admin.common import EXIT_CODES_HELP, EXIT_OK, OperationFailedError, forbid, require, run_command, submit
from admin.publish import new_request_id
from admin.reassign.answers import partition_outcomes
from core.controller.elections import QUEUED
from core.decisions import AdminResult
from core.events import ElectLeaders
from core.kafka.error_codes import KafkaError as Errors
from core.model import ElectionType, TopicPartition


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "elect-leaders",
        parents=[common],
        help="run a preferred or unclean leader election (kafka-leader-election)",
        description="Run a leader election, like kafka-leader-election.",
        epilog=EXIT_CODES_HELP,
    )
    p.add_argument(
        "--election-type",
        required=True,
        type=str.upper,
        choices=["PREFERRED", "UNCLEAN"],
        help="PREFERRED: the first replica leads where it is live and in the ISR; UNCLEAN: a live replica "
        "outside the ISR may lead a partition without a leader",
    )
    scope = p.add_mutually_exclusive_group(required=True)
    scope.add_argument("--all-topic-partitions", action="store_true", help="every partition")
    scope.add_argument("--topic", help="one partition's topic (with --partition)")
    scope.add_argument("--path-to-json-file", type=Path, help='{"partitions":[{"topic":"foo","partition":1}]}')
    p.add_argument("--partition", type=int, help="partition id (with --topic)")
    p.add_argument("--output", choices=["text", "json"], default="text", help="a --dry-run: text or json")
    dry_run.add_option(p)
    p.set_defaults(func=cmd_elect)


def cmd_elect(args: argparse.Namespace) -> int:
    return run_command(args, _elect)


def _elect(args: argparse.Namespace) -> int:
    etype = ElectionType(args.election_type)
    request_id = new_request_id()
    if args.path_to_json_file is not None:
        forbid(args, ["--partition"], "with --path-to-json-file")
        command = files.read_election(args.path_to_json_file, request_id, etype)
    elif args.topic is not None:
        partition = require(args, "--partition", "with --topic")
        command = ElectLeaders(request_id, etype, (TopicPartition(args.topic, partition),))
    else:
        forbid(args, ["--partition"], "with --all-topic-partitions")
        command = ElectLeaders(request_id, etype, ())
    if dry_run.dry_running(args):
        return dry_run.run(args, command, f"{etype.value.lower()} election")
    try:
        done = submit(args, command, f"{etype.value.lower()} election")
    except OperationFailedError as e:
        if e.result is None or not election_report(etype, e.result):
            raise
        raise OperationFailedError(_election_failures(etype, e.result), e.result) from None
    scope = ",".join(str(tp) for tp in command.partitions) or "all partitions"
    if done.result is None:
        print(f"Leader election ({etype.value}) submitted for {scope}.")
        return EXIT_OK
    if not election_report(etype, done.result):
        print(f"Successfully completed leader election ({etype.value}) for partitions {scope}")
        if done.result.message:
            print(done.result.message)
    return EXIT_OK


def election_report(etype: ElectionType, result: AdminResult) -> bool:
    """Kafka's ``kafka-leader-election`` lines for the partitions elected and those that needed no election;
    False when the answer carries no per-partition outcomes."""
    outcomes = partition_outcomes(result)
    if not outcomes:
        return False
    elected = [tp for tp, error, message in outcomes if error == Errors.NONE.name and message != QUEUED]
    queued = [tp for tp, error, message in outcomes if error == Errors.NONE.name and message == QUEUED]
    noop = [tp for tp, error, _ in outcomes if error == Errors.ELECTION_NOT_NEEDED.name]
    if elected:
        print(f"Successfully completed leader election ({etype.value}) for partitions {', '.join(elected)}")
    if queued:
        # leader.imbalance.max.leaders.per.interval: the rebalance passes elect them, a bounded number each
        print(f"Queued leader election ({etype.value}) for partitions {', '.join(queued)}")
        count = result.details.get("queued")
        if result.message:
            # the buckets' answers merged: their count summed in details, one message
            print(f"{count} {result.message}" if isinstance(count, int) else result.message)
    if noop:
        print(f"Valid replica already elected for partitions {', '.join(noop)}")
    return True


def _election_failures(etype: ElectionType, result: AdminResult) -> str:
    failed = [o for o in partition_outcomes(result) if o[1] not in (Errors.NONE.name, Errors.ELECTION_NOT_NEEDED.name)]
    lines = [f"Error completing leader election ({etype.value}) for partition: {tp}: {error}: {message}"
             for tp, error, message in failed]  # fmt: skip
    return f"{len(failed)} replica(s) could not be elected:\n" + "\n".join(lines)
