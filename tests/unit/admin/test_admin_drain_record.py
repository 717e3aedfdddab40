"""The drain record in ZooKeeper (``/livectl/drains/<N>``, :mod:`admin.drain`): its JSON, and bad ones named."""

from __future__ import annotations

import pytest

from admin.drain import DrainRecord, drain_path
from core.errors import FormatError

pytestmark = pytest.mark.unit


def test_the_record_form() -> None:
    record = DrainRecord(10, -1)
    assert drain_path(4) == "/livectl/drains/4"
    assert record.encode() == b'{"version":1,"batch_size":10,"throttle":-1}'
    assert DrainRecord.decode(record.encode()) == record
    for bad, field in (
        (b'{"version":2}', "version"),
        (b'{"version":1,"batch_size":0,"throttle":-1}', "batch_size"),
        (b'{"version":1,"batch_size":1,"throttle":-2}', "throttle"),
        (b"nope", "$"),
    ):
        with pytest.raises(FormatError) as e:
            DrainRecord.decode(bad)
        assert e.value.field == field
