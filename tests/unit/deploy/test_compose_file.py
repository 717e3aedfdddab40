"""``docker-compose.yml`` would start: checked without a Docker engine (none exists here).

* Debian's ``docker-compose`` accepts the file (``docker-compose config``, which validates it against the
  Compose schema and resolves anchors and merges);
* one image, built from the ``Dockerfile``, runs every livectl and Spark service (same Python, same
  dependencies, livectl installed from a wheel, not editable);
* the Spark checkpoint is a named volume mounted at the same place by every Spark service, and both
  controllers' ``--checkpoint-dir`` is on it;
* there is a standby controller, with its own controller id, on the same checkpoint, started after the
  active one is healthy;
* every service has a healthcheck; the livectl ones parse as real ``livectl`` commands (and the brokers'
  one demands a minimum count, so it can fail), the Spark ones are Python that compiles;
* the controllers' ``spark-submit`` lines point at the master's port, run the packaged ``streaming/main.py``
  with arguments ``streaming.driver.entry`` accepts, and ask for no more executor slots than the workers offer.

Running the livectl healthchecks against a real ZooKeeper (they fail below the count, pass at it) is in
``tests/integration/deploy/test_compose_healthchecks.py``.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from compose_file import COMPOSE, REPO, controller_parts, load, services

from livectl.cli import build_parser
from streaming.driver.entry import add_run_arguments
from streaming.driver.session import spark_defaults
from streaming.resources import SPARK_JAR

pytestmark = pytest.mark.unit

IMAGE = "livectl:0.1.0"
LIVECTL_SERVICES = {"spark-master", "spark-worker-1", "spark-worker-2", "controller", "controller-standby", "brokers"}
SPARK_SERVICES = {"spark-master", "spark-worker-1", "spark-worker-2", "controller", "controller-standby"}
CONTROLLERS = ("controller", "controller-standby")


def image_python() -> str:
    """``3.11`` from the Dockerfile's ``FROM python:3.11.x-…``."""
    m = re.search(r"^FROM python:(\d+\.\d+)", (REPO / "Dockerfile").read_text(), re.M)
    assert m, "the Dockerfile must start from an official python image"
    return m.group(1)


def site_packages() -> str:
    return f"/usr/local/lib/python{image_python()}/site-packages"


def confs(opts: dict[str, list[str]]) -> dict[str, str]:
    return dict(c.split("=", 1) for c in opts.get("--conf", []))


def test_docker_compose_config_accepts_the_file() -> None:
    exe = shutil.which("docker-compose")
    assert exe, "Debian's docker-compose is needed (scripts/setup installs it)"
    proc = subprocess.run(
        [exe, "-f", str(COMPOSE), "config"], capture_output=True, text=True, timeout=120, check=False, cwd=REPO
    )
    assert proc.returncode == 0, proc.stderr
    resolved = yaml.safe_load(proc.stdout)
    assert set(resolved["services"]) == set(services())
    # after Compose's own merge of the anchors: the shared volume is still on every Spark service
    for name in SPARK_SERVICES:
        assert any(str(v).startswith("checkpoints:/checkpoints") for v in resolved["services"][name]["volumes"]), name


def test_one_image_for_every_livectl_and_spark_service() -> None:
    svcs = services()
    assert set(svcs) >= LIVECTL_SERVICES | {"zookeeper", "kafka"}
    for name in LIVECTL_SERVICES:
        assert svcs[name]["image"] == IMAGE, name
        assert svcs[name]["build"] == ".", name
        assert svcs[name]["environment"]["PYSPARK_PYTHON"] == "/usr/local/bin/python3", name
    dockerfile = (REPO / "Dockerfile").read_text()
    assert "openjdk-17-jre-headless" in dockerfile  # Spark's JVM
    install = [ln for ln in dockerfile.splitlines() if "pip install" in ln]
    assert install and not any(" -e " in ln or "--editable" in ln for ln in install), install
    assert f"SPARK_HOME={site_packages()}/pyspark" in dockerfile
    ignored = (REPO / ".dockerignore").read_text().split()
    assert ".venv" in ignored and ".git" in ignored


def test_spark_services_run_the_wheels_spark_class() -> None:
    svcs = services()
    spark_class = f"{site_packages()}/pyspark/bin/spark-class"
    import pyspark

    assert (Path(pyspark.__file__).parent / "bin" / "spark-class").is_file()  # the wheel carries it
    master = svcs["spark-master"]
    assert master["entrypoint"] == [spark_class]
    assert master["command"][0] == "org.apache.spark.deploy.master.Master"
    port = master["command"][master["command"].index("--port") + 1]
    for name in ("spark-worker-1", "spark-worker-2"):
        w = svcs[name]
        assert w["entrypoint"] == [spark_class]
        assert w["command"][:2] == ["org.apache.spark.deploy.worker.Worker", f"spark://spark-master:{port}"]
        assert w["command"][w["command"].index("--host") + 1] == w["hostname"] == name
        assert w["depends_on"]["spark-master"]["condition"] == "service_healthy"


def test_checkpoint_volume_is_shared_by_every_spark_service() -> None:
    doc = load()
    assert "checkpoints" in doc["volumes"]
    svcs = doc["services"]
    for name in SPARK_SERVICES:
        assert "checkpoints:/checkpoints" in svcs[name]["volumes"], name
    dirs = set()
    for name in CONTROLLERS:
        _, _, args = controller_parts(svcs[name])
        ns = _run_parser().parse_args(args)
        assert ns.checkpoint_dir.startswith("/checkpoints/"), ns.checkpoint_dir
        dirs.add(ns.checkpoint_dir)
    assert len(dirs) == 1, "active and standby must share one checkpoint"


def test_kafka_is_the_tests_version_in_kraft_mode_on_a_durable_volume() -> None:
    """The compose bus is the Apache Kafka the tests and ``livectl local up`` run (``jvm/kafka/pom.xml``),
    in KRaft mode (never registered in the ZooKeeper tree livectl controls), its log directory a volume."""
    pom = (REPO / "jvm" / "kafka" / "pom.xml").read_text()
    version = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", pom)
    assert version is not None
    doc = load()
    kafka = doc["services"]["kafka"]
    assert kafka["image"] == f"apache/kafka:{version.group(1)}"
    env = kafka["environment"]
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller" and "KAFKA_ZOOKEEPER_CONNECT" not in env
    assert "kafka-data" in doc["volumes"] and f"kafka-data:{env['KAFKA_LOG_DIRS']}" in kafka["volumes"]


#: where the image keeps the archive of Spark's driver classes (streaming.runtime.class_archive)
DRIVER_ARCHIVE = "/opt/livectl/spark-driver.jsa"


def _run_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(exit_on_error=False)
    add_run_arguments(p)
    return p


def test_controllers_are_spark_submit_clients_of_the_cluster_with_a_standby() -> None:
    svcs = services()
    master_port = svcs["spark-master"]["command"][svcs["spark-master"]["command"].index("--port") + 1]
    worker_slots = sum(int(svcs[w]["environment"]["SPARK_WORKER_CORES"]) for w in ("spark-worker-1", "spark-worker-2"))
    ids = set()
    slots = 0
    for name in CONTROLLERS:
        svc = svcs[name]
        assert svc["entrypoint"] == ["spark-submit"]
        opts, app, args = controller_parts(svc)
        assert opts["--master"] == [f"spark://spark-master:{master_port}"]
        assert app == f"{site_packages()}/streaming/main.py"
        assert (REPO / "streaming" / "main.py").is_file()  # in the package the image installs
        # the Spark UI's figures job (streaming.monitoring.spark_ui) on the driver's class path and the executors'
        assert opts["--jars"] == [f"{site_packages()}/livectl_conf/{SPARK_JAR}"]
        # livectl's Spark defaults as Spark loads any (streaming.driver.session.submitted_session)
        assert opts["--properties-file"] == [f"{site_packages()}/livectl_conf/spark-defaults.conf"]
        assert (REPO / "conf" / "spark-defaults.conf").is_file()
        assert (REPO / "conf" / SPARK_JAR).is_file()
        # the driver maps the class-data-sharing archive the image made (its Dockerfile names the same file)
        assert opts["--driver-java-options"] == [f"-XX:SharedArchiveFile={DRIVER_ARCHIVE} -Xshare:auto"]
        assert f'ln -s "$(livectl class-archive)" {DRIVER_ARCHIVE}' in (REPO / "Dockerfile").read_text()
        ns = _run_parser().parse_args(args)
        assert ns.zookeeper == "zookeeper:2181" and ns.bootstrap_server == "kafka:9092"
        ids.add(ns.controller_id)
        conf = confs(opts)
        # executors connect back to the driver by its service's host name
        assert conf["spark.driver.host"] == svc["hostname"]
        # the file ships no Java options, and the compose file sets none (the JVM's own tiered compilation)
        assert "spark.driver.defaultJavaOptions" not in spark_defaults()
        assert "spark.driver.defaultJavaOptions" not in conf
        slots += int(conf["spark.cores.max"])
    assert len(ids) == 2, "the standby needs a controller id of its own"
    # the standby holds its executors while it waits: both applications fit on the workers at once
    assert slots <= worker_slots, (slots, worker_slots)
    assert {d for d, c in svcs["controller"]["depends_on"].items() if c["condition"] == "service_healthy"} == {
        "zookeeper",
        "kafka",
        "spark-worker-1",
        "spark-worker-2",
    }
    # started once the active controller is elected, so it comes up as the standby
    assert svcs["controller-standby"]["depends_on"]["controller"]["condition"] == "service_healthy"


def healthchecks() -> dict[str, list[str]]:
    out = {}
    for name, svc in services().items():
        test = svc.get("healthcheck", {}).get("test")
        assert test, f"service {name} has no healthcheck"
        out[name] = [str(x) for x in test]
    return out


def test_every_healthcheck_is_a_real_command() -> None:
    checks = healthchecks()
    parser = build_parser()
    livectl_checks = {n: t for n, t in checks.items() if t[:2] == ["CMD", "livectl"]}
    assert set(livectl_checks) == {"controller", "controller-standby", "brokers"}
    for name, test in livectl_checks.items():
        args = parser.parse_args(test[2:])  # argparse exits (a failed test) on anything livectl does not accept
        assert callable(args.func), name
        if name == "brokers":
            assert args.func.__name__ == "cmd_brokers_list"
            assert args.min == 5, "the brokers' healthcheck must fail below the five brokers"
        else:
            assert args.func.__name__ == "cmd_controller_status"  # exits 1 while nobody holds /controller
    for name in ("spark-master", "spark-worker-1", "spark-worker-2"):
        test = checks[name]
        assert test[:3] == ["CMD", "python3", "-c"], name
        compile(test[3], f"<healthcheck of {name}>", "exec")
        assert "sys.exit(0 if" in test[3] and "else 1)" in test[3], name
