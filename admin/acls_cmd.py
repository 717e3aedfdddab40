"""``livectl acls``: the Kafka ACLs of a deployment (:mod:`admin.acls`), printed as ``kafka-acls.sh``
commands or, with ``--apply``, created on the cluster with the Admin API (``CreateAcls``, as
``kafka-acls.sh --add`` does; rules that exist already are left as they are). Applying needs a principal
allowed to alter the cluster's ACLs (a super user: ``--command-config`` with its credentials)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from admin.acls import (
    DEFAULT_QUERY_NAME,
    SIMBROKERS_CONTROL_TOPIC,
    SPARK_GROUP_PREFIX,
    Acl,
    AclConfigError,
    Deployment,
    Operation,
    PatternType,
    ResourceType,
    Topics,
    acl_set,
    kafka_acls_commands,
)
from admin.common import EXIT_OK, OperationFailedError, UsageError, bootstrap_server, kafka_config, run_command
from admin.publish import KafkaUnavailableError
from sinks.requests import transactional_id

_TOPIC_OPTIONS = (
    ("--admin-topic", "admin", "admin commands"),
    ("--broker-events-topic", "broker_events", "broker events"),
    ("--requests-topic", "requests", "controller requests"),
    ("--admin-results-topic", "admin_results", "admin results"),
    ("--rejected-topic", "rejected", "rejected input"),
    ("--control-topic", "simbrokers_control", "the simulated brokers' control topic"),
    ("--log-dirs-topic", "log_dirs", "the brokers' log sizes"),
)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "acls",
        help="the Kafka ACLs that lock livectl's topics (kafka-acls.sh commands, or --apply)",
        description="Print the Kafka ACLs of a deployment as kafka-acls.sh commands, or create them (--apply). "
        "Only controllers write requests, admin results and rejections; only brokers (and controllers) write "
        "broker events; only admins write admin commands. With allow.everyone.if.no.acl.found=false on the "
        "brokers, everything else is refused.",
    )
    who = p.add_argument_group("principals (Kafka's User:NAME; each option may repeat)")
    who.add_argument(
        "--controller-principal", action="append", required=True, metavar="PRINCIPAL", help="the controller's"
    )
    who.add_argument("--broker-principal", action="append", required=True, metavar="PRINCIPAL", help="a broker's")
    who.add_argument(
        "--admin-principal", action="append", required=True, metavar="PRINCIPAL", help="an admin's (livectl topics ...)"
    )
    names = p.add_argument_group("names (as the controller's settings)")
    names.add_argument(
        "--query-name",
        default=DEFAULT_QUERY_NAME,
        help="the controller's query_name setting: its transactional id is livectl-<query_name> (default: %(default)s)",
    )
    defaults = Topics()
    for option, attr, what in _TOPIC_OPTIONS:
        names.add_argument(option, default=getattr(defaults, attr), help=f"{what} (default: %(default)s)")
    names.add_argument(
        "--no-simulated-brokers",
        dest="simulated_brokers",
        action="store_false",
        help=f"leave out the simulated brokers' control topic ({SIMBROKERS_CONTROL_TOPIC})",
    )
    names.add_argument(
        "--spark-group-prefix",
        nargs="?",
        const=SPARK_GROUP_PREFIX,
        default=None,
        metavar="PREFIX",
        help="grant the controllers the consumer groups of Spark's Kafka source (its groupIdPrefix; "
        f"default when given without a value: {SPARK_GROUP_PREFIX})",
    )
    conn = p.add_argument_group("connection")
    conn.add_argument(
        "--bootstrap-server",
        default=None,
        help="Kafka bootstrap server (default: $LIVECTL_BOOTSTRAP_SERVER, `livectl local up`, or 127.0.0.1:9092)",
    )
    conn.add_argument(
        "--command-config",
        type=Path,
        default=None,
        metavar="FILE",
        help="Kafka client security properties of the principal that applies the ACLs (a super user)",
    )
    p.add_argument("--apply", action="store_true", help="create the ACLs on the cluster (Kafka's Admin API)")
    p.add_argument("--tool", default="kafka-acls.sh", help="the command printed for each rule (default: %(default)s)")
    p.set_defaults(func=cmd_acls)


def deployment(args: argparse.Namespace) -> Deployment:
    """The deployment the options describe; a bad one raises :class:`UsageError` naming the option."""
    topics = Topics(**{attr: getattr(args, option[2:].replace("-", "_")) for option, attr, _ in _TOPIC_OPTIONS})
    try:
        return Deployment(
            controllers=tuple(args.controller_principal),
            brokers=tuple(args.broker_principal),
            admins=tuple(args.admin_principal),
            transactional_id=transactional_id(args.query_name),
            topics=topics,
            simulated_brokers=args.simulated_brokers,
            spark_group_prefix=args.spark_group_prefix,
        )
    except AclConfigError as e:
        raise UsageError(e.field, e.reason) from None


def cmd_acls(args: argparse.Namespace) -> int:
    return run_command(args, _acls)


def _acls(args: argparse.Namespace) -> int:
    acls = acl_set(deployment(args))
    bootstrap = bootstrap_server(args)
    if not args.apply:
        config = str(args.command_config) if args.command_config is not None else None
        print("\n".join(kafka_acls_commands(acls, bootstrap, config, args.tool)))
        return EXIT_OK
    created = apply(acls, bootstrap, kafka_config(args))
    print(f"Created {created} ACL bindings ({len(acls)} rules) on {bootstrap}.")
    return EXIT_OK


def bindings(acls: Sequence[Acl]) -> list[Any]:
    """kafka-python's ``ACL`` objects of ``acls``: one binding per operation, from any host."""
    from kafka.admin import ACL, ACLOperation, ACLPermissionType, ACLResourcePatternType, ResourcePattern
    from kafka.admin import ResourceType as KafkaResourceType

    resource_types = {
        ResourceType.TOPIC: KafkaResourceType.TOPIC,
        ResourceType.TRANSACTIONAL_ID: KafkaResourceType.TRANSACTIONAL_ID,
        ResourceType.GROUP: KafkaResourceType.GROUP,
    }
    operations = {Operation.READ: ACLOperation.READ, Operation.WRITE: ACLOperation.WRITE}
    operations[Operation.CREATE] = ACLOperation.CREATE
    patterns = {PatternType.LITERAL: ACLResourcePatternType.LITERAL}
    patterns[PatternType.PREFIXED] = ACLResourcePatternType.PREFIXED
    out = []
    for a in acls:
        pattern = ResourcePattern(resource_types[a.resource.type], a.resource.name, patterns[a.resource.pattern])
        for op in a.operations:
            out.append(ACL(a.principal, "*", operations[op], ACLPermissionType.ALLOW, pattern))
    return out


def apply(acls: Sequence[Acl], bootstrap: str, client_config: dict[str, Any]) -> int:
    """Create ``acls`` on the cluster at ``bootstrap``; returns how many bindings it accepted. A refusal
    (e.g. the principal may not alter ACLs) raises :class:`OperationFailedError` with Kafka's error."""
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    wanted = bindings(acls)
    try:
        admin = KafkaAdminClient(**client_config, bootstrap_servers=bootstrap)
    except KafkaError as e:
        raise KafkaUnavailableError(f"cannot reach Kafka at {bootstrap}: {e}") from None
    try:
        result = admin.create_acls(wanted)
    except KafkaError as e:
        raise OperationFailedError(f"creating the ACLs failed: {type(e).__name__}: {e}") from None
    finally:
        admin.close()
    failed = result["failed"]
    if failed:
        errors = sorted({getattr(err, "__name__", str(err)) for err in failed})
        raise OperationFailedError(f"{len(failed)} of {len(wanted)} ACL bindings refused by Kafka: {', '.join(errors)}")
    return len(result["succeeded"])
