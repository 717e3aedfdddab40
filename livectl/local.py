"""Real local services on loopback: ZooKeeper (Debian's package) and Apache Kafka (one KRaft node).

ZooKeeper is one standalone server by default, or an ensemble (``livectl local up --zookeeper-servers 3``):
each server its own process, ``zoo.cfg`` (the ``server.N`` lines) and ``myid``, recorded as ``zookeeper-N``;
the connect string lists them all (:attr:`LocalServices.zookeeper_connect`).

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
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from string import Template

from livectl.kafka_server import (
    KafkaSettings,
    Listener,
    ScramCredential,
    env_jvm_options,
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
from streaming.resources import ZOO_CFG_TEMPLATE, conf_file

__all__ = [
    "EnsembleServer",
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
    "missing_prerequisites",
    "pid_matches",
    "port_free",
    "restart_kafka",
    "spawn_zookeeper_server",
    "start_broker",
    "start_ensemble_servers",
    "start_kafka",
    "start_zookeeper",
    "start_zookeeper_ensemble",
    "start_zookeeper_server",
    "stop_kafka",
    "stop_process",
    "write_ensemble_configs",
    "zookeeper_config",
    "zookeeper_mode",
    "zookeeper_ok",
]

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
ZOOKEEPER_CONF_DIR = Path("/etc/zookeeper/conf")
ZOOKEEPER_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"
#: an ensemble's servers run ZooKeeper's quorum peer (the standalone main refuses ``server.N`` lines)
ZOOKEEPER_QUORUM_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
#: the most servers ``local up`` starts in one ensemble (each is a JVM on this machine)
MAX_ZOOKEEPER_SERVERS = 7


@dataclass
class LocalServices:
    """The services started in one run folder."""

    run_dir: Path
    services: dict[str, Service] = field(default_factory=dict)

    @property
    def zookeeper(self) -> Service | None:
        """The standalone ZooKeeper, or an ensemble's first server."""
        servers = self.zookeeper_servers
        return servers[0] if servers else None

    @property
    def zookeeper_servers(self) -> list[Service]:
        """Every recorded ZooKeeper server: ``zookeeper`` alone, or ``zookeeper-1`` … ``zookeeper-N``."""
        if "zookeeper" in self.services:
            return [self.services["zookeeper"]]
        names = sorted((n for n in self.services if _ENSEMBLE_NAME.fullmatch(n)), key=lambda n: int(n[10:]))
        return [self.services[n] for n in names]

    @property
    def zookeeper_connect(self) -> str:
        """The ZooKeeper connect string: every recorded server's address, comma-separated."""
        return ",".join(svc.address for svc in self.zookeeper_servers)

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
        zookeeper_servers: int = 1,
    ) -> None:
        """Start whatever is not already running (port 0 = the broker's last port if free, else a free
        one; ZooKeeper always takes a free one). ``kafka``: the broker's settings (listeners, security).

        ``zookeeper_servers``: 1 (a standalone server) or an ensemble of that many (odd, at most
        :data:`MAX_ZOOKEEPER_SERVERS`; ``zk_port`` must then be 0). An ensemble's stopped servers are started
        again with their recorded ``zoo.cfg``; asking for another shape than the one recorded is refused
        until ``down``."""
        if zookeeper_servers < 1 or zookeeper_servers > MAX_ZOOKEEPER_SERVERS or zookeeper_servers % 2 == 0:
            raise LocalServiceError(
                f"zookeeper_servers must be 1 or an odd count up to {MAX_ZOOKEEPER_SERVERS} "
                f"(a majority of an even ensemble tolerates no more failures), got {zookeeper_servers}"
            )
        if zookeeper_servers > 1 and zk_port:
            raise LocalServiceError("zk_port: an ensemble's servers take free ports; leave it 0")
        recorded = self.zookeeper_servers
        if recorded and len(recorded) != zookeeper_servers:
            raise LocalServiceError(
                f"zookeeper_servers: {len(recorded)} ZooKeeper server(s) recorded in {self.run_dir}, "
                f"{zookeeper_servers} asked; run `livectl local down` first"
            )
        br = self.broker
        zk = self.zookeeper
        zk_missing = (
            (zk is None or not zk.running())
            if zookeeper_servers == 1
            else not recorded or any(not svc.running() for svc in recorded)
        )
        # whatever is missing is said at once, in one line, before anything starts (nothing is left running)
        problems = missing_prerequisites(zookeeper=zk_missing, kafka=br is None or not br.running())
        if problems:
            raise LocalServiceError("; ".join(problems))
        if zookeeper_servers == 1:
            if zk is None or not zk.running():
                self.services["zookeeper"] = start_zookeeper(
                    self.run_dir / "zookeeper", zk_port or free_port(), timeout
                )
                self.save()
        elif not recorded:
            ensemble = start_zookeeper_ensemble(self.run_dir / "zookeeper-ensemble", zookeeper_servers, timeout)
            self.services.update({svc.name: svc for svc in ensemble})
            self.save()
        else:
            for svc in recorded:
                if not svc.running():
                    self.services[svc.name] = start_zookeeper_server(Path(svc.marker), timeout)
                    self.save()
        if br is None or not br.running():
            self.services["broker"] = start_kafka(
                self.run_dir / "broker", broker_port, settings=kafka, timeout=max(timeout, kafka_timeout)
            )
            self.save()

    def down(self) -> list[str]:
        """Stop the recorded services, by PID. Returns what was stopped."""
        stopped = []
        for name in ("broker", *(svc.name for svc in self.zookeeper_servers)):
            svc = self.services.get(name)
            if svc is not None and (stop_kafka(svc) if name == "broker" else stop_process(svc.pid, svc.marker)):
                stopped.append(name)
            self.services.pop(name, None)
        self.save()
        return stopped

    def status(self) -> dict[str, dict[str, object]]:
        """Each service's state; a ZooKeeper server's also its ``mode`` as its ``srvr`` answer says
        (``standalone``, ``leader``, ``follower``; ``None`` when it does not serve)."""
        out: dict[str, dict[str, object]] = {}
        names = [svc.name for svc in self.zookeeper_servers] or ["zookeeper"]
        for name in (*names, "broker"):
            svc = self.services.get(name)
            if svc is None:
                out[name] = {"state": "not started"}
                continue
            alive = svc.running()
            mode = zookeeper_mode(svc.port) if alive and name != "broker" else None
            healthy = alive and (mode is not None if name != "broker" else broker_ok(svc.address, timeout=3.0))
            out[name] = {
                "state": "running" if healthy else ("unhealthy" if alive else "stopped"),
                "pid": svc.pid,
                "address": svc.address,
                "log": svc.log,
                **({"mode": mode} if name != "broker" else {}),
                **({"data": svc.data_dir} if svc.data_dir else {}),
            }
        return out


# -------------------------------------------------------------------- helpers


def missing_prerequisites(*, zookeeper: bool, kafka: bool) -> list[str]:
    """What starting ZooKeeper (``zookeeper``) and the Kafka broker (``kafka``) needs and is not installed:
    Java, Debian's zookeeper package, Apache Kafka's jars; each one line saying how to get it."""
    problems: list[str] = []
    checks = ((zookeeper or kafka, find_java), (zookeeper, check_zookeeper_installed), (kafka, kafka_classpath))
    for needed, check in checks:
        if needed:
            try:
                check()
            except LocalServiceError as e:
                problems.append(str(e))
    return problems


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


def zookeeper_mode(port: int, timeout: float = 1.0, *, host: str = "127.0.0.1") -> str | None:
    """The server's role from ZooKeeper's four-letter ``srvr`` (whitelisted in ``zoo.cfg.template``):
    ``standalone``, ``leader`` or ``follower``; ``None`` when it is unreachable or not serving (an
    ensemble's server without a quorum answers that it is "not currently serving requests")."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(b"srvr")
            chunks = []
            while chunk := s.recv(4096):
                chunks.append(chunk)
    except OSError:
        return None
    m = re.search(r"^Mode: (\S+)", b"".join(chunks).decode(errors="replace"), re.MULTILINE)
    return m.group(1) if m else None


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
    text = zookeeper_config(data, port)
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
    proc = spawn(_zookeeper_command(java, heap, jvm_options, ZOOKEEPER_MAIN, cfg), log)
    wait_ready(proc, lambda: zookeeper_ok(port), "ZooKeeper", log, timeout)
    return Service("zookeeper", proc.pid, port, f"127.0.0.1:{port}", str(log), str(cfg))


def zookeeper_config(data_dir: Path, client_port: int, address: str = "127.0.0.1") -> str:
    """The shipped ``zoo.cfg`` template rendered: data in ``data_dir``, clients served on
    ``address:client_port`` (loopback unless a test host's address is given). Every ``zoo.cfg`` livectl
    writes starts with it."""
    template = Template(conf_file(ZOO_CFG_TEMPLATE).read_text())
    text = template.substitute(data_dir=str(data_dir), client_port=client_port)
    return text.replace("clientPortAddress=127.0.0.1", f"clientPortAddress={address}")


#: extra JVM options for every ZooKeeper server livectl starts, as ZooKeeper's own ``zkServer.sh`` reads them
ZOOKEEPER_OPTS_ENV = "SERVER_JVMFLAGS"


def _zookeeper_command(java: str, heap: str, jvm_options: list[str], main: str, cfg: Path) -> list[str]:
    return [
        java,
        "-Xms64m",
        f"-Xmx{heap}",
        *jvm_options,
        *env_jvm_options(ZOOKEEPER_OPTS_ENV),
        "-cp",
        f"{ZOOKEEPER_CONF_DIR}:{ZOOKEEPER_JAR}",
        main,
        str(cfg),
    ]


_ENSEMBLE_NAME = re.compile(r"zookeeper-[1-9][0-9]*")
#: what an ensemble server's ``zoo.cfg`` records beside the template (read back by a restart)
_SERVER_LINE = re.compile(r"^# livectl: server (\d+) heap (\S+) client port (\d+)$", re.MULTILINE)


@dataclass(frozen=True)
class EnsembleServer:
    """Where one ensemble server listens: clients on ``address:client_port``, the other servers on
    ``address:quorum_port`` (followers to the leader) and ``address:election_port``."""

    address: str
    client_port: int
    quorum_port: int
    election_port: int


def write_ensemble_configs(run_dir: Path, servers: Sequence[EnsembleServer], *, heap: str = "256m") -> list[Path]:
    """Each server's ``run_dir/server-N/zoo.cfg`` (the template, its ``server.N`` lines listing every server)
    and ``myid``, N from 1 in the order of ``servers``; the paths of the ``zoo.cfg`` files, for
    :func:`spawn_zookeeper_server`."""
    quorum = "".join(
        f"server.{n}={s.address}:{s.quorum_port}:{s.election_port}\n" for n, s in enumerate(servers, start=1)
    )
    configs = []
    for n, s in enumerate(servers, start=1):
        server_dir = run_dir / f"server-{n}"
        data = server_dir / "data"
        data.mkdir(parents=True, exist_ok=True)
        (data / "myid").write_text(f"{n}\n")
        cfg = server_dir / "zoo.cfg"
        text = zookeeper_config(data, s.client_port, s.address)
        cfg.write_text(f"{text}# livectl: server {n} heap {heap} client port {s.client_port}\n{quorum}")
        configs.append(cfg)
    return configs


def start_zookeeper_ensemble(
    run_dir: Path, servers: int = 3, timeout: float = 60.0, *, heap: str = "256m"
) -> list[Service]:
    """Start an ensemble of ``servers`` ZooKeeper servers (Debian's package, ZooKeeper's quorum peer) on
    loopback, each under ``run_dir/server-N`` with its ``myid`` and a ``zoo.cfg`` listing every server's
    ``server.N=127.0.0.1:<quorum port>:<election port>``; client, quorum and election ports are free
    ones. Returns the servers (``zookeeper-1`` …), each serving as leader or follower. On failure the
    servers started are stopped and :class:`LocalServiceError` says which one failed, with its log."""
    if servers < 1:
        raise LocalServiceError(f"servers must be at least 1, got {servers}")
    find_java()
    check_zookeeper_installed()
    ports: list[int] = []
    while len(ports) < 3 * servers:
        port = free_port()
        if port not in ports:
            ports.append(port)
    members = [EnsembleServer("127.0.0.1", *ports[3 * n : 3 * n + 3]) for n in range(servers)]
    return start_ensemble_servers(write_ensemble_configs(run_dir, members, heap=heap), timeout)


def start_ensemble_servers(
    configs: Sequence[Path], timeout: float = 60.0, prefixes: Sequence[Sequence[str]] = ()
) -> list[Service]:
    """Start a server from each of ``configs`` (:func:`write_ensemble_configs`), the i-th command after
    ``prefixes[i]`` if given (a test host's ``ip netns exec``), and wait until every one serves; on failure
    the ones started are stopped."""
    started: list[tuple[Service, subprocess.Popen[bytes]]] = []
    try:
        for i, cfg in enumerate(configs):
            started.append(spawn_zookeeper_server(cfg, prefixes[i] if prefixes else ()))
        for svc, proc in started:
            _wait_serving(svc, proc, timeout)
    except LocalServiceError:
        for svc, _ in started:
            stop_process(svc.pid, svc.marker)
        raise
    return [svc for svc, _ in started]


def start_zookeeper_server(cfg: Path, timeout: float = 60.0, prefix: Sequence[str] = ()) -> Service:
    """Start again one ensemble server from the ``zoo.cfg`` :func:`write_ensemble_configs` wrote for it
    (its recorded marker), after ``prefix`` if given; returns once it serves (as leader or follower: a
    majority must be up)."""
    svc, proc = spawn_zookeeper_server(cfg, prefix)
    try:
        _wait_serving(svc, proc, timeout)
    except LocalServiceError:
        stop_process(svc.pid, svc.marker)
        raise
    return svc


_CLIENT_ADDRESS = re.compile(r"^clientPortAddress=(\S+)$", re.MULTILINE)


def spawn_zookeeper_server(cfg: Path, prefix: Sequence[str] = ()) -> tuple[Service, subprocess.Popen[bytes]]:
    """Start (not wait for) the ensemble server of ``cfg``, its command after ``prefix``; its record
    (``zookeeper-N``, the address from ``clientPortAddress``) and process."""
    text = cfg.read_text() if cfg.exists() else ""
    m = _SERVER_LINE.search(text)
    if m is None:
        raise LocalServiceError(f"{cfg}: not a zoo.cfg written by `livectl local up --zookeeper-servers`")
    n, heap, port = int(m.group(1)), m.group(2), int(m.group(3))
    a = _CLIENT_ADDRESS.search(text)
    address = a.group(1) if a else "127.0.0.1"
    log = cfg.parent / "zookeeper.log"
    proc = spawn([*prefix, *_zookeeper_command(find_java(), heap, [], ZOOKEEPER_QUORUM_MAIN, cfg)], log)
    return Service(f"zookeeper-{n}", proc.pid, port, f"{address}:{port}", str(log), str(cfg)), proc


def _wait_serving(svc: Service, proc: subprocess.Popen[bytes], timeout: float) -> None:
    # the child's own exit status, not /proc's command line: until it execs Java that is still Python's
    host = svc.address.rsplit(":", 1)[0]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = Path(svc.log).read_text(errors="replace")[-2000:]
            raise LocalServiceError(
                f"ZooKeeper server {svc.name} exited with code {proc.returncode} while starting; log {svc.log}:\n{tail}"
            )
        if zookeeper_mode(svc.port, host=host) in ("leader", "follower"):
            return
        time.sleep(0.2)
    raise LocalServiceError(
        f"ZooKeeper server {svc.name} was not serving after {timeout:.0f} s (no quorum?); see {svc.log}"
    )


def start_broker(
    run_dir: Path, port: int = 0, timeout: float = 120.0, *, settings: KafkaSettings | None = None
) -> Service:
    """Start Apache Kafka (one KRaft node, :mod:`livectl.kafka_server`) on 127.0.0.1:``port`` with its
    durable log directory under ``run_dir``; stop it with :func:`stop_kafka` (or ``stop_process`` with a
    longer timeout) and start it again in the same ``run_dir`` to keep its topics."""
    return start_kafka(run_dir, port, settings=settings, timeout=timeout)
