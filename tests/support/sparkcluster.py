"""A Spark standalone cluster on loopback, started from the pyspark wheel's own ``bin/spark-class``, and the
controller submitted to it with ``bin/spark-submit`` — every piece a separate process, stopped by PID.

* :func:`start_master` / :func:`start_worker`: ``org.apache.spark.deploy.master.Master`` and
  ``org.apache.spark.deploy.worker.Worker`` on ports chosen free at run time. Each runs in its own session
  (process group = its PID): the executors and Python workers a worker launches are in that group, so
  :meth:`SparkProcess.kill_group` is what losing the machine does. Workers run in folders of their own
  (outside the repository) with an environment a Spark machine would have: ``SPARK_HOME``, Java, and no
  virtual environment, ``PYTHONPATH`` or ``PYSPARK_*`` — executors find Python only in the archive.
* :func:`start_driver`: ``spark-submit --master spark://… environment/…/streaming/main.py …`` (client
  mode) from a folder holding the packed environment unpacked as ``environment``; executors get the same
  environment with ``--archives <env>#environment``; ``spark.pyspark.python`` and
  ``spark.pyspark.driver.python`` are both ``./environment/bin/python``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyspark
from jvm_options import SHORT_LIVED_JIT
from waiting import poll_until, wait_until

from livectl import local

REPO = Path(__file__).resolve().parents[2]
SPARK_HOME = Path(pyspark.__file__).resolve().parent
SPARK_CLASS = SPARK_HOME / "bin" / "spark-class"
SPARK_SUBMIT = SPARK_HOME / "bin" / "spark-submit"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


def machine_env(home: Path, conf_dir: Path) -> dict[str, str]:
    """The environment of a Spark machine: Java and ``SPARK_HOME``; nothing of this repository's venv."""
    venv_bin = str(Path(sys.executable).parent)
    path = os.pathsep.join(p for p in os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep) if p != venv_bin)
    # the machine's own temporary space (its "/tmp"): Spark's local dirs (block manager, the driver's copy of
    # --archives, ~0.6 GB each) and the JVMs' java.io.tmpdir (RocksDB's and lz4's native libraries) live in the
    # test's folder; a process killed with SIGKILL never deletes them, and in the shared /tmp they piled up
    # run after run until the disk, and the session's ZooKeeper on it, gave out
    scratch = home / "machine-tmp"
    scratch.mkdir(parents=True, exist_ok=True)
    jvm = f"-Djava.io.tmpdir={scratch} {SHORT_LIVED_JIT}"
    env = {
        "PATH": path,
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TMPDIR": str(scratch),
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_CONF_DIR": str(conf_dir),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOCAL_DIRS": str(scratch),
        "SPARK_SUBMIT_OPTS": jvm,
        "SPARK_DAEMON_JAVA_OPTS": jvm,
        # the daemons themselves need little; executors get spark.executor.memory
        "SPARK_DAEMON_MEMORY": "384m",
    }
    if "JAVA_HOME" in os.environ:
        env["JAVA_HOME"] = os.environ["JAVA_HOME"]
    return env


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    """Running and not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def group_members(pgid: int) -> list[int]:
    """Live processes of process group ``pgid`` (from ``/proc/*/stat``)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields_ = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields_[0] != "Z" and int(fields_[2]) == pgid:
            out.append(int(entry.name))
    return out


@dataclass
class SparkProcess:
    """One process started here in a session of its own. ``marker`` is checked in its command line before
    it is signalled, so a recycled PID is never touched; its group (pgid = its PID) holds what it launched."""

    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    marker: str
    ports: dict[str, int] = field(default_factory=dict)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def running(self) -> bool:
        return self.proc.poll() is None

    def members(self) -> list[int]:
        return group_members(self.pid)

    def tree(self) -> list[int]:
        """This process, what it started (by parent PID: Spark's Python daemons lead process groups of their
        own) and its process group."""
        from livectl.demo import descendants

        own = [self.pid] if self.running() else []
        return sorted({*own, *descendants(self.pid), *self.members()})

    def kill_group(self) -> None:
        """SIGKILL the process and everything it started: a machine (or a driver) lost at once."""
        if self.running() and self.marker not in _cmdline(self.pid):
            raise AssertionError(f"{self.name}: pid {self.pid} no longer runs {self.marker!r}; not signalling")
        pids = self.tree()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        wait_until(f"{self.name}'s processes to be gone", lambda: not any(_alive(p) for p in pids), timeout=30)

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM to the group, then SIGKILL to whatever of its tree is left after ``timeout``."""
        if self.running() and self.marker not in _cmdline(self.pid):
            return
        pids = self.tree()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGTERM)

        def gone() -> bool:
            self.proc.poll()  # reaps the group leader once it exits
            return not any(_alive(p) for p in pids)

        poll_until(gone, timeout, interval=0.2)
        for pid in [*pids, *self.tree()]:
            if _alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        wait_until(f"{self.name}'s processes to be gone", lambda: not any(_alive(p) for p in pids), timeout=30)

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def _spawn(name: str, cmd: Sequence[str], cwd: Path, env: dict[str, str], marker: str) -> SparkProcess:
    cwd.mkdir(parents=True, exist_ok=True)
    log = cwd / f"{name}.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            list(cmd), cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
    return SparkProcess(name, proc, log, marker)


def http_json(url: str, timeout: float = 5.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return json.loads(resp.read())


def try_json(url: str) -> Any:
    try:
        return http_json(url)
    except (OSError, ValueError):
        return None


@dataclass
class StandaloneCluster:
    master: SparkProcess
    workers: dict[str, SparkProcess]
    conf_dir: Path

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.master.ports['port']}"

    def state(self) -> dict[str, Any]:
        """The master's own view (its web UI's ``/json/``): workers, applications."""
        doc = try_json(f"http://127.0.0.1:{self.master.ports['webui']}/json/")
        return doc if isinstance(doc, dict) else {}

    def alive_workers(self) -> int:
        return int(self.state().get("aliveworkers", 0))

    def apps(self) -> list[dict[str, Any]]:
        return list(self.state().get("activeapps") or [])

    def stop(self) -> None:
        for w in self.workers.values():
            w.stop()
        self.master.stop()


def start_master(run_dir: Path, conf_dir: Path) -> SparkProcess:
    port, webui = local.free_port(), local.free_port()
    home = run_dir / "master"
    env = machine_env(home, conf_dir)
    # a worker that stops heart-beating is declared dead after 10 s (default 60): the test kills one. The
    # workers are given the same value (they heart-beat every timeout / 4)
    env["SPARK_MASTER_OPTS"] = "-Dspark.worker.timeout=10"
    cmd = [str(SPARK_CLASS), MASTER_CLASS, "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(webui)]
    p = _spawn("master", cmd, home, env, MASTER_CLASS)
    p.ports = {"port": port, "webui": webui}
    return p


def start_worker(run_dir: Path, conf_dir: Path, name: str, master_url: str, *, cores: int, memory: str) -> SparkProcess:
    """A worker with its own folder (its working directory) and work dir ``<folder>/work``, where each
    executor gets ``<app id>/<executor id>/`` and unpacks ``spark.archives``."""
    port, webui = local.free_port(), local.free_port()
    home = run_dir / name
    work = home / "work"
    work.mkdir(parents=True, exist_ok=True)
    cmd = [
        str(SPARK_CLASS), WORKER_CLASS, master_url, "--host", "127.0.0.1", "--port", str(port),
        "--webui-port", str(webui), "--cores", str(cores), "--memory", memory, "--work-dir", str(work),
    ]  # fmt: skip
    env = machine_env(home, conf_dir)
    # the same timeout as the master's: a worker heart-beats every timeout / 4
    env["SPARK_WORKER_OPTS"] = "-Dspark.worker.timeout=10"
    p = _spawn(name, cmd, home, env, str(work))
    p.ports = {"port": port, "webui": webui}
    return p


def executor_dirs(worker: SparkProcess, app_id: str) -> dict[str, Path]:
    """Executor id -> its working directory, for the executors ``worker`` launched for ``app_id``."""
    app = worker.log.parent / "work" / app_id
    return {d.name: d for d in sorted(app.iterdir())} if app.is_dir() else {}


@dataclass(frozen=True)
class DriverSpec:
    """One controller under ``spark-submit``: ``args`` go to ``streaming/main.py``."""

    name: str
    controller_id: int
    args: tuple[str, ...]
    cores_max: int = 2
    executor_memory: str = "512m"
    driver_memory: str = "768m"


def unpack_env(env_archive: Path, into: Path) -> Path:
    """Unpack the packed environment as a driver machine does (``tar -xzf``); returns ``into``."""
    if not (into / "bin" / "python").exists():
        into.mkdir(parents=True, exist_ok=True)
        subprocess.run(["tar", "-xzf", str(env_archive), "-C", str(into)], check=True, timeout=300)
    return into


def start_driver(run_dir: Path, conf_dir: Path, cluster_url: str, env_archive: Path, spec: DriverSpec) -> SparkProcess:
    """``spark-submit`` in client mode, in its own folder and session; the driver's UI on a free port.

    The driver machine has the same environment unpacked as ``./environment`` in the driver's working
    directory, and runs the driver from it: the driver JVM itself starts Python processes with
    ``spark.pyspark.python`` (the Python data source's planning runs beside the driver), so that relative
    path must resolve there as it does in every executor's working directory. ``streaming/main.py`` is the
    one installed in the environment (livectl from its wheel, not this checkout)."""
    # the driver's RPC port is chosen too: left to the OS, it can be the very port just found free for the
    # UI, which then moves to the next one and the REST API calls below reach the RPC server instead
    ui = local.free_port()
    rpc = local.free_port()
    while rpc == ui:
        rpc = local.free_port()
    home = run_dir / spec.name
    home.mkdir(parents=True, exist_ok=True)
    shared = unpack_env(env_archive, run_dir / "driver-environment")
    (home / "environment").symlink_to(shared, target_is_directory=True)
    (main_py,) = (home / "environment").glob("lib/python3.*/site-packages/streaming/main.py")
    # the Spark UI's figures job (streaming.monitoring.spark_ui), shipped in the package: driver and executors
    (ui_jar,) = (home / "environment").glob("lib/python3.*/site-packages/livectl_conf/jars/livectl-spark.jar")
    (defaults,) = (home / "environment").glob("lib/python3.*/site-packages/livectl_conf/spark-defaults.conf")
    cmd = [
        str(SPARK_SUBMIT),
        "--master", cluster_url,
        "--deploy-mode", "client",
        "--name", f"livectl-{spec.name}",
        "--properties-file", str(defaults.relative_to(home)),
        "--driver-memory", spec.driver_memory,
        "--conf", f"spark.cores.max={spec.cores_max}",
        "--conf", "spark.executor.cores=1",
        "--conf", f"spark.executor.memory={spec.executor_memory}",
        # an executor's temporary files in its own working directory (under its worker's folder), not /tmp
        "--conf", f"spark.executor.extraJavaOptions=-Djava.io.tmpdir=. {SHORT_LIVED_JIT}",
        "--conf", "spark.driver.host=127.0.0.1",
        "--conf", "spark.driver.bindAddress=127.0.0.1",
        "--conf", f"spark.ui.port={ui}",
        "--conf", f"spark.driver.port={rpc}",
        "--archives", f"{env_archive}#environment",
        "--conf", "spark.pyspark.python=./environment/bin/python",
        "--conf", "spark.pyspark.driver.python=./environment/bin/python",
        "--jars", str(ui_jar.relative_to(home)),
        str(main_py.relative_to(home)),
        "--controller-id", str(spec.controller_id),
        *spec.args,
    ]  # fmt: skip
    p = _spawn(spec.name, cmd, home, machine_env(home, conf_dir), f"livectl-{spec.name}")
    p.ports = {"ui": ui}
    return p


def discard_copies(run_dir: Path) -> None:
    """Delete what the cluster's processes copied and unpacked under ``run_dir`` (the driver machine's
    environment, each executor's unpacked ``--archives`` and jars, every machine's temporary space: several
    GB in all), keeping every log (the daemons' and drivers' logs, each executor's ``stdout`` and
    ``stderr``). Call it once the processes are stopped."""
    shutil.rmtree(run_dir / "driver-environment", ignore_errors=True)
    for scratch in run_dir.glob("*/machine-tmp"):
        shutil.rmtree(scratch, ignore_errors=True)
    for executor in run_dir.glob("*/work/*/*"):
        if not executor.is_dir():
            continue
        for item in executor.iterdir():
            if item.name in ("stdout", "stderr"):
                continue
            if item.is_dir() and not item.is_symlink():
                shutil.rmtree(item, ignore_errors=True)
            else:
                item.unlink(missing_ok=True)


def app_id_of(driver: SparkProcess) -> str | None:
    """The application id, from the driver's own REST API (``/api/v1/applications``)."""
    doc = try_json(f"http://127.0.0.1:{driver.ports['ui']}/api/v1/applications")
    if isinstance(doc, list) and doc:
        return str(doc[0]["id"])
    return None


def executors_of(driver: SparkProcess, app_id: str) -> list[dict[str, Any]]:
    """Every executor the driver has had (``allexecutors``: active and removed), without the driver."""
    doc = try_json(f"http://127.0.0.1:{driver.ports['ui']}/api/v1/applications/{app_id}/allexecutors")
    return [e for e in doc or [] if e.get("id") != "driver"]


def process_tree(worker: SparkProcess) -> dict[int, str]:
    """Every live process under ``worker`` (by parent PID) or in its process group, with its command line."""
    return {pid: _cmdline(pid) for pid in worker.tree()}


def python_workers(worker: SparkProcess) -> list[tuple[int, str, str]]:
    """``(pid, command line, working directory)`` of the Python processes a worker's executors started."""
    out = []
    for pid in process_tree(worker):
        cmd = _cmdline(pid)
        if "pyspark.daemon" in cmd or "pyspark.worker" in cmd:
            try:
                cwd = os.readlink(f"/proc/{pid}/cwd")
            except OSError:
                continue
            out.append((pid, cmd, cwd))
    return out
