"""The admin commands of ``livectl`` (and ``python -m admin``), with the habits of Kafka's tools.

=====================  ==========================================================================
``topics``             ``--create/--delete/--describe/--list/--alter`` (``kafka-topics``)
``reassign``           ``--generate/--execute/--verify/--cancel/--list`` (``kafka-reassign-partitions``;
                       :mod:`admin.reassign_cmd`)
``configs``            topic, broker and ``<default>`` configs (``kafka-configs``; :mod:`admin.configs`)
``elect-leaders``      ``--election-type PREFERRED|UNCLEAN`` (``kafka-leader-election``)
``brokers list``       registrations under ``/brokers/ids`` (``--min N``: exit 1 below N, a healthcheck)
``broker shutdown N``  ask simulated broker N for a controlled shutdown (control topic); ``--wait`` reports
                       its outcome (:mod:`admin.broker_shutdown`)
``broker kill N``      make simulated broker N vanish (session closed, no controlled shutdown)
``broker fault N ...`` inject ``slow-follower``, ``stuck-follower``, ``disk-failure``, ``clear``, ``produce-rate``
``controller status``  ``/controller`` and ``/controller_epoch``
=====================  ==========================================================================

Writes are :mod:`core.events` admin commands published to ``livectl.admin`` with a fresh request id;
``--wait`` follows the :class:`core.decisions.AdminResult` on ``livectl.admin-results``. Reads come
straight from ZooKeeper. Input is validated locally with core's decoders first.

Exit codes: 0 success; 1 the operation failed (controller error, topic exists, ...); 2 invalid input
(usage, field and reason named); 3 not finished (``--wait`` timed out, ``--verify`` still in progress);
4 ZooKeeper or Kafka unreachable.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from admin import broker_shutdown, configs, files, reassign_cmd, topics_read
from admin.publish import (
    ADMIN_RESULTS_TOPIC,
    ADMIN_TOPIC,
    KafkaUnavailableError,
    Progress,
    ResultFollower,
    WaitTimeoutError,
    new_request_id,
    publish,
    publish_command,
)
from admin.zkread import ZkReader, ZkUnavailableError, connect
from core.codec.events import decode_event, encode_event
from core.decisions import AdminResult, AdminStatus
from core.errors import FormatError
from core.events import AdminCommand, CreatePartitions, CreateTopic, DeleteTopic, ElectLeaders
from core.kafka.envelope import REQUESTS_TOPIC
from core.model import ElectionType, TopicPartition
from core.topic_configs import topic_configs_problem
from simbrokers.control import CONTROL_TOPIC, ControlCommand
from sinks.security import KafkaSecurity, SecurityConfigError

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_PENDING = 3
EXIT_UNAVAILABLE = 4

#: core event field -> the option that sets it (for error messages)
_OPTION_OF = {
    "topic": "--topic",
    "partitions": "--partitions",
    "replication_factor": "--replication-factor",
    "replica_assignment": "--replica-assignment",
    "configs": "--config",
    "total_count": "--partitions",
    "election_type": "--election-type",
}


class AdminError(Exception):
    """Root of the admin CLI's own exceptions."""


class UsageError(AdminError):
    """Invalid input: ``field`` (an option or file field) and ``reason``."""

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}")


class OperationFailedError(AdminError):
    """The operation was refused or failed; the message says why (``result``: the controller's answer)."""

    def __init__(self, message: str, result: AdminResult | None = None) -> None:
        super().__init__(message)
        self.result = result


class NotFinishedError(AdminError):
    """The operation has not finished (yet)."""


Handler = Callable[[argparse.Namespace], int]


# ----------------------------------------------------------------------------- defaults


def _local_services_address(name: str) -> str | None:
    """Address of a service started by ``livectl local up`` in ./run/local, if any."""
    state = Path("run") / "local" / "services.json"
    try:
        raw = json.loads(state.read_text())
        address = raw[name]["address"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return str(address)


def default_bootstrap() -> str:
    return os.environ.get("LIVECTL_BOOTSTRAP_SERVER") or _local_services_address("broker") or "127.0.0.1:9092"


def default_zookeeper() -> str:
    return os.environ.get("LIVECTL_ZOOKEEPER") or _local_services_address("zookeeper") or "127.0.0.1:2181"


# ----------------------------------------------------------------------------- parser


def _common(write: bool) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("connection")
    g.add_argument(
        "--bootstrap-server",
        default=None,
        help="Kafka bootstrap server (default: $LIVECTL_BOOTSTRAP_SERVER, `livectl local up`, or 127.0.0.1:9092)",
    )
    g.add_argument(
        "--zookeeper",
        default=None,
        help="ZooKeeper connect string (default: $LIVECTL_ZOOKEEPER, `livectl local up`, or 127.0.0.1:2181)",
    )
    g.add_argument(
        "--command-config",
        type=Path,
        default=None,
        metavar="FILE",
        help="Kafka client security properties (security.protocol, sasl.*, ssl.*), as for Kafka's tools",
    )
    if write:
        g.add_argument("--admin-topic", default=ADMIN_TOPIC, help="commands topic (default: %(default)s)")
        g.add_argument(
            "--admin-results-topic", default=ADMIN_RESULTS_TOPIC, help="results topic (default: %(default)s)"
        )
        w = p.add_argument_group("waiting")
        w.add_argument("--wait", action="store_true", help="follow the controller's result until ok or error")
        w.add_argument("--timeout", type=float, default=120.0, help="seconds to --wait (default: %(default)s)")
    return p


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the admin subcommands to the top-level ``livectl`` parser."""
    write, read = _common(True), _common(False)
    _add_topics(subparsers, write)
    _add_reassign(subparsers, write)
    _add_elect(subparsers, write)
    _add_brokers(subparsers, read)
    _add_broker(subparsers, write)
    _add_controller(subparsers, read)
    configs.add_parser(subparsers, write)


def _add_topics(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "topics",
        parents=[common],
        help="create, delete, describe, list and alter topics (kafka-topics)",
        description="Create, delete, describe, list and alter topics, like kafka-topics.",
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
    p.set_defaults(func=cmd_topics)


def _add_reassign(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "reassign",
        parents=[common],
        help="move partition replicas between brokers (kafka-reassign-partitions)",
        description="Generate, execute, verify, cancel and list partition reassignments, like "
        "kafka-reassign-partitions. "
        'Files use Kafka\'s format {"version":1,"partitions":[{"topic","partition","replicas"}]}.',
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
    reassign_cmd.add_options(p, action)
    p.set_defaults(func=cmd_reassign)


def _add_elect(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "elect-leaders",
        parents=[common],
        help="run a preferred or unclean leader election (kafka-leader-election)",
        description="Run a leader election, like kafka-leader-election.",
    )
    p.add_argument("--election-type", required=True, type=str.upper, choices=["PREFERRED", "UNCLEAN"])
    scope = p.add_mutually_exclusive_group(required=True)
    scope.add_argument("--all-topic-partitions", action="store_true", help="every partition")
    scope.add_argument("--topic", help="one partition's topic (with --partition)")
    scope.add_argument("--path-to-json-file", type=Path, help='{"partitions":[{"topic":"foo","partition":1}]}')
    p.add_argument("--partition", type=int, help="partition id (with --topic)")
    p.set_defaults(func=cmd_elect)


def _add_brokers(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("brokers", help="list registered brokers", description="Brokers registered in ZooKeeper.")
    bsub = p.add_subparsers(dest="brokers_cmd", required=True, metavar="COMMAND")
    lp = bsub.add_parser("list", parents=[common], help="list /brokers/ids", description="List /brokers/ids.")
    lp.add_argument("--json", action="store_true", help="print JSON (same as --output json)")
    lp.add_argument("--output", choices=["text", "json"], default="text", help="text or json")
    lp.add_argument(
        "--min",
        type=int,
        default=None,
        metavar="N",
        help="exit 1 when fewer than N brokers are registered (a healthcheck that can fail)",
    )
    lp.set_defaults(func=cmd_brokers_list)


def _add_broker(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "broker",
        help="control a simulated broker (shutdown, kill, faults)",
        description="Commands for simulated brokers, published on the control topic they obey.",
    )
    bsub = p.add_subparsers(dest="broker_cmd", required=True, metavar="COMMAND")

    def add(name: str, helptext: str) -> argparse.ArgumentParser:
        sp = bsub.add_parser(name, parents=[common], help=helptext, description=helptext)
        sp.add_argument("broker_id", type=int, metavar="BROKER_ID")
        sp.add_argument("--control-topic", default=CONTROL_TOPIC, help="default: %(default)s")
        sp.add_argument(
            "--requests-topic", default=REQUESTS_TOPIC, help="controller requests, for --wait (default: %(default)s)"
        )
        return sp

    add("shutdown", "controlled shutdown of a simulated broker, then deregistration").set_defaults(
        func=cmd_broker, broker_command="shutdown"
    )
    add("kill", "make a simulated broker vanish (no controlled shutdown)").set_defaults(
        func=cmd_broker, broker_command="kill"
    )
    fp = add("fault", "inject a fault into a simulated broker")
    fp.add_argument("fault", choices=["slow-follower", "stuck-follower", "disk-failure", "clear", "produce-rate"])
    fp.add_argument("--fetch-interval-ms", type=int, help="slow-follower: fetch only this often")
    fp.add_argument("--max-records", type=int, help="slow-follower: records per fetch and partition")
    fp.add_argument("--rate", type=float, help="produce-rate: records/s per led partition")
    fp.set_defaults(func=cmd_broker, broker_command=None)


def _add_controller(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("controller", help="the active controller", description="The active controller.")
    csub = p.add_subparsers(dest="controller_cmd", required=True, metavar="COMMAND")
    sp = csub.add_parser(
        "status", parents=[common], help="show /controller and /controller_epoch", description="Controller status."
    )
    sp.add_argument("--json", action="store_true", help="print JSON (same as --output json)")
    sp.add_argument("--output", choices=["text", "json"], default="text", help="text or json")
    sp.set_defaults(func=cmd_controller_status)


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


# ----------------------------------------------------------------------------- plumbing


def _run(args: argparse.Namespace, body: Handler) -> int:
    """Map this module's exceptions to messages on stderr and exit codes."""
    prog = f"livectl {args.command}"
    try:
        return body(args)
    except UsageError as e:
        print(f"{prog}: error: {e.field}: {e.reason}", file=sys.stderr)
        return EXIT_USAGE
    except FormatError as e:
        print(f"{prog}: error: {_OPTION_OF.get(e.field, e.field)}: {e.reason}", file=sys.stderr)
        return EXIT_USAGE
    except OperationFailedError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return EXIT_FAILED
    except NotFinishedError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return EXIT_PENDING
    except (ZkUnavailableError, KafkaUnavailableError) as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return EXIT_UNAVAILABLE


def _zk(args: argparse.Namespace) -> str:
    return str(args.zookeeper or default_zookeeper())


def _kafka(args: argparse.Namespace) -> str:
    return str(args.bootstrap_server or default_bootstrap())


def _kafka_config(args: argparse.Namespace) -> dict[str, Any]:
    """kafka-python keyword arguments from ``--command-config`` (Kafka's property names)."""
    path: Path | None = getattr(args, "command_config", None)
    if path is None:
        return {}
    try:
        text = path.read_text()
    except OSError as e:
        raise UsageError("--command-config", f"cannot read {path}: {e.strerror or e}") from None
    try:
        return KafkaSecurity.from_file_text(text, str(path)).client_kwargs()
    except SecurityConfigError as e:
        raise UsageError("--command-config", f"{path}: {e}") from None


def _validated(command: AdminCommand) -> AdminCommand:
    """Round-trip through core's strict decoder: what the controller will accept, or a FormatError."""
    decoded = decode_event(encode_event(command))
    assert isinstance(decoded, AdminCommand)
    return decoded


@dataclass(frozen=True)
class Submitted:
    request_id: str
    result: AdminResult | None


def submit(args: argparse.Namespace, command: AdminCommand, label: str) -> Submitted:
    """Publish ``command``; with ``--wait``, follow its result (errors raise :class:`OperationFailedError`)."""
    command = _validated(command)
    bootstrap = _kafka(args)
    config = _kafka_config(args)
    follower = ResultFollower.open(bootstrap, args.admin_results_topic, config) if args.wait else None
    try:
        publish_command(bootstrap, args.admin_topic, command, command.request_id, config)
        print(f"Submitted {command.TYPE} (request {command.request_id}).", file=sys.stderr)
        if follower is None:
            return Submitted(command.request_id, None)
        try:
            result = follower.wait(command.request_id, args.timeout, Progress(label))
        except WaitTimeoutError as e:
            raise NotFinishedError(str(e)) from None
    finally:
        if follower is not None:
            follower.close()
    if result.status is AdminStatus.ERROR:
        detail = f": {result.message}" if result.message else ""
        raise OperationFailedError(f"{result.error or 'ERROR'}{detail}", result)
    return Submitted(command.request_id, result)


def _configs(pairs: Sequence[str]) -> tuple[tuple[str, str], ...]:
    out: dict[str, str] = {}
    for item in pairs:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError("--config", f"expected KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return tuple(sorted(out.items()))


def parse_replica_assignment(text: str) -> tuple[tuple[int, ...], ...]:
    """Kafka's ``--replica-assignment`` syntax: ``1:2,2:3`` = partition 0 on 1,2 and partition 1 on 2,3."""
    out = []
    for i, group in enumerate(text.split(",")):
        reps = []
        for item in group.split(":"):
            try:
                reps.append(int(item.strip()))
            except ValueError:
                reason = f"partition {i}: {item.strip()!r} is not a broker id"
                raise UsageError("--replica-assignment", reason) from None
        out.append(tuple(reps))
    return tuple(out)


def _broker_ids(text: str, option: str) -> tuple[int, ...]:
    try:
        ids = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise UsageError(option, f"expected comma-separated broker ids, got {text!r}") from None
    if not ids:
        raise UsageError(option, "must list at least one broker id")
    return ids


def _require(args: argparse.Namespace, name: str, why: str) -> Any:
    value = getattr(args, name.lstrip("-").replace("-", "_"))
    if value is None:
        raise UsageError(name, f"is required {why}")
    return value


def _forbid(args: argparse.Namespace, names: Sequence[str], why: str) -> None:
    for name in names:
        value = getattr(args, name.lstrip("-").replace("-", "_"))
        if value not in (None, False, []):
            raise UsageError(name, f"can't be used {why}")


# ----------------------------------------------------------------------------- topics


def cmd_topics(args: argparse.Namespace) -> int:
    return _run(args, _topics)


def _topics(args: argparse.Namespace) -> int:
    if args.list:
        return _topics_list(args)
    if args.describe:
        return _topics_describe(args)
    topic = _require(args, "--topic", "with --create, --delete and --alter")
    if args.create:
        return _topics_create(args, topic)
    if args.delete:
        _forbid(
            args,
            ["--partitions", "--replication-factor", "--replica-assignment", "--config", "--delete-config"],
            "with --delete",
        )
        return _topics_delete(args, topic)
    return _topics_alter(args, topic)


def _topics_create(args: argparse.Namespace, topic: str) -> int:
    _forbid(args, ["--delete-config"], "with --create")
    topic_configs = _configs(args.config)
    for key, value in topic_configs:
        problem = topic_configs_problem({key: value})
        if problem is not None:
            raise UsageError(key, problem)
    problem = topic_configs_problem(dict(topic_configs))
    if problem is not None:
        raise UsageError("--config", problem)
    if args.replica_assignment is not None:
        _forbid(args, ["--partitions", "--replication-factor"], "with --replica-assignment")
        assignment = parse_replica_assignment(args.replica_assignment)
        command = CreateTopic(new_request_id(), topic, len(assignment), len(assignment[0]), assignment, topic_configs)
    else:
        partitions = _require(args, "--partitions", "with --create (or give --replica-assignment)")
        rf = _require(args, "--replication-factor", "with --create (or give --replica-assignment)")
        command = CreateTopic(new_request_id(), topic, partitions, rf, (), topic_configs)
    _validated(command)
    with connect(_zk(args)) as zk:
        if zk.topic(topic) is not None:
            if args.if_not_exists:
                return EXIT_OK
            raise OperationFailedError(f"Topic '{topic}' already exists.")
    done = submit(args, command, f"create {topic}")
    print(f"Created topic {topic}." if done.result else f"Creation of topic {topic} submitted.")
    return EXIT_OK


def _topics_delete(args: argparse.Namespace, topic: str) -> int:
    with connect(_zk(args)) as zk:
        if zk.topic(topic) is None:
            if args.if_exists:
                return EXIT_OK
            raise OperationFailedError(f"Topic '{topic}' does not exist as expected")
    done = submit(args, DeleteTopic(new_request_id(), topic), f"delete {topic}")
    print(f"Topic {topic} deleted." if done.result else f"Topic {topic} is marked for deletion.")
    return EXIT_OK


def _topics_alter(args: argparse.Namespace, topic: str) -> int:
    if args.partitions is None and not args.config and not args.delete_config:
        raise UsageError("--alter", "needs --partitions, --config and/or --delete-config")
    _forbid(args, ["--replication-factor"], "with --alter (use reassign to change replicas)")
    with connect(_zk(args)) as zk:
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
    add = dict(_configs(args.config))
    delete = configs.parse_delete_config(args.delete_config)
    if add or delete:
        configs.check_topic_change(args, topic, add, delete)
    for command, _ in commands:
        _validated(command)
    for command, label in commands:
        submit(args, command, f"{label} {topic}")
    if args.partitions is not None:
        print(f"Partitions of topic {topic}: {len(current.partitions)} -> {args.partitions}.")
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
    topics_read.list_topics(args, _zk(args), _matcher(args.topic))
    return EXIT_OK


def _ints(xs: Sequence[int]) -> str:
    return ",".join(map(str, xs))


def _topics_describe(args: argparse.Namespace) -> int:
    def missing() -> None:
        if args.topic is not None and topics_read.looks_literal(args.topic):
            raise OperationFailedError(f"Topic '{args.topic}' does not exist as expected")

    topics_read.describe(args, _zk(args), _matcher(args.topic), missing)
    return EXIT_OK


# ----------------------------------------------------------------------------- reassign


def cmd_reassign(args: argparse.Namespace) -> int:
    return _run(args, _reassign)


def _reassign(args: argparse.Namespace) -> int:
    if args.generate:
        path = _require(args, "--topics-to-move-json-file", "with --generate")
        brokers = _broker_ids(_require(args, "--broker-list", "with --generate"), "--broker-list")
        return _reassign_generate(args, path, brokers)
    if args.list or args.describe:
        return reassign_cmd.list_reassignments(args)
    path = _require(args, "--reassignment-json-file", "with --execute, --verify and --cancel")
    if not args.execute:
        _forbid(args, ["--throttle", "--replica-alter-log-dirs-throttle", "--additional"], "without --execute")
    if args.execute:
        return reassign_cmd.execute(args, path)
    if args.verify:
        return reassign_cmd.verify(args, path)
    return reassign_cmd.cancel(args, path)


def _current_assignment(zk: ZkReader, topics: Sequence[str]) -> dict[TopicPartition, tuple[int, ...]]:
    out: dict[TopicPartition, tuple[int, ...]] = {}
    for t in topics:
        znode = zk.topic(t)
        if znode is None:
            raise OperationFailedError(f"Topic '{t}' does not exist")
        for p, reps in znode.partitions:
            out[TopicPartition(t, p)] = reps
    return out


def _reassign_generate(args: argparse.Namespace, path: Path, broker_list: tuple[int, ...]) -> int:
    from core.placement import BrokerRack, PlacementError, assign_replicas, stable_start_index

    topics = files.read_topics_to_move(path)
    with connect(_zk(args)) as zk:
        registered = zk.brokers()
        current = _current_assignment(zk, topics)
    unknown = sorted(set(broker_list) - set(registered))
    if unknown:
        known = _ints(sorted(registered))
        raise UsageError("--broker-list", f"unknown broker(s) {_ints(unknown)}; registered: {known}")
    racks = [BrokerRack(b, None if args.disable_rack_aware else registered[b].rack) for b in sorted(set(broker_list))]
    proposed: dict[TopicPartition, tuple[int, ...]] = {}
    for t in topics:
        parts = sorted(tp for tp in current if tp.topic == t)
        rf = len(current[parts[0]]) if parts else 0
        try:
            placed = assign_replicas(racks, len(parts), rf, start_index=stable_start_index(t, len(racks)))
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


# ----------------------------------------------------------------------------- elect-leaders


def cmd_elect(args: argparse.Namespace) -> int:
    return _run(args, _elect)


def _elect(args: argparse.Namespace) -> int:
    etype = ElectionType(args.election_type)
    request_id = new_request_id()
    if args.path_to_json_file is not None:
        _forbid(args, ["--partition"], "with --path-to-json-file")
        command = files.read_election(args.path_to_json_file, request_id, etype)
    elif args.topic is not None:
        partition = _require(args, "--partition", "with --topic")
        command = ElectLeaders(request_id, etype, (TopicPartition(args.topic, partition),))
    else:
        _forbid(args, ["--partition"], "with --all-topic-partitions")
        command = ElectLeaders(request_id, etype, ())
    try:
        done = submit(args, command, f"{etype.value.lower()} election")
    except OperationFailedError as e:
        if e.result is None or not _election_report(etype, e.result):
            raise
        raise OperationFailedError(_election_failures(etype, e.result), e.result) from None
    scope = ",".join(str(tp) for tp in command.partitions) or "all partitions"
    if done.result is None:
        print(f"Leader election ({etype.value}) submitted for {scope}.")
        return EXIT_OK
    if not _election_report(etype, done.result):
        print(f"Successfully completed leader election ({etype.value}) for partitions {scope}")
        if done.result.message:
            print(done.result.message)
    return EXIT_OK


def _election_report(etype: ElectionType, result: AdminResult) -> bool:
    """Kafka's ``kafka-leader-election`` lines for the partitions elected and those that needed no election;
    False when the answer carries no per-partition outcomes."""
    outcomes = reassign_cmd.partition_outcomes(result)
    if not outcomes:
        return False
    elected = [tp for tp, error, _ in outcomes if error == "NONE"]
    noop = [tp for tp, error, _ in outcomes if error == "ELECTION_NOT_NEEDED"]
    if elected:
        print(f"Successfully completed leader election ({etype.value}) for partitions {', '.join(elected)}")
    if noop:
        print(f"Valid replica already elected for partitions {', '.join(noop)}")
    return True


def _election_failures(etype: ElectionType, result: AdminResult) -> str:
    failed = [o for o in reassign_cmd.partition_outcomes(result) if o[1] not in ("NONE", "ELECTION_NOT_NEEDED")]
    lines = [f"Error completing leader election ({etype.value}) for partition: {tp}: {error}: {message}"
             for tp, error, message in failed]  # fmt: skip
    return f"{len(failed)} replica(s) could not be elected:\n" + "\n".join(lines)


# ----------------------------------------------------------------------------- brokers, broker, controller


def cmd_brokers_list(args: argparse.Namespace) -> int:
    return _run(args, _brokers_list)


def _brokers_list(args: argparse.Namespace) -> int:
    """Print the registrations; with ``--min N`` the exit code is 1 when fewer than N are registered (the
    listing is printed either way, so a failing healthcheck still shows who is there)."""
    minimum: int | None = args.min
    if minimum is not None and minimum < 0:
        raise UsageError("--min", f"must be 0 or more, got {minimum}")
    with connect(_zk(args)) as zk:
        brokers = zk.brokers()
        controller = zk.controller().broker_id
    if args.json or args.output == "json":
        print(json.dumps({str(b): r.raw | {"broker_epoch": r.epoch} for b, r in sorted(brokers.items())}, indent=2))
    elif not brokers:
        print("no brokers registered under /brokers/ids")
    else:
        print(f"{'ID':>4}  {'EPOCH':>12}  {'RACK':<8}  ENDPOINTS")
        for b, r in sorted(brokers.items()):
            mark = "  (controller)" if b == controller else ""
            print(f"{b:>4}  {r.epoch:>12}  {r.rack or '-':<8}  {','.join(r.endpoints)}{mark}")
    if minimum is not None and len(brokers) < minimum:
        raise OperationFailedError(
            f"{len(brokers)} broker(s) registered under /brokers/ids, fewer than --min {minimum}"
        )
    return EXIT_OK


def cmd_broker(args: argparse.Namespace) -> int:
    return _run(args, _broker)


def _broker(args: argparse.Namespace) -> int:
    name = args.broker_command or args.fault
    cmd = ControlCommand(
        args.broker_id,
        name,
        getattr(args, "fetch_interval_ms", None),
        getattr(args, "max_records", None),
        getattr(args, "rate", None),
    )
    try:
        from simbrokers.control import validate

        validate(cmd)
    except FormatError as e:
        option = {"fetch_interval_ms": "--fetch-interval-ms", "rate": "--rate"}.get(e.field, e.field)
        raise UsageError(option, e.reason) from None
    path = f"/brokers/ids/{args.broker_id}"
    with connect(_zk(args)) as zk:
        if args.broker_id not in zk.brokers():
            raise OperationFailedError(f"broker {args.broker_id} is not registered ({path} does not exist)")
    answers = None
    if args.wait and name == "shutdown":
        answers = broker_shutdown.open_consumer(_kafka(args), args.requests_topic, _kafka_config(args))
    publish(_kafka(args), args.control_topic, str(args.broker_id), cmd.to_json(), _kafka_config(args))
    print(f"Sent {name} to broker {args.broker_id} on {args.control_topic}.")
    if answers is not None:
        try:
            with connect(_zk(args)) as zk:
                ok, message = broker_shutdown.follow(
                    lambda: args.broker_id in zk.brokers(), answers, args.broker_id, args.timeout
                )
        except TimeoutError as e:
            raise NotFinishedError(str(e)) from None
        finally:
            answers.close()
        if not ok:
            raise OperationFailedError(message)
        print(message)
        return EXIT_OK
    if args.wait and name == "kill":
        progress = Progress(f"broker {args.broker_id} {name}")
        deadline = time.monotonic() + args.timeout
        with connect(_zk(args)) as zk:
            while args.broker_id in zk.brokers():
                if time.monotonic() >= deadline:
                    progress.done(None)
                    raise NotFinishedError(f"broker {args.broker_id} still registered after {args.timeout:g}s")
                progress.draw(None)
                time.sleep(0.2)
        progress.done(None)
        print(f"Broker {args.broker_id} deregistered.")
    return EXIT_OK


def cmd_controller_status(args: argparse.Namespace) -> int:
    return _run(args, _controller_status)


def _controller_status(args: argparse.Namespace) -> int:
    with connect(_zk(args)) as zk:
        info = zk.controller()
    if args.json or args.output == "json":
        print(json.dumps(info.__dict__, indent=2))
    else:
        active = "none" if info.broker_id is None else str(info.broker_id)
        print(f"Active controller: {active}")
        if info.timestamp is not None:
            print(f"Elected at (ms):   {info.timestamp}")
        epoch = "none" if info.epoch is None else f"{info.epoch} (zkVersion {info.epoch_zk_version})"
        print(f"Controller epoch:  {epoch}")
    return EXIT_OK if info.broker_id is not None else EXIT_FAILED
