"""A broker's registration znode parsed as Kafka's ``BrokerIdZNode.decode`` does (no ZooKeeper needed)."""

from __future__ import annotations

import pytest
from broker_registration import registration

from core.model import Broker, Endpoint
from streaming.zk.snapshot_reader import SnapshotError, parse_broker_registration

pytestmark = pytest.mark.unit


def test_parse_broker_registration() -> None:
    info = parse_broker_registration(5, registration("h1", 9092, "r1"), 77)
    assert info == Broker(
        5, 77, "r1", (Endpoint("PLAINTEXT", "h1", 9092, "PLAINTEXT"), Endpoint("INTERNAL", "::1", 9093, "SSL"))
    )
    old = parse_broker_registration(1, b'{"version":1,"host":"old","port":9092,"jmx_port":-1}', 3)
    assert old.endpoints == (Endpoint("PLAINTEXT", "old", 9092, "PLAINTEXT"),) and old.rack is None
    with pytest.raises(SnapshotError, match="/brokers/ids/2: endpoint 'nohostport'"):
        parse_broker_registration(2, b'{"endpoints":["nohostport"]}', 1)
