"""The admin CLI's parser: every command has help, one action is required."""

from __future__ import annotations

import pytest

from admin.cli import build_parser
from admin.cluster_cmd import iso_utc

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
