"""The demo's processes: one simulated broker per process, process trees read from ``/proc``, and the
file descriptors the Spark JVM inherits."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from livectl.local import pid_matches

#: the checkout these packages live in (put on the broker processes' PYTHONPATH)
REPO_ROOT = Path(__file__).resolve().parent.parent.parent


def pid_alive(pid: int) -> bool:
    """Running and not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def process_stats() -> Iterator[tuple[int, list[str]]]:
    """``(pid, fields)`` of every process, ``fields`` its ``/proc/<pid>/stat`` after the command name: the
    state first (``Z`` a zombie), then the parent's PID and the process group. One gone meanwhile is left out."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields_ = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        yield int(entry.name), fields_


def children(pid: int) -> list[int]:
    """The live processes whose parent is ``pid`` (from ``/proc/*/stat``)."""
    return [p for p, fields_ in process_stats() if int(fields_[1]) == pid and fields_[0] != "Z"]


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (from ``/proc/*/stat``), depth first."""
    children: dict[int, list[int]] = {}
    for p, fields_ in process_stats():
        children.setdefault(int(fields_[1]), []).append(p)
    out: list[int] = []
    todo = list(children.get(pid, []))
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return [p for p in out if pid_alive(p)]


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


class BrokerHandle(Protocol):
    """One broker process of the demo, simulated (:class:`BrokerProcess`) or a Kafka JVM
    (:class:`livectl.demo.kafka.KafkaBroker`): what the steps and the teardown do with it."""

    broker_id: int

    @property
    def pid(self) -> int: ...

    @property
    def marker(self) -> str: ...

    @property
    def log_file(self) -> Path: ...

    def running(self) -> bool: ...

    def signal(self, signum: int) -> None:
        """Send ``signum`` if it still runs (checked by its command line)."""
        ...

    def wait(self, timeout: float) -> bool:
        """Until it has exited (at most ``timeout`` s); whether it has."""
        ...

    def exit_problem(self) -> str | None:
        """After it exited: why that was not a clean controlled shutdown (``None``: it was)."""
        ...

    def forget_status(self) -> None:
        """It is gone: its view no longer counts."""
        ...


@dataclass
class BrokerProcess:
    """One ``python -m simbrokers --brokers <id>`` process. ``marker`` (its status file path) is checked
    in ``/proc/<pid>/cmdline`` before any signal, so a recycled PID is never signalled."""

    broker_id: int
    proc: subprocess.Popen[bytes]
    status_file: Path
    log_path: Path
    started: float = field(default_factory=time.monotonic)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def marker(self) -> str:
        return str(self.status_file)

    @property
    def log_file(self) -> Path:
        return self.log_path

    def running(self) -> bool:
        return self.proc.poll() is None

    def signal(self, signum: int) -> None:
        if self.running() and pid_matches(self.pid, self.marker):
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)

    def wait(self, timeout: float) -> bool:
        """Until the process has exited (at most ``timeout`` s); whether it has."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout)
        return not self.running()

    def exit_problem(self) -> str | None:
        """Why its exit was not a clean controlled shutdown (``None``: it was): its exit code."""
        code = self.proc.poll()
        return None if code == 0 else f"broker {self.broker_id} exited with code {code}; see {self.log_file}"

    def forget_status(self) -> None:
        """Its status document goes (a broker that is gone has no view)."""
        self.status_file.unlink(missing_ok=True)


def start_broker_process(
    broker_id: int,
    *,
    zookeeper: str,
    bootstrap: str,
    topics: dict[str, str],
    brokers_dir: Path,
    session_timeout_ms: int,
    prefix: Sequence[str] = (),
    host: str = "127.0.0.1",
    extra_args: Sequence[str] = (),
) -> BrokerProcess:
    """Start simulated broker ``broker_id`` in its own process and session (Ctrl-C in the terminal reaches
    only the demo, which then stops the brokers itself). ``prefix`` goes before the command (the
    reliability tests run a broker in a network namespace of its own: ``ip netns exec NAME``); it must
    exec the command, so that the process started is the broker; ``host`` is the address the broker
    registers and serves fetches on (``--host``); ``extra_args`` are more ``python -m simbrokers`` options."""
    brokers_dir.mkdir(parents=True, exist_ok=True)
    status = (brokers_dir / f"broker-{broker_id}.json").resolve()
    status.unlink(missing_ok=True)  # a previous incarnation's view must not be mistaken for this one's
    log_file = brokers_dir / f"broker-{broker_id}.log"
    cmd = [
        *prefix,
        sys.executable,
        "-m",
        "simbrokers",
        "--brokers",
        str(broker_id),
        "--zookeeper",
        zookeeper,
        "--bootstrap-server",
        bootstrap,
        "--status-file",
        str(status),
        "--host",
        host,
        "--session-timeout-ms",
        str(session_timeout_ms),
        "--requests-topic",
        topics["requests"],
        "--events-topic",
        topics["events"],
        "--control-topic",
        topics["control"],
        *extra_args,
    ]
    env = dict(os.environ)
    # the packages of this checkout, whether or not livectl is installed in the interpreter
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    with log_file.open("ab") as out:
        out.write(f"\n--- {time.strftime('%H:%M:%S')} starting broker {broker_id}\n".encode())
        out.flush()
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, env=env
        )
    return BrokerProcess(broker_id, proc, status, log_file)


@contextlib.contextmanager
def output_to(path: Path) -> Iterator[None]:
    """Send this process's fd 1 and 2 to ``path`` meanwhile: the Spark JVM launched inside inherits them,
    so its log lines land in the file instead of the timeline. Python's own ``sys.stdout`` object is left
    alone (the timeline writes to a duplicate of the terminal taken before)."""
    try:
        fds = (sys.stdout.fileno(), sys.stderr.fileno())
    except (AttributeError, OSError, ValueError):  # not real files (captured): nothing to redirect
        yield
        return
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(fd) for fd in fds]
    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        for fd in fds:
            os.dup2(target, fd)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, old in zip(fds, saved, strict=True):
            os.dup2(old, fd)
            os.close(old)
        os.close(target)


def kinds(names: Iterable[str]) -> str:
    """``5 brokers, Spark JVM, 9 Spark workers, zookeeper, broker`` from process descriptions."""
    counts: dict[str, int] = {}
    for n in names:
        kind = "broker" if n.startswith("broker ") else "Spark worker" if n.startswith("Spark worker") else n
        counts[kind] = counts.get(kind, 0) + 1
    return ", ".join(f"{c} {k}s" if c > 1 else k for k, c in counts.items())
