"""The status page rendered from the observatory's snapshot."""

from __future__ import annotations

from dataclasses import replace

import pytest
from observations import batch

from core.kafka.log_dirs import LogDirResult, LogDirsReport, PartitionLogDir, TopicLogDir
from core.observe import BucketSummary, ReassignmentInfo
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


def test_reassignments_show_the_data_moved_from_the_brokers_log_sizes() -> None:
    # moving-0 adds brokers 4 and 5; the batch's summary does not name its leader, the one below does (1)
    def report(broker: int, at_s: float, size: int) -> LogDirsReport:
        topics = (TopicLogDir("moving", (PartitionLogDir(0, size),)),)
        return LogDirsReport(broker, int(at_s * 1000), (LogDirResult("/d", topics),))

    o = oy.Observatory(1000, clock=lambda: 2000.0)
    o.set_role(oy.Role.ACTIVE, 5)
    o.record_batch(batch())
    page = render(o.snapshot())
    # no reports: the sizes are not known
    assert "moved 0 B of unknown, rate unknown, time left unknown" in page
    assert '<p id="reassignment-data">Data, all: moved 0 B of unknown' in page
    o.log_dirs = lambda: (
        report(1, 1998.0, 8192),  # the leader's log: 8 KiB for each of the two adding replicas
        report(4, 1998.0, 0),
        report(4, 2000.0, 4096),  # 2 KiB/s
        report(5, 2000.0, 8192),
    )
    moving = ReassignmentInfo("moving", 0, (4, 5), (4, 5), (1,), (1, 4), leader=1)
    cluster = BucketSummary(reassigning_count=1, reassignments=(moving,))
    page = render(replace(o.snapshot(), cluster=cluster, live_brokers=(1, 4, 5)))
    assert "moved 12.0 KiB of 16.0 KiB (75%), 2.0 KiB/s, about 2 s left" in page
    total = "Data, all: moved 12.0 KiB of 16.0 KiB (75%), 2.0 KiB/s, about 2 s left."
    assert f'<p id="reassignment-data">{total}</p>' in page
    # broker 5 dies with its copy whole: the move waits for it, and the page says so rather than a time left
    page = render(replace(o.snapshot(), cluster=cluster, live_brokers=(1, 4)))
    assert "(75%), 2.0 KiB/s, time left unknown; waiting for broker 5, which is not alive</td>" in page
    assert "time left unknown; 1 partition(s) waiting for broker 5, which is not alive." in page


def test_the_target_in_isr_bar_says_100_only_when_every_target_replica_is_in_the_isr() -> None:
    # 200 of 201 target replicas in the ISR is 99.5%: rounded to the nearest, the bar said 100% while broker 201
    # was still out of the ISR and the move could not complete
    o = oy.Observatory(1000, clock=lambda: 2000.0)
    o.set_role(oy.Role.ACTIVE, 5)
    target = tuple(range(1, 202))
    moving = ReassignmentInfo("wide", 0, target, (201,), (), target[:-1], leader=1)
    done = ReassignmentInfo("wide", 1, target, (), (), target, leader=1)
    cluster = BucketSummary(reassigning_count=2, reassignments=(moving, done))
    snap = o.snapshot()
    figures = {**snap.figures, "ReassigningPartitions": 2}
    page = render(replace(snap, cluster=cluster, live_brokers=target, figures=figures))
    row, done_row = (page.split("<td>wide</td>")[i].split("</tr>")[0] for i in (1, 2))
    assert '<span class="bar"><span style="width:99%"></span></span> 99%</td>' in row
    assert "100%" not in row
    assert '<span class="bar"><span style="width:100%"></span></span> 100%</td>' in done_row
