"""Apache Kafka as livectl's local bus: one KRaft node (broker and controller in one JVM) on loopback.

The broker runs from the jars ``scripts/setup`` resolved with Maven from ``jvm/kafka/pom.xml`` into
``.cache/jvm/kafka`` (or the folder ``$LIVECTL_KAFKA_LIBS`` names); nothing is downloaded at run time.
KRaft, not ZooKeeper mode: the bus must never register in the ZooKeeper tree of the cluster livectl
controls (``docs/kafka-bus.md``).

Its log directory (``<run_dir>/data``) is durable: formatted once, on the first start, and kept by every
later start in the same ``run_dir`` — topics and records survive a restart. The ports of the last start
are kept too (``<run_dir>/ports.json``), so a restart answers on the same address when they are free.

Security and other server settings are the caller's (:class:`KafkaSettings`): extra listeners, any server
property, SCRAM credentials written at format time (``StorageTool format --add-scram``) and JVM options.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
import subprocess
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

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
    "KAFKA_LIBS_ENV",
    "KAFKA_MAIN",
    "KafkaSettings",
    "Listener",
    "ScramCredential",
    "kafka_classpath",
    "kafka_version",
    "log4j_properties",
    "restart_kafka",
    "server_properties",
    "start_kafka",
    "stop_kafka",
]

KAFKA_LIBS_ENV = "LIVECTL_KAFKA_LIBS"
#: the Kafka line the local bus is tested with (jvm/kafka/pom.xml pins 3.9.2), and where to get it
KAFKA_LINE = "3.9"
KAFKA_DOWNLOADS = "https://kafka.apache.org/downloads"
#: the folder holding the packages: a checkout has scripts/setup and .cache/jvm there; an install does not
PACKAGE_ROOT = Path(__file__).resolve().parents[1]
KAFKA_MAIN = "kafka.Kafka"
STORAGE_TOOL = "kafka.tools.StorageTool"
#: extra JVM options for every Kafka JVM livectl starts, as Kafka's own ``kafka-run-class.sh`` reads them
KAFKA_OPTS_ENV = "KAFKA_OPTS"


def env_jvm_options(name: str) -> list[str]:
    """The JVM options in the environment variable ``name`` (shell words), appended after livectl's own."""
    try:
        return shlex.split(os.environ.get(name, ""))
    except ValueError as e:
        raise LocalServiceError(f"${name}: {e}") from None


#: what the broker logs (kafka.server.KafkaRaftServer) once it is unfenced and serving
STARTED_LINE = "Kafka Server started"
CONTROLLER = "CONTROLLER"
NODE_ID = 1
#: a broker in KRaft mode may take a while to stop (it flushes and closes every log); then SIGKILL
STOP_TIMEOUT = 30.0
_NAME = re.compile(r"[A-Z][A-Z0-9_]*")
_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


@dataclass(frozen=True)
class Listener:
    """A client listener on 127.0.0.1: ``name`` (upper case, as Kafka's listener names), its security
    ``protocol`` (``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT``, ``SASL_SSL``; default: the name) and ``port``
    (0 = the port of the last start in the same folder if free, else a free one)."""

    name: str
    protocol: str = ""
    port: int = 0

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name) or self.name == CONTROLLER:
            raise ValueError(f"Listener.name: {self.name!r} is not an upper-case listener name other than CONTROLLER")
        if self.security_protocol not in _PROTOCOLS:
            raise ValueError(f"Listener.protocol: {self.security_protocol!r} is not one of {', '.join(_PROTOCOLS)}")
        if not 0 <= self.port < 65536:
            raise ValueError(f"Listener.port: {self.port} is not a port")

    @property
    def security_protocol(self) -> str:
        return self.protocol or self.name


@dataclass(frozen=True)
class ScramCredential:
    """A SCRAM user written into the metadata log when the log directory is formatted (KRaft's way to
    have users before the broker first starts, e.g. for inter-broker SASL). Users added later go through
    the Admin API (``alter_user_scram_credentials``)."""

    user: str
    password: str
    mechanism: str = "SCRAM-SHA-512"

    def __post_init__(self) -> None:
        if self.mechanism not in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            raise ValueError(f"ScramCredential.mechanism: {self.mechanism!r} is not SCRAM-SHA-256 or SCRAM-SHA-512")
        for what, value in (("user", self.user), ("password", self.password)):
            # StorageTool parses name=...,password=... inside [...]: these would break the entry
            if not value or any(c in value for c in ',=[]"\n'):
                raise ValueError(f'ScramCredential.{what}: must be non-empty without , = [ ] " or a newline')

    def storage_arg(self) -> str:
        """The value of ``StorageTool format --add-scram``."""
        return f"{self.mechanism}=[name={self.user},password={self.password}]"


@dataclass(frozen=True)
class KafkaSettings:
    """How the broker runs, beyond the defaults of a one-node local bus.

    ``listeners``: the client listeners, first = the address recorded as the service's ``bootstrap`` and
    the inter-broker listener unless ``properties`` says otherwise. ``properties``: server properties
    applied last (they override every default here, e.g. ``sasl.enabled.mechanisms``,
    ``listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config``, ``authorizer.class.name``, ``super.users``).
    ``scram``: users added when the log directory is formatted (only then). ``jvm_options``: extra JVM
    flags (e.g. ``-Djavax.net.debug=...``). ``heap``: the JVM's ``-Xmx``."""

    listeners: tuple[Listener, ...] = (Listener("PLAINTEXT"),)
    properties: Mapping[str, str] = field(default_factory=dict)
    scram: tuple[ScramCredential, ...] = ()
    jvm_options: tuple[str, ...] = ()
    heap: str = "512m"

    def __post_init__(self) -> None:
        if not self.listeners:
            raise ValueError("KafkaSettings.listeners: at least one client listener is needed")
        names = [listener.name for listener in self.listeners]
        if len(set(names)) != len(names):
            raise ValueError(f"KafkaSettings.listeners: names repeat: {names}")
        if not re.fullmatch(r"[1-9][0-9]*[kKmMgG]?", self.heap):
            raise ValueError(f"KafkaSettings.heap: {self.heap!r} is not a JVM heap size such as 512m or 1g")
        for key, value in self.properties.items():
            if not key or any(c in key for c in "=: \n") or "\n" in value:
                raise ValueError(f"KafkaSettings.properties: {key!r} cannot be written as a server property")


def kafka_classpath() -> str:
    """The broker's classpath (``<dir>/*``): ``$LIVECTL_KAFKA_LIBS``, else ``<repo>/.cache/jvm/kafka``.
    Raises :class:`LocalServiceError` saying in one line what is missing and how to get it: in a checkout
    (``scripts/setup`` beside the package) by running setup, in an installed wheel by pointing
    ``$LIVECTL_KAFKA_LIBS`` at an Apache Kafka distribution's ``libs/``."""
    env = os.environ.get(KAFKA_LIBS_ENV)
    libs = Path(env) if env else PACKAGE_ROOT / ".cache" / "jvm" / "kafka"
    if any(libs.glob("kafka_2.13-*.jar")):
        return f"{libs}/*"
    distribution = f"the libs/ folder of an Apache Kafka {KAFKA_LINE} distribution ({KAFKA_DOWNLOADS})"
    if env:
        raise LocalServiceError(
            f"Apache Kafka's jars are missing: ${KAFKA_LIBS_ENV}={env} has no kafka_2.13-*.jar; point it to "
            f"{distribution}"
        )
    if (PACKAGE_ROOT / "scripts" / "setup").exists():
        raise LocalServiceError(
            f"Apache Kafka's jars are missing ({libs} has no kafka_2.13-*.jar): run scripts/setup, which "
            f"resolves them with Maven from jvm/kafka/pom.xml, or set {KAFKA_LIBS_ENV} to {distribution}"
        )
    raise LocalServiceError(f"Apache Kafka's jars are missing: set {KAFKA_LIBS_ENV} to {distribution}")


def kafka_version() -> str:
    """The Apache Kafka version on :func:`kafka_classpath` (from its ``kafka_2.13-<version>.jar``)."""
    libs = Path(kafka_classpath()[: -len("/*")])
    jar = next(j for j in sorted(libs.glob("kafka_2.13-*.jar")) if "-test" not in j.name)
    return jar.name[len("kafka_2.13-") : -len(".jar")]


def start_kafka(
    run_dir: Path,
    port: int = 0,
    *,
    controller_port: int = 0,
    settings: KafkaSettings | None = None,
    timeout: float = 120.0,
    ports: Mapping[str, int] | None = None,
) -> Service:
    """Start the broker with its files under ``run_dir`` (formatting ``run_dir/data`` if it is not yet)
    and wait until it serves. ``port`` (if not 0) is the first listener's, ``controller_port`` the
    KRaft controller's; ``ports`` (listener name or ``CONTROLLER`` -> port) fixes any of them. Starting
    again with the same ``run_dir`` after :func:`stop_kafka` keeps the data (and the ports, when they are
    free or given). Returns the service record (``name`` ``broker``)."""
    settings = settings or KafkaSettings()
    java = find_java()
    classpath = kafka_classpath()
    run_dir = run_dir.resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    data = run_dir / "data"
    ports = _choose_ports(run_dir, settings, port, controller_port, ports or {})
    listeners = {name: f"127.0.0.1:{p}" for name, p in ports.items()}
    config = run_dir / "server.properties"
    config.write_text(server_properties(settings, ports, data))
    log4j = run_dir / "log4j.properties"
    log = run_dir / "server.log"
    log4j.write_text(log4j_properties(log, _BUS_LEVELS))
    out = run_dir / "broker.out"
    if not (data / "meta.properties").exists():
        _format(java, classpath, config, settings, out)
    (run_dir / "ports.json").write_text(json.dumps(ports))
    cmd = [
        java,
        "-Xms64m",
        f"-Xmx{settings.heap}",
        "-Djava.awt.headless=true",
        f"-Dlog4j.configuration=file:{log4j}",
        *settings.jvm_options,
        *env_jvm_options(KAFKA_OPTS_ENV),
        "-cp",
        classpath,
        KAFKA_MAIN,
        str(config),
    ]
    start = log.stat().st_size if log.exists() else 0
    proc = spawn(cmd, out)
    try:
        wait_ready(proc, lambda: logged_since(log, start, STARTED_LINE), "the Kafka broker", log, timeout)
    except LocalServiceError as e:
        # what the JVM itself said (a bad option, no memory) is in broker.out, not in the broker's log
        tail = out.read_text(errors="replace")[-1000:] if out.exists() else ""
        raise LocalServiceError(f"{e}\n{out}:\n{tail}") from None
    first = settings.listeners[0].name
    return Service("broker", proc.pid, ports[first], listeners[first], str(log), str(config), listeners, str(data))


def restart_kafka(service: Service, *, settings: KafkaSettings | None = None, timeout: float = 120.0) -> Service:
    """Stop ``service`` (if it runs) and start it again in its folder on exactly its ports (every listener
    and the controller's), with its data. ``settings`` must name the same listeners as at its start."""
    stop_kafka(service)
    ports = {name: int(address.rsplit(":", 1)[1]) for name, address in service.listeners.items()}
    return start_kafka(Path(service.marker).parent, settings=settings, timeout=timeout, ports=ports)


def stop_kafka(service: Service, timeout: float = STOP_TIMEOUT) -> bool:
    """Stop the broker by PID (SIGTERM: a clean shutdown; SIGKILL after ``timeout``). Its data stays."""
    return stop_process(service.pid, service.marker, timeout)


def _choose_ports(
    run_dir: Path, settings: KafkaSettings, port: int, controller_port: int, fixed: Mapping[str, int]
) -> dict[str, int]:
    try:
        previous = json.loads((run_dir / "ports.json").read_text())
    except (OSError, ValueError):
        previous = {}
    wanted = {listener.name: listener.port for listener in settings.listeners}
    if port:
        wanted[settings.listeners[0].name] = port
    wanted[CONTROLLER] = controller_port
    unknown = set(fixed) - set(wanted)
    if unknown:
        raise ValueError(f"ports: no listener called {sorted(unknown)}; the listeners are {sorted(wanted)}")
    wanted.update(fixed)
    chosen: dict[str, int] = {}
    for name, asked in wanted.items():
        old = previous.get(name) if isinstance(previous, dict) else None
        p = asked or (old if isinstance(old, int) and old not in chosen.values() and port_free(old) else 0)
        while not p or p in chosen.values():
            p = free_port()
        chosen[name] = p
    return chosen


def server_properties(settings: KafkaSettings, ports: Mapping[str, int], data: Path) -> str:
    """The ``server.properties`` text: one combined KRaft node, ``ports`` by listener name (and
    ``CONTROLLER``), log directory ``data``; ``settings.properties`` last, overriding any default."""
    clients = ",".join(f"{x.name}://127.0.0.1:{ports[x.name]}" for x in settings.listeners)
    protocols = {x.name: x.security_protocol for x in settings.listeners} | {CONTROLLER: "PLAINTEXT"}
    props: dict[str, str] = {
        "process.roles": "broker,controller",
        "node.id": str(NODE_ID),
        "controller.quorum.voters": f"{NODE_ID}@127.0.0.1:{ports[CONTROLLER]}",
        "controller.listener.names": CONTROLLER,
        "listeners": f"{clients},{CONTROLLER}://127.0.0.1:{ports[CONTROLLER]}",
        "advertised.listeners": clients,
        "inter.broker.listener.name": settings.listeners[0].name,
        "listener.security.protocol.map": ",".join(f"{k}:{v}" for k, v in protocols.items()),
        "log.dirs": str(data),
        "num.partitions": "1",
        "default.replication.factor": "1",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "4",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "4",
        # a consumer group joins at once: a local bus has one member per group
        "group.initial.rebalance.delay.ms": "0",
        # a small machine shared with Spark and ZooKeeper
        "num.network.threads": "2",
        "num.io.threads": "4",
        "num.recovery.threads.per.data.dir": "1",
        "background.threads": "4",
    }
    props.update(settings.properties)
    lines = (f"{k}={v.replace(chr(92), chr(92) * 2)}" for k, v in props.items())
    return "# written by livectl (livectl/kafka_server.py) at each start\n" + "\n".join(lines) + "\n"


def _format(java: str, classpath: str, config: Path, settings: KafkaSettings, out: Path) -> None:
    # Kafka's Uuid in its string form: 16 random bytes, URL-safe base64 without padding, never leading "-"
    cluster_id = "-"
    while cluster_id.startswith("-"):
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    cmd = [
        java,
        "-Xmx256m",
        *env_jvm_options(KAFKA_OPTS_ENV),
        "-cp",
        classpath,
        STORAGE_TOOL,
        "format",
        "-t",
        cluster_id,
        "-c",
        str(config),
    ]
    for credential in settings.scram:
        cmd += ["--add-scram", credential.storage_arg()]
    done = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False)
    with out.open("a") as f:
        f.write(f"$ StorageTool format -t {cluster_id} -c {config}\n{done.stdout}{done.stderr}")
    if done.returncode != 0:
        raise LocalServiceError(f"formatting Kafka's log directory failed ({config}): {done.stderr.strip()[-1500:]}")


_LOG4J = """\
# written by livectl at each start: the broker logs to one file in its run folder
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.RollingFileAppender
log4j.appender.file.File={log}
log4j.appender.file.MaxFileSize=20MB
log4j.appender.file.MaxBackupIndex=2
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
"""

#: the bus's loggers: its own request, cleaner, state-change and loader chatter kept to warnings
_BUS_LEVELS = {
    "kafka.request.logger": "WARN",
    "kafka.log.LogCleaner": "WARN",
    "state.change.logger": "WARN",
    "org.apache.kafka.storage.internals.log.LogLoader": "WARN",
}


def log4j_properties(log: Path, levels: Mapping[str, str]) -> str:
    """A broker's ``log4j.properties``: everything into one rolling file (``log``), with ``levels`` per logger."""
    return _LOG4J.format(log=log) + "".join(f"log4j.logger.{name}={level}\n" for name, level in levels.items())
