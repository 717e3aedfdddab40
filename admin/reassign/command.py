"""``livectl reassign``'s command line: the options and which action runs (:mod:`admin.reassign`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from admin import dry_run
from admin.common import (
    EXIT_CODES_HELP,
    broker_ids,
    forbid,
    require,
    run_command,
)
from admin.reassign.cancel import cancel
from admin.reassign.execute import execute
from admin.reassign.generate import generate
from admin.reassign.listing import list_reassignments
from admin.reassign.verify import verify
from core.kafka.log_dirs import LOG_DIRS_TOPIC


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "reassign",
        parents=[common],
        help="move partition replicas between brokers (kafka-reassign-partitions)",
        description="Generate, execute, verify, cancel and list partition reassignments, like "
        "kafka-reassign-partitions. "
        'Files use Kafka\'s format {"version":1,"partitions":[{"topic","partition","replicas"}]}. '
        "--execute and --cancel wait for the controller's answer, as Kafka's tool waits for its "
        "AlterPartitionReassignments response; --wait then follows the moves to their end.",
        epilog=EXIT_CODES_HELP + " --verify: 0 done, 3 still moving, 1 missing or at another assignment. --wait: 1 "
        "at once when every partition still moving waits for a broker that is not alive (it stays in place).",
    )
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--generate", action="store_true", help="propose an assignment for --topics-to-move-json-file")
    action.add_argument("--execute", action="store_true", help="start the reassignment in --reassignment-json-file")
    action.add_argument("--verify", action="store_true", help="check the reassignment in --reassignment-json-file")
    action.add_argument("--cancel", action="store_true", help="cancel the reassignments in --reassignment-json-file")
    p.add_argument("--reassignment-json-file", type=Path, help="Kafka's reassignment JSON")
    p.add_argument("--topics-to-move-json-file", type=Path, help='{"version":1,"topics":[{"topic":"foo"}]}')
    p.add_argument("--broker-list", help="brokers to place replicas on, e.g. 1,2,3 (--generate)")
    p.add_argument("--disable-rack-aware", action="store_true", help="ignore broker racks (--generate)")
    add_options(p, action)
    p.set_defaults(func=cmd_reassign)


def add_options(p: argparse.ArgumentParser, action: argparse._MutuallyExclusiveGroup) -> None:
    action.add_argument("--list", action="store_true", help="list the reassignments in progress")
    action.add_argument("--describe", action="store_true", help="same as --list")
    p.add_argument(
        "--throttle",
        type=int,
        default=None,
        metavar="RATE",
        help="--execute: inter-broker replication throttle in bytes/s on the moving replicas",
    )
    p.add_argument(
        "--replica-alter-log-dirs-throttle",
        type=int,
        default=None,
        metavar="RATE",
        help="--execute: replica.alter.log.dirs.io.max.bytes.per.second on the brokers involved",
    )
    p.add_argument("--additional", action="store_true", help="--execute: add to reassignments already in progress")
    p.add_argument("--preserve-throttles", action="store_true", help="--verify/--cancel: leave the throttles in place")
    p.add_argument(
        "--output", choices=["text", "json"], default="text", help="--verify/--list and a --dry-run: text or json"
    )
    p.add_argument(
        "--log-dirs-topic",
        default=LOG_DIRS_TOPIC,
        help="--verify/--list: where the brokers report their log sizes, for the bytes moved (default: %(default)s)",
    )
    dry_run.add_option(p)


def cmd_reassign(args: argparse.Namespace) -> int:
    return run_command(args, _reassign)


def _reassign(args: argparse.Namespace) -> int:
    if not (args.execute or args.cancel):
        forbid(args, ["--dry-run"], "without --execute or --cancel")
        # --verify, --list and --generate answer at once: an accepted --wait would promise what they do not do
        forbid(args, ["--wait", "--no-wait"], "without --execute or --cancel (run --verify again to follow the moves)")
    if args.generate:
        path = require(args, "--topics-to-move-json-file", "with --generate")
        brokers = broker_ids(require(args, "--broker-list", "with --generate"), "--broker-list")
        return generate(args, path, brokers)
    if args.list or args.describe:
        return list_reassignments(args)
    path = require(args, "--reassignment-json-file", "with --execute, --verify and --cancel")
    if not args.execute:
        forbid(args, ["--throttle", "--replica-alter-log-dirs-throttle", "--additional"], "without --execute")
    if args.execute:
        return execute(args, path)
    if args.verify:
        return verify(args, path)
    return cancel(args, path)
