"""``livectl channel``: deliver the controller's requests to real Kafka brokers (:mod:`channel.runner`)."""

from __future__ import annotations

import argparse
import logging
import re
import signal
import ssl
import sys
from pathlib import Path
from types import FrameType

from kafka.errors import KafkaError
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from channel.acls import AUTHORIZER_PROPERTIES, AclAuthorizer
from channel.admin_link import ADMIN_RESULTS_TOPIC, ADMIN_TOPIC
from channel.authz import SUPER_USERS, ClusterAction
from channel.runner import DEFAULT_GROUP, ChannelSettings, ControllerChannel
from channel.sasl import ChannelSasl
from channel.tls import OVER_TLS, ChannelTls, parse_protocol_map, protocol_of
from core.kafka.envelope import BROKER_EVENTS_TOPIC, REQUESTS_TOPIC
from core.kafka.log_dirs import LOG_DIRS_TOPIC
from sinks.local_services import default_bootstrap_server, default_zookeeper
from sinks.security import KafkaSecurity, SecurityConfigError, parse_properties

_DESCRIPTION = """\
The controller channel: reads the requests livectl's controller writes (the requests topic, committed
transactions only) and sends each broker its LeaderAndIsr, UpdateMetadata and StopReplica as Kafka's own
RPCs, in the order the controller decided them, at the highest version both sides speak; the brokers'
answers go to the broker-events topic as livectl's events. For real Apache Kafka brokers in ZooKeeper mode
registered in the controlled cluster's ZooKeeper (docs/real-brokers.md).

It is also the controller's endpoint: it listens (--listen) and each UpdateMetadata it delivers lists the
controller as a live broker with the channel's addresses, one per listener name: --controller-listeners,
where a broker looks its controller up, and --client-listeners, where clients send the controller's node
their Admin calls. The brokers' ControlledShutdown and AlterPartition become livectl's events and are
answered with the controller's answers; AllocateProducerIds is answered from ZooKeeper's
/latest_producer_id_block and ListPartitionReassignments from the topic znodes, as Kafka's ZooKeeper
controller does. Kafka's Admin client's CreateTopics, DeleteTopics, CreatePartitions, ElectLeaders and
AlterPartitionReassignments become livectl's admin commands (--admin-topic) and are answered from livectl's
admin results (--admin-results-topic); DescribeConfigs, AlterConfigs and IncrementalAlterConfigs of the
controller's own broker id are answered from and written to its /config/brokers/<id> in ZooKeeper; anything
else a client sends (Metadata, DescribeCluster, ...) is forwarded to a registered broker on the same
listener.

SSL and SASL (the brokers' security.inter.broker.protocol, or a secured control.plane.listener.name): the
channel connects with TLS to each broker endpoint registered with security protocol SSL or SASL_SSL (the
registration's listener_security_protocol_map) and authenticates with SASL to one registered SASL_PLAINTEXT
or SASL_SSL (sasl.mechanism.inter.broker.protocol, the listener's JAAS login's username and password, as a
Kafka controller); its endpoint listens with TLS and/or SASL on the listener names
--listener-security-protocol-map maps so, advertised there as such, and refuses a SASL client whose
mechanism is not enabled or whose credentials are wrong (PLAIN: the JAAS login's user_<name> entries;
SCRAM-SHA-256/512: the users' credentials in ZooKeeper, as a broker checks them). All of it from
--security-config, a Kafka broker's own ssl.* and sasl.* properties (PEM files): the keystore is the endpoint's
server certificate and the certificate the channel presents to the brokers, the truststore verifies the
brokers' certificates (and theirs as clients with ssl.client.auth). A listener the brokers secure otherwise
than the endpoint is not advertised; a SASL endpoint forwards no client's request. With super.users in
--security-config, only the principals it names (a SASL user, a client certificate's subject, User:ANONYMOUS)
may send the brokers' own requests, as with Kafka's CLUSTER_ACTION; anyone else is answered
CLUSTER_AUTHORIZATION_FAILED (31) and nothing reaches livectl's controller. With
authorizer.class.name=kafka.security.authorizer.AclAuthorizer, the admin calls the channel answers itself
(CreateTopics, DeleteTopics, CreatePartitions, ElectLeaders, AlterPartitionReassignments,
ListPartitionReassignments, the controller's node's own configs) are authorized as that authorizer does, from
the ACLs kafka-acls writes in the cluster's ZooKeeper (super.users may do anything;
allow.everyone.if.no.acl.found, default false); a refused item is answered TOPIC_AUTHORIZATION_FAILED (29) or
CLUSTER_AUTHORIZATION_FAILED (31), never published nor written; the brokers' own requests are then taken from
super.users and the principals the ACLs grant ClusterAction on the Cluster.
"""

_EPILOG = """\
once per message:
  the consumer group's offset of a message is committed after every broker it names answered and the
  events were written; a channel restarted in between sends that message again (Kafka's brokers ignore
  a repeated LeaderAndIsr of the same leader epoch).

one channel per group:
  a channel started on a group takes the place of the one running there (Kafka's static membership,
  group.instance.id = the group), which is fenced and stops.

exit status:
  0 stopped by SIGTERM / Ctrl-C; 1 could not start (ZooKeeper or Kafka unreachable), or fenced by a
  newer channel on the group; 2 bad options.
"""


def _ibp(text: str) -> str:
    if not re.fullmatch(r"[0-9]+\.[0-9]+(-IV[0-9]+)?", text):
        raise argparse.ArgumentTypeError(f"expected a Kafka version such as 3.9 or 2.8-IV1, got {text!r}")
    return text


def _host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT (PORT 0: chosen at start), got {text!r}")
    return host, int(port)


def _names(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    bad = [n for n in names if not re.fullmatch(r"[A-Za-z0-9_.-]+", n)]
    if bad:
        raise argparse.ArgumentTypeError(f"not a listener name: {bad[0]!r}")
    return names


def _protocol_map(text: str) -> dict[str, str]:
    try:
        return parse_protocol_map(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _security(args: argparse.Namespace) -> tuple[ChannelTls, ChannelSasl, ClusterAction, AclAuthorizer | None]:
    """``--security-config``'s settings, checked: its ``ssl.*`` (:class:`ChannelTls`, whose files are read here),
    ``sasl.*`` / ``listener.name.*`` (:class:`ChannelSasl`), ``super.users`` (:class:`ClusterAction`) and
    ``authorizer.class.name`` with ``allow.everyone.if.no.acl.found`` (:class:`AclAuthorizer`);
    :class:`SecurityConfigError` naming what is wrong."""
    path = args.security_config
    props: dict[str, str] = {}
    if path is not None:
        try:
            text = path.read_text()
        except OSError as e:
            raise SecurityConfigError("--security-config", f"cannot read {path}: {e.strerror or e}") from None
        try:
            props = parse_properties(text, str(path))
            tls = ChannelTls.from_properties({k: v for k, v in props.items() if k.strip().startswith("ssl.")})
            sasl = ChannelSasl.from_properties(
                {
                    k: v
                    for k, v in props.items()
                    if not k.strip().startswith("ssl.") and k.strip() not in (SUPER_USERS, *AUTHORIZER_PROPERTIES)
                }
            )
            cluster_action = ClusterAction.from_properties({k: v for k, v in props.items() if k.strip() == SUPER_USERS})
            authorizer = AclAuthorizer.from_properties(
                {k: v for k, v in props.items() if k.strip() in (SUPER_USERS, *AUTHORIZER_PROPERTIES)}
            )
        except SecurityConfigError as e:
            raise SecurityConfigError("--security-config", f"{path}: {e}") from None
    else:
        tls, sasl, cluster_action, authorizer = ChannelTls(), ChannelSasl(), ClusterAction(), None
    names = (*args.controller_listeners, *args.client_listeners)
    protocols = {n: protocol_of(n, args.listener_security_protocol_map) for n in names}
    try:
        if path is not None:
            tls.client_context()
        if any(p in OVER_TLS for p in protocols.values()):
            tls.server_context()
    except SecurityConfigError as e:
        raise SecurityConfigError("--security-config", f"an SSL listener of the endpoint: {e}") from None
    except (OSError, ssl.SSLError) as e:
        raise SecurityConfigError("--security-config", f"cannot load a certificate or key: {e}") from None
    try:
        for name, protocol in protocols.items():
            if protocol.startswith("SASL_"):
                sasl.server(name, lambda _user, _mechanism: None)
        if sasl.client_mechanism:
            sasl.client_config(args.listener)
    except SecurityConfigError as e:
        raise SecurityConfigError("--security-config", f"SASL: {e}") from None
    return tls, sasl, cluster_action, authorizer


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "channel",
        help="deliver the controller's requests to real Kafka brokers (ZooKeeper mode) as Kafka RPCs",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--zookeeper",
        default=None,
        help="ZooKeeper of the controlled cluster, where the brokers register "
        "(default: $LIVECTL_ZOOKEEPER, `livectl local up`, or 127.0.0.1:2181)",
    )
    p.add_argument(
        "--bootstrap-server",
        default=None,
        help="livectl's Kafka bus (default: $LIVECTL_BOOTSTRAP_SERVER, `livectl local up`, or 127.0.0.1:9092)",
    )
    p.add_argument(
        "--command-config",
        type=Path,
        default=None,
        metavar="FILE",
        help="the bus's client security properties (security.protocol, sasl.*, ssl.*), as for Kafka's tools",
    )
    p.add_argument(
        "--security-config",
        "--ssl-config",
        dest="security_config",
        type=Path,
        default=None,
        metavar="FILE",
        help="TLS and SASL toward the brokers and on the endpoint's SSL / SASL listeners, as a Kafka broker's own "
        "properties (--ssl-config: the same option). TLS, PEM files: ssl.truststore.location (CA certificates; "
        "default: the system's), ssl.keystore.location (certificate chain, with the key unless ssl.key.location), "
        "ssl.key.location, ssl.key.password, ssl.client.auth (required/requested/none, default none), "
        "ssl.endpoint.identification.algorithm (https, the default: a broker's certificate must name its "
        "registered host; empty: not checked). SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512): "
        "sasl.mechanism.inter.broker.protocol (the channel's, to the brokers), sasl.enabled.mechanisms (the "
        "endpoint's; or listener.name.<listener>.sasl.enabled.mechanisms), "
        "listener.name.<listener>.<mechanism>.sasl.jaas.config (username/password: the channel's login; PLAIN's "
        "user_<name>=\"<password>\": the endpoint's users; SCRAM users: ZooKeeper's /config/users), or an "
        "unprefixed sasl.jaas.config for every listener. Who may send the endpoint the brokers' own requests "
        "(ControlledShutdown, AlterPartition, AllocateProducerIds; Kafka's CLUSTER_ACTION): super.users, "
        "principals separated by ';' as a broker's (User:<SASL user>, User:<certificate subject DN, RFC 2253>, "
        "User:ANONYMOUS for PLAINTEXT), anyone else answered CLUSTER_AUTHORIZATION_FAILED; not given: anyone, as "
        "a broker without an authorizer. authorizer.class.name=kafka.security.authorizer.AclAuthorizer (no other "
        "class) authorizes the admin calls the channel answers itself from the ACLs in ZooKeeper, with super.users "
        "and allow.everyone.if.no.acl.found; not given: anyone may make them, as Kafka",
    )
    p.add_argument(
        "--listener-security-protocol-map",
        type=_protocol_map,
        default={},
        metavar="MAP",
        help="the endpoint's listener names and their security protocol, as Kafka's listener.security.protocol.map: "
        "NAME:PROTOCOL,... with PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (SSL needs ssl.keystore.location in "
        "--security-config, SASL sasl.enabled.mechanisms); give the brokers' own, e.g. "
        "CONTROL_PLANE:SASL_SSL,INTERNAL:SSL,PLAINTEXT:PLAINTEXT (default: a name not listed is PLAINTEXT, but one "
        "named after a protocol speaks it, as in Kafka's default map)",
    )
    p.add_argument("--group", default=DEFAULT_GROUP, help="consumer group keeping its place (default: %(default)s)")
    p.add_argument(
        "--listener",
        default="CONTROL_PLANE",
        help="the brokers' listener the channel connects to, their control.plane.listener.name as Kafka's "
        "controller does (default: %(default)s; else their first endpoint)",
    )
    p.add_argument(
        "--listen",
        type=_host_port,
        default=("127.0.0.1", 0),
        metavar="HOST:PORT",
        help="where the controller's endpoint listens, one port per listener name: the names of "
        "--controller-listeners then --client-listeners on PORT, PORT+1, ... (default: 127.0.0.1:0, ports chosen "
        "at start and logged; give a fixed one in production, as brokers keep the address of the last "
        "UpdateMetadata)",
    )
    p.add_argument(
        "--advertised-host",
        default="",
        help="the host UpdateMetadata advertises for the endpoint (default: the --listen host)",
    )
    p.add_argument(
        "--controller-listeners",
        type=_names,
        default=("CONTROL_PLANE", "INTERNAL"),
        metavar="NAMES",
        help="the brokers' listener names under which UpdateMetadata advertises the endpoint for the brokers' "
        "own requests: their control.plane.listener.name and inter.broker.listener.name (default: "
        "CONTROL_PLANE,INTERNAL; empty: do not listen at all)",
    )
    p.add_argument(
        "--client-listeners",
        type=_names,
        default=("PLAINTEXT",),
        metavar="NAMES",
        help="more listener names where it is advertised, for clients: Kafka's Admin client sends the "
        "controller's node ListPartitionReassignments (kafka-topics --describe) and more; each needs a port of "
        "its own, so the names are given, not found (default: PLAINTEXT; empty: none; a name the brokers "
        "secure otherwise than --listener-security-protocol-map says is not advertised)",
    )
    p.add_argument(
        "--inter-broker-protocol",
        type=_ibp,
        default=None,
        metavar="VERSION",
        help="send no newer request versions than Kafka 3.9's controller sends for this "
        "inter.broker.protocol.version (default: the highest both sides speak)",
    )
    p.add_argument("--requests-topic", default=REQUESTS_TOPIC, help="default: %(default)s")
    p.add_argument("--events-topic", default=BROKER_EVENTS_TOPIC, help="default: %(default)s")
    p.add_argument(
        "--log-dirs-topic",
        default=LOG_DIRS_TOPIC,
        help="where each broker's DescribeLogDirs answer for its partitions being reassigned is published, for "
        "reassign --verify/--list and the status page (default: %(default)s)",
    )
    p.add_argument(
        "--log-dirs-interval-s",
        type=float,
        default=1.0,
        help="how often those brokers are asked; 0: never (default: %(default)s)",
    )
    p.add_argument(
        "--admin-topic",
        default=ADMIN_TOPIC,
        help="where Kafka's admin requests to the controller go as livectl's admin commands (default: %(default)s)",
    )
    p.add_argument(
        "--admin-results-topic",
        default=ADMIN_RESULTS_TOPIC,
        help="where livectl's answers to them are read (default: %(default)s)",
    )
    p.add_argument(
        "--num-partitions",
        type=int,
        default=1,
        help="Kafka's num.partitions: the partitions of a topic CreateTopics asks with -1 (default: %(default)s)",
    )
    p.add_argument(
        "--default-replication-factor",
        type=int,
        default=1,
        help="Kafka's default.replication.factor: the replication factor of a topic CreateTopics asks with -1 "
        "(default: %(default)s)",
    )
    p.add_argument("--retry-s", type=float, default=1.0, help="retry interval for an unreachable broker")
    p.add_argument("--log-level", default="INFO", help="Python logging level (default: %(default)s)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    if args.retry_s <= 0:
        print("livectl channel: --retry-s: must be > 0", file=sys.stderr)
        return 2
    if args.log_dirs_interval_s < 0:
        print("livectl channel: --log-dirs-interval-s: must be >= 0", file=sys.stderr)
        return 2
    # Kafka's own bounds: num.partitions at least 1, default.replication.factor an int16 of at least 1
    if args.num_partitions < 1:
        print("livectl channel: --num-partitions: must be >= 1", file=sys.stderr)
        return 2
    if not 1 <= args.default_replication_factor <= 32767:
        print("livectl channel: --default-replication-factor: must be 1 to 32767", file=sys.stderr)
        return 2
    listen_host, listen_port = args.listen
    if args.controller_listeners and not (args.advertised_host or listen_host not in ("", "0.0.0.0", "::")):
        print("livectl channel: --advertised-host: required when --listen is on every interface", file=sys.stderr)
        return 2
    try:
        level = logging.getLevelNamesMapping()[args.log_level.upper()]
    except KeyError:
        print(f"livectl channel: --log-level: {args.log_level!r} is not a logging level", file=sys.stderr)
        return 2
    logging.basicConfig(level=level, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("kafka").setLevel(logging.WARNING)
    logging.getLogger("kazoo").setLevel(logging.WARNING)
    try:
        kafka = (
            KafkaSecurity.from_file_text(args.command_config.read_text(), str(args.command_config))
            if args.command_config is not None
            else KafkaSecurity()
        )
    except OSError as e:
        print(
            f"livectl channel: --command-config: cannot read {args.command_config}: {e.strerror or e}", file=sys.stderr
        )
        return 2
    except SecurityConfigError as e:
        print(f"livectl channel: --command-config: {e}", file=sys.stderr)
        return 2
    try:
        tls, sasl, cluster_action, authorizer = _security(args)
    except SecurityConfigError as e:
        print(f"livectl channel: {e}", file=sys.stderr)
        return 2
    settings = ChannelSettings(
        zookeeper=args.zookeeper or default_zookeeper(),
        bootstrap_server=args.bootstrap_server or default_bootstrap_server(),
        requests_topic=args.requests_topic,
        events_topic=args.events_topic,
        group=args.group,
        listener=args.listener,
        inter_broker_protocol=args.inter_broker_protocol or "",
        retry_s=args.retry_s,
        kafka=kafka.client_kwargs(),
        controller_listeners=args.controller_listeners,
        client_listeners=args.client_listeners,
        listen_host=listen_host,
        listen_port=listen_port,
        advertised_host=args.advertised_host,
        log_dirs_topic=args.log_dirs_topic,
        log_dirs_interval_s=args.log_dirs_interval_s,
        admin_topic=args.admin_topic,
        admin_results_topic=args.admin_results_topic,
        num_partitions=args.num_partitions,
        default_replication_factor=args.default_replication_factor,
        tls=tls,
        listener_protocols=args.listener_security_protocol_map,
        sasl=sasl,
        cluster_action=cluster_action,
        authorizer=authorizer,
    )
    channel = ControllerChannel(settings)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        channel.stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        channel.start()
    except (KazooException, KazooTimeoutError, KafkaError, OSError) as e:
        print(f"livectl channel: could not start: {type(e).__name__}: {e}", file=sys.stderr)
        channel.close()
        return 1
    try:
        return channel.run()
    finally:
        channel.close()
