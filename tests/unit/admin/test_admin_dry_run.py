"""``--dry-run``: every write command takes it, and what the controller answered is printed from core's step
(text and JSON), the decisions in core's one JSON form."""

from __future__ import annotations

import argparse
import dataclasses
import json

import pytest
from core_support import Cluster

import core.events as ev
from admin import dry_run, topics_cmd
from admin.cli import build_parser
from admin.common import EXIT_USAGE, Handler, run_command
from admin.reassign import command
from core.codec.decisions import decode_decision
from core.codec.dry_run_details import read_dry_run
from core.controller import step
from core.decisions import AdminResult
from core.model import ElectionType, PartitionTarget, TopicPartition

pytestmark = pytest.mark.unit

WRITES = (
    ["topics", "--create", "--topic", "t", "--partitions", "1", "--replication-factor", "1"],
    ["topics", "--delete", "--topic", "t"],
    ["topics", "--alter", "--topic", "t", "--partitions", "2"],
    ["reassign", "--execute", "--reassignment-json-file", "plan.json"],
    ["reassign", "--cancel", "--reassignment-json-file", "plan.json"],
    ["elect-leaders", "--election-type", "PREFERRED", "--all-topic-partitions"],
    ["configs", "--entity-type", "topics", "--entity-name", "t", "--alter", "--add-config", "retention.ms=1"],
    ["brokers", "--drain", "3"],
)


@pytest.mark.parametrize("argv", WRITES, ids=lambda argv: " ".join(argv[:2]))
def test_every_mutating_command_takes_dry_run(argv: list[str]) -> None:
    assert dry_run.dry_running(build_parser().parse_args([*argv, "--dry-run"]))
    assert not dry_run.dry_running(build_parser().parse_args(argv))


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (
            ["topics", "--list", "--dry-run"],
            "livectl topics: error: --dry-run: can't be used with --list or --describe",
        ),
        (
            ["reassign", "--verify", "--reassignment-json-file", "p.json", "--dry-run"],
            "livectl reassign: error: --dry-run: can't be used without --execute or --cancel",
        ),
        (
            ["topics", "--alter", "--topic", "t", "--partitions", "3", "--config", "a=b", "--dry-run"],
            "livectl topics: error: --dry-run: takes one change at a time",
        ),
    ],
)
def test_dry_run_where_it_means_nothing_is_exit_2(
    argv: list[str], line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = build_parser().parse_args(argv)
    assert run_command(args, _body(args)) == EXIT_USAGE
    assert capsys.readouterr().err.startswith(line)


def _body(args: argparse.Namespace) -> Handler:
    """The command's body (its checks of the options come before it connects anywhere)."""
    return topics_cmd._topics if args.command == "topics" else command._reassign


def answer_of(cmd: ev.AdminCommand) -> AdminResult:
    c = Cluster.start([1, 2, 3])
    c.run(ev.CreateTopic("c", "t", replica_assignment=((1, 2), (2, 3))))
    (answer,) = step(c.state, [dataclasses.replace(cmd, dry_run=True)])[1]  # type: ignore[type-var]
    assert isinstance(answer, AdminResult)
    return answer


def test_text_shows_writes_requests_partitions_and_that_nothing_was_applied() -> None:
    answer = answer_of(ev.CreatePartitions("x", "t", 3))
    report = read_dry_run(answer.details)
    assert report is not None
    lines = dry_run.text_lines(answer, report)
    assert lines[0] == "Dry run of create_partitions (request x): the controller would carry it out."
    assert "  set /brokers/topics/t" in "\n".join(lines)
    assert any(line.startswith("  create /brokers/topics/t/partitions/2/state") for line in lines)
    assert any(line.startswith("  LeaderAndIsr to broker ") and "t-2 (leader " in line for line in lines)
    assert any(line.startswith("  t-2 OnlinePartition replicas ") for line in lines)
    assert lines[-2:] == ["Refusals (0):", "Nothing was applied."]


def test_a_refusal_is_shown_with_its_reason() -> None:
    answer = answer_of(ev.CreateTopic("x", "u", 1, 5))
    report = read_dry_run(answer.details)
    assert report is not None
    lines = dry_run.text_lines(answer, report)
    assert lines[0].startswith(
        "Dry run of create_topic (request x): the controller would refuse it: INVALID_REPLICATION_FACTOR"
    )
    assert "ZooKeeper writes (0):" in lines and "Requests (0):" in lines
    assert lines[lines.index("Refusals (1):") + 1].startswith("  create_topic: INVALID_REPLICATION_FACTOR: ")


def test_json_carries_the_decisions_in_cores_form() -> None:
    answer = answer_of(ev.ReassignPartitions("x", (PartitionTarget("t", 0, (3, 1)),)))
    report = read_dry_run(answer.details)
    assert report is not None
    out = json.loads(json.dumps(dry_run.as_json(answer, report)))
    assert (out["would"], out["applied"], out["error"]) == ("in_progress", False, None)
    assert [decode_decision(d, typed=True) for d in out["decisions"]] == list(report.decisions)
    assert out["partitions"] == [
        {"topic": "t", "partition": 0, "state": "OnlinePartition", "replicas": [3, 1, 2], "adding_replicas": [3],
         "removing_replicas": [2], "leader": 1, "leader_epoch": 1, "isr": [1, 2]}
    ]  # fmt: skip


def test_per_partition_refusals_are_listed_with_their_reasons() -> None:
    answer = answer_of(ev.ElectLeaders("x", ElectionType.PREFERRED, (TopicPartition("t", 0), TopicPartition("t", 7))))
    report = read_dry_run(answer.details)
    assert report is not None
    lines = dry_run.text_lines(answer, report)
    refusals = lines[next(i for i, line in enumerate(lines) if line.startswith("Refusals (")) + 1 : -1]
    assert any(line.startswith("  t-0: ELECTION_NOT_NEEDED") for line in refusals), lines
    assert any(line.startswith("  t-7: UNKNOWN_TOPIC_OR_PARTITION") for line in refusals), lines
