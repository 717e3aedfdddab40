"""Real Apache Kafka brokers in ZooKeeper mode, for livectl to control (``docs/real-brokers.md``).

Each broker is one JVM from the same jars as the local bus (:func:`livectl.kafka_server.kafka_classpath`,
Kafka 3.9.2), with ``broker.id``, ``zookeeper.connect`` = the ZooKeeper of the cluster livectl controls, a
durable log directory (``<run_dir>/data``, kept across restarts in the same folder) and one PLAINTEXT
listener on a loopback port chosen at run time (the port of the last start in the folder when it is free).
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
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from livectl.kafka_server import KAFKA_MAIN, kafka_classpath, log4j_properties
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

__all__ = ["ZkBrokerSettings", "start_zk_broker", "stop_zk_broker", "zk_broker_properties"]

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
    broker_id: int, zookeeper_connect: str, port: int, data: Path, settings: ZkBrokerSettings
) -> str:
    """The ``server.properties`` text of one ZooKeeper-mode broker."""
    props: dict[str, str] = {
        "broker.id": str(broker_id),
        "zookeeper.connect": zookeeper_connect,
        "zookeeper.session.timeout.ms": "6000",
        "listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
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
    ZooKeeper). ``port`` 0: the last start's port in this folder when free, else a free one. Returns the
    service record (``name`` ``kafka-<id>``; ``address`` its listener, ``data_dir`` its log directory)."""
    if broker_id < 0:
        raise ValueError(f"broker_id: must be at least 0, got {broker_id}")
    settings = settings or ZkBrokerSettings()
    java = find_java()
    classpath = kafka_classpath()
    run_dir = run_dir.resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    data = run_dir / "data"
    port = port or _previous_port(run_dir) or free_port()
    config = run_dir / "server.properties"
    config.write_text(zk_broker_properties(broker_id, zookeeper_connect, port, data, settings))
    (run_dir / "port.json").write_text(json.dumps(port))
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
    return Service(
        f"kafka-{broker_id}", proc.pid, port, address, str(log), str(config), {"PLAINTEXT": address}, str(data)
    )


def stop_zk_broker(service: Service, timeout: float = STOP_TIMEOUT) -> bool:
    """Stop the broker by PID (SIGTERM, then SIGKILL after ``timeout``; ``timeout`` 0 kills it at once). Its
    data stays."""
    return stop_process(service.pid, service.marker, timeout)


def _previous_port(run_dir: Path) -> int:
    try:
        port = json.loads((run_dir / "port.json").read_text())
    except (OSError, ValueError):
        return 0
    return port if isinstance(port, int) and port_free(port) else 0
