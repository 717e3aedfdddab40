"""The long run's short form (issue 41, item 6): ``bench/long_run/`` for 75 s at 2,000 partitions.

Real processes on the session's ZooKeeper and Kafka: five simulated broker processes, an active ``livectl
run`` controller and a standby on one checkpoint. An admin command every 2 s (creations, config changes,
added partitions, reassignments, deletions, in turn), a broker SIGKILLed and started again (twice when the
machine keeps up) and one takeover (the active controller's process group SIGKILLed, the standby elected, a new
standby started). The full hour at 100k partitions runs by hand (``python -m bench long_run``, docs/reliability.md).

Asserted: every command answered exactly once with ``ok`` (the admin-results topic read back), ZooKeeper and
every broker's own view in agreement at the end, leader and controller epochs only growing, and, after the
warm-up window, the threads and open descriptors of the active controller's JVM and Python and of the
brokers not still rising (the last window within :data:`bench.long_run.SHORT_SLACK` of the first after the
warm-up: a few for the Python processes; the JVM's thread pools still grow in its first minutes). Memory is
reported, not asserted: 75 s says nothing of a leak per hour.
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
    for role, slack in long_run.SHORT_SLACK.items():
        # a window in the middle of the takeover has no active controller
        seen = [w for w in report.windows[cfg.warmup_windows :] if role in w.roles]
        assert seen, (role, report.windows)
        first, last = seen[0], seen[-1]
        for metric in slack:
            assert long_run.within_slack(role, metric, first.roles[role][metric], last.roles[role][metric]), (
                role,
                metric,
                first,
                last,
            )
