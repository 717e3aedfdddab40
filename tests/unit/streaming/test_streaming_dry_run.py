"""A dry run through the query's own steps (routing, the buckets' step, the dispatch; without Spark): a command
split over several buckets is run dry in each, nothing reaches ZooKeeper or ``livectl.requests``, the buckets'
answers merge into one, and the real command that follows writes what that answer announced."""

from __future__ import annotations

import datetime as dt
import json
import logging
from pathlib import Path

import pytest
from shell_pipeline import ADMIN, BUCKETS, Pipeline

from core import events as ev
from core.codec.decisions import decode_decision
from core.codec.dry_run_details import dry_run_details, read_dry_run
from core.codec.events import event_to_json
from core.decisions import AdminResult, AdminStatus, BrokerRequest, ZkWrite
from core.model import PartitionTarget
from streaming.monitoring.audit_rows import AuditBatch, audit_rows
from streaming.monitoring.state_change_log import STATE_CHANGE_LOGGER, log_state_changes
from streaming.query.routing import bucket_of
from streaming.query.validation import InputValidator

pytestmark = pytest.mark.unit


def two_topics_in_two_buckets() -> tuple[str, str]:
    names = [f"topic{i}" for i in range(50)]
    first = names[0]
    second = next(n for n in names if bucket_of(n, BUCKETS) != bucket_of(first, BUCKETS))
    return first, second


def results(p: Pipeline) -> list[AdminResult]:
    out = []
    for m in p.requests.messages:
        if m.topic == "livectl.admin-results":
            raw = {k: v for k, v in m.value_json().items() if k not in ("batch_id", "controller_epoch")}
            d = decode_decision(raw)
            assert isinstance(d, AdminResult)
            out.append(d)
    return out


def test_a_split_command_run_dry_changes_nothing_and_answers_once(tmp_path: Path, validator: InputValidator) -> None:
    a, b = two_topics_in_two_buckets()
    p = Pipeline.failed_over(tmp_path, validator, (1, 2, 3, 4))
    zk = p.zk
    p.run_batch([(ADMIN, event_to_json(ev.CreateTopic(f"c-{t}", t, 1, 2, ((1, 2),)))) for t in (a, b)])
    tree, sent = zk.snapshot(), [m for m in p.requests.messages if m.topic == "livectl.requests"]

    targets = (PartitionTarget(a, 0, (3, 4)), PartitionTarget(b, 0, (4, 1)))
    p.run_batch([(ADMIN, event_to_json(ev.ReassignPartitions("dry", targets, dry_run=True)))])
    assert zk.snapshot() == tree
    assert [m for m in p.requests.messages if m.topic == "livectl.requests"] == sent
    (answer,) = [r for r in results(p) if r.request_id == "dry"]  # one answer for both buckets
    assert answer.status is AdminStatus.IN_PROGRESS
    report = read_dry_run(answer.details)
    assert report is not None
    assert {(r.topic, r.replicas) for r in report.partitions} == {(a, (3, 4, 1, 2)), (b, (4, 1, 2))}
    writes = [d for d in report.decisions if isinstance(d, ZkWrite)]
    assert {f"/brokers/topics/{a}", f"/brokers/topics/{b}"} <= {w.path for w in writes}
    assert any(isinstance(d, BrokerRequest) for d in report.decisions)

    p.run_batch([(ADMIN, event_to_json(ev.ReassignPartitions("real", targets)))])
    last = {w.path: w for w in writes}
    for path, w in last.items():  # the real run wrote what the dry run announced
        assert w.data is not None and json.loads(zk.get(path)[0]) == json.loads(w.data), path
    (real,) = [r for r in results(p) if r.request_id == "real"]
    assert (real.status, real.error) == (answer.status, answer.error)


def test_in_one_batch_a_dry_run_sees_the_command_before_it(tmp_path: Path, validator: InputValidator) -> None:
    p = Pipeline.failed_over(tmp_path, validator)
    zk = p.zk
    p.run_batch(
        [
            (ADMIN, event_to_json(ev.CreateTopic("c", "fresh", 2, 2))),
            (ADMIN, event_to_json(ev.CreatePartitions("dry", "fresh", 3, dry_run=True))),
        ]
    )
    assert zk.exists("/brokers/topics/fresh") and not zk.exists("/brokers/topics/fresh/partitions/2")
    (answer,) = [r for r in results(p) if r.request_id == "dry"]
    assert answer.status is AdminStatus.OK
    report = read_dry_run(answer.details)
    assert report is not None
    assert [(r.topic, r.partition) for r in report.partitions] == [("fresh", 2)]


def test_the_state_change_log_says_a_dry_run_applied_nothing(caplog: pytest.LogCaptureFixture) -> None:
    dry = AdminResult("d", "create_topic", AdminStatus.OK, details=dry_run_details([], []))
    real = AdminResult("r", "create_topic", AdminStatus.OK)
    batch = AuditBatch(3, admin_results=[dry, real])
    table = audit_rows(batch, 1000, 2, dt.datetime(2026, 12, 7, tzinfo=dt.UTC))
    actions = dict(zip(table.column("request_id").to_pylist(), table.column("action").to_pylist(), strict=True))
    assert actions == {"d": "create_topic (dry run)", "r": "create_topic"}
    caplog.set_level(logging.INFO, logger=STATE_CHANGE_LOGGER)
    log_state_changes(batch, 1000, 2)
    lines = [r.getMessage() for r in caplog.records]
    assert any("Admin request d (create_topic, dry run: nothing applied): ok" in line for line in lines)
    assert any("Admin request r (create_topic): ok" in line for line in lines)
