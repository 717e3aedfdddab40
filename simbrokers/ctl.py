"""``livectl-simbrokers`` (or ``python -m simbrokers.ctl``): commands to running simulated brokers.

====================  =========================================================================================
``shutdown N``        controlled shutdown, as on SIGTERM, then deregistration; ``--wait`` follows the controller's
                      ``ControlledShutdownResponse`` answers to its outcome (:mod:`simbrokers.shutdown_watch`)
``kill N``            vanish at once: the ZooKeeper session closes without a controlled shutdown; ``--wait``
                      until ``/brokers/ids/N`` is gone
``fault N KIND``      ``slow-follower``, ``stuck-follower``, ``disk-failure``, ``clear``, ``produce-rate``
====================  =========================================================================================

Each command is one message on the simulator's control topic (:mod:`simbrokers.control`), sent only when
``/brokers/ids/N`` exists. A real Kafka broker has no such topic: its operator stops it
(``kafka-server-stop.sh``, SIGTERM), which is a controlled shutdown, or kills it.

Exit codes (as ``livectl``'s admin commands): 0 success; 1 failed (broker not registered, controlled
shutdown failed); 2 invalid input (option and reason named); 3 not finished (``--wait`` timed out);
4 ZooKeeper or Kafka unreachable.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kafka import KafkaProducer
from kafka.errors import KafkaError
from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError

from core.errors import FormatError
from core.kafka import zkdata
from core.kafka.envelope import REQUESTS_TOPIC
from simbrokers import shutdown_watch
from simbrokers.control import CONTROL_TOPIC, ControlCommand, validate
from sinks.errors import SinkUnavailableError
from sinks.kafka_read import consumer_at_end
from sinks.local_services import default_bootstrap_server, default_zookeeper
from sinks.security import KafkaSecurity, SecurityConfigError

PROG = "livectl-simbrokers"
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_PENDING, EXIT_UNAVAILABLE = 0, 1, 2, 3, 4
FAULTS = ("slow-follower", "stuck-follower", "disk-failure", "clear", "produce-rate")


class CtlError(Exception):
    """Root of this tool's errors; ``exit_code`` is what the command exits with."""

    exit_code = EXIT_FAILED


class UsageError(CtlError):
    exit_code = EXIT_USAGE


#: how long one ZooKeeper call of ``--wait`` may take
ZK_CALL_TIMEOUT_S = 10.0


class NotFinishedError(CtlError):
    exit_code = EXIT_PENDING


class UnavailableError(CtlError):
    exit_code = EXIT_UNAVAILABLE


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    g = common.add_argument_group("connection")
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
    g.add_argument("--control-topic", default=CONTROL_TOPIC, help="default: %(default)s")
    g.add_argument(
        "--requests-topic", default=REQUESTS_TOPIC, help="controller requests, for shutdown --wait (%(default)s)"
    )
    w = common.add_argument_group("waiting")
    w.add_argument("--wait", action="store_true", help="shutdown: follow to its outcome; kill: until deregistered")
    w.add_argument("--timeout", type=float, default=120.0, help="seconds to --wait (default: %(default)s)")

    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Commands to running simulated brokers (python -m simbrokers), sent on their control topic.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, helptext: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, parents=[common], help=helptext, description=helptext)
        sp.add_argument("broker_id", type=int, metavar="BROKER_ID", help="the simulated broker's id")
        return sp

    add("shutdown", "controlled shutdown of a simulated broker, then deregistration")
    add("kill", "make a simulated broker vanish (no controlled shutdown)")
    fp = add("fault", "inject a fault into a simulated broker")
    fp.add_argument("fault", choices=FAULTS, help="the fault to inject; clear removes the slow and stuck faults")
    fp.add_argument("--fetch-interval-ms", type=int, help="slow-follower: fetch only this often")
    fp.add_argument("--max-records", type=int, help="slow-follower: records per fetch and partition")
    fp.add_argument("--rate", type=float, help="produce-rate: records/s per led partition")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return _run(args)
    except CtlError as e:
        print(f"{PROG} {args.command}: error: {e}" if e.exit_code != EXIT_PENDING else f"{PROG}: {e}", file=sys.stderr)
        return e.exit_code


def _run(args: argparse.Namespace) -> int:
    name = args.fault if args.command == "fault" else args.command
    cmd = ControlCommand(
        args.broker_id,
        name,
        getattr(args, "fetch_interval_ms", None),
        getattr(args, "max_records", None),
        getattr(args, "rate", None),
    )
    try:
        validate(cmd)
    except FormatError as e:
        option = {"fetch_interval_ms": "--fetch-interval-ms", "rate": "--rate"}.get(e.field, e.field)
        raise UsageError(f"{option}: {e.reason}") from None
    bootstrap = args.bootstrap_server or default_bootstrap_server()
    config = _kafka_config(args.command_config)
    zk = _connect(args.zookeeper or default_zookeeper())
    try:
        path = zkdata.broker_path(args.broker_id)

        def registered() -> bool:
            # bounded: a request made while kazoo reconnects to a ZooKeeper that is gone waits for ever
            try:
                return zk.exists_async(path).get(timeout=ZK_CALL_TIMEOUT_S) is not None
            except KazooTimeoutError:
                raise NotFinishedError(
                    f"ZooKeeper did not answer within {ZK_CALL_TIMEOUT_S:g}s: broker {args.broker_id}'s outcome "
                    "is unknown"
                ) from None

        if not registered():
            raise CtlError(f"broker {args.broker_id} is not registered ({path} does not exist)")
        answers = None
        if args.wait and name == "shutdown":
            try:
                answers = consumer_at_end(bootstrap, args.requests_topic, config)
            except SinkUnavailableError as e:
                raise UnavailableError(str(e)) from None
        _publish(bootstrap, args.control_topic, str(args.broker_id), cmd.to_json(), config)
        print(f"Sent {name} to broker {args.broker_id} on {args.control_topic}.")
        if answers is not None:
            try:
                ok, message = shutdown_watch.follow(registered, answers, args.broker_id, args.timeout)
            except TimeoutError as e:
                raise NotFinishedError(str(e)) from None
            finally:
                answers.close()
            if not ok:
                raise CtlError(message)
            print(message)
        elif args.wait and name == "kill":
            waiting = shutdown_watch.Waiting(f"broker {args.broker_id} kill")
            deadline = time.monotonic() + args.timeout
            try:
                while registered():
                    if time.monotonic() >= deadline:
                        raise NotFinishedError(f"broker {args.broker_id} still registered after {args.timeout:g}s")
                    waiting.draw()
                    time.sleep(0.2)
            finally:
                waiting.done()
            print(f"Broker {args.broker_id} deregistered.")
    finally:
        zk.stop()
        zk.close()
    return EXIT_OK


def _kafka_config(path: Path | None) -> dict[str, Any]:
    """kafka-python keyword arguments from ``--command-config`` (Kafka's property names)."""
    if path is None:
        return {}
    try:
        return KafkaSecurity.client_kwargs_from_file(path)
    except SecurityConfigError as e:
        raise UsageError(str(e)) from None


def _connect(connect: str) -> KazooClient:
    zk = KazooClient(hosts=connect, timeout=10)
    try:
        zk.start(timeout=10)
    except KazooTimeoutError:
        zk.close()
        raise UnavailableError(f"cannot reach ZooKeeper at {connect}") from None
    return zk


def _publish(bootstrap: str, topic: str, key: str, value: str, config: dict[str, Any]) -> None:
    try:
        producer = KafkaProducer(**config, bootstrap_servers=bootstrap, acks="all")
        try:
            producer.send(topic, key=key.encode(), value=value.encode()).get(timeout=30)
        finally:
            producer.close(timeout=10)
    except KafkaError as e:
        raise UnavailableError(f"cannot write to {topic} on {bootstrap}: {e}") from None


if __name__ == "__main__":
    sys.exit(main())
