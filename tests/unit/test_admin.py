"""Admin CLI, pure parts: argument syntax, Kafka's JSON files, the progress line. No services."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from admin import files
from admin.cli import build_parser
from admin.common import UsageError, parse_replica_assignment
from admin.publish import EpochFilter, Progress, _decode_result
from core.codec.decisions import encode_decision
from core.decisions import AdminResult, AdminStatus
from core.errors import FormatError
from core.model import ElectionType, TopicPartition
from simbrokers.control import ControlCommand, parse_control

pytestmark = pytest.mark.unit


def test_replica_assignment_syntax_is_kafkas() -> None:
    assert parse_replica_assignment("1:2,2:3,3:1") == ((1, 2), (2, 3), (3, 1))
    with pytest.raises(UsageError) as e:
        parse_replica_assignment("1:2,x:3")
    assert e.value.field == "--replica-assignment" and "partition 1" in e.value.reason


def test_reassignment_file_errors_name_the_file_and_field(tmp_path: Path) -> None:
    f = tmp_path / "r.json"
    f.write_text('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any","any"]}]}')
    [target] = files.read_reassignment(f, "rid")
    assert (target.topic, target.partition, target.replicas) == ("t", 0, (1, 2))
    for text, field in [
        ('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[]}]}', "partitions[0].replicas"),
        ('{"version":1,"partitions":[{"topic":"t","partition":-1,"replicas":[1]}]}', "partitions[0].partition"),
        ('{"version":2,"partitions":[]}', "version"),
        ('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1],"log_dirs":["/d"]}]}',
         "partitions[0].log_dirs"),
        ("[1]", "$"),
    ]:  # fmt: skip
        f.write_text(text)
        with pytest.raises(FormatError) as e:
            files.read_reassignment(f, "rid")
        assert e.value.field == f"{f}: {field}", text
    with pytest.raises(FormatError) as e:
        files.read_reassignment(tmp_path / "missing.json", "rid")
    assert "cannot read the file" in e.value.reason


def test_topics_to_move_and_election_files(tmp_path: Path) -> None:
    f = tmp_path / "m.json"
    f.write_text('{"version":1,"topics":[{"topic":"a"},{"topic":"b"}]}')
    assert files.read_topics_to_move(f) == ["a", "b"]
    f.write_text('{"partitions":[{"topic":"a","partition":1}]}')
    ev = files.read_election(f, "rid", ElectionType.PREFERRED)
    assert ev.partitions == (TopicPartition("a", 1),)
    f.write_text('{"partitions":[]}')
    with pytest.raises(FormatError):
        files.read_election(f, "rid", ElectionType.PREFERRED)


def test_generated_json_is_kafkas_format() -> None:
    text = files.reassignment_json({TopicPartition("t", 1): (2, 3), TopicPartition("t", 0): (1, 2)})
    assert json.loads(text) == {
        "version": 1,
        "partitions": [
            {"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["any", "any"]},
            {"topic": "t", "partition": 1, "replicas": [2, 3], "log_dirs": ["any", "any"]},
        ],
    }


def test_every_command_has_help() -> None:
    parser = build_parser()
    for argv in (
        ["topics", "--help"],
        ["reassign", "--help"],
        ["elect-leaders", "--help"],
        ["brokers", "list", "--help"],
        ["controller", "status", "--help"],
    ):
        with pytest.raises(SystemExit) as e:
            parser.parse_args(argv)
        assert e.value.code == 0


def test_every_simulator_command_has_help() -> None:
    from simbrokers.ctl import build_parser as simbrokers_parser

    for argv in (["fault", "--help"], ["shutdown", "--help"], ["kill", "--help"]):
        with pytest.raises(SystemExit) as e:
            simbrokers_parser().parse_args(argv)
        assert e.value.code == 0


def test_one_action_is_required() -> None:
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(["topics", "--create", "--list"])
    assert e.value.code == 2


def test_results_with_the_sinks_extra_fields_decode() -> None:
    result = AdminResult("r1", "create_topic", AdminStatus.OK)
    value = json.dumps(encode_decision(result) | {"batch_id": 3, "controller_epoch": 1}).encode()
    assert _decode_result(value) == result
    assert _decode_result(b"not json") is None


def test_progress_bar_uses_the_counts_in_details() -> None:
    out = io.StringIO()
    p = Progress("reassign", out)
    line = p.line(AdminResult("r", "reassign_partitions", AdminStatus.IN_PROGRESS, details='{"done":1,"total":4}'))
    assert "[######..................] 1/4 in_progress" in line
    assert "waiting" in p.line(None)


def test_control_commands_round_trip_and_are_checked() -> None:
    cmd = ControlCommand(3, "slow-follower", fetch_interval_ms=500)
    assert parse_control(b"3", cmd.to_json()) == cmd
    with pytest.raises(FormatError) as e:
        parse_control(b"3", '{"version":1,"command":"explode"}')
    assert e.value.field == "command"


def test_epoch_filter_drops_results_of_an_older_controller() -> None:
    f = EpochFilter()
    assert [f.admit(e) for e in (2, 3, 2, None, 3, 1, 4)] == [True, True, False, True, True, False, True]
    assert (f.highest, f.dropped) == (4, 2)
