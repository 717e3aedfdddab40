"""The local services' record (:mod:`sinks.local_services`): what ``livectl local up`` saves, the admin
commands read back, and a damaged record reads as "nothing recorded"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sinks import local_services as ls

pytestmark = pytest.mark.unit


def test_saved_records_read_back_and_name_the_addresses(tmp_path: Path) -> None:
    run_dir = tmp_path / "run" / "local"
    assert ls.load_records(run_dir) == {}
    records = {"zookeeper": {"name": "zookeeper", "pid": 7, "port": 2181, "address": "127.0.0.1:2181"}}
    ls.save_records(run_dir, records)
    assert ls.load_records(run_dir) == records
    assert json.loads((run_dir / ls.STATE_FILE).read_text()) == records
    assert not (run_dir / (ls.STATE_FILE + ".tmp")).exists()
    assert ls.recorded_address("zookeeper", run_dir) == "127.0.0.1:2181"
    assert ls.recorded_address("broker", run_dir) is None


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", '{"broker": 5}', '{"broker": {"address": 9092}}'])
def test_a_damaged_record_reads_as_nothing_recorded(tmp_path: Path, text: str) -> None:
    (tmp_path / ls.STATE_FILE).write_text(text)
    assert ls.recorded_address("broker", tmp_path) is None


def test_a_record_that_is_not_an_object_of_objects_is_refused_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / ls.STATE_FILE).write_text('{"broker": 5}')
    with pytest.raises(ValueError, match=r"services\.json: must be a JSON object of one object per service"):
        ls.load_records(tmp_path)


def test_default_addresses_come_from_the_environment_then_the_record_then_loopback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The one lookup every tool without ``--zookeeper`` / ``--bootstrap-server`` uses (admin commands,
    ``python -m simbrokers``, ``livectl-simbrokers``)."""
    monkeypatch.delenv(ls.ZOOKEEPER_ENV, raising=False)
    monkeypatch.delenv(ls.BOOTSTRAP_SERVER_ENV, raising=False)
    assert ls.default_zookeeper(tmp_path) == "127.0.0.1:2181"
    assert ls.default_bootstrap_server(tmp_path) == "127.0.0.1:9092"
    ls.save_records(tmp_path, {"zookeeper": {"address": "127.0.0.1:40001"}, "broker": {"address": "127.0.0.1:40002"}})
    assert ls.default_zookeeper(tmp_path) == "127.0.0.1:40001"
    assert ls.default_bootstrap_server(tmp_path) == "127.0.0.1:40002"
    monkeypatch.setenv(ls.ZOOKEEPER_ENV, "zk.example:2181/kafka")
    monkeypatch.setenv(ls.BOOTSTRAP_SERVER_ENV, "kafka.example:9092")
    assert ls.default_zookeeper(tmp_path) == "zk.example:2181/kafka"
    assert ls.default_bootstrap_server(tmp_path) == "kafka.example:9092"
    monkeypatch.setenv(ls.ZOOKEEPER_ENV, "")  # set but empty: as if unset
    assert ls.default_zookeeper(tmp_path) == "127.0.0.1:40001"
    cwd = tmp_path / "cwd"
    ls.save_records(cwd / ls.DEFAULT_RUN_DIR, {"broker": {"address": "127.0.0.1:40003"}})
    monkeypatch.chdir(cwd)  # the default run folder is relative to the working directory
    monkeypatch.delenv(ls.BOOTSTRAP_SERVER_ENV)
    assert ls.default_bootstrap_server() == "127.0.0.1:40003"
