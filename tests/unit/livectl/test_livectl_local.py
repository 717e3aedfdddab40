"""livectl.local without ZooKeeper or the broker: errors that name the fix, PID-safe stops, Kafka's settings."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from waiting import wait_until

from livectl import kafka_server, local
from sinks import local_services

pytestmark = pytest.mark.unit


def test_missing_java_names_the_install_command(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no java on PATH
    with pytest.raises(local.LocalServiceError, match="apt-get install -y default-jre-headless"):
        local.find_java()


def test_missing_zookeeper_package_names_the_install_command(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(local, "ZOOKEEPER_JAR", tmp_path / "zookeeper.jar")
    with pytest.raises(local.LocalServiceError, match="apt-get install -y zookeeper"):
        local.check_zookeeper_installed()


def _checkout_without_jars(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A checkout (scripts/setup beside the packages) whose setup has not resolved Kafka's jars yet."""
    monkeypatch.delenv(kafka_server.KAFKA_LIBS_ENV, raising=False)
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    (root / "scripts" / "setup").write_text("#!/bin/sh\n")
    monkeypatch.setattr(kafka_server, "PACKAGE_ROOT", root)
    return root


def test_missing_kafka_jars_say_what_and_to_run_setup(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    root = _checkout_without_jars(monkeypatch, tmp_path)
    with pytest.raises(local.LocalServiceError, match=r"Apache Kafka's jars are missing .*run scripts/setup") as err:
        local.kafka_classpath()
    assert "\n" not in str(err.value) and str(root / ".cache" / "jvm" / "kafka") in str(err.value)
    assert "LIVECTL_KAFKA_LIBS" in str(err.value)
    monkeypatch.setenv(kafka_server.KAFKA_LIBS_ENV, str(tmp_path))
    (tmp_path / "kafka_2.13-3.9.2.jar").write_bytes(b"")
    assert local.kafka_classpath() == f"{tmp_path}/*"


def test_local_up_without_kafka_jars_starts_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _checkout_without_jars(monkeypatch, tmp_path)
    services = local.LocalServices(tmp_path / "run")
    with pytest.raises(local.LocalServiceError, match="run scripts/setup"):
        services.up()
    assert services.services == {} and not (tmp_path / "run").exists()  # ZooKeeper was not started either


def test_installed_without_a_checkout_missing_kafka_jars_say_to_set_the_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """From a wheel there is no scripts/setup to run: the one line says which variable to set, to what."""
    monkeypatch.delenv(kafka_server.KAFKA_LIBS_ENV, raising=False)
    monkeypatch.setattr(kafka_server, "PACKAGE_ROOT", tmp_path / "site-packages")
    with pytest.raises(local.LocalServiceError) as err:
        local.kafka_classpath()
    assert str(err.value) == (
        "Apache Kafka's jars are missing: set LIVECTL_KAFKA_LIBS to the libs/ folder of an Apache Kafka 3.9 "
        "distribution (https://kafka.apache.org/downloads)"
    )
    monkeypatch.setenv(kafka_server.KAFKA_LIBS_ENV, str(tmp_path / "kafka" / "libs"))
    with pytest.raises(local.LocalServiceError, match=r"LIVECTL_KAFKA_LIBS=.*/kafka/libs has no kafka_2\.13-\*\.jar"):
        local.kafka_classpath()


def test_local_up_says_everything_missing_in_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Neither ZooKeeper's package nor Kafka's jars: both are named, with how to get them, and nothing starts."""
    monkeypatch.setattr(local, "ZOOKEEPER_JAR", tmp_path / "zookeeper.jar")
    monkeypatch.setenv(kafka_server.KAFKA_LIBS_ENV, str(tmp_path / "no-jars"))
    services = local.LocalServices(tmp_path / "run")
    with pytest.raises(local.LocalServiceError) as err:
        services.up()
    message = str(err.value)
    assert "\n" not in message
    assert "apt-get install -y zookeeper" in message and "LIVECTL_KAFKA_LIBS" in message
    assert services.services == {} and not (tmp_path / "run").exists()
    assert local.missing_prerequisites(zookeeper=False, kafka=False) == []


def test_the_default_kafka_jars_are_the_ones_scripts_setup_resolves(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(kafka_server.KAFKA_LIBS_ENV, raising=False)
    repo = Path(kafka_server.__file__).resolve().parents[1]
    assert local.kafka_classpath() == f"{repo / '.cache' / 'jvm' / 'kafka'}/*"


def test_server_properties_carry_extra_listeners_and_override_defaults(tmp_path: Path) -> None:
    settings = local.KafkaSettings(
        listeners=(local.Listener("PLAINTEXT"), local.Listener("CLIENT", "SASL_SSL")),
        properties={"sasl.enabled.mechanisms": "SCRAM-SHA-512", "num.partitions": "3"},
    )
    text = kafka_server.server_properties(settings, {"PLAINTEXT": 9001, "CLIENT": 9002, "CONTROLLER": 9003}, tmp_path)
    props = dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:9001,CLIENT://127.0.0.1:9002,CONTROLLER://127.0.0.1:9003"
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:9001,CLIENT://127.0.0.1:9002"
    assert props["listener.security.protocol.map"] == "PLAINTEXT:PLAINTEXT,CLIENT:SASL_SSL,CONTROLLER:PLAINTEXT"
    assert props["process.roles"] == "broker,controller" and props["controller.quorum.voters"] == "1@127.0.0.1:9003"
    assert props["log.dirs"] == str(tmp_path) and props["num.partitions"] == "3"
    assert props["sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert "zookeeper.connect" not in props  # KRaft: never in the ZooKeeper tree livectl controls


def test_bad_kafka_settings_name_the_field() -> None:
    with pytest.raises(ValueError, match=r"Listener\.protocol"):
        local.Listener("CLIENT")  # not a protocol name, and none given
    with pytest.raises(ValueError, match=r"Listener\.name"):
        local.Listener("CONTROLLER", "PLAINTEXT")
    with pytest.raises(ValueError, match=r"KafkaSettings\.heap"):
        local.KafkaSettings(heap="lots")
    with pytest.raises(ValueError, match=r"KafkaSettings\.listeners"):
        local.KafkaSettings(listeners=())
    with pytest.raises(ValueError, match=r"KafkaSettings\.properties"):
        local.KafkaSettings(properties={"a": "two\nlines"})
    with pytest.raises(ValueError, match=r"ScramCredential\.password"):
        local.ScramCredential("admin", "a,b")
    assert local.ScramCredential("admin", "s3cret").storage_arg() == "SCRAM-SHA-512=[name=admin,password=s3cret]"


def test_stop_signals_only_the_process_we_started() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)  # livectl-test-marker"])
    # right after the fork the child's /proc cmdline can still be empty: wait until it shows the command
    cmdline = Path(f"/proc/{proc.pid}/cmdline")
    wait_until("the child's command line", lambda: b"livectl-test-marker" in cmdline.read_bytes(), 10, interval=0.05)
    try:
        # a PID whose command line does not carry the marker is left alone
        assert not local.stop_process(proc.pid, "some-other-command")
        assert proc.poll() is None
        assert local.stop_process(proc.pid, "livectl-test-marker")
        assert proc.wait(5) is not None
        assert not local.stop_process(proc.pid, "livectl-test-marker")
    finally:
        if proc.poll() is None:
            proc.kill()


def test_state_file_round_trip_and_status_of_nothing(tmp_path: Path) -> None:
    services = local.LocalServices(tmp_path)
    services.services["zookeeper"] = local.Service("zookeeper", 999999, 1234, "127.0.0.1:1234", "log", "zoo.cfg")
    services.save()
    again = local.LocalServices.load(tmp_path)
    assert again.zookeeper == services.zookeeper
    status = again.status()
    assert status["zookeeper"]["state"] == "stopped" and status["broker"]["state"] == "not started"
    assert again.down() == []
    assert local.LocalServices.load(tmp_path).services == {}


def test_free_ports_are_distinct_and_bindable() -> None:
    ports = {local.free_port() for _ in range(5)}
    assert len(ports) >= 4 and all(1024 < p < 65536 for p in ports)


def test_sasl_users_that_cannot_go_into_a_jaas_file_are_refused(tmp_path: Path) -> None:
    for users in ({"bad user": "pw"}, {"livectl": 'has"quote'}):
        with pytest.raises(local.LocalServiceError, match="JAAS"):
            local.start_zookeeper(tmp_path, local.free_port(), sasl_users=users)


def test_recorded_address_reads_what_local_up_saved(tmp_path: Path) -> None:
    assert local_services.recorded_address("zookeeper", tmp_path) is None  # nothing recorded
    services = local.LocalServices(tmp_path)
    services.services["zookeeper"] = local.Service("zookeeper", 1, 2181, "127.0.0.1:2181", "zk.log", "zoo.cfg")
    services.services["broker"] = local.Service("broker", 2, 9092, "127.0.0.1:9092", "broker.log", "server.properties")
    services.save()
    assert local_services.recorded_address("zookeeper", tmp_path) == "127.0.0.1:2181"
    assert local_services.recorded_address("broker", tmp_path) == "127.0.0.1:9092"
    assert local_services.recorded_address("prometheus", tmp_path) is None
    (tmp_path / local_services.STATE_FILE).write_text("{not json")
    assert local_services.recorded_address("zookeeper", tmp_path) is None


def test_an_ensemble_is_recorded_server_by_server_and_its_connect_string_lists_them(tmp_path: Path) -> None:
    services = local.LocalServices(tmp_path)
    for n, port in ((1, 2181), (2, 2182), (10, 2190), (3, 2183)):  # 10 sorts after 3, by number
        name = f"zookeeper-{n}"
        services.services[name] = local.Service(name, 999999, port, f"127.0.0.1:{port}", "zk.log", f"{n}/zoo.cfg")
    services.save()
    again = local.LocalServices.load(tmp_path)
    assert [s.name for s in again.zookeeper_servers] == ["zookeeper-1", "zookeeper-2", "zookeeper-3", "zookeeper-10"]
    expected = "127.0.0.1:2181,127.0.0.1:2182,127.0.0.1:2183,127.0.0.1:2190"
    assert again.zookeeper_connect == expected
    assert local_services.recorded_address("zookeeper", tmp_path) == expected
    status = again.status()
    assert status["zookeeper-2"] == {**status["zookeeper-2"], "state": "stopped", "mode": None}
    assert "zookeeper" not in status
    # another shape than the one recorded is refused before anything starts
    with pytest.raises(
        local.LocalServiceError, match=r"4 ZooKeeper server.* recorded .* 1 asked; run `livectl local down`"
    ):
        again.up()


@pytest.mark.parametrize("count", [0, 2, 9])
def test_an_ensemble_size_that_is_not_odd_or_too_big_is_refused_naming_the_field(tmp_path: Path, count: int) -> None:
    with pytest.raises(local.LocalServiceError, match=rf"zookeeper_servers must be 1 or an odd count.*got {count}"):
        local.LocalServices(tmp_path).up(zookeeper_servers=count)
    assert not (tmp_path / local_services.STATE_FILE).exists()


def test_a_zookeeper_mode_of_nothing_listening_is_none() -> None:
    assert local.zookeeper_mode(local.free_port()) is None


def test_ensemble_configs_bind_each_server_to_its_own_address_and_list_every_server(tmp_path: Path) -> None:
    # the partition tests' ensemble: each server on a test host's address, the same ports everywhere
    members = [local.EnsembleServer(f"10.231.7.{4 * n + 2}", 2181, 2888, 3888) for n in (1, 2, 3)]
    configs = local.write_ensemble_configs(tmp_path, members, heap="128m")
    assert configs == [tmp_path / f"server-{n}" / "zoo.cfg" for n in (1, 2, 3)]
    quorum = ["server.1=10.231.7.6:2888:3888", "server.2=10.231.7.10:2888:3888", "server.3=10.231.7.14:2888:3888"]
    for n, (cfg, member) in enumerate(zip(configs, members, strict=True), start=1):
        lines = cfg.read_text().splitlines()
        assert f"clientPortAddress={member.address}" in lines
        assert "clientPortAddress=127.0.0.1" not in lines
        assert "clientPort=2181" in lines
        assert f"# livectl: server {n} heap 128m client port 2181" in lines
        assert [line for line in lines if line.startswith("server.")] == quorum
        assert (cfg.parent / "data" / "myid").read_text() == f"{n}\n"


def test_the_standalone_and_the_ensemble_configs_share_one_template(tmp_path: Path) -> None:
    text = local.zookeeper_config(tmp_path / "data", 2181)
    assert "clientPortAddress=127.0.0.1" in text.splitlines()
    cfg = local.write_ensemble_configs(tmp_path, [local.EnsembleServer("127.0.0.1", 2181, 2888, 3888)])[0]
    assert cfg.read_text().startswith(local.zookeeper_config(cfg.parent / "data", 2181))


def test_extra_jvm_options_come_from_kafkas_and_zookeepers_own_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_OPTS", "-XX:TieredStopAtLevel=1  -Dx='a b'")
    assert kafka_server.env_jvm_options(kafka_server.KAFKA_OPTS_ENV) == ["-XX:TieredStopAtLevel=1", "-Dx=a b"]
    monkeypatch.delenv("KAFKA_OPTS")
    assert kafka_server.env_jvm_options(kafka_server.KAFKA_OPTS_ENV) == []
    monkeypatch.setenv("SERVER_JVMFLAGS", "-Xmx1g -XX:+UseSerialGC")
    command = local._zookeeper_command("java", "256m", ["-Da=b"], "Main", Path("zoo.cfg"))
    # after livectl's own options: the operator's -Xmx wins
    assert command[:6] == ["java", "-Xms64m", "-Xmx256m", "-Da=b", "-Xmx1g", "-XX:+UseSerialGC"]


def test_unparseable_extra_jvm_options_name_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_OPTS", "-Dx='unclosed")
    with pytest.raises(local.LocalServiceError, match=r"\$KAFKA_OPTS: No closing quotation"):
        kafka_server.env_jvm_options(kafka_server.KAFKA_OPTS_ENV)
