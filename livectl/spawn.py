"""Local service processes: started in their own session with output to a log, stopped only by PID.

Shared by :mod:`livectl.local` (ZooKeeper, the record of ``livectl local up``) and
:mod:`livectl.kafka_server` (the Apache Kafka broker). A PID is signalled only while its ``/proc`` command
line still carries the marker recorded at start, so a recycled PID is never signalled.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "LocalServiceError",
    "Service",
    "find_java",
    "free_port",
    "logged_since",
    "pid_matches",
    "spawn",
    "stop_process",
    "wait_ready",
]


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
    #: every listener by name -> ``host:port`` (the Kafka broker: its client listeners and ``CONTROLLER``)
    listeners: dict[str, str] = field(default_factory=dict)
    #: where the service keeps its data across restarts ("" when it keeps none)
    data_dir: str = ""

    def running(self) -> bool:
        return pid_matches(self.pid, self.marker)

    @property
    def connect(self) -> str:
        """ZooKeeper connect string (for the ``zookeeper`` service)."""
        return self.address

    @property
    def bootstrap(self) -> str:
        """Kafka bootstrap servers (for the ``broker`` service): its first client listener."""
        return self.address

    def listener(self, name: str) -> str:
        """``host:port`` of the listener called ``name``; :class:`KeyError` naming the known ones otherwise."""
        try:
            return self.listeners[name]
        except KeyError:
            raise KeyError(f"{self.name} has no listener {name!r}; it has {sorted(self.listeners)}") from None


def free_port() -> int:
    """A port that was free on 127.0.0.1 a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def port_free(port: int) -> bool:
    """Whether 127.0.0.1:``port`` can be bound now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def find_java() -> str:
    java = shutil.which("java")
    if java is None:
        raise LocalServiceError(
            "Java is not installed; ZooKeeper and Kafka need a Java runtime. Install it with: "
            "sudo apt-get install -y default-jre-headless"
        )
    return java


def pid_matches(pid: int, marker: str) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
    # a zombie has an empty cmdline: treat it as gone
    return marker in cmdline


def spawn(cmd: list[str], log: Path) -> subprocess.Popen[bytes]:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        # own session: Ctrl-C in the terminal that ran `local up` does not reach the services
        return subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )


def wait_ready(proc: subprocess.Popen[bytes], check: Callable[[], bool], what: str, log: Path, timeout: float) -> None:
    """Poll ``check`` until it is true; on exit or timeout stop ``proc`` and raise with the log's tail."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise LocalServiceError(f"{what} exited with code {proc.returncode} while starting; log {log}:\n{tail}")
        if check():
            return
        time.sleep(0.1)
    stop_process(proc.pid, "")
    raise LocalServiceError(f"{what} was not ready after {timeout:.0f} s; see {log}")


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


def logged_since(log: Path, start: int, line: str) -> bool:
    """Whether ``line`` is in ``log`` after byte ``start`` (a service's readiness line written since its start; a
    log rotated since then is read from its beginning)."""
    try:
        with log.open("rb") as f:
            f.seek(start if log.stat().st_size >= start else 0)
            return line.encode() in f.read()
    except OSError:
        return False
