"""The deployed path's pure parts: shipped configuration, --config / --conf, the workers' interpreter,
the Spark UI address, the in-memory checkpoint store and shipped-file names."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from livectl.cli import main as livectl_main
from streaming import resources
from streaming.driver.entry import parse_spark_conf, worker_python
from streaming.driver.session import defaults_not_submitted, spark_defaults, spark_ui_address
from streaming.query import failover
from streaming.query.validation import load_suite
from streaming.runtime.checkpoint_fs import CheckpointError, MemoryCheckpointStore, batch_ids, child, parent
from streaming.settings import Settings, SettingsError

pytestmark = pytest.mark.unit


def test_the_configuration_ships_with_the_packages() -> None:
    for name in resources.SHIPPED:
        assert resources.conf_file(name).is_file(), name
        assert resources.conf_path(name).is_file()
    # the files the code reads come from the installed conf package (here the editable install maps it onto the
    # repository's conf/), not from the working directory
    assert resources.conf_root() == Path(__file__).resolve().parents[3] / "conf"
    assert (
        Settings.load().controller_id
        == json.loads(resources.conf_file(resources.DEFAULTS).read_text())["controller_id"]
    )
    assert load_suite()[0] == "livectl-input"
    defaults = spark_defaults()
    assert defaults["spark.sql.streaming.stateStore.providerClass"].endswith("RocksDBStateStoreProvider")
    assert all(k.startswith("spark.") for k in defaults)


def test_livectl_conf_path_prints_the_shipped_files(capsys: pytest.CaptureFixture[str]) -> None:
    assert livectl_main(["conf", "path"]) == 0
    folder = Path(capsys.readouterr().out.strip())
    assert (folder / "spark-defaults.conf").is_file()
    assert livectl_main(["conf", "path", "log4j2.properties"]) == 0
    assert Path(capsys.readouterr().out.strip()) == folder / "log4j2.properties"
    assert livectl_main(["conf", "path", "nope.conf"]) == 2
    err = capsys.readouterr().err
    assert "'nope.conf' is not shipped" in err


def test_a_user_config_file_goes_over_the_defaults_and_under_set(tmp_path: Path) -> None:
    cfg = tmp_path / "mine.json"
    cfg.write_text(json.dumps({"num_buckets": 6, "controller_id": 7}))
    s = Settings.load(config_path=cfg, overrides=["controller_id=9"])
    assert (s.num_buckets, s.controller_id) == (6, 9)
    cfg.write_text("[1]")
    with pytest.raises(SettingsError) as e:
        Settings.load(config_path=cfg)
    assert e.value.key == "config" and "must hold a JSON object" in e.value.reason
    with pytest.raises(SettingsError) as e:
        Settings.load(config_path=tmp_path / "missing.json")
    assert e.value.key == "config" and "cannot read" in e.value.reason
    cfg.write_text('{"no_such": 1}')
    with pytest.raises(SettingsError) as e:
        Settings.load(config_path=cfg)
    assert e.value.key == "no_such"


def test_spark_properties_from_the_command_line() -> None:
    assert parse_spark_conf(["spark.a=1", "spark.b=x=y", "spark.a=2"]) == {"spark.a": "2", "spark.b": "x=y"}
    with pytest.raises(SettingsError) as e:
        parse_spark_conf(["spark.a"])
    assert e.value.key == "--conf" and "spark.property=value" in e.value.reason
    with pytest.raises(SettingsError) as e:
        parse_spark_conf(["a.b=1"])
    assert "not a Spark property" in e.value.reason


def test_python_workers_run_the_drivers_interpreter_unless_the_user_chose() -> None:
    assert worker_python({}, {}) == sys.executable
    assert worker_python({"PYSPARK_PYTHON": "/opt/py"}, {}) is None
    assert worker_python({}, {"spark.pyspark.python": "./environment/bin/python"}) is None
    assert worker_python({"PYSPARK_PYTHON": "/opt/py"}, {"spark.pyspark.python": "/opt/py"}) is None


class _Conf:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def get(self, key: str) -> str | None:
        return self.values.get(key)


class _Context:
    def __init__(self, url: str | None, conf: dict[str, str]) -> None:
        self.uiWebUrl = url
        self._conf = _Conf(conf)

    def getConf(self) -> _Conf:
        return self._conf


class _Spark:
    def __init__(self, url: str | None, conf: dict[str, str] | None = None) -> None:
        self.sparkContext = _Context(url, conf or {})


def test_the_spark_ui_address_is_one_that_answers() -> None:
    # SPARK_LOCAL_IP: the UI listens there only, whatever host name Spark reports
    spark = _Spark("http://myhost.example:4041", {"spark.driver.host": "myhost"})
    assert spark_ui_address(spark, {"SPARK_LOCAL_IP": "127.0.0.1"}) == "http://127.0.0.1:4041"
    # listening on every interface: the driver host (the user's spark.driver.host, or Spark's choice)
    assert spark_ui_address(_Spark("http://a:4040", {"spark.driver.host": "10.1.2.3"}), {}) == "http://10.1.2.3:4040"
    assert spark_ui_address(_Spark("http://a:4040"), {"SPARK_LOCAL_IP": "0.0.0.0"}) == "http://a:4040"
    # the public name the user asked Spark to report stands
    assert spark_ui_address(_Spark("http://pub:4040"), {"SPARK_PUBLIC_DNS": "pub", "SPARK_LOCAL_IP": "127.0.0.1"}) == (
        "http://pub:4040"
    )
    assert spark_ui_address(_Spark("http://a:4040"), {"SPARK_LOCAL_IP": "::1"}) == "http://[::1]:4040"
    assert spark_ui_address(_Spark(None), {}) is None


def test_the_memory_store_and_uri_helpers() -> None:
    store = MemoryCheckpointStore("memory:/ck/")
    assert store.root == "memory:/ck" and child(store.root, "a", "b") == "memory:/ck/a/b"
    assert parent("memory:/ck/a/b") == "memory:/ck/a"
    for name in ("0", "1", ".1.crc", "10"):
        store.write_text(child(store.root, "commits", name), "v1")
    assert batch_ids(store, child(store.root, "commits")) == [0, 1, 10]
    assert store.list_names(store.root) == ["commits"] and store.exists(child(store.root, "commits"))
    store.remove(child(store.root, "commits"))
    assert batch_ids(store, child(store.root, "commits")) == []
    with pytest.raises(CheckpointError) as e:
        store.read_text("memory:/ck/x")
    assert e.value.uri == "memory:/ck/x"


def test_shipped_names_are_unique_per_checkpoint_epoch_and_bucket() -> None:
    names = {
        failover.shipped_name(child(root, "failover", f"epoch-{epoch}"), bucket)
        for root in ("file:/a/ck", "hdfs://nn/ck", "file:/a/ck2")
        for epoch in (1, 2)
        for bucket in range(4)
    }
    assert len(names) == 3 * 2 * 4
    assert all("/" not in n and n.endswith(".json") for n in names)
    # outside a Spark worker nothing was shipped: the step reports the snapshot as gone
    ref: dict[str, Any] = {"controller_epoch": 2, "path": "file:/a/ck/failover/epoch-2"}
    assert "is gone" in str(failover.unusable_reason(ref, 0, 1, "file:/a/ck", failover.ShippedSnapshots()))


def test_under_spark_submit_only_the_defaults_not_submitted_are_supplied() -> None:
    defaults = spark_defaults()
    # everything submitted (--properties-file with livectl's file): nothing to set, nothing missing
    assert defaults_not_submitted(lambda key: True) == ({}, [])
    # nothing submitted: the session properties are set now; the rest is named, spark-submit's own excepted
    to_set, missing = defaults_not_submitted(lambda key: False)
    assert to_set == {k: v for k, v in defaults.items() if k.startswith("spark.sql.")}
    assert "spark.python.daemon.module" in missing and "spark.task.maxDirectResultSize" in missing
    assert not {"spark.app.name", "spark.driver.memory"} & set(missing)
    assert not any(k.startswith("spark.sql.") for k in missing)
    # a submitted value is never replaced: the state store the user chose stays theirs
    chosen = "spark.sql.streaming.stateStore.providerClass"
    to_set, _ = defaults_not_submitted(lambda key: key == chosen)
    assert chosen not in to_set
