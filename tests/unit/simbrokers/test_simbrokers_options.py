"""``python -m simbrokers`` refuses bad options before it registers any broker, naming the option."""

from __future__ import annotations

from pathlib import Path

import pytest

from simbrokers.__main__ import main

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
