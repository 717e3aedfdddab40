"""The long run's own arithmetic and checks (``bench/long_run/``), without services: the growth per hour, the
epoch checks, and the process figures read from /proc."""

from __future__ import annotations

import os
import threading

import pytest

from bench import long_run
from bench.harness import procstat

pytestmark = pytest.mark.unit


def test_slope_is_the_least_squares_slope() -> None:
    assert long_run.slope([0, 1, 2, 3], [1, 3, 5, 7]) == pytest.approx(2.0)
    assert long_run.slope([0, 1, 2], [5, 4, 6]) == pytest.approx(0.5)
    assert long_run.slope([1], [1]) is None
    assert long_run.slope([2, 2], [1, 3]) is None


def _window(i: int, rss: float, threads: int, p99: float) -> long_run.Window:
    w = long_run.Window(i, i * 600.0, (i + 1) * 600.0, p99_s=p99, p50_s=p99 / 2)
    w.roles["active_jvm"] = {"rss_mib": rss, "threads": threads, "fds": 100, "processes": 1}
    return w


def test_window_growth_leaves_the_warm_up_out_and_speaks_per_hour() -> None:
    # windows of 10 minutes: +10 MiB per window after a warm-up jump is +60 MiB per hour
    windows = [_window(0, 100, 50, 9.0)] + [_window(i, 1000 + 10 * i, 80, 1.0) for i in range(1, 5)]
    growth = long_run.window_growth(windows, 1, 600)
    assert growth["active_jvm.rss_mib"] == pytest.approx(60.0)
    assert growth["active_jvm.threads"] == pytest.approx(0.0)
    assert growth["active_jvm.fds"] == pytest.approx(0.0)
    assert growth["latency.p99_s"] == pytest.approx(0.0)


def _sample(t: float, processes: dict[tuple[str, int, str], int]) -> long_run.Sample:
    return long_run.Sample(t, {}, {k: procstat.Usage(v * 1024, 10, 10) for k, v in processes.items()})


def test_memory_growth_within_processes_ignores_the_jump_between_them() -> None:
    # two JVMs one after the other, each flat at its own level: flat within each process, whatever the jump
    samples = [_sample(t, {("controller_jvm", 1, "active"): 1000}) for t in range(0, 3600, 60)]
    samples += [_sample(t, {("controller_jvm", 2, "active"): 3000}) for t in range(3600, 7200, 60)]
    # a broker that grows 1 MiB a minute after its first 10 minutes
    samples += [_sample(t, {("broker", 7, "1"): 200 + max(0, t - 600) // 60}) for t in range(0, 7200, 60)]
    got = long_run.within_process_growth(samples, warmup_s=600)
    assert got["controller_jvm_active"]["mib_per_hour"] == pytest.approx(0.0)
    assert got["controller_jvm_active"]["processes"] == 2
    assert got["broker"]["mib_per_hour"] == pytest.approx(60.0)


def _tree(epochs: dict[tuple[str, int], int]) -> long_run.Tree:
    return long_run.Tree({}, [], {k: {"leader": 1, "leader_epoch": e, "isr": [1]} for k, e in epochs.items()})


def _view(broker_epoch: int, controller_epoch: int, parts: dict[str, tuple[str, int]]) -> dict[str, object]:
    return {
        "broker_epoch": broker_epoch,
        "controller_epoch": controller_epoch,
        "partitions": {k: {"role": role, "leader_epoch": e} for k, (role, e) in parts.items()},
    }


def test_epochs_that_go_back_are_problems() -> None:
    e = long_run.Epochs()
    e.see(_tree({("t", 0): 3}), {1: _view(10, 2, {"t-0": ("leader", 3)})}, "w0")
    e.see(_tree({("t", 0): 4}), {1: _view(10, 2, {"t-0": ("leader", 4)})}, "w1")
    assert e.problems == []
    e.see(_tree({("t", 0): 2}), {1: _view(10, 1, {"t-0": ("follower", 4)})}, "w2")
    assert len(e.problems) == 2
    assert "t-0 leader epoch 2 after 4" in e.problems[0]
    assert "broker 1 (epoch 10) t-0 went (4, 2) -> (4, 1)" in e.problems[1]


def test_a_restarted_broker_starts_its_own_view_history() -> None:
    e = long_run.Epochs()
    e.see(_tree({}), {1: _view(10, 2, {"t-0": ("follower", 5)})}, "w0")
    e.see(_tree({}), {1: _view(11, 1, {"t-0": ("follower", 1)})}, "w1")  # a new incarnation, epochs from its start
    assert e.problems == []


def test_two_leaders_at_one_leader_epoch_is_a_problem() -> None:
    e = long_run.Epochs()
    e.see(_tree({}), {1: _view(10, 2, {"t-0": ("leader", 5)})}, "w0")
    e.see(_tree({}), {2: _view(12, 2, {"t-0": ("leader", 5)})}, "w1")
    assert e.problems == ["w1: brokers 1 and 2 both lead t-0 at 5"]


def test_the_controller_epoch_may_not_go_back() -> None:
    e = long_run.Epochs()
    e.controller(2, "a")
    e.controller(3, "b")
    e.controller(1, "c")
    assert e.problems == ["c: controller epoch 1 after 3"]


def test_usage_of_this_process_counts_its_threads_and_descriptors() -> None:
    before = procstat.usage(os.getpid())
    assert before is not None and before.rss_kib > 0
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    r, w = os.pipe()
    t.start()
    try:
        during = procstat.usage(os.getpid())
        assert during is not None
        assert during.threads == before.threads + 1
        assert during.fds == before.fds + 2
    finally:
        stop.set()
        t.join()
        os.close(r)
        os.close(w)


def test_cpu_seconds_count_what_this_process_computes() -> None:
    before = procstat.cpu_seconds(os.getpid())
    machine_before = procstat.machine_busy_seconds()
    assert before is not None
    # a busy loop until the kernel has charged this process at least two clock ticks more
    while (now := procstat.cpu_seconds(os.getpid())) is not None and now < before + 2 / procstat.TICKS:
        sum(range(10_000))
    # the machine's count is kept per CPU, not in step with a process's: it has not gone back, and it is a count
    after = procstat.machine_busy_seconds()
    assert after >= machine_before > 0


def test_cpu_cores_are_each_roles_cpu_seconds_over_the_window() -> None:
    def sample(t: float, cpu: dict[int, tuple[str, float]], machine: float) -> long_run.Sample:
        return long_run.Sample(t, {}, {}, cpu, machine)

    samples = [
        sample(0, {1: ("active_jvm", 100.0), 2: ("brokers", 5.0), 4: ("standby_jvm", 50.0)}, 1000.0),
        # broker 3 starts between samples: it counts from its first sample
        sample(
            10, {1: ("active_jvm", 108.0), 2: ("brokers", 7.0), 3: ("brokers", 1.0), 4: ("standby_jvm", 51.0)}, 1017.0
        ),
        # the active JVM is gone (it counts to its last sample) and the standby's took over
        sample(20, {2: ("brokers", 9.0), 3: ("brokers", 3.0), 4: ("active_jvm", 57.0)}, 1036.0),
    ]
    # active_jvm 8 + 6 s, standby_jvm 1 s, brokers 4 + 2 s, the machine 36 s: over 20 s
    assert long_run.cpu_cores(samples) == {
        "active_jvm": 0.7,
        "brokers": 0.3,
        "machine": 1.8,
        "other": 0.75,
        "standby_jvm": 0.05,
    }
    assert long_run.cpu_cores(samples[:1]) == {}


def test_a_process_that_is_gone_has_no_usage() -> None:
    assert procstat.usage(2**22 + 12345) is None
    assert procstat.cpu_seconds(2**22 + 12345) is None
    assert procstat.total([2**22 + 12345]) == procstat.NOTHING


def test_descendants_follow_parent_links() -> None:
    parents = {2: 1, 3: 2, 4: 1, 5: 9}
    assert sorted(procstat.descendants(1, parents)) == [2, 3, 4]
