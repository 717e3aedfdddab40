"""Real local services on loopback: ZooKeeper (Debian's package) and Apache Kafka (one KRaft node).

``livectl local up`` starts both under a run folder (default ``./run/local``), records their ports and
PIDs in ``services.json`` there, and ``livectl local down`` stops exactly those processes, by PID, after
checking that each PID still runs the command line we started (a recycled PID is never signalled).
Kafka's log directory (``<run folder>/broker/data``) stays across ``down`` and ``up``: a restart keeps
the topics and their records (:mod:`livectl.kafka_server`; ``docs/kafka-bus.md``).

The same :class:`LocalServices` API backs the pytest fixtures, which pick free ports at run time.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from importlib.resources import files
from pathlib import Path
from string import Template

from livectl.kafka_server import (
    KafkaSettings,
    Listener,
    ScramCredential,
    kafka_classpath,
    kafka_version,
    restart_kafka,
    start_kafka,
    stop_kafka,
)
from livectl.spawn import (
    LocalServiceError,
    Service,
    find_java,
    free_port,
    pid_matches,
    port_free,
    spawn,
    stop_process,
    wait_ready,
)
from sinks.local_services import load_records, save_records

__all__ = [
    "KafkaSettings",
    "Listener",
    "LocalServiceError",
    "LocalServices",
    "ScramCredential",
    "Service",
    "broker_ok",
    "check_zookeeper_installed",
    "find_java",
    "free_port",
    "kafka_classpath",
    "kafka_version",
    "pid_matches",
    "port_free",
    "restart_kafka",
    "start_broker",
    "start_kafka",
    "start_zookeeper",
    "stop_kafka",
    "stop_process",
    "zookeeper_ok",
]

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
ZOOKEEPER_CONF_DIR = Path("/etc/zookeeper/conf")
ZOOKEEPER_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"


@dataclass
class LocalServices:
    """The services started in one run folder."""

    run_dir: Path
    services: dict[str, Service] = field(default_factory=dict)

    @property
    def zookeeper(self) -> Service | None:
        return self.services.get("zookeeper")

    @property
    def broker(self) -> Service | None:
        return self.services.get("broker")

    # ---------------------------------------------------------------- persistence

    @classmethod
    def load(cls, run_dir: Path) -> LocalServices:
        return cls(run_dir, {k: Service(**v) for k, v in load_records(run_dir).items()})

    def save(self) -> None:
        save_records(self.run_dir, {k: asdict(v) for k, v in self.services.items()})

    # ---------------------------------------------------------------- lifecycle

    def up(
        self,
        zk_port: int = 0,
        broker_port: int = 0,
        timeout: float = 30.0,
        *,
        kafka: KafkaSettings | None = None,
        kafka_timeout: float = 120.0,
    ) -> None:
        """Start whatever is not already running (port 0 = the broker's last port if free, else a free
        one; ZooKeeper always takes a free one). ``kafka``: the broker's settings (listeners, security)."""
        br = self.broker
        if br is None or not br.running():
            kafka_classpath()  # missing jars: said before anything starts
        zk = self.zookeeper
        if zk is None or not zk.running():
            self.services["zookeeper"] = start_zookeeper(self.run_dir / "zookeeper", zk_port or free_port(), timeout)
            self.save()
        if br is None or not br.running():
            self.services["broker"] = start_kafka(
                self.run_dir / "broker", broker_port, settings=kafka, timeout=max(timeout, kafka_timeout)
            )
            self.save()

    def down(self) -> list[str]:
        """Stop the recorded services, by PID. Returns what was stopped."""
        stopped = []
        for name in ("broker", "zookeeper"):
            svc = self.services.get(name)
            if svc is not None and (stop_kafka(svc) if name == "broker" else stop_process(svc.pid, svc.marker)):
                stopped.append(name)
            self.services.pop(name, None)
        self.save()
        return stopped

    def status(self) -> dict[str, dict[str, object]]:
        out: dict[str, dict[str, object]] = {}
        for name in ("zookeeper", "broker"):
            svc = self.services.get(name)
            if svc is None:
                out[name] = {"state": "not started"}
                continue
            alive = svc.running()
            healthy = alive and (zookeeper_ok(svc.port) if name == "zookeeper" else broker_ok(svc.address, timeout=3.0))
            out[name] = {
                "state": "running" if healthy else ("unhealthy" if alive else "stopped"),
                "pid": svc.pid,
                "address": svc.address,
                "log": svc.log,
                **({"data": svc.data_dir} if svc.data_dir else {}),
            }
        return out


# -------------------------------------------------------------------- helpers


def check_zookeeper_installed() -> None:
    if not ZOOKEEPER_JAR.exists():
        raise LocalServiceError(
            f"Debian's zookeeper package is not installed ({ZOOKEEPER_JAR} is missing). "
            "Install it with: sudo apt-get install -y zookeeper"
        )


def zookeeper_ok(port: int, timeout: float = 1.0) -> bool:
    """ZooKeeper's four-letter ``ruok`` answers ``imok``."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(b"ruok")
            return s.recv(16) == b"imok"
    except OSError:
        return False


def broker_ok(address: str, timeout: float = 1.0) -> bool:
    """A Kafka Metadata request answers."""
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    try:
        admin = KafkaAdminClient(bootstrap_servers=address, request_timeout_ms=int(timeout * 1000))
    except (KafkaError, OSError, ValueError):
        return False
    try:
        admin.list_topics()
        return True
    except (KafkaError, OSError):
        return False
    finally:
        admin.close()


def start_zookeeper(
    run_dir: Path,
    port: int,
    timeout: float = 30.0,
    *,
    sasl_users: Mapping[str, str] | None = None,
    heap: str = "512m",
) -> Service:
    """Start Debian's ZooKeeper standalone on 127.0.0.1:``port`` with data under ``run_dir``.

    ``sasl_users`` (user -> password) turns on SASL authentication the way Kafka's ZooKeeper set-up does
    it without Kerberos: a JAAS ``Server`` section with ZooKeeper's ``DigestLoginModule`` listing the users
    (DIGEST-MD5) and ``authProvider.1`` = ZooKeeper's ``SASLAuthenticationProvider``, so that a client that
    authenticated as ``user`` is ``sasl:user`` in ACLs. Clients without SASL may still connect. ``heap`` is the
    JVM's maximum heap (``-Xmx``): a tree of a million partitions holds two million znodes."""
    java = find_java()
    check_zookeeper_installed()
    data = run_dir / "data"
    data.mkdir(parents=True, exist_ok=True)
    cfg = run_dir / "zoo.cfg"
    template = Template((files("livectl") / "conf" / "zoo.cfg.template").read_text())
    text = template.substitute(data_dir=str(data), client_port=port)
    jvm_options: list[str] = []
    if sasl_users:
        for user, password in sasl_users.items():
            if not re.fullmatch(r"[A-Za-z0-9_.-]+", user) or '"' in password or "\\" in password:
                raise LocalServiceError(f"sasl_users: {user!r} or its password cannot be written to a JAAS file")
        jaas = run_dir / "zookeeper-jaas.conf"
        entries = "\n".join(f'    user_{user}="{password}"' for user, password in sasl_users.items())
        module = "org.apache.zookeeper.server.auth.DigestLoginModule"
        jaas.write_text(f"Server {{\n    {module} required\n{entries};\n}};\n")
        jaas.chmod(0o600)
        text += "authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider\n"
        jvm_options.append(f"-Djava.security.auth.login.config={jaas}")
    cfg.write_text(text)
    log = run_dir / "zookeeper.log"
    cmd = [
        java,
        "-Xms64m",
        f"-Xmx{heap}",
        *jvm_options,
        "-cp",
        f"{ZOOKEEPER_CONF_DIR}:{ZOOKEEPER_JAR}",
        ZOOKEEPER_MAIN,
        str(cfg),
    ]
    proc = spawn(cmd, log)
    wait_ready(proc, lambda: zookeeper_ok(port), "ZooKeeper", log, timeout)
    return Service("zookeeper", proc.pid, port, f"127.0.0.1:{port}", str(log), str(cfg))


def start_broker(
    run_dir: Path, port: int = 0, timeout: float = 120.0, *, settings: KafkaSettings | None = None
) -> Service:
    """Start Apache Kafka (one KRaft node, :mod:`livectl.kafka_server`) on 127.0.0.1:``port`` with its
    durable log directory under ``run_dir``; stop it with :func:`stop_kafka` (or ``stop_process`` with a
    longer timeout) and start it again in the same ``run_dir`` to keep its topics."""
    return start_kafka(run_dir, port, settings=settings, timeout=timeout)
