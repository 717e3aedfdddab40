"""What every admin command shares: the ``--replica-assignment`` syntax, as Kafka's ``kafka-topics.sh``."""

from __future__ import annotations

import pytest

from admin.common import UsageError, parse_replica_assignment

pytestmark = pytest.mark.unit


def test_replica_assignment_syntax_is_kafkas() -> None:
    assert parse_replica_assignment("1:2,2:3,3:1") == ((1, 2), (2, 3), (3, 1))
    with pytest.raises(UsageError) as e:
        parse_replica_assignment("1:2,x:3")
    assert e.value.field == "--replica-assignment" and "partition 1" in e.value.reason
