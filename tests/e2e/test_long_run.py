"""The long run's short form (issue 41, item 6): ``bench/long_run/`` for 75 s at 2,000 partitions.

Real processes on the session's ZooKeeper and Kafka: five simulated broker processes, an active ``livectl
run`` controller and a standby on one checkpoint. An admin command every 2 s (creations, config changes,
added partitions, reassignments, deletions, in turn), a broker SIGKILLed and started again (twice when the
machine keeps up) and one takeover (the active controller's process group SIGKILLed, the standby elected, a new
standby started). The full hour at 100k partitions runs by hand (``python -m bench long_run``, docs/reliability.md).

Asserted: every command answered exactly once with ``ok`` (the admin-results topic read back), ZooKeeper and
every broker's own view in agreement at the end, leader and controller epochs only growing, and, after the
warm-up window, the threads and open descriptors of the brokers and of the active controller's JVM and Python
(between takeovers, where it is one process, after its first window as the active one) not still rising (the
last window within :data:`bench.long_run.SHORT_SLACK` of the first: a few for the Python processes; the JVM's
thread pools still grow in its first minutes). With its takeover in the middle of 75 s the active controller's
spans are often too short for two windows, and then nothing is asserted of them: the hour's run measures each
process's growth. Memory is reported, not asserted: 75 s says nothing of a leak per hour.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import long_run
from bench.long_run.config import KINDS
from livectl import local

pytestmark = pytest.mark.e2e


def test_a_short_long_run_keeps_every_invariant(
    zookeeper: local.Service, kafka_broker: local.Service, tmp_path: Path
) -> None:
    cfg = long_run.SHORT
    report = long_run.run(zookeeper.connect, kafka_broker.bootstrap, tmp_path, cfg)
    long_run.print_report(report)  # shown when the test fails
    assert report.problems == []
    assert all(report.commands[k] >= 1 for k in KINDS), report.commands
    assert report.commands["answered_once"] == report.commands["sent"]
    happened = [e["what"] for e in report.events]
    assert happened.count("broker-back") >= 1, happened
    assert happened.count("takeover-loaded") >= 1, happened
    spans = _one_controller_spans(report, cfg.warmup_windows)
    for role, slack in long_run.SHORT_SLACK.items():
        if role.startswith("active_"):
            # one process's figures only between takeovers, and after its own first window as the active one
            # (its thread pools grow then, as the first controller's do in the run's warm-up); a span too short
            # for two windows says nothing
            runs = [[w for w in (s if i == 0 else s[1:]) if role in w.roles] for i, s in enumerate(spans)]
        else:
            # not the controller's processes: a takeover changes none of them, so every window after the warm-up
            # counts (a takeover slower than a window, under load, would otherwise leave one)
            runs = [[w for w in report.windows[cfg.warmup_windows :] if role in w.roles]]
            assert len(runs[0]) >= 2, (role, report.windows)
        for seen in (r for r in runs if len(r) >= 2):
            first, last = seen[0], seen[-1]
            for metric in slack:
                assert long_run.within_slack(role, metric, first.roles[role][metric], last.roles[role][metric]), (
                    role,
                    metric,
                    first,
                    last,
                )


def _one_controller_spans(report: long_run.Report, warmup: int) -> list[list[long_run.Window]]:
    """The windows after the warm-up, split at each takeover (a window overlapping its kill-to-loaded time is
    in none; windows are contiguous, so each takeover overlaps one): within a span the active controller is
    one process."""
    kills = [float(e["t"]) for e in report.events if e["what"] == "takeover-kill"]
    loads = [float(e["t"]) for e in report.events if e["what"] == "takeover-loaded"]
    takeovers = list(zip(kills, loads + [float("inf")] * (len(kills) - len(loads)), strict=True))
    spans: list[list[long_run.Window]] = [[]]
    for w in report.windows[warmup:]:
        if any(killed < w.end and w.start <= loaded for killed, loaded in takeovers):
            spans.append([])
        else:
            spans[-1].append(w)
    return [s for s in spans if s]
