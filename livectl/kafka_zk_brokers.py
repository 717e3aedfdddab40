"""Real Apache Kafka brokers in ZooKeeper mode, for livectl to control (``docs/real-brokers.md``).

Each broker is one JVM from the same jars as the local bus (:func:`livectl.kafka_server.kafka_classpath`,
Kafka 3.9.2), with ``broker.id``, ``zookeeper.connect`` = the ZooKeeper of the cluster livectl controls, a
durable log directory (``<run_dir>/data``, kept across restarts in the same folder) and three plaintext
listeners on loopback ports chosen at run time (the ports of the last start in the folder when they are
free): ``PLAINTEXT`` for clients, ``INTERNAL`` (``inter.broker.listener.name``: replication, and where a
broker sends ControlledShutdown) and ``CONTROL_PLANE`` (``control.plane.listener.name``: where the
controller's requests arrive and where a broker sends AlterPartition / AllocateProducerIds). livectl's
controller channel is advertised on all three, one port each: to the brokers on ``INTERNAL`` and
``CONTROL_PLANE``, and to clients on ``PLAINTEXT`` as the controller's node (``docs/real-brokers.md``).
It registers under ``/brokers/ids/<id>`` exactly as livectl's controller expects of a broker.

Every ZooKeeper-mode broker also runs Kafka's own controller, which tries to create ``/controller``
whenever it is absent: start livectl's controller first (it holds ``/controller`` while it runs), or a
broker becomes the cluster's controller. The race itself is issue 42's item 2, not solved here.

Stopped by PID like livectl's other services (:func:`stop_zk_broker`: SIGTERM, Kafka's controlled shutdown,
then SIGKILL after the timeout).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from livectl.kafka_server import KAFKA_MAIN, KAFKA_OPTS_ENV, env_jvm_options, kafka_classpath, log4j_properties
from livectl.spawn import (
    LocalServiceError,
    Service,
    find_java,
    free_port,
    logged_since,
    port_free,
    spawn,
    stop_process,
    wait_ready,
)

__all__ = [
    "CONTROL_PLANE_LISTENER",
    "INTER_BROKER_LISTENER",
    "LISTENERS",
    "ZkBrokerSettings",
    "start_zk_broker",
    "stop_zk_broker",
    "zk_broker_properties",
]

#: the brokers' listeners: clients, replication and ControlledShutdown, the controller's requests
CLIENT_LISTENER, INTER_BROKER_LISTENER, CONTROL_PLANE_LISTENER = "PLAINTEXT", "INTERNAL", "CONTROL_PLANE"
LISTENERS = (CLIENT_LISTENER, INTER_BROKER_LISTENER, CONTROL_PLANE_LISTENER)

#: what kafka.server.KafkaServer logs once it serves
STARTED_LINE = "started (kafka.server.KafkaServer)"
#: a ZooKeeper-mode broker's controlled shutdown waits on the controller; then SIGKILL
STOP_TIMEOUT = 30.0
_IBP = re.compile(r"[0-9]+\.[0-9]+(-IV[0-9]+)?")


@dataclass(frozen=True)
class ZkBrokerSettings:
    """How one ZooKeeper-mode broker runs. ``inter_broker_protocol``: ``inter.broker.protocol.version``
    (e.g. ``3.9``, ``2.8``; empty = the release's own). ``properties``: server properties applied last.
    ``heap``: the JVM's ``-Xmx``."""

    inter_broker_protocol: str = ""
    properties: Mapping[str, str] = field(default_factory=dict)
    heap: str = "384m"

    def __post_init__(self) -> None:
        if self.inter_broker_protocol and not _IBP.fullmatch(self.inter_broker_protocol):
            raise ValueError(
                f"ZkBrokerSettings.inter_broker_protocol: {self.inter_broker_protocol!r} is not a Kafka version "
                "such as 3.9 or 2.8-IV1"
            )
        if not re.fullmatch(r"[1-9][0-9]*[kKmMgG]?", self.heap):
            raise ValueError(f"ZkBrokerSettings.heap: {self.heap!r} is not a JVM heap size such as 384m")
        for key, value in self.properties.items():
            if not key or any(c in key for c in "=: \n") or "\n" in value:
                raise ValueError(f"ZkBrokerSettings.properties: {key!r} cannot be written as a server property")


def zk_broker_properties(
    broker_id: int, zookeeper_connect: str, ports: Mapping[str, int], data: Path, settings: ZkBrokerSettings
) -> str:
    """The ``server.properties`` text of one ZooKeeper-mode broker; ``ports``: listener name -> port, one for
    each of :data:`LISTENERS`."""
    missing = [name for name in LISTENERS if name not in ports]
    if missing:
        raise ValueError(f"ports: no port for listener(s) {', '.join(missing)}")
    endpoints = ",".join(f"{name}://127.0.0.1:{ports[name]}" for name in LISTENERS)
    props: dict[str, str] = {
        "broker.id": str(broker_id),
        "zookeeper.connect": zookeeper_connect,
        "zookeeper.session.timeout.ms": "6000",
        "listeners": endpoints,
        "advertised.listeners": endpoints,
        "listener.security.protocol.map": ",".join(f"{name}:PLAINTEXT" for name in LISTENERS),
        "inter.broker.listener.name": INTER_BROKER_LISTENER,
        "control.plane.listener.name": CONTROL_PLANE_LISTENER,
        "log.dirs": str(data),
        # topics are livectl's to create (its admin path); a producer must not create one behind it
        "auto.create.topics.enable": "false",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "4",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        # a small machine shared with ZooKeeper, the bus and Spark
        "num.network.threads": "2",
        "num.io.threads": "2",
        "num.replica.fetchers": "1",
        "num.recovery.threads.per.data.dir": "1",
        "background.threads": "2",
    }
    if settings.inter_broker_protocol:
        props["inter.broker.protocol.version"] = settings.inter_broker_protocol
    props.update(settings.properties)
    lines = (f"{k}={v.replace(chr(92), chr(92) * 2)}" for k, v in props.items())
    return "# written by livectl (livectl/kafka_zk_brokers.py) at each start\n" + "\n".join(lines) + "\n"


def start_zk_broker(
    run_dir: Path,
    broker_id: int,
    zookeeper_connect: str,
    *,
    settings: ZkBrokerSettings | None = None,
    port: int = 0,
    timeout: float = 90.0,
) -> Service:
    """Start broker ``broker_id`` with its files under ``run_dir`` and wait until it serves (registered in
    ZooKeeper). ``port``: the clients' listener's; 0: the last start's ports in this folder when free, else
    free ones. Returns the service record (``name`` ``kafka-<id>``; ``address`` the clients' listener,
    ``listeners`` every listener's address by name, ``data_dir`` its log directory)."""
    if broker_id < 0:
        raise ValueError(f"broker_id: must be at least 0, got {broker_id}")
    settings = settings or ZkBrokerSettings()
    java = find_java()
    classpath = kafka_classpath()
    run_dir = run_dir.resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    data = run_dir / "data"
    ports = _previous_ports(run_dir)
    if port:
        ports[CLIENT_LISTENER] = port
    for name in LISTENERS:
        if name not in ports:
            ports[name] = _another_free_port(ports.values())
    port = ports[CLIENT_LISTENER]
    config = run_dir / "server.properties"
    config.write_text(zk_broker_properties(broker_id, zookeeper_connect, ports, data, settings))
    (run_dir / "port.json").write_text(json.dumps(ports))
    log = run_dir / "server.log"
    log4j = run_dir / "log4j.properties"
    log4j.write_text(log4j_properties(log, {"kafka.request.logger": "WARN", "state.change.logger": "INFO"}))
    out = run_dir / "broker.out"
    cmd = [
        java,
        "-Xms64m",
        f"-Xmx{settings.heap}",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-Djava.awt.headless=true",
        f"-Dlog4j.configuration=file:{log4j}",
        *env_jvm_options(KAFKA_OPTS_ENV),
        "-cp",
        classpath,
        KAFKA_MAIN,
        str(config),
    ]
    start = log.stat().st_size if log.exists() else 0
    proc = spawn(cmd, out)
    try:
        wait_ready(proc, lambda: logged_since(log, start, STARTED_LINE), f"Kafka broker {broker_id}", log, timeout)
    except LocalServiceError as e:
        tail = out.read_text(errors="replace")[-1000:] if out.exists() else ""
        raise LocalServiceError(f"{e}\n{out}:\n{tail}") from None
    address = f"127.0.0.1:{port}"
    endpoints = {name: f"127.0.0.1:{ports[name]}" for name in LISTENERS}
    return Service(f"kafka-{broker_id}", proc.pid, port, address, str(log), str(config), endpoints, str(data))


def stop_zk_broker(service: Service, timeout: float = STOP_TIMEOUT) -> bool:
    """Stop the broker by PID (SIGTERM, then SIGKILL after ``timeout``; ``timeout`` 0 kills it at once). Its
    data stays."""
    return stop_process(service.pid, service.marker, timeout)


def _previous_ports(run_dir: Path) -> dict[str, int]:
    """The last start's ports in ``run_dir`` that are free now, by listener (a bare number: the clients')."""
    try:
        held = json.loads((run_dir / "port.json").read_text())
    except (OSError, ValueError):
        return {}
    if isinstance(held, int):
        held = {CLIENT_LISTENER: held}
    if not isinstance(held, dict):
        return {}
    return {
        name: p
        for name, p in held.items()
        if name in LISTENERS and isinstance(p, int) and not isinstance(p, bool) and port_free(p)
    }


def _another_free_port(taken: Iterable[int]) -> int:
    taken = set(taken)
    while True:
        port = free_port()
        if port not in taken:
            return port
