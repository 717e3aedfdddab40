"""The simulated brokers' control messages: round trip and checks naming the field."""

from __future__ import annotations

import pytest

from core.errors import FormatError
from simbrokers.control import ControlCommand, parse_control

pytestmark = pytest.mark.unit


def test_control_commands_round_trip_and_are_checked() -> None:
    cmd = ControlCommand(3, "slow-follower", fetch_interval_ms=500)
    assert parse_control(b"3", cmd.to_json()) == cmd
    with pytest.raises(FormatError) as e:
        parse_control(b"3", '{"version":1,"command":"explode"}')
    assert e.value.field == "command"
