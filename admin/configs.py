"""``livectl configs`` (``kafka-configs``) and the config writes other commands share.

Entities, as Kafka keeps them in ZooKeeper (``kafka.zk.AdminZkClient``):

* topics — ``/config/topics/<t>`` ``{"version":1,"config":{…}}``. The controller owns a topic's configs
  (it validates them and writes the znode), so a change is an ``alter_topic_config`` command; the tool
  waits for the controller's answer, as ``kafka-configs`` waits for its response;
* brokers — ``/config/brokers/<id>`` and the cluster default ``/config/brokers/<default>``, written by the
  tool directly (:mod:`sinks.entity_configs`), as Kafka's ``AdminZkClient.changeBrokerConfig`` does.

After every change a sequential ``/config/changes/config_change_NNNNNNNNNN`` notification is created with
``{"version":2,"entity_path":"topics/<t>"}`` (or ``brokers/<id>``, ``brokers/<default>``): the znode
Kafka's brokers (and the simulated ones) watch to reload an entity's configs.

Names and values are checked against Kafka's definitions (:mod:`core.topic_configs`) before anything is
written: an unknown name or a bad value is exit 2 naming the key and the reason.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from admin import dry_run
from admin.common import (
    EXIT_CODES_HELP,
    EXIT_OK,
    OperationFailedError,
    UsageError,
    forbid,
    run_command,
    submit,
    waits,
    zk_connect,
)
from admin.publish import new_request_id
from admin.zkread import ZkUnavailableError, connect
from core.events import AlterTopicConfig
from core.kafka import zkdata
from core.kafka.configs import BROKER_CONFIGS, broker_configs_problem, topic_configs_problem
from sinks.entity_configs import DEFAULT_BROKER, change_broker_configs, notify, read_entity_configs

#: why a topic config change refuses ``--no-wait``
NO_WAIT_CONFIGS = (
    "a topic config change waits for the controller's answer: the /config/changes notification the brokers "
    "reload from is created after it"
)


# ----------------------------------------------------------------------------- ZooKeeper writes


@contextmanager
def writer(hosts: str, timeout_s: float = 5.0) -> Iterator[KazooClient]:
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    zk = KazooClient(hosts=hosts, timeout=timeout_s)
    try:
        zk.start(timeout=timeout_s)
    except KazooTimeoutError:
        zk.close()
        raise ZkUnavailableError(f"cannot reach ZooKeeper at {hosts} (timed out after {timeout_s:g}s)") from None
    try:
        yield zk
    finally:
        zk.stop()
        zk.close()


# ----------------------------------------------------------------------------- parsing


def parse_add_config(text: str, option: str = "--add-config") -> dict[str, str]:
    """Kafka's ``--add-config`` syntax: ``k1=v1,k2=[v1,v2],k3=v3`` (square brackets keep a list value's commas)."""

    out: dict[str, str] = {}
    for item in re.findall(r"[^,\[]+(?:\[[^\]]*\])?[^,]*", text):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(option, f"expected KEY=VALUE, got {item.strip()!r}")
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        out[key.strip()] = value
    if not out:
        raise UsageError(option, "must name at least one KEY=VALUE")
    return out


def parse_delete_config(values: Sequence[str]) -> list[str]:

    names = [n.strip() for v in values for n in v.split(",") if n.strip()]
    if values and not names:
        raise UsageError("--delete-config", "must name at least one config")
    return names


def checked_delete(current: Mapping[str, str], delete: Sequence[str]) -> None:
    """Kafka refuses to delete a config that is not set (``Invalid config(s): …``)."""

    missing = [k for k in delete if k not in current]
    if missing:
        raise UsageError("--delete-config", f"Invalid config(s): {','.join(missing)} (not set)")


# ----------------------------------------------------------------------------- topic config changes


def alter_topic_configs(args: argparse.Namespace, topic: str, add: Mapping[str, str], delete: Sequence[str]) -> None:
    """Validate locally (exit 2), send ``alter_topic_config`` and wait for the controller's answer (exit 1 on
    its error, 3 when none came), then create the ``/config/changes`` notification."""

    check_topic_change(args, topic, add, delete)
    command = AlterTopicConfig(new_request_id(), topic, tuple(sorted(add.items())), tuple(sorted(set(delete))))
    waiting = argparse.Namespace(**{**vars(args), "no_wait": False})
    submit(waiting, command, f"alter config {topic}")
    with writer(zk_connect(args)) as zk:
        notify(zk, "topics", topic)


def check_topic_change(args: argparse.Namespace, topic: str, add: Mapping[str, str], delete: Sequence[str]) -> None:
    """The topic exists (exit 1 if not), the names and values are Kafka's and the deleted configs are set
    (exit 2 naming the key if not)."""

    with connect(zk_connect(args)) as zk:
        if zk.topic(topic) is None:
            raise OperationFailedError(f"Topic '{topic}' does not exist as expected")
        current = zk.topic_config(topic)
    checked_delete(current, delete)
    merged = {**current, **add}
    for key in delete:
        merged.pop(key, None)
    for key in sorted(add):
        problem = topic_configs_problem({key: add[key]})
        if problem is not None:
            raise UsageError(key, problem)
    problem = topic_configs_problem(merged)
    if problem is not None:
        raise UsageError("--add-config", problem)


# ----------------------------------------------------------------------------- the command


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "configs",
        parents=[common],
        help="describe and alter topic and broker configs (kafka-configs)",
        description="Describe and alter topic, broker and cluster-default broker configs, like kafka-configs. "
        "Topic changes go through the controller; broker configs are written to /config/brokers/<id> or "
        "/config/brokers/<default>; each change creates a /config/changes notification.",
        epilog=EXIT_CODES_HELP + " --no-wait is refused for topics (their change notification follows the "
        "answer); broker configs are written by the tool itself, with nothing to wait for.",
    )
    p.add_argument("--entity-type", required=True, choices=["topics", "brokers"], help="topics or brokers")
    p.add_argument("--entity-name", help="topic name or broker id (all entities of the type for --describe)")
    p.add_argument("--entity-default", action="store_true", help="brokers: the cluster default (<default>)")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--describe", action="store_true", help="show the configs set on the entity")
    action.add_argument("--alter", action="store_true", help="change configs (--add-config / --delete-config)")
    p.add_argument("--add-config", help="k1=v1,k2=[v1,v2],k3=v3")
    p.add_argument("--delete-config", action="append", default=[], metavar="K1,K2", help="config names to remove")
    p.add_argument(
        "--output", choices=["text", "json"], default="text", help="--describe, --alter --dry-run: text or json"
    )
    dry_run.add_option(p)
    p.set_defaults(func=cmd_configs)


def cmd_configs(args: argparse.Namespace) -> int:

    return run_command(args, _configs)


def _entity(args: argparse.Namespace) -> str | None:

    if args.entity_default:
        if args.entity_type != "brokers":
            raise UsageError("--entity-default", "only applies to --entity-type brokers")
        if args.entity_name is not None:
            raise UsageError("--entity-default", "can't be used with --entity-name")
        return DEFAULT_BROKER
    name: str | None = args.entity_name
    if name is not None and args.entity_type == "brokers" and name != DEFAULT_BROKER and not name.isdigit():
        raise UsageError("--entity-name", f"a broker id (an integer) or {DEFAULT_BROKER}, got {name!r}")
    return name


def _configs(args: argparse.Namespace) -> int:

    name = _entity(args)
    if args.describe:
        forbid(args, ["--add-config", "--delete-config", "--dry-run"], "with --describe")
        return _describe(args, name)
    if name is None:
        raise UsageError("--entity-name", "is required with --alter (or --entity-default for brokers)")
    add = parse_add_config(args.add_config) if args.add_config is not None else {}
    delete = parse_delete_config(args.delete_config)
    if not add and not delete:
        raise UsageError("--alter", "needs --add-config and/or --delete-config")
    both = sorted(set(add) & set(delete))
    if both:
        raise UsageError("--delete-config", f"{both[0]} is both added and deleted")
    if args.entity_type == "topics" and dry_run.dry_running(args):
        check_topic_change(args, name, add, delete)
        command = AlterTopicConfig(new_request_id(), name, tuple(sorted(add.items())), tuple(sorted(set(delete))))
        return dry_run.run(args, command, f"alter config {name}")
    forbid(
        args, ["--dry-run"], "with --entity-type brokers (broker configs are written by the tool, not the controller)"
    )
    if args.entity_type == "topics":
        if not waits(args):
            raise UsageError("--no-wait", NO_WAIT_CONFIGS)
        alter_topic_configs(args, name, add, delete)
        print(f"Completed updating config for topic {name}.")
        return EXIT_OK
    for key in sorted(add):
        problem = broker_configs_problem({key: add[key]})
        if problem is not None:
            raise UsageError(key, problem)
    unknown = [k for k in delete if k not in BROKER_CONFIGS]
    if unknown:
        raise UsageError(unknown[0], f"Unknown broker config name: {unknown[0]}")
    with writer(zk_connect(args)) as zk:
        checked_delete(read_entity_configs(zk, "brokers", name), delete)
        change_broker_configs(zk, name, add, delete)
    label = "default broker" if name == DEFAULT_BROKER else f"broker {name}"
    print(f"Completed updating config for {label}.")
    return EXIT_OK


def _describe(args: argparse.Namespace, name: str | None) -> int:

    kind = args.entity_type
    out: dict[str, dict[str, str]] = {}
    with writer(zk_connect(args)) as zk:
        if name is not None:
            names = [name]
        else:
            try:
                names = sorted(zk.get_children(zkdata.entity_configs_path(kind)))
            except NoNodeError:
                names = []
            if kind == "topics":
                names = sorted(set(names) | set(_children(zk, zkdata.BROKER_TOPICS)))
        if kind == "topics" and name is not None and not zk.exists(zkdata.topic_path(name)):
            raise OperationFailedError(f"Topic '{name}' does not exist as expected")
        for n in names:
            out[n] = read_entity_configs(zk, kind, n)
    if args.output == "json":
        print(json.dumps({"entity_type": kind, "entities": [{"name": n, "configs": c} for n, c in out.items()]}))
        return EXIT_OK
    for n, c in out.items():
        what = "default broker" if n == DEFAULT_BROKER else f"{kind[:-1]} '{n}'"
        print(f"Configs for {what} are {','.join(f'{k}={v}' for k, v in sorted(c.items()))}")
    return EXIT_OK


def _children(zk: KazooClient, path: str) -> list[str]:
    try:
        return list(zk.get_children(path))
    except NoNodeError:
        return []
