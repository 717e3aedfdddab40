"""``python -m simbrokers --brokers 1,2,3 --zookeeper HOST:PORT --bootstrap-server HOST:PORT``.

Runs the listed brokers in this process (run several processes for a multi-process cluster: fetches
between them go over TCP loopback to the registered endpoints). Faults are injected through the
control topic (``livectl-simbrokers fault ...``; see :mod:`simbrokers.control`). SIGTERM: controlled
shutdown of every broker here, the process gone within ``--shutdown-timeout-s`` + 5 s whatever is
unreachable; SIGKILL: the brokers vanish and their sessions expire.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from core.kafka.envelope import BROKER_EVENTS_TOPIC, REQUESTS_TOPIC
from simbrokers.broker import BrokerConfig
from simbrokers.control import CONTROL_TOPIC
from simbrokers.registration import RegistrationError
from simbrokers.runner import ProcessSettings, SimBrokersError, SimBrokersProcess
from sinks.security import KafkaSecurity, SecurityConfigError, ZkSecurity


def broker_ids(text: str) -> tuple[int, ...]:
    try:
        ids = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"--brokers: expected comma-separated broker ids, got {text!r}") from None
    if not ids or any(i < 0 for i in ids) or len(set(ids)) != len(ids):
        raise argparse.ArgumentTypeError(f"--brokers: expected distinct non-negative ids, got {text!r}")
    return ids


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m simbrokers",
        description="Simulated Kafka brokers that talk to the livectl controller through ZooKeeper and topics.",
    )
    p.add_argument("--brokers", type=broker_ids, required=True, help="broker ids to run here, e.g. 1,2,3")
    p.add_argument("--zookeeper", required=True, help="ZooKeeper connect string, e.g. 127.0.0.1:2181")
    p.add_argument("--bootstrap-server", required=True, help="Kafka bootstrap server, e.g. 127.0.0.1:9092")
    p.add_argument("--host", default="127.0.0.1", help="host registered and listened on for fetches")
    p.add_argument("--base-port", type=int, default=0, help="fetch port of the first broker (others +1); 0 = free")
    p.add_argument("--rack", default=None, help="broker.rack of these brokers")
    p.add_argument("--produce-rate", type=float, default=10.0, help="records/s per led partition (default 10)")
    p.add_argument("--replica-lag-time-max-ms", type=int, default=10_000, help="replica.lag.time.max.ms")
    p.add_argument("--min-insync-replicas", type=int, default=1, help="min.insync.replicas")
    p.add_argument("--fetch-interval-ms", type=int, default=50, help="follower fetch pacing")
    p.add_argument(
        "--controlled-shutdown-max-retries",
        type=int,
        default=3,
        help="Kafka's controlled.shutdown.max.retries (default: %(default)s)",
    )
    p.add_argument(
        "--controlled-shutdown-retry-backoff-ms",
        type=int,
        default=2_000,
        help="Kafka's controlled.shutdown.retry.backoff.ms (default: %(default)s)",
    )
    p.add_argument(
        "--controlled-shutdown-timeout-ms",
        type=int,
        default=15_000,
        help="how long one ControlledShutdown request waits for the controller's answer (default: %(default)s)",
    )
    p.add_argument(
        "--shutdown-timeout-s",
        type=float,
        default=30.0,
        help="after SIGTERM, stop anyway when the controlled shutdowns are not done within this many seconds; "
        "the process exits within this + 5 s whatever is unreachable (default: %(default)s)",
    )
    p.add_argument("--session-timeout-ms", type=int, default=6_000, help="ZooKeeper session timeout")
    p.add_argument("--status-file", type=Path, default=None, help="write brokers' status JSON here every second")
    p.add_argument("--topic-wait-s", type=float, default=60.0, help="wait this long for livectl topics")
    p.add_argument("--requests-topic", default=REQUESTS_TOPIC, help=f"default {REQUESTS_TOPIC}")
    p.add_argument("--events-topic", default=BROKER_EVENTS_TOPIC, help=f"default {BROKER_EVENTS_TOPIC}")
    p.add_argument("--control-topic", default=CONTROL_TOPIC, help=f"default {CONTROL_TOPIC}")
    p.add_argument(
        "--command-config",
        type=Path,
        default=None,
        metavar="FILE",
        help="Kafka client security properties (security.protocol, sasl.*, ssl.*), as for Kafka's tools",
    )
    p.add_argument("--zookeeper-auth", default="", metavar="digest|sasl:USER:PASSWORD", help="ZooKeeper authentication")
    p.add_argument(
        "--zookeeper-set-acl",
        action="store_true",
        help="registrations get Kafka's ACLs (writable with --zookeeper-auth's credential only)",
    )
    p.add_argument("--log-level", default="INFO", help="Python logging level (default: %(default)s)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.shutdown_timeout_s <= 0:
        parser.error("--shutdown-timeout-s: must be > 0")
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("kafka").setLevel(logging.WARNING)
    logging.getLogger("kazoo").setLevel(logging.WARNING)
    config = BrokerConfig(
        replica_lag_time_max_ms=args.replica_lag_time_max_ms,
        min_insync_replicas=args.min_insync_replicas,
        produce_rate=args.produce_rate,
        fetch_interval_ms=args.fetch_interval_ms,
        controlled_shutdown_max_retries=args.controlled_shutdown_max_retries,
        controlled_shutdown_retry_backoff_ms=args.controlled_shutdown_retry_backoff_ms,
        controlled_shutdown_timeout_ms=args.controlled_shutdown_timeout_ms,
    )
    try:
        kafka_security = (
            KafkaSecurity.from_file_text(args.command_config.read_text(), str(args.command_config))
            if args.command_config is not None
            else KafkaSecurity()
        )
        zk_security = ZkSecurity.parse(args.zookeeper_auth, args.zookeeper_set_acl)
    except OSError as e:
        print(f"simbrokers: --command-config: cannot read {args.command_config}: {e.strerror or e}", file=sys.stderr)
        return 2
    except SecurityConfigError as e:
        option = {"zookeeper_auth": "--zookeeper-auth", "zookeeper_set_acl": "--zookeeper-set-acl"}
        print(f"simbrokers: {option.get(e.key, '--command-config')}: {e}", file=sys.stderr)
        return 2
    settings = ProcessSettings(
        broker_ids=args.brokers,
        zookeeper=args.zookeeper,
        bootstrap_server=args.bootstrap_server,
        host=args.host,
        base_port=args.base_port,
        rack=args.rack,
        config=config,
        session_timeout_ms=args.session_timeout_ms,
        status_file=args.status_file,
        topic_wait_s=args.topic_wait_s,
        requests_topic=args.requests_topic,
        events_topic=args.events_topic,
        control_topic=args.control_topic,
        kafka_security=kafka_security,
        zookeeper_security=zk_security,
        shutdown_timeout_s=args.shutdown_timeout_s,
    )
    proc = SimBrokersProcess(settings)
    proc.install_signal_handlers()
    try:
        proc.start()
    except (SimBrokersError, RegistrationError) as e:
        print(f"simbrokers: {e}", file=sys.stderr)
        return 1
    return proc.run()


if __name__ == "__main__":
    sys.exit(main())
