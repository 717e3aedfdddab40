"""``python -m simbrokers`` refuses bad options before it registers any broker, naming the option."""

from __future__ import annotations

from pathlib import Path

import pytest

from simbrokers.__main__ import default_session_timeout_ms, main

pytestmark = pytest.mark.unit


def test_a_status_file_in_a_missing_folder_is_refused_at_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # tried live: the brokers registered, then the process died on its first status write with a traceback
    # (FileNotFoundError: run/b45.tmp) and the brokers vanished
    missing = tmp_path / "run" / "b4.json"
    with pytest.raises(SystemExit) as done:
        main(["--brokers", "4", "--status-file", str(missing), "--zookeeper", "127.0.0.1:1"])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert f"--status-file: the folder {missing.parent} does not exist" in err


@pytest.mark.parametrize(
    ("connect", "expected"),
    [
        ("127.0.0.1:2181", 6_000),
        ("127.0.0.1:2181/livectl", 6_000),
        ("zk1:2181,zk2:2181,zk3:2181", 18_000),
        ("zk1:2181,zk2:2181,zk3:2181/kafka", 18_000),
    ],
)
def test_the_default_session_outlasts_an_ensemble_s_sync_limit(connect: str, expected: int) -> None:
    # with one session below syncLimit x tickTime (10 s in the shipped zoo.cfg), a server cut off from its
    # quorum expired its brokers' sessions while still answering their pings (docs/reliability.md)
    assert default_session_timeout_ms(connect) == expected


def test_a_session_timeout_that_is_not_positive_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--brokers", "4", "--session-timeout-ms", "0", "--zookeeper", "127.0.0.1:1"])
    assert done.value.code == 2
    assert "--session-timeout-ms: expected a positive number of milliseconds, got 0" in capsys.readouterr().err
