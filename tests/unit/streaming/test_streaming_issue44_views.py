"""Issue 44 in the operator's views, the Prometheus endpoint and the status page: gentle leader balance (item 4:
the preferred-leader moves left, the bound per pass, the last pass's moves), the cordoned brokers and the
draining ones with what they still hold (item 1)."""

from __future__ import annotations

import pytest
from observations import batch, samples

from streaming.monitoring import observatory as oy
from streaming.monitoring.metrics_http import MetricsServer
from streaming.monitoring.status_page import render

pytestmark = pytest.mark.unit


def test_the_endpoint_and_the_page_show_the_moves_left() -> None:
    from prometheus_client import generate_latest

    o = oy.Observatory(1)
    o.record_batch(batch())
    server = MetricsServer(o, 1)
    m = samples(generate_latest(server.registry).decode())
    assert m[("livectl_preferred_leader_moves_left", ())] == 0, "no rebalance schedule yet: nothing wanted"
    assert m[("livectl_preferred_leader_moves_per_interval_max", ())] == 2147483647
    assert "no bound on the leaders one pass moves" in render(o.snapshot())
    o.leader_moves = lambda: (17, 5, 5)
    m = samples(generate_latest(server.registry).decode())
    assert m[("livectl_preferred_leader_moves_left", ())] == 17
    assert m[("livectl_preferred_leader_moves_per_interval_max", ())] == 5
    assert m[("livectl_preferred_leader_moves_last_pass", ())] == 5
    page = render(o.snapshot())
    assert 'id="card-leader-moves-left">Leader moves left<b>17</b>' in page
    assert "Preferred-leader moves left: 17; last pass: 5;\nat most 5 per pass" in page


def test_the_endpoint_and_the_page_show_the_cordoned_brokers() -> None:
    """Issue 44, item 1: a cordoned broker is 1 on ``livectl_broker_cordoned`` and listed on the page."""
    from prometheus_client import generate_latest

    o = oy.Observatory(1)
    o.record_batch(batch())
    server = MetricsServer(o, 1)
    assert 'id="card-cordoned">Cordoned<b>none</b>' in render(o.snapshot())
    o.cordoned = lambda: (2, 9)
    m = samples(generate_latest(server.registry).decode())
    assert m[("livectl_broker_cordoned", (("broker", "2"),))] == 1
    assert m[("livectl_broker_cordoned", (("broker", "9"),))] == 1, "cordoned though not registered"
    assert m[("livectl_broker_cordoned", (("broker", "1"),))] == 0
    assert 'id="card-cordoned">Cordoned<b>2, 9</b>' in render(o.snapshot())


def test_the_endpoint_and_the_page_show_the_draining_brokers_and_what_they_hold() -> None:
    """Issue 44, item 1: a broker with a drain recorded is 1 on ``livectl_broker_draining``; the replicas and
    leaders it still holds (the drain's progress) are on the endpoint and the page."""
    from prometheus_client import generate_latest

    o = oy.Observatory(1)
    o.record_batch(batch())
    server = MetricsServer(o, 1)
    assert 'id="card-draining">Draining<b>none</b>' in render(o.snapshot())
    m = samples(generate_latest(server.registry).decode())
    # the buckets' counts summed (broker 3: two in one bucket, one in the other)
    assert m[("livectl_broker_replica_partitions", (("broker", "3"),))] == 3
    assert m[("livectl_broker_draining", (("broker", "3"),))] == 0
    o.draining = lambda: (3, 6)
    m = samples(generate_latest(server.registry).decode())
    assert m[("livectl_broker_draining", (("broker", "3"),))] == 1
    assert m[("livectl_broker_draining", (("broker", "6"),))] == 1, "a drain recorded for a broker holding nothing"
    assert m[("livectl_broker_replica_partitions", (("broker", "6"),))] == 0
    page = render(o.snapshot())
    assert "Draining<b>3 (3 replicas, 1 leaders left), 6 (0 replicas, 0 leaders left)</b>" in page
