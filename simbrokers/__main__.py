"""``python -m simbrokers --brokers 1,2,3 [--zookeeper HOST:PORT] [--bootstrap-server HOST:PORT]``.

Runs the listed brokers in this process (run several processes for a multi-process cluster: fetches
between them go over TCP loopback to the registered endpoints). Faults are injected through the
control topic (``livectl-simbrokers fault ...``; see :mod:`simbrokers.control`). SIGTERM: controlled
shutdown of every broker here, the process gone within ``--shutdown-timeout-s`` + 5 s whatever is
unreachable; SIGKILL: the brokers vanish and their sessions expire. Without
``--zookeeper`` / ``--bootstrap-server`` the addresses come from
:func:`sinks.local_services.default_zookeeper` / :func:`~sinks.local_services.default_bootstrap_server`,
as for the admin commands.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from kafka.errors import KafkaError
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from core.kafka.envelope import BROKER_EVENTS_TOPIC, REQUESTS_TOPIC
from core.kafka.log_dirs import LOG_DIRS_TOPIC
from simbrokers.alter_requests import PROPOSALS_PER_RECORD
from simbrokers.broker import BrokerConfig
from simbrokers.control import CONTROL_TOPIC
from simbrokers.registration import RegistrationError
from simbrokers.runner import ProcessSettings, SimBrokersError, SimBrokersProcess
from sinks.local_services import default_bootstrap_server, default_zookeeper
from sinks.security import KafkaSecurity, SecurityConfigError, ZkSecurity

#: zookeeper.session.timeout.ms against one server: a failed broker is noticed within seconds
ONE_SERVER_SESSION_TIMEOUT_MS = 6_000
#: against an ensemble: Kafka's own default, above the shipped zoo.cfg's syncLimit x tickTime (10 s) plus a
#: reconnection, so that a server cut off from its quorum does not expire its clients' sessions meanwhile
ENSEMBLE_SESSION_TIMEOUT_MS = 18_000


def default_session_timeout_ms(connect: str) -> int:
    """The session timeout a broker gets when ``--session-timeout-ms`` is not given, by the servers in
    ``connect`` (``host:port[,host:port...][/chroot]``)."""
    servers = [s for s in connect.split("/", 1)[0].split(",") if s.strip()]
    return ENSEMBLE_SESSION_TIMEOUT_MS if len(servers) > 1 else ONE_SERVER_SESSION_TIMEOUT_MS


def broker_ids(text: str) -> tuple[int, ...]:
    try:
        ids = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"--brokers: expected comma-separated broker ids, got {text!r}") from None
    if not ids or any(i < 0 for i in ids) or len(set(ids)) != len(ids):
        raise argparse.ArgumentTypeError(f"--brokers: expected distinct non-negative ids, got {text!r}")
    return ids


_DESCRIPTION = """\
Simulated Kafka brokers that talk to the livectl controller only as ZooKeeper-era brokers do: each registers
/brokers/ids/<id> in ZooKeeper, reads its requests from the requests topic and answers on the broker-events
topic. Several processes with different ids make one cluster: followers fetch from leaders over TCP.
"""

_EPILOG = """\
connection defaults:
  Without --zookeeper / --bootstrap-server, as for the admin commands: $LIVECTL_ZOOKEEPER and
  $LIVECTL_BOOTSTRAP_SERVER, then the addresses `livectl local up` recorded in run/local/services.json
  (relative to the working directory), then 127.0.0.1:2181 and 127.0.0.1:9092.

signals:
  SIGTERM or Ctrl-C: a controlled shutdown of every broker of this process, then exit (a second Ctrl-C
  exits at once). SIGKILL: the brokers vanish and their ZooKeeper sessions expire.

commands to running brokers (livectl-simbrokers, on the control topic):
  livectl-simbrokers shutdown|kill N, livectl-simbrokers fault N slow-follower|stuck-follower|disk-failure|
  clear|produce-rate; see livectl-simbrokers --help and docs/operations.md, "Simulated brokers".
"""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m simbrokers",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    b = p.add_argument_group("brokers")
    b.add_argument("--brokers", type=broker_ids, required=True, help="broker ids to run in this process, e.g. 1,2,3")
    b.add_argument(
        "--host",
        default="127.0.0.1",
        help="host registered in each endpoint and listened on for fetches (default: %(default)s)",
    )
    b.add_argument(
        "--base-port",
        type=int,
        default=0,
        help="fetch port of the first broker, the next ones +1 each; 0 = a free port each (default: %(default)s)",
    )
    b.add_argument("--rack", default=None, help="broker.rack registered for these brokers (default: none)")
    b.add_argument(
        "--status-file",
        type=Path,
        default=None,
        metavar="FILE",
        help="write every broker's partitions (role, leader epoch, ISR, LEO, HW) and the acknowledged-loss "
        "audit to FILE as JSON every --status-interval-ms (default: not written)",
    )
    b.add_argument(
        "--status-interval-ms",
        type=int,
        default=1_000,
        help="how often --status-file is rewritten (default: %(default)s)",
    )
    b.add_argument("--log-level", default="INFO", help="Python logging level (default: %(default)s)")

    c = p.add_argument_group("connection")
    c.add_argument(
        "--zookeeper",
        default=None,
        help="ZooKeeper connect string (default: $LIVECTL_ZOOKEEPER, `livectl local up`, or 127.0.0.1:2181)",
    )
    c.add_argument(
        "--bootstrap-server",
        default=None,
        help="Kafka bootstrap server (default: $LIVECTL_BOOTSTRAP_SERVER, `livectl local up`, or 127.0.0.1:9092)",
    )
    c.add_argument(
        "--command-config",
        type=Path,
        default=None,
        metavar="FILE",
        help="Kafka client security properties (security.protocol, sasl.*, ssl.*), as for Kafka's tools",
    )
    c.add_argument(
        "--zookeeper-auth",
        default="",
        metavar="digest|sasl:USER:PASSWORD",
        help="ZooKeeper authentication of every broker session (default: none)",
    )
    c.add_argument(
        "--zookeeper-set-acl",
        action="store_true",
        help="registrations get Kafka's ACLs (writable with --zookeeper-auth's credential only)",
    )
    c.add_argument(
        "--session-timeout-ms",
        type=int,
        default=None,
        help=(
            "ZooKeeper session timeout of each broker, zookeeper.session.timeout.ms (default: "
            f"{ONE_SERVER_SESSION_TIMEOUT_MS} with one ZooKeeper server, {ENSEMBLE_SESSION_TIMEOUT_MS} with an "
            "ensemble: above its syncLimit x tickTime)"
        ),
    )
    c.add_argument(
        "--topic-wait-s",
        type=float,
        default=60.0,
        help="seconds to wait at start for the livectl topics to exist (default: %(default)s)",
    )

    k = p.add_argument_group("Kafka broker settings")
    k.add_argument(
        "--replica-lag-time-max-ms",
        type=int,
        default=10_000,
        help="replica.lag.time.max.ms: a follower behind this long leaves the ISR (default: %(default)s)",
    )
    k.add_argument(
        "--min-insync-replicas",
        type=int,
        default=1,
        help="min.insync.replicas, unless the topic or /config/brokers sets it (default: %(default)s)",
    )
    k.add_argument(
        "--shutdown-timeout-s",
        type=float,
        default=30.0,
        help="after SIGTERM, stop anyway when the controlled shutdowns are not done within this many seconds; "
        "the process exits within this + 5 s whatever is unreachable (default: %(default)s)",
    )
    k.add_argument(
        "--controlled-shutdown-max-retries",
        type=int,
        default=3,
        help="controlled.shutdown.max.retries (default: %(default)s)",
    )
    k.add_argument(
        "--controlled-shutdown-retry-backoff-ms",
        type=int,
        default=2_000,
        help="controlled.shutdown.retry.backoff.ms (default: %(default)s)",
    )
    k.add_argument(
        "--controlled-shutdown-timeout-ms",
        type=int,
        default=15_000,
        help="how long one ControlledShutdown request waits for the controller's answer (default: %(default)s)",
    )

    sim = p.add_argument_group("simulation")
    sim.add_argument(
        "--produce-rate",
        type=float,
        default=10.0,
        help="records per second appended to each partition a broker leads (default: %(default)s)",
    )
    sim.add_argument(
        "--fetch-interval-ms",
        type=int,
        default=50,
        help="how often a follower fetches from its leader (default: %(default)s)",
    )
    sim.add_argument(
        "--proposals-per-record",
        type=int,
        default=PROPOSALS_PER_RECORD,
        help="ISR proposals per AlterPartition record on the events topic, as Kafka's brokers send every pending "
        "partition in one request; 0: one alter_partition record per partition (default: %(default)s)",
    )
    sim.add_argument(
        "--tick-ms",
        type=int,
        default=50,
        help="how often the process ticks its brokers (produce, ISR checks, due fetches); it also waits this long "
        "for requests between ticks (default: %(default)s)",
    )

    t = p.add_argument_group("topics")
    t.add_argument("--requests-topic", default=REQUESTS_TOPIC, help="the controller's requests (default: %(default)s)")
    t.add_argument(
        "--events-topic", default=BROKER_EVENTS_TOPIC, help="the brokers' answers and events (default: %(default)s)"
    )
    t.add_argument(
        "--control-topic",
        default=CONTROL_TOPIC,
        help="commands from livectl-simbrokers: shutdown, kill, faults (default: %(default)s)",
    )
    t.add_argument(
        "--log-dirs-topic",
        default=LOG_DIRS_TOPIC,
        help="each broker's DescribeLogDirs answer for the partitions being reassigned (default: %(default)s)",
    )
    t.add_argument(
        "--log-dirs-interval-ms",
        type=int,
        default=1_000,
        help="how often each broker publishes it on --log-dirs-topic; 0: never (default: %(default)s)",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.shutdown_timeout_s <= 0:
        parser.error("--shutdown-timeout-s: must be > 0")
    for name in ("tick_ms", "status_interval_ms"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name.replace('_', '-')}: must be > 0")
    if args.proposals_per_record < 0:
        parser.error("--proposals-per-record: must be >= 0")
    if args.log_dirs_interval_ms < 0:
        parser.error("--log-dirs-interval-ms: must be >= 0")
    if args.session_timeout_ms is not None and args.session_timeout_ms <= 0:
        parser.error(f"--session-timeout-ms: expected a positive number of milliseconds, got {args.session_timeout_ms}")
    if args.status_file is not None and not args.status_file.parent.is_dir():
        # else the brokers register and the process dies on its first status write
        parser.error(f"--status-file: the folder {args.status_file.parent} does not exist")
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
    zookeeper = args.zookeeper or default_zookeeper()
    settings = ProcessSettings(
        broker_ids=args.brokers,
        zookeeper=zookeeper,
        bootstrap_server=args.bootstrap_server or default_bootstrap_server(),
        host=args.host,
        base_port=args.base_port,
        rack=args.rack,
        config=config,
        session_timeout_ms=(
            args.session_timeout_ms if args.session_timeout_ms is not None else default_session_timeout_ms(zookeeper)
        ),
        status_file=args.status_file,
        status_interval_ms=args.status_interval_ms,
        tick_ms=args.tick_ms,
        topic_wait_s=args.topic_wait_s,
        requests_topic=args.requests_topic,
        events_topic=args.events_topic,
        control_topic=args.control_topic,
        log_dirs_topic=args.log_dirs_topic,
        log_dirs_interval_ms=args.log_dirs_interval_ms,
        kafka_security=kafka_security,
        zookeeper_security=zk_security,
        shutdown_timeout_s=args.shutdown_timeout_s,
        proposals_per_record=args.proposals_per_record,
    )
    proc = SimBrokersProcess(settings)
    proc.install_signal_handlers()
    try:
        proc.start()
    except (SimBrokersError, RegistrationError) as e:
        print(f"simbrokers: {e}", file=sys.stderr)
        proc.close()
        return 1
    except (KazooException, KazooTimeoutError, KafkaError) as e:
        print(f"simbrokers: could not start: {type(e).__name__}: {e}", file=sys.stderr)
        proc.close()
        return 1
    return proc.run()


if __name__ == "__main__":
    sys.exit(main())
