"""livectl's Python worker daemon (streaming.warm.worker_daemon): what it preloads, and that it then runs
pyspark's daemon as Spark starts it (``python -m``, the port first on its standard output, a fork per
connection). No Spark: the daemon is driven through its socket protocol, as PythonWorkerFactory does."""

from __future__ import annotations

import gc
import os
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from spark_conf import FakeSpark

from streaming.query import routing
from streaming.resources import SPARK_DEFAULTS, conf_file
from streaming.warm import warmup, worker_daemon

pytestmark = pytest.mark.unit


def test_preloaded_covers_what_a_query_worker_imports() -> None:
    for name in ("pyspark.worker", "pandas", "pyarrow", "streaming.query.routing", "streaming.query.stateful"):
        assert name in worker_daemon.PRELOADED
    # a batch with input judges it by great-expectations: imported before the first fork too
    assert "great_expectations" in worker_daemon.PRELOADED


def test_preload_imports_each_module_then_builds_the_validator() -> None:
    built: list[bool] = []
    done = worker_daemon.preload(("json", "streaming.query.routing"), build_validator=lambda: built.append(True))
    assert [name for name, _ in done.seconds] == ["json", "streaming.query.routing"]
    assert all(s >= 0 for _, s in done.seconds)
    assert built == [True]
    assert done.validator_seconds is not None
    assert done.failures == ()
    assert "streaming.query.routing" in sys.modules


def test_preload_builds_no_validator_unless_told() -> None:
    routing.shared_validator.cache_clear()
    done = worker_daemon.preload(("streaming.query.routing",))
    assert done.failures == () and done.validator_seconds is None
    assert not routing.validator_built()


def test_a_failing_import_is_reported_and_the_rest_still_preloaded() -> None:
    def broken() -> object:
        raise RuntimeError("no suite")

    done = worker_daemon.preload(("livectl_no_such_module_for_the_test", "json"), build_validator=broken)
    assert [name for name, _ in done.seconds] == ["json"]
    assert done.failures[0].startswith("import livectl_no_such_module_for_the_test: ModuleNotFoundError")
    assert done.failures[1] == "validator: RuntimeError('no suite')"
    line = worker_daemon.report(done)
    assert "preloaded 1 modules" in line and "livectl_no_such_module_for_the_test" in line and "no suite" in line


def test_main_preloads_before_handing_over_to_the_manager() -> None:
    seen: list[tuple[bool, bool, bool]] = []
    routing.shared_validator.cache_clear()

    def manager() -> None:
        seen.append(("streaming.query.stateful" in sys.modules, routing.validator_built(), gc.get_freeze_count() > 0))

    try:
        worker_daemon.main(manager=manager)
    finally:
        gc.unfreeze()
    # everything a worker needs, the validator included, is there before the first fork, and frozen
    assert seen == [(True, True, True)]


def test_a_failing_preload_is_said_on_standard_error_and_pyspark_daemon_still_runs(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(worker_daemon, "PRELOADED", ("livectl_no_such_module_for_the_test",))
    ran: list[bool] = []
    try:
        worker_daemon.main(manager=lambda: ran.append(True))
    finally:
        gc.unfreeze()
    assert ran == [True]
    out, err = capfd.readouterr()
    assert out == "" and "livectl worker daemon: preloaded 0 modules" in err
    assert "livectl_no_such_module_for_the_test" in err


def test_imports_print_nothing_on_the_daemons_standard_output(capfd: pytest.CaptureFixture[str]) -> None:
    with worker_daemon.stdout_to_stderr():
        os.write(1, b"noise from an import\n")
        print("more noise", flush=True)
    os.write(1, b"after\n")
    out, err = capfd.readouterr()
    assert out == "after\n"
    assert "noise from an import" in err and "more noise" in err


def test_the_shipped_spark_defaults_name_this_daemon() -> None:
    lines = [line.split() for line in conf_file(SPARK_DEFAULTS).read_text().splitlines() if line.strip()]
    assert ["spark.python.daemon.module", "streaming.warm.worker_daemon"] in lines
    # the warm-up job's switch is not in the file: on by default
    assert not any(parts[0] == warmup.WARMUP_CONF for parts in lines)


def test_run_as_spark_runs_it_the_daemon_forks_a_worker_per_connection(tmp_path: Path) -> None:
    """``python -m streaming.warm.worker_daemon`` with the environment PythonWorkerFactory gives it: the first
    four bytes on its standard output are the port, each connection gets a forked child's pid, and closing
    its standard input stops it (pyspark's daemon protocol)."""
    env = {
        **os.environ,
        "PYTHON_WORKER_FACTORY_SECRET": "test-secret",
        "PYTHONUNBUFFERED": "YES",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "streaming.warm.worker_daemon"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=tmp_path,
    )
    try:
        assert proc.stdout is not None and proc.stdin is not None
        raw = proc.stdout.read(4)
        (port,) = struct.unpack("!i", raw)
        assert 1 <= port <= 0xFFFF
        pids = []
        for _ in range(2):
            with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
                pid_bytes = b""
                while len(pid_bytes) < 4:
                    chunk = conn.recv(4 - len(pid_bytes))
                    assert chunk, "the daemon closed the connection before sending the worker's pid"
                    pid_bytes += chunk
                (pid,) = struct.unpack("!i", pid_bytes)
                pids.append(pid)
        assert len(set(pids)) == 2 and proc.pid not in pids
        proc.stdin.close()  # Spark's way of stopping the daemon (pyspark's daemon then exits with 1)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    stderr = proc.stderr.read().decode() if proc.stderr is not None else ""
    assert "failed" not in stderr, stderr


def test_warmup_switch_is_true_or_false() -> None:
    assert warmup.warmup_setting("true")
    assert warmup.warmup_setting(" TRUE ")
    assert not warmup.warmup_setting("false")
    with pytest.raises(ValueError, match=r"spark\.livectl\.python\.warmup: must be true or false, got 'yes'"):
        warmup.warmup_setting("yes")


def test_warm_task_preloads_and_reports_its_process_and_whether_the_modules_were_there(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import pandas as pd

    monkeypatch.setattr(worker_daemon, "PRELOADED", (*worker_daemon.PRELOADED, "json.tool"))
    sys.modules.pop("json.tool", None)
    start = time.perf_counter()
    rows = list(warmup.warm_task(iter([pd.DataFrame({"id": [0]})])))
    assert len(rows) == 1
    assert rows[0]["pid"].tolist() == [os.getpid()]
    assert 0 <= rows[0]["seconds"].tolist()[0] <= time.perf_counter() - start
    assert rows[0]["ready"].tolist() == [False]
    assert "json.tool" in sys.modules and "streaming.query.stateful" in sys.modules
    again = list(warmup.warm_task(iter([])))
    assert again[0]["ready"].tolist() == [True]


def test_warm_task_imports_the_daemons_list(monkeypatch: pytest.MonkeyPatch) -> None:
    # one list says what a worker needs: the task preloads whatever the daemon's tuple names
    monkeypatch.setattr(worker_daemon, "PRELOADED", (*worker_daemon.PRELOADED, "json.tool"))
    sys.modules.pop("json.tool", None)
    list(warmup.warm_task(iter([])))
    assert all(name in sys.modules for name in worker_daemon.PRELOADED)


def test_warm_task_fails_naming_a_module_it_cannot_import(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker_daemon, "PRELOADED", ("livectl_no_such_module_for_the_test",))
    with pytest.raises(RuntimeError, match=r"Python worker warm-up: import livectl_no_such_module_for_the_test"):
        list(warmup.warm_task(iter([])))


def test_an_active_start_warms_up_at_once_unless_told_after_the_read() -> None:
    assert warmup.warmup_early(FakeSpark({}))
    assert warmup.warmup_early(FakeSpark({warmup.WARMUP_EARLY_CONF: "True"}))
    assert not warmup.warmup_early(FakeSpark({warmup.WARMUP_EARLY_CONF: "false"}))
    with pytest.raises(ValueError, match=r"spark\.livectl\.python\.warmup\.early: must be true or false, got 'soon'"):
        warmup.warmup_early(FakeSpark({warmup.WARMUP_EARLY_CONF: "soon"}))
