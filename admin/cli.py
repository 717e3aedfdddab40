"""The admin commands of ``livectl`` (and ``python -m admin``), with the habits of Kafka's tools.

=====================  ==========================================================================
``topics``             ``--create/--delete/--describe/--list/--alter`` (``kafka-topics``; :mod:`admin.topics_cmd`)
``reassign``           ``--generate/--execute/--verify/--cancel/--list`` (``kafka-reassign-partitions``;
                       :mod:`admin.reassign`)
``configs``            topic, broker and ``<default>`` configs (``kafka-configs``; :mod:`admin.configs`)
``elect-leaders``      ``--election-type PREFERRED|UNCLEAN`` (``kafka-leader-election``; :mod:`admin.elect_cmd`)
``brokers list``       registrations under ``/brokers/ids`` (``--min N``: exit 1 below N, a healthcheck;
                       :mod:`admin.cluster_cmd`)
``controller status``  ``/controller`` and ``/controller_epoch`` (:mod:`admin.cluster_cmd`)
``acls``               the Kafka ACLs that lock livectl's topics, as ``kafka-acls.sh`` commands or applied
                       (``--apply``; :mod:`admin.acls_cmd`)
=====================  ==========================================================================

Simulated brokers are stopped, killed and given faults by the simulator's own tool,
``livectl-simbrokers`` (:mod:`simbrokers.ctl`); a Kafka operator stops a real broker instead.

Writes are :mod:`core.events` admin commands published to ``livectl.admin`` with a fresh request id; the
tool then waits for the controller's :class:`core.decisions.AdminResult` on ``livectl.admin-results``, as
Kafka's tools wait for their response (``--no-wait``: fire and forget; ``--wait``, the default kept for
scripts, also follows a started deletion or reassignment to its end). Reads come straight from ZooKeeper.
Input is validated locally with core's decoders first.

Exit codes: 0 success (or accepted, or with ``--no-wait`` submitted); 1 the operation was refused or failed
(the controller's error and reason in one line, topic exists, ...); 2 invalid input (usage, field and
reason named); 3 not finished (no answer within ``--timeout``: the line names the request id for
``livectl audit --request-id``; ``--verify`` still in progress); 4 ZooKeeper or Kafka unreachable. This
module only wires the parser: what every command shares (errors, exit codes, connection options, submitting)
is :mod:`admin.common`.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from admin import acls_cmd, cluster_cmd, configs, elect_cmd, topics_cmd
from admin.common import Handler, common_options
from admin.reassign import command as reassign_cmd


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the admin subcommands to the top-level ``livectl`` parser."""
    write, read = common_options(True), common_options(False)
    topics_cmd.add_parser(subparsers, write)
    reassign_cmd.add_parser(subparsers, write)
    elect_cmd.add_parser(subparsers, write)
    cluster_cmd.add_brokers_parser(subparsers, read, write)
    cluster_cmd.add_controller_parser(subparsers, read)
    configs.add_parser(subparsers, write)
    acls_cmd.add_parser(subparsers)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m admin", description="livectl admin commands")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler = args.func
    return handler(args)
