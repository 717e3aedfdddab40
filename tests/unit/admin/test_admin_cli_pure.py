"""The admin CLI's parser: every command has help, one action is required."""

from __future__ import annotations

import pytest

from admin.cli import build_parser

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
