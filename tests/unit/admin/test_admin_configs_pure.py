"""The config options of the admin tool, parsed as Kafka's ``kafka-configs.sh`` parses them."""

from __future__ import annotations

import pytest

from admin.configs import parse_add_config

pytestmark = pytest.mark.unit


def test_parse_add_config_keeps_bracketed_lists() -> None:
    assert parse_add_config("a=1,b=[x,y],c=") == {"a": "1", "b": "x,y", "c": ""}
