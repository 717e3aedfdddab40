"""The package carries itself: a wheel built from the repository, installed into a fresh virtual
environment, runs the controller from ``/`` against the real ZooKeeper and broker until it answers a
command.

The wheel is built with ``pip wheel --no-deps`` from a copy of the sources the Dockerfile copies (so the
build leaves nothing in the work tree) and installed with ``--no-deps --no-index`` into a new venv. The
dependencies (PySpark alone is ~400 MB) are not installed again: a ``.pth`` file in the new venv lists the
test interpreter's site-packages *folder*. That folder's own ``.pth`` files — among them the editable
install's finder that maps ``streaming`` etc. to this work tree — are not processed from there (Python
handles ``.pth`` files only in site folders), so livectl itself can come only from the wheel; the test
checks that. The controller runs with an environment of its own: no ``PYSPARK_PYTHON``, no venv on the
``PATH`` (so a ``python3`` found there may lack pyarrow: the Python workers must run the driver's
interpreter), ``SPARK_LOCAL_IP=127.0.0.1`` (so the Spark UI address it prints must be the loopback one,
and must answer), and a ``file://`` checkpoint URI, written through ``pyarrow.fs``. A checkpoint URI
whose scheme livectl cannot open stops the installed ``livectl run`` with exit code 1 and one line naming
the URI and pyarrow's reason.

A newcomer's install is tried too, as the docs give it: ``python3 -m venv`` from the system's Python and a
plain ``pip install`` of the wheel (its dependencies from the package index, none of the extras). Each entry
point then either works or says in one line what is missing and how to get it: ``livectl --help``,
``livectl run --help``, the simulated brokers' ``--help``; ``livectl local up`` and ``livectl demo`` without
Apache Kafka's jars (``LIVECTL_KAFKA_LIBS``) start nothing; ``livectl package-env`` without the ``pack``
extra names it; and ``local up`` / ``down`` with ``LIVECTL_KAFKA_LIBS`` set run the real services.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import tomllib
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from waiting import wait_until

from bench.harness.sparkcluster import group_members
from livectl import local
from livectl.demo.processes import cmdline

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
#: what the wheel is built from (the Dockerfile copies the same)
#: what a wheel is built from: the packages pyproject.toml lists (their top folders) and conf/ (livectl_conf)
SOURCES = (
    "pyproject.toml",
    "README.md",
    "conf",
    *sorted(
        {
            p.split(".")[0]
            for p in tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
        }
        - {"livectl_conf"}
    ),
)


def _fresh_env(tmp: Path) -> dict[str, str]:
    venv_bin = str(Path(sys.executable).parent)
    path = os.pathsep.join(p for p in os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep) if p != venv_bin)
    env = {"PATH": path, "HOME": os.environ.get("HOME", str(tmp)), "TMPDIR": str(tmp), "SPARK_LOCAL_IP": "127.0.0.1"}
    # the JVM's temporary files beside the Python ones (a killed JVM leaves them; not in the shared /tmp)
    env["SPARK_LOCAL_DIRS"] = str(tmp)
    # no test JVM option here (tests/support/jvm_options.py): the installed controller's JVM is checked as shipped
    env["SPARK_SUBMIT_OPTS"] = f"-Djava.io.tmpdir={tmp}"
    if "JAVA_HOME" in os.environ:
        env["JAVA_HOME"] = os.environ["JAVA_HOME"]
    return env


def _build_wheel(work: Path) -> Path:
    """A wheel built from a copy of the sources (the work tree is left as it is)."""
    src = work / "src"
    src.mkdir()
    for name in SOURCES:
        item = REPO / name
        if item.is_dir():
            shutil.copytree(item, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(item, src / name)
    dist = work / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(src)],
        check=True,
        timeout=300,
    )
    (wheel,) = dist.glob("livectl-*.whl")
    return wheel


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with livectl installed from a wheel built here; returns its ``bin`` folder."""
    work = tmp_path_factory.mktemp("wheel")
    wheel = _build_wheel(work)
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index", str(wheel)],
        check=True,
        timeout=300,
    )
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # the dependencies: this interpreter's site-packages folder, after the venv's own
    (Path(purelib) / "zz-livectl-test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv / "bin"


def test_the_wheel_carries_its_configuration(installed: Path) -> None:
    probe = (
        "import json, streaming, livectl, streaming.resources as r, streaming.settings as s;"
        "print(json.dumps([streaming.__file__, livectl.__file__, str(r.conf_path(r.SPARK_DEFAULTS)),"
        " str(r.conf_path(r.INPUT_SUITE)), str(r.conf_path(r.ZOO_CFG_TEMPLATE)), s.Settings.load().query_name]))"
    )
    out = subprocess.run(
        [str(installed / "python"), "-c", probe],
        cwd="/",
        env=_fresh_env(installed.parent),
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    streaming_file, livectl_file, spark_defaults, suite, zoo_cfg, query = json.loads(out)
    venv = str(installed.parent)
    for path in (streaming_file, livectl_file, spark_defaults, suite, zoo_cfg):
        assert path.startswith(venv), f"{path} is not from the wheel's install in {venv}"
    assert query == "livectl"
    conf = subprocess.run(
        [str(installed / "livectl"), "conf", "path", "log4j2.properties"],
        cwd="/",
        env=_fresh_env(installed.parent),
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.strip()
    assert conf.startswith(venv) and Path(conf).is_file()


@contextlib.contextmanager
def _process(
    cmd: list[str], log: Path, env: dict[str, str], stop: signal.Signals = signal.SIGTERM
) -> Iterator[subprocess.Popen[bytes]]:
    """Started from ``/`` in a session of its own (its JVM and Python workers in its process group);
    ``stop`` at the end, then SIGKILL of the group if anything is left."""
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd="/", env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, stop)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(60)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)


def _wait_log(log: Path, pattern: str, proc: subprocess.Popen[bytes], timeout: float) -> re.Match[str]:
    def found() -> re.Match[str] | None:
        match = re.search(pattern, log.read_text(errors="replace"))
        assert match or proc.poll() is None, f"{pattern!r} not in {log} and the process ended (exit {proc.poll()})"
        return match

    return wait_until(
        f"{pattern!r} in {log}", found, timeout, interval=0.5, detail=lambda: log.read_text(errors="replace")[-3000:]
    )


def test_the_installed_controller_runs_from_root_and_answers(
    installed: Path, zookeeper: local.Service, kafka_broker: local.Service, tmp_path: Path
) -> None:
    name = f"w{uuid.uuid4().hex[:8]}"
    root = KazooClient(hosts=zookeeper.connect, timeout=10)
    root.start(timeout=10)
    root.ensure_path(f"/{name}")
    zk = f"{zookeeper.connect}/{name}"
    topics = {
        "admin_topic": f"{name}.admin",
        "broker_events_topic": f"{name}.broker-events",
        "requests_topic": f"{name}.requests",
        "admin_results_topic": f"{name}.admin-results",
        "rejected_topic": f"{name}.rejected",
    }
    checkpoint = tmp_path / "checkpoint"
    env = _fresh_env(tmp_path)
    metrics_port = local.free_port()
    controller = [
        str(installed / "livectl"),
        "run",
        "--zookeeper",
        zk,
        "--bootstrap-server",
        kafka_broker.bootstrap,
        "--checkpoint-dir",
        checkpoint.as_uri(),
        "--buckets",
        "2",
        "--master",
        "local[2]",
        "--set",
        f"query_name={name}",
        "--set",
        f"metrics_port={metrics_port}",
        "--set",
        "trigger_interval=500 milliseconds",
        "--set",
        "zookeeper_session_timeout_ms=6000",
        *[a for key, topic in topics.items() for a in ("--set", f"{key}={topic}")],
    ]
    brokers = [
        str(installed / "python"),
        "-m",
        "simbrokers",
        "--brokers",
        "1",
        "--zookeeper",
        zk,
        "--bootstrap-server",
        kafka_broker.bootstrap,
        "--requests-topic",
        topics["requests_topic"],
        "--events-topic",
        topics["broker_events_topic"],
        "--control-topic",
        f"{name}.control",
        "--topic-wait-s",
        "180",
    ]
    try:
        with (
            _process(controller, tmp_path / "controller.log", env) as ctl,
            # killed at the end, first: a controlled shutdown would wait for the stopped controller
            _process(brokers, tmp_path / "brokers.log", env, stop=signal.SIGKILL),
        ):
            ui = _wait_log(tmp_path / "controller.log", r"Spark UI: (http://\S+)", ctl, 180).group(1)
            # the address printed is the one the UI answers on: loopback, as Spark was bound to it
            assert ui.startswith("http://127.0.0.1:"), ui
            with urllib.request.urlopen(ui, timeout=30) as page:
                assert page.status == 200
            # the controller knows broker 1 — the simulated broker registers beside the controller's start, and
            # the snapshot (read as the query starts) may come before it: its status page lists the live
            # brokers as the buckets see them. A topic of replication factor 1 sent earlier is refused, as
            # Kafka's controller refuses one with no broker registered
            page = ""

            def knows_broker_1() -> bool:
                nonlocal page
                assert ctl.poll() is None, (tmp_path / "controller.log").read_text(errors="replace")[-4000:]
                with (
                    contextlib.suppress(OSError),
                    urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/", timeout=10) as r,
                ):
                    page = r.read().decode()
                return "live brokers [1]" in page

            wait_until(
                "the status page listing broker 1", knows_broker_1, 120, interval=0.5, detail=lambda: page[:2000]
            )
            assert "live brokers [1]" in page, page[:2000]
            create = subprocess.run(
                [
                    str(installed / "livectl"),
                    "topics",
                    "--create",
                    "--topic",
                    "orders",
                    "--partitions",
                    "2",
                    "--replication-factor",
                    "1",
                    "--zookeeper",
                    zk,
                    "--bootstrap-server",
                    kafka_broker.bootstrap,
                    "--admin-topic",
                    topics["admin_topic"],
                    "--admin-results-topic",
                    topics["admin_results_topic"],
                    "--wait",
                    "--timeout",
                    "120",
                ],
                cwd="/",
                env=env,
                capture_output=True,
                text=True,
                timeout=180,
                check=False,
            )
            log = (tmp_path / "controller.log").read_text(errors="replace")
            assert create.returncode == 0, f"{create.stdout}\n{create.stderr}\n--- controller:\n{log[-4000:]}"
            state, _ = root.get(f"/{name}/brokers/topics/orders/partitions/0/state")
            assert json.loads(state)["leader"] == 1
            # monitoring from the installed package: livectl's endpoint (prometheus_client is a dependency of
            # the wheel) with the topic just created, and Spark's own metrics the Spark way (the shipped
            # spark-defaults.conf: the PrometheusServlet sink on the driver), on the UI's port
            # the figures are taken once the batch's writes are done: the answer can come a moment before
            text = ""

            def counts_the_topic() -> bool:
                nonlocal text
                with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=30) as r:
                    text = r.read().decode()
                return "kafka_controller_kafkacontroller_globaltopiccount 1.0" in text

            wait_until("the metrics counting the topic", counts_the_topic, 60, interval=0.5, detail=lambda: text[:2000])
            assert "kafka_controller_kafkacontroller_activecontrollercount 1.0" in text, text[:2000]
            assert "kafka_controller_kafkacontroller_globaltopiccount 1.0" in text, text[:2000]
            with urllib.request.urlopen(f"{ui}/metrics/prometheus/", timeout=30) as r:
                spark_text = r.read().decode()
            assert "_driver_DAGScheduler_job_allJobs" in spark_text, spark_text[:2000]
            # the query's Structured Streaming figures (spark.sql.streaming.metricsEnabled)
            assert f"_driver_spark_streaming_{name}_inputRate_total_Value" in spark_text, spark_text[:3000]
            # the figures in the Stages tab: named accumulators of each batch's figures job (livectl run put the
            # wheel's livectl-spark.jar on spark.jars), through Spark's REST API
            figures: list[dict[str, str]] = []

            def figures_count_the_topic() -> bool:
                nonlocal figures
                with urllib.request.urlopen(f"{ui}/api/v1/applications", timeout=30) as r:
                    app_id = json.loads(r.read())[0]["id"]
                with urllib.request.urlopen(f"{ui}/api/v1/applications/{app_id}/stages", timeout=30) as r:
                    stages = json.loads(r.read())
                figures = [
                    {a["name"]: a["value"] for a in st["accumulatorUpdates"]}
                    for st in stages
                    if st["name"].startswith("livectl figures after batch ")
                ]
                return any(f.get("livectl.GlobalTopicCount") == "1" for f in figures)

            wait_until(
                "the figures in the Stages tab",
                figures_count_the_topic,
                60,
                interval=0.5,
                detail=lambda: str(figures[:3]),
            )
            assert any(f.get("livectl.GlobalTopicCount") == "1" for f in figures), figures[:3]
            assert all(f.get("livectl.ActiveControllerCount") == "1" for f in figures), figures[:3]
            # the Python workers ran (the bucket step): none failed to start or import
            assert "Python worker failed" not in log and "No module named" not in log
            # the driver's JVM took the shipped log4j2.properties (Spark at WARN from its first line on)
            assert " INFO SparkContext" not in log
            # and the shipped spark-defaults.conf's driver settings (spark.driver.memory 2g); the JIT is the
            # JVM's own (tiered, up to C2: nothing shipped stops it at C1)
            commands = [cmdline(pid).split() for pid in group_members(ctl.pid)]
            jvms = [cmd for cmd in commands if cmd and Path(cmd[0]).name == "java"]
            assert len(jvms) == 1, jvms
            assert "-Xmx2g" in jvms[0], jvms[0]
            assert not any(arg.startswith("-XX:TieredStopAtLevel") for arg in jvms[0]), jvms[0]
            os.kill(ctl.pid, signal.SIGTERM)
            assert ctl.wait(90) == 0, (tmp_path / "controller.log").read_text(errors="replace")[-3000:]
    finally:
        root.stop()
        root.close()
    # the checkpoint URI was written through pyarrow's file system for it, where the URI says
    assert json.loads((checkpoint / "livectl.json").read_text())["num_buckets"] == 2
    assert sorted(p.name for p in (checkpoint / "failover").glob("epoch-*/bucket-*.json")) == [
        "bucket-0.json",
        "bucket-1.json",
    ]


def test_a_checkpoint_uri_spark_cannot_open_is_refused_at_start(
    installed: Path, zookeeper: local.Service, kafka_broker: local.Service, tmp_path: Path
) -> None:
    done = subprocess.run(
        [
            str(installed / "livectl"),
            "run",
            "--zookeeper",
            zookeeper.connect,
            "--bootstrap-server",
            kafka_broker.bootstrap,
            "--checkpoint-dir",
            "nosuch://bucket/livectl",
            "--master",
            "local[1]",
            "--conf",
            "spark.ui.enabled=false",
        ],
        cwd="/",
        env=_fresh_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 1, done.stderr[-3000:]
    expected = (
        "livectl run: checkpoint nosuch://bucket/livectl: cannot open it: "
        "ArrowInvalid: Unrecognized filesystem type in URI: nosuch://bucket/livectl"
    )
    assert done.stderr.strip().splitlines()[-1] == expected, done.stderr[-3000:]
    assert "Traceback" not in done.stderr


#: the newcomer's Python: the system's, as the docs' ``python3 -m venv`` takes it
SYSTEM_PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else (shutil.which("python3") or "python3")


@pytest.fixture(scope="module")
def pip_installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A newcomer's install: a venv of the system's Python and ``pip install livectl-*.whl``, the dependencies
    from the package index, no extras. Returns its ``bin`` folder."""
    work = tmp_path_factory.mktemp("newcomer")
    wheel = _build_wheel(work)
    venv = work / "venv"
    subprocess.run([SYSTEM_PYTHON, "-m", "venv", str(venv)], check=True, timeout=120)
    subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", str(wheel)],
        check=True,
        timeout=1200,
    )
    return venv / "bin"


def _newcomer(
    bin_dir: Path, cwd: Path, *argv: str, timeout: float = 300, **extra: str
) -> subprocess.CompletedProcess[str]:
    """``argv`` run as a newcomer runs it: the venv's ``bin`` first on ``PATH``, from an empty folder, with
    no ``LIVECTL_*`` variable but those in ``extra``."""
    env = _fresh_env(cwd)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    env.update(extra)
    return subprocess.run(list(argv), cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def _running_under(folder: Path) -> list[str]:
    """Command lines of live processes that name ``folder`` (what a service started there would)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and str(folder) in (line := cmdline(int(entry.name))):
            found.append(line)
    return found


def test_a_newcomers_pip_install_shows_every_command(pip_installed: Path, tmp_path: Path) -> None:
    for argv in (
        ("livectl", "--help"),
        ("livectl", "run", "--help"),
        ("livectl", "demo", "--help"),
        ("livectl-simbrokers", "--help"),
        ("python", "-m", "simbrokers", "--help"),
    ):
        done = _newcomer(pip_installed, tmp_path, *argv, timeout=120)
        assert done.returncode == 0, f"{argv}: {done.stderr[-2000:]}"
        assert done.stdout.startswith("usage: "), (argv, done.stdout[:300])
    commands = _newcomer(pip_installed, tmp_path, "livectl", "--help").stdout
    for name in ("local", "run", "demo", "package-env", "topics", "controller"):
        assert re.search(rf"^    {name}\b", commands, flags=re.MULTILINE), commands


def test_a_newcomer_without_kafka_jars_is_told_in_one_line_and_nothing_runs(
    pip_installed: Path, tmp_path: Path
) -> None:
    """``local up`` and ``demo`` from a plain install: Apache Kafka's jars are not in the wheel; one line says
    to set ``LIVECTL_KAFKA_LIBS`` and to what, and neither leaves a process or a service record behind."""
    up = _newcomer(pip_installed, tmp_path, "livectl", "local", "up", timeout=120)
    assert up.returncode == 1, up.stdout + up.stderr
    assert up.stderr == (
        "livectl local up: Apache Kafka's jars are missing: set LIVECTL_KAFKA_LIBS to the libs/ folder of an "
        "Apache Kafka 3.9 distribution (https://kafka.apache.org/downloads)\n"
    )
    assert not (tmp_path / "run").exists()
    demo = _newcomer(pip_installed, tmp_path, "livectl", "demo", "--quiet", timeout=300)
    assert demo.returncode == 1, demo.stdout + demo.stderr
    assert "Traceback" not in demo.stdout + demo.stderr
    failed = [line for line in demo.stdout.splitlines() if "FAIL" in line]
    assert failed and all("set LIVECTL_KAFKA_LIBS to the libs/ folder" in line for line in failed), demo.stdout
    assert _running_under(tmp_path) == []


def test_a_newcomer_without_the_pack_extra_is_told_to_install_it(pip_installed: Path, tmp_path: Path) -> None:
    done = _newcomer(pip_installed, tmp_path, "livectl", "package-env", timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr == (
        "livectl package-env: venv-pack is not installed: pip install 'livectl[pack]' (or pip install venv-pack)\n"
    )


def test_a_newcomer_with_kafka_jars_runs_the_local_services(pip_installed: Path, tmp_path: Path) -> None:
    """``LIVECTL_KAFKA_LIBS`` set (here: to the jars ``scripts/setup`` resolved): ``local up`` starts ZooKeeper
    and Kafka from the plain install, ``status`` finds them answering, ``down`` stops both, by PID."""
    libs = {"LIVECTL_KAFKA_LIBS": str(REPO / ".cache" / "jvm" / "kafka")}
    try:
        up = _newcomer(pip_installed, tmp_path, "livectl", "local", "up", timeout=240, **libs)
        assert up.returncode == 0, up.stdout + up.stderr
        assert "Apache Kafka, KRaft" in up.stdout and "stop with:  livectl local down" in up.stdout
        status = _newcomer(pip_installed, tmp_path, "livectl", "local", "status", "--json", timeout=120, **libs)
        assert status.returncode == 0, status.stdout + status.stderr
        assert {name: s["state"] for name, s in json.loads(status.stdout).items()} == {
            "zookeeper": "running",
            "broker": "running",
        }
    finally:
        down = _newcomer(pip_installed, tmp_path, "livectl", "local", "down", timeout=120, **libs)
    assert down.returncode == 0 and down.stdout == "stopped: broker, zookeeper\n", down.stdout + down.stderr
    assert _running_under(tmp_path) == []
