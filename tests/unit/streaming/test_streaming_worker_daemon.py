"""livectl's Python worker daemon (streaming.worker_daemon): what it preloads, and that it then runs
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
import types
import weakref
from pathlib import Path

import pytest
from spark_conf import FakeSpark

from streaming import routing, warmup, worker_daemon
from streaming.resources import SPARK_DEFAULTS, conf_file

pytestmark = pytest.mark.unit


def test_preloaded_covers_what_a_query_worker_imports() -> None:
    for name in ("pyspark.worker", "pandas", "pyarrow", "streaming.routing", "streaming.stateful"):
        assert name in worker_daemon.PRELOADED
    # what only a batch with input needs comes once the daemon is idle (streaming.worker_validator)
    assert worker_daemon.DEFERRED == ("great_expectations",)
    assert "great_expectations" not in worker_daemon.PRELOADED


def test_preload_imports_each_module_then_builds_the_validator() -> None:
    built: list[bool] = []
    done = worker_daemon.preload(("json", "streaming.routing"), build_validator=lambda: built.append(True))
    assert [name for name, _ in done.seconds] == ["json", "streaming.routing"]
    assert all(s >= 0 for _, s in done.seconds)
    assert built == [True]
    assert done.validator_seconds is not None
    assert done.failures == ()
    assert "streaming.routing" in sys.modules


def test_preload_builds_no_validator_unless_told() -> None:
    routing.shared_validator.cache_clear()
    done = worker_daemon.preload(("streaming.routing",))
    assert done.failures == () and done.validator_seconds is None
    assert not routing.validator_built()


def test_the_deferred_preload_fills_the_shared_validator_cache_a_fork_inherits() -> None:
    routing.shared_validator.cache_clear()
    try:
        done = worker_daemon.preload_deferred()
        assert done.failures == ()
        assert [name for name, _ in done.seconds] == ["great_expectations"]
        assert routing.validator_built()
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


def test_a_failing_import_is_reported_and_the_rest_still_preloaded() -> None:
    def broken() -> object:
        raise RuntimeError("no suite")

    done = worker_daemon.preload(("livectl_no_such_module_for_the_test", "json"), build_validator=broken)
    assert [name for name, _ in done.seconds] == ["json"]
    assert done.failures[0].startswith("import livectl_no_such_module_for_the_test: ModuleNotFoundError")
    assert done.failures[1] == "validator: RuntimeError('no suite')"
    line = worker_daemon.report(done)
    assert "preloaded 1 modules" in line and "livectl_no_such_module_for_the_test" in line and "no suite" in line


def test_a_failing_deferred_preload_is_said_on_standard_error(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(worker_daemon, "DEFERRED", ("livectl_no_such_module_for_the_test",))
    routing.shared_validator.cache_clear()
    try:
        done = worker_daemon.preload_deferred()
    finally:
        gc.unfreeze()
    assert done.failures and "livectl_no_such_module_for_the_test" in done.failures[0]
    out, err = capfd.readouterr()
    assert out == "" and "livectl worker daemon: preloaded 0 modules" in err


def test_main_preloads_before_handing_over_to_the_manager() -> None:
    seen: list[tuple[bool, bool, bool]] = []
    routing.shared_validator.cache_clear()

    def manager() -> None:
        seen.append(("streaming.stateful" in sys.modules, routing.validator_built(), gc.get_freeze_count() > 0))

    try:
        worker_daemon.main(manager=manager)
    finally:
        gc.unfreeze()
    # the validator is not built before the first forks: the daemon builds it once idle
    assert seen == [(True, False, True)]


class _Poller:
    """A poller whose polls answer from a script (each entry a list of events)."""

    def __init__(self, script: list[list[tuple[int, int]]]) -> None:
        self.script = script
        self.registered: list[int] = []

    def poll(self, timeout: int) -> list[tuple[int, int]]:
        return self.script.pop(0) if self.script else []

    def register(self, fd: int, mask: int) -> None:
        self.registered.append(fd)


def test_the_daemons_idle_poll_runs_the_deferred_preload_once_after_a_quiet_spell() -> None:
    ran: list[float] = []
    spare = [False]
    poll = worker_daemon._IdlePoll(
        _Poller([[(3, 1)], [], [], [(3, 1)], [], [], [], []]),
        lambda: ran.append(time.monotonic()),
        quiet_s=0.05,
        spare=lambda: spare[0],
    )
    poll.register(0, 1)  # the wrapped poller's own methods are there
    assert poll.poll(1000) == [(3, 1)]
    assert poll.poll(1000) == [] and ran == []  # not quiet long enough yet
    time.sleep(0.06)
    assert poll.poll(1000) == [] and ran == []  # quiet, but no core idle
    assert poll.poll(1000) == [(3, 1)]  # a request: the quiet spell starts again
    time.sleep(0.06)
    spare[0] = True
    assert poll.poll(1000) == [] and len(ran) == 1
    time.sleep(0.06)
    poll.poll(1000)
    assert len(ran) == 1  # once


def test_it_is_installed_where_pyspark_daemon_polls() -> None:
    from pyspark import daemon

    saved = daemon.select
    ran: list[bool] = []
    try:
        assert worker_daemon.install_idle_preload(daemon, lambda: ran.append(True), quiet_s=0.0, spare=lambda: True)
        assert daemon.select.POLLIN == saved.POLLIN
        poller = daemon.select.poll()
        r, w = os.pipe()
        try:
            poller.register(r, daemon.select.POLLIN)
            assert poller.poll(10) == [] and ran == [True]
            os.write(w, b"x")
            assert poller.poll(10) == [(r, daemon.select.POLLIN)]
        finally:
            os.close(r)
            os.close(w)
        assert not worker_daemon.install_idle_preload(daemon, lambda: None)  # already in place
        assert not worker_daemon.install_idle_preload(types.ModuleType("pyspark.daemon"), lambda: None)
    finally:
        daemon.select = saved


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
    assert ["spark.python.daemon.module", "streaming.worker_daemon"] in lines
    # the warm-up job's switch is not in the file: on by default
    assert not any(parts[0] == warmup.WARMUP_CONF for parts in lines)


def test_run_as_spark_runs_it_the_daemon_forks_a_worker_per_connection(tmp_path: Path) -> None:
    """``python -m streaming.worker_daemon`` with the environment PythonWorkerFactory gives it: the first
    four bytes on its standard output are the port, each connection gets a forked child's pid, and closing
    its standard input stops it (pyspark's daemon protocol)."""
    env = {
        **os.environ,
        "PYTHON_WORKER_FACTORY_SECRET": "test-secret",
        "PYTHONUNBUFFERED": "YES",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "streaming.worker_daemon"],
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
    assert "json.tool" in sys.modules and "streaming.stateful" in sys.modules
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


def _installed_pyspark(root: Path) -> Path:
    """A ``site-packages`` under ``root`` with a ``pyspark`` package and the archives a pip-installed pyspark
    ships inside itself."""
    site = root / "site-packages"
    (site / "pyspark" / "python" / "lib").mkdir(parents=True)
    (site / "pyspark" / "jars").mkdir()
    (site / "pyspark" / "__init__.py").write_text("")
    for archive in ("python/lib/pyspark.zip", "python/lib/py4j-0.10.9.9-src.zip", "jars/spark-core_2.13-4.3.0.jar"):
        (site / "pyspark" / archive).write_bytes(b"PK")
    return site


def test_the_archives_inside_the_installed_pyspark_leave_the_path_and_others_stay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delitem(sys.modules, "pyspark", raising=False)
    site = _installed_pyspark(tmp_path)
    lib, jars = site / "pyspark" / "python" / "lib", site / "pyspark" / "jars"
    elsewhere = tmp_path / "spark-home" / "python" / "lib"
    elsewhere.mkdir(parents=True)
    (elsewhere / "other.zip").write_bytes(b"PK")
    path = [
        "",
        str(tmp_path),
        str(lib / "pyspark.zip"),
        str(lib / "py4j-0.10.9.9-src.zip"),
        str(jars / "spark-core_2.13-4.3.0.jar"),
        str(elsewhere / "other.zip"),
        str(tmp_path / "missing.zip"),
        str(site),
    ]
    sys.path_importer_cache[str(lib / "pyspark.zip")] = None
    dropped = worker_daemon.drop_shipped_archives(path)
    assert dropped == (
        str(lib / "pyspark.zip"),
        str(lib / "py4j-0.10.9.9-src.zip"),
        str(jars / "spark-core_2.13-4.3.0.jar"),
    )
    # the rest in its order: a Spark distribution's archive, a path that is no file, the directories
    assert path == ["", str(tmp_path), str(elsewhere / "other.zip"), str(tmp_path / "missing.zip"), str(site)]
    assert str(lib / "pyspark.zip") not in sys.path_importer_cache


def test_nothing_leaves_the_path_without_an_installed_pyspark_or_once_pyspark_is_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = _installed_pyspark(tmp_path)
    shipped = str(site / "pyspark" / "python" / "lib" / "pyspark.zip")
    # the archive alone (a Spark distribution's, pyspark not installed as a directory): it stays
    monkeypatch.delitem(sys.modules, "pyspark", raising=False)
    alone = [shipped, str(tmp_path)]
    assert worker_daemon.drop_shipped_archives(alone) == () and alone == [shipped, str(tmp_path)]
    # pyspark already imported (from wherever): its modules and the archives are not to be mixed
    monkeypatch.setitem(sys.modules, "pyspark", object())
    loaded = [shipped, str(site)]
    assert worker_daemon.drop_shipped_archives(loaded) == () and loaded == [shipped, str(site)]


def test_the_collection_after_a_task_frees_its_garbage_cycles_and_freezes_what_survives() -> None:
    collector = worker_daemon.TaskEndCollector()
    try:
        survivors: list[list[int]] = [[] for _ in range(1000)]  # e.g. the bucket states the worker caches
        garbage = _Holder(None)
        garbage.value = garbage  # the task's garbage cycle (pandas frames make them)
        dead = weakref.ref(garbage)
        del garbage
        before = gc.get_freeze_count()
        assert collector.collect() >= 2
        assert dead() is None
        # what is left is out of the next collections: they walk only what later tasks make
        assert gc.get_freeze_count() >= before + len(survivors)
        assert collector.full_collections == 0
    finally:
        gc.unfreeze()


def test_a_frozen_object_become_a_garbage_cycle_is_freed_once_the_frozen_objects_have_doubled() -> None:
    collector = worker_daemon.TaskEndCollector(growth=2.0, headroom=0)
    try:
        holder = _Holder(None)
        holder.value = holder  # a cycle, alive at the first task's end: frozen with the rest
        dead = weakref.ref(holder)
        keep = [holder]
        collector.collect()
        marked = gc.get_freeze_count()
        keep.clear()
        del holder
        collector.collect()
        assert dead() is not None, "a frozen cycle waits for a full collection"
        # the frozen objects grow past twice the first task's mark
        more: list[list[int]] = [[] for _ in range(marked + 1000)]
        collector.collect()
        assert dead() is None
        assert collector.full_collections == 1
        # the new mark is twice what the full collection left: the same objects again trigger nothing
        collector.collect()
        assert collector.full_collections == 1
        del more
    finally:
        gc.unfreeze()


def test_the_collector_stands_in_for_the_gc_module() -> None:
    collector = worker_daemon.TaskEndCollector()
    assert collector.isenabled is gc.isenabled
    with pytest.raises(ValueError, match="growth must be greater than 1"):
        worker_daemon.TaskEndCollector(growth=1.0)
    with pytest.raises(ValueError, match="headroom must not be negative"):
        worker_daemon.TaskEndCollector(headroom=-1)


def test_a_bucket_state_kept_after_the_first_task_stays_within_the_headroom() -> None:
    """A worker's first bucket task leaves a state several times the daemon's preloaded objects (the mark of
    the first task's end): within the headroom that is no full collection; past it, one."""
    # a growth of 1 % stands for the relative bound being far exceeded (as 0.6M objects over a 0.26M mark)
    collector = worker_daemon.TaskEndCollector(growth=1.01, headroom=50_000)
    try:
        collector.collect()  # the first task's end (the warm-up's): the mark
        assert gc.get_freeze_count() < 4_000_000  # 1 % of the mark is then under the 40k objects below
        state: list[list[int]] = [[] for _ in range(40_000)]  # a bucket's state kept
        collector.collect()
        assert collector.full_collections == 0, "past the relative bound, but within the headroom"
        more: list[list[int]] = [[] for _ in range(60_000)]  # past the headroom too
        collector.collect()
        assert collector.full_collections == 1
        del state, more
    finally:
        gc.unfreeze()


def test_it_is_installed_where_pyspark_daemon_collects_after_each_task() -> None:
    import inspect

    import pyspark.daemon

    # what install_task_end_collector relies on: the daemon's manager calls gc.collect() through its own gc
    assert vars(pyspark.daemon)["gc"] is gc
    assert "gc.collect()" in inspect.getsource(pyspark.daemon.manager)
    daemon = types.ModuleType("daemon_like")
    daemon.gc = gc  # type: ignore[attr-defined]
    collector = worker_daemon.TaskEndCollector()
    assert worker_daemon.install_task_end_collector(daemon, collector)
    assert daemon.gc is collector
    assert not worker_daemon.install_task_end_collector(types.ModuleType("no_gc"))


class _Holder:
    def __init__(self, value: object) -> None:
        self.value = value
