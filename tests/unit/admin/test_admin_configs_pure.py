"""The config tool's pure parts, as Kafka's ``kafka-configs.sh``: options parsed, change notifications written
as the brokers read them."""

from __future__ import annotations

import pytest

from admin.configs import parse_add_config
from core.kafka.zk_notifications import config_change_sequence, decode_config_change, encode_config_change

pytestmark = pytest.mark.unit


def test_parse_add_config_keeps_bracketed_lists() -> None:
    assert parse_add_config("a=1,b=[x,y],c=") == {"a": "1", "b": "x,y", "c": ""}


def test_add_config_and_notifications() -> None:
    assert parse_add_config("a=1,b=[x,y]") == {"a": "1", "b": "x,y"}
    assert encode_config_change("brokers", "<default>") == b'{"version":2,"entity_path":"brokers/<default>"}'
    # what the tool writes is what the simulated brokers read
    assert decode_config_change(encode_config_change("topics", "orders")) == ("topics", "orders")
    assert decode_config_change(b'{"version":1,"entity_path":"topics/x"}') is None
    assert decode_config_change(b"nope") is None
    assert config_change_sequence("config_change_0000000042") == 42
    assert config_change_sequence("config_change_x") is None and config_change_sequence("other") is None
