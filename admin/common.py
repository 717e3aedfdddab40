"""What every admin command shares: exit codes and errors, connection options and their defaults, submitting
a command to the controller and waiting for its answer (the default; ``--no-wait`` to fire and forget,
``--wait`` to follow a started deletion or reassignment to its end), and the parsing of Kafka's option
syntaxes."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from admin.publish import (
    ADMIN_RESULTS_TOPIC,
    ADMIN_TOPIC,
    KafkaUnavailableError,
    Progress,
    ResultFollower,
    WaitTimeoutError,
    publish_command,
)
from admin.zkread import ZkUnavailableError
from core.codec.events import decode_event, encode_event
from core.decisions import AdminResult, AdminStatus
from core.errors import FormatError
from core.events import AdminCommand
from sinks.local_services import default_bootstrap_server, default_zookeeper
from sinks.security import KafkaSecurity, SecurityConfigError

EXIT_OK = 0
#: refused or failed: the controller's error and reason, in one line
EXIT_FAILED = 1
EXIT_USAGE = 2
#: not finished: no answer within ``--timeout`` (the line names the request id), ``--verify`` still moving
EXIT_PENDING = 3
EXIT_UNAVAILABLE = 4

#: the exit codes, as the ``--help`` of every command that sends commands to the controller lists them
EXIT_CODES_HELP = (
    "Exit codes: 0 done (or accepted: a topic deletion or reassignment the controller started; with --no-wait, "
    "submitted); 1 refused or failed, the controller's error and reason in one line; 2 invalid input (option "
    "and reason named); 3 no answer within --timeout, the line names the request id to look up later with "
    "`livectl audit --request-id ID`; 4 ZooKeeper or Kafka unreachable."
)

#: core event field -> the option that sets it (for error messages)
OPTION_OF = {
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


# ----------------------------------------------------------------------------- options


def common_options(write: bool) -> argparse.ArgumentParser:
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
        w = p.add_argument_group(
            "waiting",
            "The tool waits for the controller's answer on the results topic by default, as kafka-topics waits "
            "for the broker's response, and exits 1 with the reason when the controller refuses.",
        )
        w.add_argument(
            "--wait",
            action="store_true",
            help="the default, kept for the scripts that ask for it; a topic deletion or reassignment the "
            "controller started is then followed to its end (else the tool ends when it starts)",
        )
        w.add_argument(
            "--no-wait",
            action="store_true",
            help='fire and forget: exit 0 once the command is on the admin topic ("submitted", with its '
            "request id), without the controller's answer",
        )
        w.add_argument(
            "--timeout",
            type=float,
            default=120.0,
            help="seconds to wait for the answer (default: %(default)s); none by then is exit 3",
        )
    return p


def waits(args: argparse.Namespace) -> bool:
    """The controller's answer is awaited (every write command, unless ``--no-wait``)."""
    return not getattr(args, "no_wait", False)


def follows_to_end(args: argparse.Namespace) -> bool:
    """``--wait``: an answer ``in_progress`` (a deletion or reassignment started) is followed to the final one."""
    return bool(getattr(args, "wait", False))


def timeout_message(request_id: str, timeout_s: float, last: AdminResult | None = None) -> str:
    """The one line of a wait that ran out (exit 3): the request id, and where its answer can be read later."""
    got = f"last answer: {last.status.value}" if last is not None else "no answer yet"
    return (
        f"request {request_id} not finished within {timeout_s:g}s ({got}); the controller may still carry it "
        f"out: look it up later with `livectl audit --request-id {request_id}`"
    )


def refusal_message(result: AdminResult) -> str:
    """The controller's error and reason on one line (exit 1)."""
    detail = " ".join(result.message.split()) if result.message else ""
    return f"{result.error or 'ERROR'}: {detail}" if detail else (result.error or "ERROR")


# ----------------------------------------------------------------------------- plumbing


def run_command(args: argparse.Namespace, body: Handler) -> int:
    """Map this module's exceptions to messages on stderr and exit codes."""
    prog = f"livectl {args.command}"
    try:
        if follows_to_end(args) and not waits(args):
            raise UsageError("--no-wait", "can't be used with --wait")
        return body(args)
    except UsageError as e:
        print(f"{prog}: error: {e.field}: {e.reason}", file=sys.stderr)
        return EXIT_USAGE
    except FormatError as e:
        print(f"{prog}: error: {OPTION_OF.get(e.field, e.field)}: {e.reason}", file=sys.stderr)
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


def zk_connect(args: argparse.Namespace) -> str:
    return str(args.zookeeper or default_zookeeper())


def bootstrap_server(args: argparse.Namespace) -> str:
    return str(args.bootstrap_server or default_bootstrap_server())


def kafka_config(args: argparse.Namespace) -> dict[str, Any]:
    """kafka-python keyword arguments from ``--command-config`` (Kafka's property names)."""
    path: Path | None = getattr(args, "command_config", None)
    if path is None:
        return {}
    try:
        return KafkaSecurity.client_kwargs_from_file(path)
    except SecurityConfigError as e:
        raise UsageError(e.key, e.reason) from None


@dataclass(frozen=True)
class ValidCommand:
    """An admin command core's strict decoder accepted (made by :func:`validated` only)."""

    command: AdminCommand


def validated(command: AdminCommand) -> ValidCommand:
    """Round-trip through core's strict decoder: what the controller will accept, or a FormatError."""
    decoded = decode_event(encode_event(command))
    assert isinstance(decoded, AdminCommand)
    return ValidCommand(decoded)


@dataclass(frozen=True)
class Submitted:
    request_id: str
    result: AdminResult | None


def submit(args: argparse.Namespace, command: AdminCommand | ValidCommand, label: str) -> Submitted:
    """Publish ``command`` (validated here unless it already was) and, unless ``--no-wait``, wait for the
    controller's answer: the first one, or with ``--wait`` the final one. An error raises
    :class:`OperationFailedError` (its reason in one line); no answer in time :class:`NotFinishedError`."""
    command = (command if isinstance(command, ValidCommand) else validated(command)).command
    bootstrap = bootstrap_server(args)
    config = kafka_config(args)
    follower = ResultFollower.open(bootstrap, args.admin_results_topic, config) if waits(args) else None
    try:
        publish_command(bootstrap, args.admin_topic, command, command.request_id, config)
        print(f"Submitted {command.TYPE} (request {command.request_id}).", file=sys.stderr)
        if follower is None:
            return Submitted(command.request_id, None)
        try:
            result = follower.wait(command.request_id, args.timeout, Progress(label), until_final=follows_to_end(args))
        except WaitTimeoutError as e:
            raise NotFinishedError(timeout_message(command.request_id, args.timeout, e.last)) from None
    finally:
        if follower is not None:
            follower.close()
    if result.status is AdminStatus.ERROR:
        raise OperationFailedError(refusal_message(result), result)
    return Submitted(command.request_id, result)


def config_pairs(pairs: Sequence[str]) -> tuple[tuple[str, str], ...]:
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


def broker_ids(text: str, option: str) -> tuple[int, ...]:
    try:
        ids = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise UsageError(option, f"expected comma-separated broker ids, got {text!r}") from None
    if not ids:
        raise UsageError(option, "must list at least one broker id")
    return ids


def require(args: argparse.Namespace, name: str, why: str) -> Any:
    value = getattr(args, name.lstrip("-").replace("-", "_"))
    if value is None:
        raise UsageError(name, f"is required {why}")
    return value


def forbid(args: argparse.Namespace, names: Sequence[str], why: str) -> None:
    for name in names:
        value = getattr(args, name.lstrip("-").replace("-", "_"))
        if value not in (None, False, []):
            raise UsageError(name, f"can't be used {why}")


def ints(xs: Sequence[int]) -> str:
    return ",".join(map(str, xs))
