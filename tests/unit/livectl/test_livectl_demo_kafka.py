"""``livectl demo --brokers kafka`` without services: the option, the record counts, and what it says when
Apache Kafka's jars are missing (before it starts anything)."""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import pytest

from livectl.demo import DemoError, DemoOptions, run_demo
from livectl.demo.cli import register
from livectl.demo.kafka import KafkaDemo
from livectl.demo.traffic import Counts, Traffic

pytestmark = pytest.mark.unit


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    return parser.parse_args(["demo", *argv])


def test_brokers_option_takes_a_count_or_kafka(capsys: pytest.CaptureFixture[str]) -> None:
    assert _parse().brokers == 5
    assert _parse("--brokers", "4").brokers == 4
    assert _parse("--brokers", "kafka").brokers == "kafka"
    assert _parse("--brokers", "Kafka").brokers == "kafka"
    with pytest.raises(SystemExit):
        _parse("--brokers", "real")
    assert "expected a number of simulated brokers or 'kafka', got 'real'" in capsys.readouterr().err


def test_counts_per_step() -> None:
    before = Counts(produced=10, acknowledged=8, failed=0, consumed=7)
    now = Counts(produced=30, acknowledged=27, failed=1, consumed=26)
    assert now.since(before) == Counts(20, 19, 1, 19)
    assert now.since(before).text() == "20 produced, 19 acknowledged, 1 failed, 19 consumed"
    assert before.text() == "10 produced, 8 acknowledged, 7 consumed"


def test_traffic_refuses_a_rate_of_zero() -> None:
    with pytest.raises(ValueError, match="rate: records per second must be above 0"):
        Traffic("127.0.0.1:9", {"t": 1}, 0)


def test_kafka_demo_runs_three_brokers(tmp_path: Path) -> None:
    with pytest.raises(DemoError, match="brokers: the demo on Kafka runs 3 brokers, got 5"):
        KafkaDemo(DemoOptions(brokers=5, kafka=True, run_dir=tmp_path), io.StringIO())


def test_missing_kafka_jars_are_one_line_before_anything_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "libs"
    empty.mkdir()
    monkeypatch.setenv("LIVECTL_KAFKA_LIBS", str(empty))
    out = io.StringIO()
    # services "given" at addresses where nothing listens: the check comes first, so nothing is contacted
    options = DemoOptions(
        brokers=3, kafka=True, run_dir=tmp_path / "demo", zookeeper="127.0.0.1:9", bootstrap="127.0.0.1:9"
    )
    report = run_demo(options, out)
    assert report.error is not None and report.exit_code == 1
    assert report.error.startswith("Apache Kafka's jars are missing: $LIVECTL_KAFKA_LIBS=")
    assert "\n" not in report.error
    assert not report.steps and not report.stopped and not report.leftovers
    assert f"FAIL  {report.error}" in out.getvalue()
