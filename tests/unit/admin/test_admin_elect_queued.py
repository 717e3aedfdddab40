"""``elect-leaders --all-topic-partitions`` under ``leader.imbalance.max.leaders.per.interval`` says how many
elections it queued in one line, whatever the number of buckets that queued them (issue 44, item 4).

Seen live with 4 buckets and a bound of 1: ``5 preferred leader elections queued: at most 1 per leader-balance
pass; 6 preferred leader elections queued: at most 1 per leader-balance pass`` (each bucket's message, joined
by the driver's merge)."""

from __future__ import annotations

import json

import pytest
from core_support import Cluster, startup

from admin import dry_run
from admin.elect_cmd import election_report
from core.codec.dry_run_details import read_dry_run
from core.controller import ControllerConfig
from core.decisions import AdminResult
from core.events import BrokerFailure, CreateTopic, ElectLeaders
from core.model import ElectionType, TopicPartition
from streaming.query.batch_rows import merge_admin_results

pytestmark = pytest.mark.unit


def _queued(topic: str, partitions: int, bound: int, *, dry: bool = False) -> AdminResult:
    """One bucket's answer to ``elect-leaders --all`` with ``partitions`` of ``topic`` led by another broker
    than their preferred one (broker 1 bounced and caught up again)."""
    config = ControllerConfig(auto_leader_rebalance_enable=False, leader_imbalance_max_leaders_per_interval=bound)
    c = Cluster.start([1, 2, 3], config)
    assignment = tuple((1, 2 + i % 2) for i in range(partitions))
    c.run(CreateTopic(f"c-{topic}", topic, replica_assignment=assignment, partitions=partitions, replication_factor=2))
    c.run(BrokerFailure(1))
    c.run(startup(1, epoch=500))
    for p in range(partitions):
        c.catch_up(TopicPartition(topic, p))
    c.run(ElectLeaders("e", ElectionType.PREFERRED, (), dry_run=dry))
    [answer] = [d for d in c.decisions if isinstance(d, AdminResult)]
    return answer


def test_elections_queued_by_two_buckets_are_counted_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    merged = merge_admin_results([_queued("orders", 5, 1), _queued("c1", 6, 1)], [2, 1])
    assert len(merged) == 1
    assert election_report(ElectionType.PREFERRED, merged[0])
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "11 preferred leader elections queued: at most 1 per leader-balance pass"
    assert sum("queued:" in line for line in out) == 1


def test_one_bucket_says_the_same(capsys: pytest.CaptureFixture[str]) -> None:
    assert election_report(ElectionType.PREFERRED, _queued("orders", 7, 3))
    assert capsys.readouterr().out.splitlines()[-1] == (
        "7 preferred leader elections queued: at most 3 per leader-balance pass"
    )


def test_a_dry_run_says_how_many_it_would_queue() -> None:
    answer = _queued("orders", 7, 3, dry=True)
    report = read_dry_run(answer.details)
    assert report is not None
    lines = dry_run.text_lines(answer, report)
    assert lines[1] == "  7 preferred leader elections queued: at most 3 per leader-balance pass"


def test_a_dry_runs_json_carries_the_queued_count_the_text_shows() -> None:
    # the text's "7 preferred leader elections queued: ..." line; the JSON had only the message, not the 7
    answer = _queued("orders", 7, 3, dry=True)
    report = read_dry_run(answer.details)
    assert report is not None
    doc = json.loads(json.dumps(dry_run.as_json(answer, report)))
    assert doc["queued_elections"] == 7
    assert doc["message"] == "preferred leader elections queued: at most 3 per leader-balance pass"
    assert dry_run.text_lines(answer, report)[1] == f"  {doc['queued_elections']} {doc['message']}"
    # two buckets' answers, merged by the driver: the sum, as in the text
    merged = merge_admin_results([answer, _queued("c1", 6, 3, dry=True)], [2, 1])[0]
    merged_report = read_dry_run(merged.details)
    assert merged_report is not None
    assert dry_run.as_json(merged, merged_report)["queued_elections"] == 13
    # nothing queued (no bound): 0, not absent
    unbounded = _queued("orders", 2, 2**31 - 1, dry=True)
    unbounded_report = read_dry_run(unbounded.details)
    assert unbounded_report is not None
    assert dry_run.as_json(unbounded, unbounded_report)["queued_elections"] == 0
