"""The status page rendered from the observatory's snapshot."""

from __future__ import annotations

import pytest
from observations import batch

from streaming.monitoring import observatory as oy
from streaming.monitoring.status_page import render

pytestmark = pytest.mark.unit


def test_status_page_content() -> None:
    o = oy.Observatory(1000, clock=lambda: 2000.0)
    o.set_role(oy.Role.ACTIVE, 5)
    o.record_batch(batch())
    page = render(o.snapshot())
    assert '<span id="role">active</span>' in page
    assert "controller epoch 5" in page and "live brokers [1, 2, 3]" in page
    assert '<svg id="leaders-chart"' in page and "broker 1" in page and "imb 100%" in page
    assert "<td>orders</td>" in page and "<td>solo</td>" in page
    assert "50%" in page  # moving-0: 1 of its 2 target replicas in the ISR
    assert "LeaderAndIsr to broker 2 (1 partitions)" in page
    assert "r1 create_topic ok" in page
    assert "orders-0: OnlinePartition -&gt; NewPartition: invalid transition" in page
    empty = render(oy.Observatory(1).snapshot())
    assert "No partitions yet." in empty and "never" in empty
