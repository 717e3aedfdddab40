"""Shared fixtures: real services on free loopback ports, and one SparkSession per test session.

``zookeeper`` and ``kafka_broker`` start the real services through :mod:`livectl.local` the first time a
test asks for them, on ports chosen at run time, and stop them by PID when the session ends. Each is
started at most once per test session.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from jvm_options import SHORT_LIVED_JIT, SHORT_LIVED_SERVER

# The test tree mirrors the source tree (tests/<tier>/core/, .../streaming/, ...), and pytest puts the folder of
# each conftest.py on sys.path: with the editable install, a later ``import streaming`` could then resolve to a
# namespace package made of test folders. Importing every product package here, in the first conftest pytest
# loads, fixes each name to the real package before any test folder is on sys.path.
import admin
import channel
import core
import livectl
import simbrokers
import sinks
import streaming
from livectl import local
from streaming.resources import SPARK_JAR, conf_path
from streaming.source.query_source import connector_jars

if TYPE_CHECKING:
    from kafka_secure import SecureKafka

_PRODUCT_PACKAGES = (admin, channel, core, livectl, simbrokers, sinks, streaming)

# Every JVM the tests start (the shared SparkSession, each `livectl run` and `spark-submit` subprocess) keeps
# its temporary files here instead of /tmp: Spark's local dirs (block manager, copies of --archives) and
# java.io.tmpdir (RocksDB's and lz4's native libraries). A JVM killed with SIGKILL, as the failover tests do,
# never deletes them; in the shared /tmp they piled up run after run until the disk was full and the session's
# ZooKeeper died writing its log. The folder goes at the end of the session.
_JVM_SCRATCH = Path(tempfile.mkdtemp(prefix="livectl-test-jvm-"))
os.environ["SPARK_LOCAL_DIRS"] = str(_JVM_SCRATCH)
os.environ["SPARK_SUBMIT_OPTS"] = " ".join(
    filter(None, (os.environ.get("SPARK_SUBMIT_OPTS"), f"-Djava.io.tmpdir={_JVM_SCRATCH}", SHORT_LIVED_JIT))
)
# the Kafka and ZooKeeper servers (and Kafka's tools) the tests start read them as Kafka's and ZooKeeper's scripts do
for _name in ("KAFKA_OPTS", "SERVER_JVMFLAGS"):
    os.environ[_name] = " ".join(filter(None, (os.environ.get(_name), SHORT_LIVED_SERVER)))

#: the session's own services, by name, once started (for the diagnosis of a test that failed)
_SESSION_SERVICES: dict[str, local.Service] = {}


#: the test tiers (pyproject.toml's markers) in the order a session runs them
_TIERS = ("unit", "integration", "spark", "e2e", "cluster")


def _tier(item: pytest.Item) -> int:
    marked = [i for i, name in enumerate(_TIERS) if item.get_closest_marker(name) is not None]
    return max(marked, default=0)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tiers run fastest first — unit, integration, spark, e2e, cluster — each keeping its own order: a
    broken build is said in seconds, and the packed environment the ``cluster`` tests need builds in the
    background meanwhile (``tests/cluster/conftest.py``), beside the unit tests' one busy core.

    With ``--cov`` (CI's core coverage gate), coverage is measured over the unit tests only: ``core`` is pure
    and its unit tests cover 99 % of it alone, while the tracer made every other test that runs core in
    process (the integration and Spark tests' drivers) pay for lines already counted — ~1.5 minutes of CI."""
    items.sort(key=_tier)  # stable: within a tier, the collection's order
    if getattr(config.option, "cov_source", None):
        for item in items:
            if item.get_closest_marker("unit") is None:
                item.add_marker(pytest.mark.no_cover)


def pytest_collection_finish(session: pytest.Session) -> None:
    """A session that starts Spark JVMs (the spark tier and above) gives them Spark's classes already parsed:
    the product's class-data-sharing archive (:mod:`streaming.runtime.class_archive`, ``.cache/jvm/spark-cds``
    in the checkout), made first when missing (about 45 s, once; a failure is not tried again for an hour)."""
    if any(_tier(item) >= _TIERS.index("spark") for item in session.items):
        from streaming.runtime import class_archive

        try:
            archive = class_archive.ensure(class_archive.default_folder(), retry_after_s=class_archive.FAILED_KEPT_S)
        except class_archive.ClassArchiveError as e:
            print(f"\nno class-data-sharing archive for the Spark JVMs: {e}", file=sys.stderr)
            return
        os.environ["SPARK_SUBMIT_OPTS"] += " " + class_archive.java_options(archive)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not os.environ.get("LIVECTL_KEEP_TEST_DIRS"):
        shutil.rmtree(_JVM_SCRATCH, ignore_errors=True)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failed test whose session ZooKeeper or broker is gone says so, with the service's log tail and the
    free disk space: otherwise every later test fails with only a connection error."""
    report: pytest.TestReport = yield
    if report.failed:
        gone = [svc for svc in _SESSION_SERVICES.values() if not local.pid_matches(svc.pid, svc.marker)]
        for svc in gone:
            free = shutil.disk_usage(Path(svc.log).parent).free / 2**30
            try:
                tail = Path(svc.log).read_text(errors="replace")[-3000:]
            except OSError as exc:
                tail = f"(log unreadable: {exc})"
            report.sections.append(
                (
                    f"the session's {svc.name} (pid {svc.pid}, {svc.address}) is no longer running",
                    f"free disk space where it wrote: {free:.1f} GiB\nlast lines of {svc.log}:\n{tail}",
                )
            )
    return report


@pytest.fixture(scope="session")
def services_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="livectl-test-"))
    yield path
    if not os.environ.get("LIVECTL_KEEP_TEST_DIRS"):
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def zookeeper(services_dir: Path) -> Iterator[local.Service]:
    """A real ZooKeeper (Debian's package); ``.connect`` is ``127.0.0.1:PORT``."""
    svc = local.start_zookeeper(services_dir / "zookeeper", local.free_port())
    _SESSION_SERVICES[svc.name] = svc
    try:
        yield svc
    finally:
        _SESSION_SERVICES.pop(svc.name, None)
        local.stop_process(svc.pid, svc.marker)


@pytest.fixture()
def private_zookeeper(tmp_path: Path) -> Iterator[local.Service]:
    """A ZooKeeper of the test's own, which it may stop (the session's is shared)."""
    svc = local.start_zookeeper(tmp_path / "zookeeper", local.free_port(), heap="128m")
    try:
        yield svc
    finally:
        local.stop_process(svc.pid, svc.marker)


@pytest.fixture(scope="module")
def zookeeper_ensemble(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A real ZooKeeper ensemble of three (:class:`zk_ensemble.Ensemble`; ``.connect`` lists the servers),
    for the tests of one module: a test that kills or stops a server calls ``heal()`` when it is done."""
    from zk_ensemble import running_ensemble

    with running_ensemble(tmp_path_factory.mktemp("zookeeper-ensemble")) as ensemble:
        yield ensemble


@pytest.fixture(scope="session")
def kafka_broker(services_dir: Path) -> Iterator[local.Service]:
    """Apache Kafka (one KRaft node, the jars scripts/setup resolves); ``.bootstrap`` is ``127.0.0.1:PORT``."""
    svc = local.start_kafka(services_dir / "broker")
    _SESSION_SERVICES[svc.name] = svc
    try:
        yield svc
    finally:
        _SESSION_SERVICES.pop(svc.name, None)
        local.stop_kafka(svc)


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One local SparkSession for the whole test session (start-up costs ~25 s here)."""
    from pyspark.sql import SparkSession

    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    # Python workers must run this venv's interpreter (the one that has pyspark, pandas, livectl), as
    # livectl run gives it to Spark
    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2]")
        .appName("livectl-tests")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config(
            "spark.sql.streaming.stateStore.providerClass",
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
        )
        # as shipped in spark-defaults.conf: each commit writes a changelog, not a whole snapshot
        .config("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        # as shipped: Python workers forked by livectl's daemon (streaming.warm.worker_daemon)
        .config("spark.python.daemon.module", "streaming.warm.worker_daemon")
        .config("spark.driver.memory", "2g")
        # as livectl run: the Spark UI's per-batch figures job (streaming.monitoring.spark_ui), and Spark's Kafka
        # connector when scripts/setup resolved it (a test of query_source=kafka needs it; the others read with the
        # Python source, as the query does when the choice was not resolved: streaming.query.pipeline.run_source)
        .config("spark.jars", ",".join([str(conf_path(SPARK_JAR)), *connector_jars("")]))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("WARN")
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def secure_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureKafka]:
    """Apache Kafka enforcing SASL_SSL (SCRAM-SHA-512), mutual TLS and ACLs (:mod:`kafka_secure`), with the
    users and certificates of ``controller``, ``broker-1``, ``alice`` (an admin; her key is encrypted) and
    ``mallory`` (an outsider), and livectl's ACL set for them applied (``livectl acls --apply``'s own call,
    as the bootstrap super user), with the consumer groups of Spark's Kafka source for the controller (the
    Spark test reads with it)."""
    from kafka_secure import ADMIN, BROKER, CONTROLLER, OUTSIDER, start_secure_kafka

    from admin.acls import SPARK_GROUP_PREFIX, Deployment, acl_set
    from admin.acls_cmd import apply
    from livectl.kafka_server import stop_kafka
    from sinks.requests import transactional_id

    names = (CONTROLLER, BROKER, ADMIN, OUTSIDER)
    users = {name: f"{name}-pw-{uuid.uuid4().hex[:8]}" for name in names}
    kafka = start_secure_kafka(tmp_path_factory.mktemp("secure-kafka"), users, names, encrypted_keys=(ADMIN,))
    try:
        deployment = Deployment(
            controllers=(f"User:{CONTROLLER}",),
            brokers=(f"User:{BROKER}",),
            admins=(f"User:{ADMIN}",),
            transactional_id=transactional_id("livectl"),
            spark_group_prefix=SPARK_GROUP_PREFIX,
        )
        apply(acl_set(deployment), kafka.sasl_bootstrap, kafka.admin_kwargs())
        yield kafka
    finally:
        stop_kafka(kafka.service)
