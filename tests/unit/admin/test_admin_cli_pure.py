"""The admin CLI's parser: every command has help, one action is required; the controller's answer is awaited
unless ``--no-wait``, and each outcome has its exit code and one line."""

from __future__ import annotations

import argparse

import pytest

from admin.cli import build_parser
from admin.cluster_cmd import iso_utc
from admin.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_PENDING,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    Handler,
    NotFinishedError,
    OperationFailedError,
    UsageError,
    follows_to_end,
    refusal_message,
    run_command,
    timeout_message,
    waits,
)
from core.decisions import AdminResult, AdminStatus

pytestmark = pytest.mark.unit


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


def test_one_action_is_required() -> None:
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(["topics", "--create", "--list"])
    assert e.value.code == 2


def test_controller_timestamp_reads_as_iso_utc() -> None:
    """``/controller``'s epoch milliseconds print as ISO-8601 UTC; what is not a number stays unconverted."""
    assert iso_utc("1700000000000") == "2023-11-14T22:13:20.000Z"
    assert iso_utc("1700000000123") == "2023-11-14T22:13:20.123Z"
    assert iso_utc("0") == "1970-01-01T00:00:00.000Z"
    assert iso_utc(None) is None
    assert iso_utc("soon") is None
    assert iso_utc(str(10**30)) is None


# ----------------------------------------------------------------------------- waiting for the controller's answer

#: one line of every command that sends a command to the controller
WRITES = (
    ["topics", "--create", "--topic", "t", "--partitions", "1", "--replication-factor", "1"],
    ["topics", "--delete", "--topic", "t"],
    ["topics", "--alter", "--topic", "t", "--partitions", "2"],
    ["reassign", "--execute", "--reassignment-json-file", "plan.json"],
    ["reassign", "--cancel", "--reassignment-json-file", "plan.json"],
    ["elect-leaders", "--election-type", "PREFERRED", "--all-topic-partitions"],
    ["configs", "--entity-type", "topics", "--entity-name", "t", "--alter", "--add-config", "retention.ms=1"],
)


@pytest.mark.parametrize("argv", WRITES, ids=lambda argv: " ".join(argv[:2]))
def test_every_write_waits_for_the_answer_unless_no_wait(argv: list[str]) -> None:
    parser = build_parser()
    default = parser.parse_args(argv)
    assert waits(default) and not follows_to_end(default) and default.timeout == 120.0
    explicit = parser.parse_args([*argv, "--wait"])  # the former opt-in, still accepted: the default plus following
    assert waits(explicit) and follows_to_end(explicit)
    fire = parser.parse_args([*argv, "--no-wait"])
    assert not waits(fire) and not follows_to_end(fire)


def test_wait_and_no_wait_together_is_exit_2_naming_the_option(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["elect-leaders", "--election-type", "PREFERRED", "--all-topic-partitions", "--wait", "--no-wait"]
    args = build_parser().parse_args(argv)
    reached: list[str] = []

    def body(_a: argparse.Namespace) -> int:
        reached.append("body")
        return EXIT_OK

    assert run_command(args, body) == EXIT_USAGE
    assert reached == []
    assert capsys.readouterr().err == "livectl elect-leaders: error: --no-wait: can't be used with --wait\n"


def _raise(e: Exception) -> Handler:
    def body(_args: argparse.Namespace) -> int:
        raise e

    return body


def test_each_outcome_has_its_exit_code_and_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(
        ["topics", "--create", "--topic", "t", "--partitions", "1", "--replication-factor", "3"]
    )
    refused = AdminResult("r1", "create_topic", AdminStatus.ERROR, "INVALID_REPLICATION_FACTOR",
                          "Replication factor: 3 larger\nthan available brokers: 1.")  # fmt: skip
    cases = [
        (OperationFailedError(refusal_message(refused), refused), EXIT_FAILED,
         "livectl topics: error: INVALID_REPLICATION_FACTOR: Replication factor: 3 larger than available brokers: 1."),
        (NotFinishedError(timeout_message("r2", 120.0)), EXIT_PENDING,
         "livectl topics: request r2 not finished within 120s (no answer yet); the controller may still carry it "
         "out: look it up later with `livectl audit --request-id r2`"),
        (UsageError("--partitions", "must be at least 1"), EXIT_USAGE,
         "livectl topics: error: --partitions: must be at least 1"),
    ]  # fmt: skip
    for error, code, line in cases:
        assert run_command(args, _raise(error)) == code
        assert capsys.readouterr().err == line + "\n"
    assert (EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_PENDING, EXIT_UNAVAILABLE) == (0, 1, 2, 3, 4)


def test_a_timeout_names_the_last_answer_seen() -> None:
    started = AdminResult("r3", "delete_topic", AdminStatus.IN_PROGRESS, None, "Topic deletion started.")
    assert timeout_message("r3", 1.5, started).startswith(
        "request r3 not finished within 1.5s (last answer: in_progress);"
    )
    assert refusal_message(AdminResult("r4", "elect_leaders", AdminStatus.ERROR, None, "")) == "ERROR"


def test_write_commands_document_their_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("topics", "reassign", "elect-leaders", "configs"):
        with pytest.raises(SystemExit):
            build_parser().parse_args([command, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        assert "--no-wait" in text and "Exit codes: 0 done" in text, command
        assert "3 no answer within --timeout, the line names the request id" in text, command


def test_brokers_documents_the_drain_and_its_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["brokers", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--drain N cordons N and moves every replica off it" in text
    assert "Exit codes: 0 done (--drain: broker N holds no replica and leads nothing)" in text
    assert "3 --drain not done within --timeout" in text and "--no-wait is refused" in text


@pytest.mark.parametrize("action", [["--verify", "--reassignment-json-file", "r.json"], ["--list"]])
@pytest.mark.parametrize("flag", ["--wait", "--no-wait"])
def test_reassign_verify_or_list_refuses_wait_flags_it_would_ignore(
    action: list[str], flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = build_parser().parse_args(["reassign", *action, flag])
    assert args.func(args) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err == (
        f"livectl reassign: error: {flag}: can't be used without --execute or --cancel "
        "(run --verify again to follow the moves)\n"
    )
