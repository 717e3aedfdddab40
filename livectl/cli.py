"""The ``livectl`` command line.

``livectl local up|down|status`` manages the real local services; ``livectl conf path`` prints where the
configuration shipped inside the package is; ``livectl class-archive`` makes the Java class-data-sharing
archive the controller's driver maps (:mod:`streaming.runtime.class_archive`); the admin commands (topics, reassign,
elect-leaders, configs, brokers, controller) come from :mod:`admin.cli`; ``livectl run`` and
``livectl demo`` start the controller job; ``livectl channel`` delivers its requests to real Kafka brokers
(:mod:`channel.cli`).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from livectl import local
from sinks import local_services

DEFAULT_RUN_DIR = local_services.DEFAULT_RUN_DIR


def _local_up(args: argparse.Namespace) -> int:
    services = local.LocalServices.load(args.run_dir)
    try:
        services.up(zk_port=args.zookeeper_port, broker_port=args.broker_port, zookeeper_servers=args.zookeeper_servers)
    except local.LocalServiceError as e:
        print(f"livectl local up: {e}", file=sys.stderr)
        return 1
    servers, broker = services.zookeeper_servers, services.broker
    assert servers and broker is not None
    for zk in servers:
        label = "ZooKeeper" if len(servers) == 1 else f"ZK server {zk.name[10:]}"
        print(f"{label:<11} {zk.address}  (pid {zk.pid}, log {zk.log})")
    print(f"Kafka       {broker.address}  (Apache Kafka, KRaft, pid {broker.pid}, log {broker.log})")
    print(f"Kafka data  {broker.data_dir}  (kept by `local down`: the next `up` has the same topics)")
    print(f"state       {args.run_dir / local_services.STATE_FILE}")
    print(f"use:        --zookeeper {services.zookeeper_connect} --bootstrap-server {broker.address}")
    print("stop with:  livectl local down")
    return 0


def _local_down(args: argparse.Namespace) -> int:
    services = local.LocalServices.load(args.run_dir)
    stopped = services.down()
    print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
    return 0


def _local_status(args: argparse.Namespace) -> int:
    services = local.LocalServices.load(args.run_dir)
    status = services.status()
    if args.json:
        print(json.dumps(status, indent=2))
    else:
        for name, st in status.items():
            detail = "" if "pid" not in st else f"  {st['address']}  pid {st['pid']}"
            if "mode" in st:
                detail += f"  mode {st['mode'] or '-'}"
            print(f"{name:<11} {st['state']}{detail}")
    return 0 if all(s["state"] == "running" for s in status.values()) else 3


def _add_local(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("local", help="start, stop and inspect the real local services (ZooKeeper, broker)")
    lsub = p.add_subparsers(dest="local_cmd", required=True)
    for name, fn, helptext in (
        ("up", _local_up, "start ZooKeeper and Apache Kafka (KRaft, durable log dir) on loopback"),
        ("down", _local_down, "stop the services started by `up`, by PID"),
        ("status", _local_status, "show what runs and whether it answers"),
    ):
        sp = lsub.add_parser(name, help=helptext)
        sp.add_argument("--run-dir", type=Path, default=DEFAULT_RUN_DIR, help="run folder (default: %(default)s)")
        if name == "up":
            sp.add_argument("--zookeeper-port", type=int, default=0, help="default: a free port")
            sp.add_argument(
                "--zookeeper-servers",
                type=int,
                default=1,
                metavar="N",
                help="1 (default): one standalone ZooKeeper; 3 (or 5, 7): an ensemble of N servers on free "
                "loopback ports, recorded as zookeeper-1..N; `local status` shows each one's mode "
                "(leader/follower) and the printed --zookeeper connect string lists them all",
            )
            sp.add_argument("--broker-port", type=int, default=0, help="default: the last one if free, else free")
        if name == "status":
            sp.add_argument("--json", action="store_true", help="print JSON")
        sp.set_defaults(func=fn)


def _conf_path(args: argparse.Namespace) -> int:
    from streaming import resources

    if args.name is None:
        print(resources.conf_path(resources.DEFAULTS).parent)
        return 0
    if args.name not in resources.SHIPPED:
        print(
            f"livectl conf path: name: {args.name!r} is not shipped; one of {', '.join(resources.SHIPPED)}",
            file=sys.stderr,
        )
        return 2
    print(resources.conf_path(args.name))
    return 0


def _add_conf(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("conf", help="where the configuration shipped inside the package is")
    csub = p.add_subparsers(dest="conf_cmd", required=True)
    sp = csub.add_parser(
        "path",
        help="print the folder of the shipped configuration, or the path of one file "
        "(e.g. for spark-submit --properties-file)",
    )
    sp.add_argument("name", nargs="?", default=None, help="livectl-defaults.json, spark-defaults.conf, ...")
    sp.set_defaults(func=_conf_path)


def _class_archive(args: argparse.Namespace) -> int:
    from streaming.runtime import class_archive

    folder = class_archive.default_folder()
    if args.check:
        found = class_archive.find(folder, class_archive.archive_key())
        if found is None:
            print(f"livectl class-archive: none in {folder} for this Java and Spark", file=sys.stderr)
            return 1
        print(found)
        return 0
    if class_archive.find(folder, class_archive.archive_key()) is None:
        print("livectl class-archive: making the archive (a short Spark job, about a minute) ...", file=sys.stderr)
    try:
        print(class_archive.ensure(folder))
    except class_archive.ClassArchiveError as e:
        print(f"livectl class-archive: {e}", file=sys.stderr)
        return 1
    return 0


def _add_class_archive(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "class-archive",
        help="make the Java class-data-sharing archive of Spark's driver classes (once; livectl run maps it)",
        description="Print the path of the class-data-sharing archive for this Java and Spark, making it first "
        "when missing (a short Spark job). livectl run maps it into the driver's JVM (setting "
        "spark_class_archive); under spark-submit pass it yourself (docs/cluster.md).",
    )
    p.add_argument("--check", action="store_true", help="only print its path; exit 1 when it was not made")
    p.set_defaults(func=_class_archive)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="livectl", description="A Kafka-style cluster controller that runs as a Spark Structured Streaming job"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_local(sub)
    _add_conf(sub)
    _add_class_archive(sub)
    for module_name in (
        "admin.cli",
        "admin.audit",
        "streaming.driver.entry",
        "livectl.demo",
        "livectl.packenv",
        "channel.cli",
    ):
        # each package adds its own subcommands through a `register(subparsers)` function
        module = importlib.import_module(module_name) if importlib.util.find_spec(module_name) else None
        if module is not None and hasattr(module, "register"):
            module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
