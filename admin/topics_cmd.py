"""``livectl topics`` (Kafka's ``kafka-topics``): ``--create/--delete/--alter`` send commands to the controller
and wait for its answer (unless ``--no-wait``), ``--list/--describe`` read ZooKeeper (:mod:`admin.topics_read`)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable

from admin import configs, dry_run, topics_read
from admin.common import (
    EXIT_CODES_HELP,
    EXIT_OK,
    OperationFailedError,
    UsageError,
    config_pairs,
    forbid,
    parse_replica_assignment,
    require,
    run_command,
    submit,
    validated,
    waits,
    zk_connect,
)
from admin.configs import NO_WAIT_CONFIGS
from admin.publish import new_request_id
from admin.zkread import connect
from core.decisions import AdminStatus
from core.events import AdminCommand, AlterTopicConfig, CreatePartitions, CreateTopic, DeleteTopic
from core.kafka.configs import topic_configs_problem


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "topics",
        parents=[common],
        help="create, delete, describe, list and alter topics (kafka-topics)",
        description="Create, delete, describe, list and alter topics, like kafka-topics.",
        epilog=EXIT_CODES_HELP,
    )
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--create", action="store_true", help="create a topic")
    action.add_argument("--delete", action="store_true", help="delete a topic")
    action.add_argument("--describe", action="store_true", help="describe topics (from ZooKeeper)")
    action.add_argument("--list", action="store_true", help="list topics (from ZooKeeper)")
    action.add_argument("--alter", action="store_true", help="add partitions (--partitions) or set --config")
    p.add_argument("--topic", help="topic name (a regular expression for --describe / --list)")
    p.add_argument("--partitions", type=int, help="number of partitions (--create), new total (--alter)")
    p.add_argument("--replication-factor", type=int, help="replication factor (--create)")
    p.add_argument(
        "--replica-assignment",
        help="explicit assignment: partitions separated by ',', replicas by ':', e.g. 1:2,2:3,3:1",
    )
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", help="topic config (repeatable)")
    p.add_argument(
        "--delete-config", action="append", default=[], metavar="KEY", help="--alter: remove a config override"
    )
    p.add_argument("--if-not-exists", action="store_true", help="--create: do nothing if the topic exists")
    p.add_argument("--if-exists", action="store_true", help="--delete/--alter: do nothing if the topic is missing")
    p.add_argument(
        "--under-replicated-partitions", action="store_true", help="--describe: only partitions with ISR < replicas"
    )
    p.add_argument(
        "--unavailable-partitions", action="store_true", help="--describe: only partitions without a live leader"
    )
    topics_read.add_options(p)
    dry_run.add_option(p)
    p.set_defaults(func=cmd_topics)


def cmd_topics(args: argparse.Namespace) -> int:
    return run_command(args, _topics)


def _topics(args: argparse.Namespace) -> int:
    if args.list or args.describe:
        forbid(args, ["--dry-run"], "with --list or --describe (they change nothing)")
    if args.list:
        return _topics_list(args)
    if args.describe:
        return _topics_describe(args)
    topic = require(args, "--topic", "with --create, --delete and --alter")
    if args.create:
        return _topics_create(args, topic)
    if args.delete:
        forbid(
            args,
            ["--partitions", "--replication-factor", "--replica-assignment", "--config", "--delete-config"],
            "with --delete",
        )
        return _topics_delete(args, topic)
    return _topics_alter(args, topic)


def _topics_create(args: argparse.Namespace, topic: str) -> int:
    forbid(args, ["--delete-config"], "with --create")
    topic_configs = config_pairs(args.config)
    for key, value in topic_configs:
        problem = topic_configs_problem({key: value})
        if problem is not None:
            raise UsageError(key, problem)
    problem = topic_configs_problem(dict(topic_configs))
    if problem is not None:
        raise UsageError("--config", problem)
    if args.replica_assignment is not None:
        forbid(args, ["--partitions", "--replication-factor"], "with --replica-assignment")
        assignment = parse_replica_assignment(args.replica_assignment)
        command = CreateTopic(new_request_id(), topic, len(assignment), len(assignment[0]), assignment, topic_configs)
    else:
        partitions = require(args, "--partitions", "with --create (or give --replica-assignment)")
        rf = require(args, "--replication-factor", "with --create (or give --replica-assignment)")
        command = CreateTopic(new_request_id(), topic, partitions, rf, (), topic_configs)
    valid = validated(command)
    if dry_run.dry_running(args):
        # the controller answers an existing topic itself (TOPIC_ALREADY_EXISTS): that is what a dry run shows
        forbid(args, ["--if-not-exists"], "with --dry-run")
        return dry_run.run(args, valid, f"create {topic}")
    with connect(zk_connect(args)) as zk:
        if zk.topic(topic) is not None:
            if args.if_not_exists:
                return EXIT_OK
            raise OperationFailedError(f"Topic '{topic}' already exists.")
    done = submit(args, valid, f"create {topic}")
    print(f"Created topic {topic}." if done.result else f"Creation of topic {topic} submitted.")
    return EXIT_OK


def _topics_delete(args: argparse.Namespace, topic: str) -> int:
    if dry_run.dry_running(args):
        forbid(args, ["--if-exists"], "with --dry-run")
        return dry_run.run(args, DeleteTopic(new_request_id(), topic), f"delete {topic}")
    with connect(zk_connect(args)) as zk:
        if zk.topic(topic) is None:
            if args.if_exists:
                return EXIT_OK
            raise OperationFailedError(f"Topic '{topic}' does not exist as expected")
    done = submit(args, DeleteTopic(new_request_id(), topic), f"delete {topic}")
    if done.result is None:
        print(f"Deletion of topic {topic} submitted.")
    elif done.result.status is AdminStatus.IN_PROGRESS:
        # Kafka's DeleteTopics answers once the deletion has started; --wait follows it to its end
        print(f"Topic {topic} is marked for deletion.")
    else:
        print(f"Topic {topic} deleted.")
    return EXIT_OK


def _topics_alter(args: argparse.Namespace, topic: str) -> int:
    if args.partitions is None and not args.config and not args.delete_config:
        raise UsageError("--alter", "needs --partitions, --config and/or --delete-config")
    forbid(args, ["--replication-factor"], "with --alter (use reassign to change replicas)")
    if dry_run.dry_running(args) and args.partitions is not None and (args.config or args.delete_config):
        raise UsageError("--dry-run", "takes one change at a time: --partitions, or --config/--delete-config")
    if (args.config or args.delete_config) and not waits(args):
        raise UsageError("--no-wait", NO_WAIT_CONFIGS)
    with connect(zk_connect(args)) as zk:
        current = zk.topic(topic)
    if current is None:
        if args.if_exists:
            return EXIT_OK
        raise OperationFailedError(f"Topic '{topic}' does not exist as expected")
    commands: list[tuple[AdminCommand, str]] = []
    if args.partitions is not None:
        have = len(current.partitions)
        if args.partitions <= have:
            raise UsageError(
                "--partitions",
                f"the number of partitions for a topic can only be increased. Topic {topic} currently has {have} "
                f"partitions, {args.partitions} would not be an increase.",
            )
        assignment: tuple[tuple[int, ...], ...] = ()
        if args.replica_assignment is not None:
            assignment = parse_replica_assignment(args.replica_assignment)
            if len(assignment) != args.partitions - have:
                raise UsageError(
                    "--replica-assignment",
                    f"lists {len(assignment)} partitions but {args.partitions - have} are being added",
                )
        commands.append((CreatePartitions(new_request_id(), topic, args.partitions, assignment), "add partitions"))
    add = dict(config_pairs(args.config))
    delete = configs.parse_delete_config(args.delete_config)
    if add or delete:
        configs.check_topic_change(args, topic, add, delete)
    checked = [(validated(command), label) for command, label in commands]
    if dry_run.dry_running(args):
        if checked:
            valid_command, label = checked[0]
            return dry_run.run(args, valid_command, f"{label} {topic}")
        command = AlterTopicConfig(new_request_id(), topic, tuple(sorted(add.items())), tuple(sorted(set(delete))))
        return dry_run.run(args, command, f"alter config {topic}")
    answered = True
    for valid_command, label in checked:
        answered = submit(args, valid_command, f"{label} {topic}").result is not None
    if args.partitions is not None:
        change = f"{len(current.partitions)} -> {args.partitions}"
        print(
            f"Partitions of topic {topic}: {change}."
            if answered
            else f"Addition of partitions to topic {topic} ({change}) submitted."
        )
    if add or delete:
        # config changes wait for the controller's answer, as kafka-configs does (see admin.configs)
        configs.alter_topic_configs(args, topic, add, delete)
        changes = [f"{k}={v}" for k, v in sorted(add.items())] + [f"-{k}" for k in delete]
        print(f"Configs of topic {topic} updated: {', '.join(changes)}.")
    return EXIT_OK


def _matcher(pattern: str | None) -> Callable[[str], bool]:
    if pattern is None:
        return lambda _: True
    try:
        rx = re.compile(pattern)
    except re.error as e:
        raise UsageError("--topic", f"not a valid regular expression: {e}") from None
    return lambda name: rx.fullmatch(name) is not None


def _topics_list(args: argparse.Namespace) -> int:
    topics_read.list_topics(args, zk_connect(args), _matcher(args.topic))
    return EXIT_OK


def _topics_describe(args: argparse.Namespace) -> int:
    def missing() -> None:
        if args.topic is not None and topics_read.looks_literal(args.topic):
            raise OperationFailedError(f"Topic '{args.topic}' does not exist as expected")

    topics_read.describe(args, zk_connect(args), _matcher(args.topic), missing)
    return EXIT_OK
