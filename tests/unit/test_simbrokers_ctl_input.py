"""``livectl-simbrokers`` (:mod:`simbrokers.ctl`) refuses bad input with exit 2, naming the option and the
reason, before it reaches for ZooKeeper or Kafka (none runs here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from simbrokers.ctl import EXIT_USAGE, main

pytestmark = pytest.mark.unit


def test_slow_follower_needs_its_pacing(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fault", "3", "slow-follower", "--zookeeper", "127.0.0.1:1"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "livectl-simbrokers fault: error: --fetch-interval-ms:" in err
    assert "slow-follower needs fetch_interval_ms and/or max_records" in err


def test_produce_rate_must_not_be_negative(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fault", "1", "produce-rate", "--rate", "-1"]) == EXIT_USAGE
    assert "--rate: produce-rate needs a rate >= 0" in capsys.readouterr().err


def test_an_unreadable_command_config_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "client.properties"
    assert main(["kill", "2", "--command-config", str(missing)]) == EXIT_USAGE
    assert f"--command-config: cannot read {missing}" in capsys.readouterr().err


def test_an_unknown_fault_is_refused_by_the_parser() -> None:
    with pytest.raises(SystemExit) as e:
        main(["fault", "2", "melt"])
    assert e.value.code == 2
