"""A Spark standalone cluster started from the pyspark wheel's own ``bin/spark-class``, and the controller
submitted to it with ``bin/spark-submit`` — every piece a separate process, stopped by PID. The cluster test
(``tests/cluster/test_spark_cluster.py``) and ``python -m bench partitions``' ``worker-cut`` run it.

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
* :class:`EnvBuild`: that environment, built by the documented command (``livectl package-env``) in a
  process of its own while other things start.

Every process binds and advertises one address (``127.0.0.1`` unless told) and can run with a ``prefix``
(``ip netns exec NAME``, which execs the command: the PID started is the process's own), so that the
partition benchmark can put each worker and the driver on a network-namespace host of its own
(``bench/harness/netns.py``) and cut one link while every process keeps running; the executors a worker
launches inherit its address and namespace. ``jvm``: more options for every JVM (the tests give theirs).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyspark

from bench.harness.matrix import wait_until
from livectl import local
from livectl.demo.processes import cmdline, descendants, pid_alive, process_stats

SPARK_HOME = Path(pyspark.__file__).resolve().parent
SPARK_CLASS = SPARK_HOME / "bin" / "spark-class"
SPARK_SUBMIT = SPARK_HOME / "bin" / "spark-submit"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


def machine_env(home: Path, conf_dir: Path, address: str = "127.0.0.1", jvm: str = "") -> dict[str, str]:
    """The environment of a Spark machine whose address is ``address``: Java and ``SPARK_HOME``; nothing of
    this repository's venv. ``jvm``: more options for its JVMs."""
    venv_bin = str(Path(sys.executable).parent)
    path = os.pathsep.join(p for p in os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep) if p != venv_bin)
    # the machine's own temporary space (its "/tmp"): Spark's local dirs (block manager, the driver's copy of
    # --archives, ~0.6 GB each) and the JVMs' java.io.tmpdir (RocksDB's and lz4's native libraries) live in the
    # test's folder; a process killed with SIGKILL never deletes them, and in the shared /tmp they piled up
    # run after run until the disk, and the session's ZooKeeper on it, gave out
    scratch = home / "machine-tmp"
    scratch.mkdir(parents=True, exist_ok=True)
    jvm = f"-Djava.io.tmpdir={scratch} {jvm}".strip()
    env = {
        "PATH": path,
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TMPDIR": str(scratch),
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_CONF_DIR": str(conf_dir),
        "SPARK_LOCAL_IP": address,
        "SPARK_LOCAL_DIRS": str(scratch),
        "SPARK_SUBMIT_OPTS": jvm,
        "SPARK_DAEMON_JAVA_OPTS": jvm,
        # the daemons themselves need little; executors get spark.executor.memory
        "SPARK_DAEMON_MEMORY": "384m",
    }
    if "JAVA_HOME" in os.environ:
        env["JAVA_HOME"] = os.environ["JAVA_HOME"]
    return env


def group_members(pgid: int) -> list[int]:
    """Live processes of process group ``pgid`` (from ``/proc/*/stat``)."""
    return [p for p, fields_ in process_stats() if fields_[0] != "Z" and int(fields_[2]) == pgid]


@dataclass
class SparkProcess:
    """One process started here in a session of its own. ``marker`` is checked in its command line before
    it is signalled, so a recycled PID is never touched; its group (pgid = its PID) holds what it launched."""

    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    marker: str
    ports: dict[str, int] = field(default_factory=dict)
    #: the address it binds and advertises (its web UI's too)
    address: str = "127.0.0.1"

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
        own = [self.pid] if self.running() else []
        return sorted({*own, *descendants(self.pid), *self.members()})

    def kill_group(self) -> None:
        """SIGKILL the process and everything it started: a machine (or a driver) lost at once."""
        if self.running() and self.marker not in cmdline(self.pid):
            raise AssertionError(f"{self.name}: pid {self.pid} no longer runs {self.marker!r}; not signalling")
        pids = self.tree()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        wait_until(f"{self.name}'s processes to be gone", lambda: not any(pid_alive(p) for p in pids), timeout=30)

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM to the group, then SIGKILL to whatever of its tree is left after ``timeout``."""
        if self.running() and self.marker not in cmdline(self.pid):
            return
        pids = self.tree()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGTERM)

        def gone() -> bool:
            self.proc.poll()  # reaps the group leader once it exits
            return not any(pid_alive(p) for p in pids)

        deadline = time.monotonic() + timeout
        while not gone() and time.monotonic() < deadline:
            time.sleep(0.2)
        for pid in [*pids, *self.tree()]:
            if pid_alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        wait_until(f"{self.name}'s processes to be gone", lambda: not any(pid_alive(p) for p in pids), timeout=30)

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def _spawn(
    name: str, cmd: Sequence[str], cwd: Path, env: dict[str, str], marker: str, *, prefix: Sequence[str] = ()
) -> SparkProcess:
    cwd.mkdir(parents=True, exist_ok=True)
    log = cwd / f"{name}.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [*prefix, *cmd], cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
    return SparkProcess(name, proc, log, marker, address=env["SPARK_LOCAL_IP"])


def http_json(url: str, timeout: float = 5.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return json.loads(resp.read())


def try_json(url: str, timeout: float = 20.0) -> Any:
    """``url``'s JSON, or ``None`` when it does not answer within ``timeout``. With 5 s, the cluster test's
    wait for a driver's application id ran out on a loaded 2-core machine (load average ~14) while the
    driver was starting its query."""
    try:
        return http_json(url, timeout)
    except (OSError, ValueError):
        return None


@dataclass
class StandaloneCluster:
    master: SparkProcess
    workers: dict[str, SparkProcess]
    conf_dir: Path

    @property
    def url(self) -> str:
        return f"spark://{self.master.address}:{self.master.ports['port']}"

    def state(self) -> dict[str, Any]:
        """The master's own view (its web UI's ``/json/``): workers, applications."""
        doc = try_json(f"http://{self.master.address}:{self.master.ports['webui']}/json/")
        return doc if isinstance(doc, dict) else {}

    def alive_workers(self) -> int:
        return int(self.state().get("aliveworkers", 0))

    def apps(self) -> list[dict[str, Any]]:
        return list(self.state().get("activeapps") or [])

    def stop(self) -> None:
        for w in self.workers.values():
            w.stop()
        self.master.stop()


def start_master(
    run_dir: Path, conf_dir: Path, *, address: str = "127.0.0.1", prefix: Sequence[str] = (), jvm: str = ""
) -> SparkProcess:
    port, webui = local.free_port(), local.free_port()
    home = run_dir / "master"
    env = machine_env(home, conf_dir, address, jvm)
    # a worker that stops heart-beating is declared dead after 10 s (default 60): the test kills one. The
    # workers are given the same value (they heart-beat every timeout / 4)
    env["SPARK_MASTER_OPTS"] = "-Dspark.worker.timeout=10"
    cmd = [str(SPARK_CLASS), MASTER_CLASS, "--host", address, "--port", str(port), "--webui-port", str(webui)]
    p = _spawn("master", cmd, home, env, MASTER_CLASS, prefix=prefix)
    p.ports = {"port": port, "webui": webui}
    return p


def start_worker(
    run_dir: Path,
    conf_dir: Path,
    name: str,
    master_url: str,
    *,
    cores: int,
    memory: str,
    address: str = "127.0.0.1",
    prefix: Sequence[str] = (),
    jvm: str = "",
) -> SparkProcess:
    """A worker with its own folder (its working directory) and work dir ``<folder>/work``, where each
    executor gets ``<app id>/<executor id>/`` and unpacks ``spark.archives``. Its executors inherit its
    address (``SPARK_LOCAL_IP``) and, started with ``prefix``, its network namespace."""
    port, webui = local.free_port(), local.free_port()
    home = run_dir / name
    work = home / "work"
    work.mkdir(parents=True, exist_ok=True)
    cmd = [
        str(SPARK_CLASS), WORKER_CLASS, master_url, "--host", address, "--port", str(port),
        "--webui-port", str(webui), "--cores", str(cores), "--memory", memory, "--work-dir", str(work),
    ]  # fmt: skip
    env = machine_env(home, conf_dir, address, jvm)
    # the same timeout as the master's: a worker heart-beats every timeout / 4
    env["SPARK_WORKER_OPTS"] = "-Dspark.worker.timeout=10"
    p = _spawn(name, cmd, home, env, str(work), prefix=prefix)
    p.ports = {"port": port, "webui": webui}
    return p


def executor_dirs(worker: SparkProcess, app_id: str) -> dict[str, Path]:
    """Executor id -> its working directory, for the executors ``worker`` launched for ``app_id``."""
    app = worker.log.parent / "work" / app_id
    return {d.name: d for d in sorted(app.iterdir())} if app.is_dir() else {}


@dataclass(frozen=True)
class DriverSpec:
    """One controller under ``spark-submit``: ``args`` go to ``streaming/main.py``; ``conf``: more Spark
    properties (``--conf key=value``), the caller's own."""

    name: str
    controller_id: int
    args: tuple[str, ...]
    cores_max: int = 2
    executor_memory: str = "512m"
    driver_memory: str = "768m"
    conf: tuple[tuple[str, str], ...] = ()


#: the whole build of the packed environment, however busy the machine
ENV_BUILD_TIMEOUT_S = 900.0


class EnvBuild:
    """``livectl package-env --output <folder>/livectl-env.tar.gz`` running in a process of its own (about 1.5
    minutes, most of it one core's pip install): started, it runs beside whatever starts next;
    :meth:`archive` waits for it."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder if folder is not None else Path(tempfile.mkdtemp(prefix="livectl-env-"))
        self.folder.mkdir(parents=True, exist_ok=True)
        self.out = self.folder / "livectl-env.tar.gz"
        self.log = self.folder / "package-env.log"
        with self.log.open("w") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "livectl", "package-env", "--output", str(self.out), "--quiet"],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                text=True,
            )

    def archive(self, timeout: float = ENV_BUILD_TIMEOUT_S) -> Path:
        """The archive, once built; :class:`AssertionError` with the command's output when the build failed."""
        rc = self.proc.wait(timeout=timeout)
        printed = self.log.read_text(errors="replace")
        assert rc == 0, f"livectl package-env failed (exit {rc}):\n{printed}"
        assert self.out.is_file() and str(self.out) in printed, printed
        return self.out

    def discard(self) -> None:
        """Stop the build if it still runs and delete its folder."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        shutil.rmtree(self.folder, ignore_errors=True)


def unpack_env(env_archive: Path, into: Path) -> Path:
    """Unpack the packed environment as a driver machine does (``tar -xzf``); returns ``into``."""
    if not (into / "bin" / "python").exists():
        into.mkdir(parents=True, exist_ok=True)
        subprocess.run(["tar", "-xzf", str(env_archive), "-C", str(into)], check=True, timeout=300)
    return into


def start_driver(
    run_dir: Path,
    conf_dir: Path,
    cluster_url: str,
    env_archive: Path,
    spec: DriverSpec,
    *,
    address: str = "127.0.0.1",
    prefix: Sequence[str] = (),
    jvm: str = "",
) -> SparkProcess:
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
        "--conf", f"spark.executor.extraJavaOptions={f'-Djava.io.tmpdir=. {jvm}'.strip()}",
        "--conf", f"spark.driver.host={address}",
        "--conf", f"spark.driver.bindAddress={address}",
        "--conf", f"spark.ui.port={ui}",
        "--conf", f"spark.driver.port={rpc}",
        "--archives", f"{env_archive}#environment",
        "--conf", "spark.pyspark.python=./environment/bin/python",
        "--conf", "spark.pyspark.driver.python=./environment/bin/python",
        "--jars", str(ui_jar.relative_to(home)),
        *[arg for key, value in spec.conf for arg in ("--conf", f"{key}={value}")],
        str(main_py.relative_to(home)),
        "--controller-id", str(spec.controller_id),
        *spec.args,
    ]  # fmt: skip
    env = machine_env(home, conf_dir, address, jvm)
    p = _spawn(spec.name, cmd, home, env, f"livectl-{spec.name}", prefix=prefix)
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
    doc = try_json(f"http://{driver.address}:{driver.ports['ui']}/api/v1/applications")
    if isinstance(doc, list) and doc:
        return str(doc[0]["id"])
    return None


def api_url(driver: SparkProcess, app_id: str) -> str:
    """The driver's REST API for application ``app_id`` (``http://<address>:<ui>/api/v1/applications/<id>``)."""
    return f"http://{driver.address}:{driver.ports['ui']}/api/v1/applications/{app_id}"


def executors_of(driver: SparkProcess, app_id: str) -> list[dict[str, Any]]:
    """Every executor the driver has had (``allexecutors``: active and removed), without the driver."""
    doc = try_json(f"{api_url(driver, app_id)}/allexecutors")
    return [e for e in doc or [] if e.get("id") != "driver"]


def process_tree(worker: SparkProcess) -> dict[int, str]:
    """Every live process under ``worker`` (by parent PID) or in its process group, with its command line."""
    return {pid: cmdline(pid) for pid in worker.tree()}


def python_workers(worker: SparkProcess) -> list[tuple[int, str, str]]:
    """``(pid, command line, working directory)`` of the Python processes a worker's executors started."""
    out = []
    for pid in process_tree(worker):
        cmd = cmdline(pid)
        if "pyspark.daemon" in cmd or "pyspark.worker" in cmd:
            try:
                cwd = os.readlink(f"/proc/{pid}/cwd")
            except OSError:
                continue
            out.append((pid, cmd, cwd))
    return out
