"""The state-change log without Spark: the rows of a micro-batch, exactly once on replay, the Kafka-style
log lines, the ``livectl audit`` filters, and the Spark UI's texts.

The pipeline is the one :mod:`shell_pipeline` drives by hand (prepare → bucket step → dispatcher on
in-memory sinks); the table's files are real Parquet bytes written by :class:`streaming.monitoring.audit_log.AuditLog`
into an in-memory folder, copied to disk where the CLI reads them.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import logging
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from shell_pipeline import ADMIN, EVENTS, Pipeline, epoch_znode, snapshot_of

from admin import audit as cli
from core import decisions as dc
from core import events as ev
from core.codec.events import event_to_json
from core.kafka.requests import RequestApi, WireBody
from sinks.memory import MemoryZooKeeper
from sinks.ports import FailedWrite, Fence
from streaming.monitoring import spark_ui
from streaming.monitoring.audit_log import PROGRESS_FILE, AuditLog, MemoryAuditFiles, default_audit_dir
from streaming.monitoring.audit_rows import (
    AUDIT_SCHEMA,
    AuditBatch,
    audit_rows,
    topic_partition_of_item,
    topic_partition_of_path,
)
from streaming.monitoring.request_digest import digest_requests, per_broker
from streaming.monitoring.state_change_log import STATE_CHANGE_LOGGER, log_state_changes
from streaming.query.validation import InputValidator
from streaming.runtime.checkpoint_fs import MemoryCheckpointStore

pytestmark = pytest.mark.unit

T0 = dt.datetime(2026, 11, 23, 23, 59, 59, 500000, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def validator() -> InputValidator:
    return InputValidator()


class Clock:
    def __init__(self, start: dt.datetime = T0) -> None:
        self.now = start

    def __call__(self) -> dt.datetime:
        return self.now


def table_of(files: MemoryAuditFiles) -> pa.Table:
    tables = [pq.read_table(io.BytesIO(b)) for _uri, b in sorted(files.blobs.items())]
    return pa.concat_tables(tables) if tables else AUDIT_SCHEMA.empty_table()


def audited_pipeline(tmp_path: Path, validator: InputValidator, clock: Clock) -> tuple[Pipeline, MemoryAuditFiles]:
    zk = MemoryZooKeeper()
    epoch_znode(zk)
    p = Pipeline(tmp_path, zk, Fence(1, 0), validator)
    files = MemoryAuditFiles()
    p.dispatcher.audit = AuditLog(files, MemoryCheckpointStore("memory:/ckpt"), 1000, 1, clock=clock)
    return p, files


def test_every_decision_of_a_batch_is_a_row(tmp_path: Path, validator: InputValidator) -> None:
    clock = Clock()
    p, files = audited_pipeline(tmp_path, validator, clock)
    p.run_batch([(EVENTS, p.failover_ref(snapshot_of((1, 2, 3))))])
    p.run_batch([(ADMIN, event_to_json(ev.CreateTopic("r1", "orders", 2, 2)))])
    rows = table_of(files).to_pylist()
    batch1 = [r for r in rows if r["batch_id"] == 1]
    assert {(r["controller_id"], r["controller_epoch"]) for r in rows} == {(1000, 1)}
    assert all(r["time"] == T0.replace(microsecond=500000) for r in batch1)
    assert [r["seq"] for r in batch1] == list(range(len(batch1)))
    # ZooKeeper writes: the topic znode and each partition's state, written
    zk = [r for r in batch1 if r["kind"] == "zk_write"]
    assert ("create", "orders", None, "/brokers/topics/orders", "written") in {
        (r["action"], r["topic"], r["partition"], r["path"], r["outcome"]) for r in zk
    }
    states = {r["partition"]: json.loads(r["detail"]) for r in zk if r["path"].endswith("/state")}
    assert sorted(states) == [0, 1]
    # requests: one row per API and partition, naming every broker sent that state
    lai = [r for r in batch1 if r["kind"] == "request" and r["action"] == "LeaderAndIsr"]
    assert sorted(r["partition"] for r in lai) == [0, 1]
    for r in lai:
        state = json.loads(r["detail"])
        assert sorted(r["brokers"]) == sorted(state["replicas"]) and r["topic"] == "orders"
        assert state["leader"] == state["replicas"][0] and state["leaderEpoch"] == 0
    um = [r for r in batch1 if r["kind"] == "request" and r["action"] == "UpdateMetadata"]
    # an UpdateMetadata (the same states, to every live broker) is one row per broker, with its count
    assert sorted((r["brokers"], json.loads(r["detail"])["partitions"]) for r in um) == [([1], 2), ([2], 2), ([3], 2)]
    # the admin result, with its request id and the topic it was about
    (admin,) = [r for r in batch1 if r["kind"] == "admin_result"]
    assert (admin["request_id"], admin["action"], admin["outcome"]) == ("r1", "create_topic", "ok")
    # the order they were carried out: ZooKeeper, requests, admin results
    kinds = [r["kind"] for r in batch1]
    assert kinds == sorted(kinds, key=["zk_write", "request", "admin_result", "state_change_failure"].index)


def test_a_replayed_batch_writes_nothing_twice(tmp_path: Path, validator: InputValidator) -> None:
    clock = Clock()
    p, files = audited_pipeline(tmp_path, validator, clock)
    p.run_batch([(EVENTS, p.failover_ref(snapshot_of((1, 2, 3))))])
    state_before = {b: s.value for b, s in p.states.items()}
    p.run_batch([(ADMIN, event_to_json(ev.CreateTopic("r1", "orders", 2, 2)))])
    written = dict(files.blobs)
    assert len(written) == 2
    # Spark replays batch 1 (same state, same rows) after a crash past the audit write
    for b, v in state_before.items():
        p.states[b].value = v
    clock.now = T0 + dt.timedelta(minutes=5)
    p.batch = 1
    p.offsets = {ADMIN: 0, EVENTS: 1}
    p.run_batch([(ADMIN, event_to_json(ev.CreateTopic("r1", "orders", 2, 2)))])
    assert files.blobs == written and files.writes == 2
    assert isinstance(p.dispatcher.audit, AuditLog) and p.dispatcher.audit.last == "skipped"


def test_a_crash_between_the_file_and_the_commit_replays_into_the_same_file() -> None:
    """The first attempt chose the time (and so the date folder, across midnight) and the file; the replay
    reuses them and replaces that file whole."""

    class Crashing(MemoryAuditFiles):
        crash = True

        def write_bytes(self, uri: str, data: bytes) -> None:
            super().write_bytes(uri, data)
            if self.crash:
                self.crash = False
                raise OSError("killed after the data file")

    clock = Clock()
    files = Crashing()
    ckpt = MemoryCheckpointStore("memory:/ckpt")
    log = AuditLog(files, ckpt, 1000, 3, clock=clock, log_lines=False)
    batch = AuditBatch(7, admin_results=[dc.AdminResult("r9", "delete_topic", dc.AdminStatus.OK)])
    with pytest.raises(OSError):
        log(batch)
    (first,) = files.blobs
    assert "/date=2026-11-23/" in first
    pending = json.loads(ckpt.read_text(f"memory:/ckpt/{PROGRESS_FILE}"))["pending"]
    assert pending["batch"] == 7 and pending["file"] == first
    clock.now = T0 + dt.timedelta(seconds=1)  # past midnight now
    log(batch)
    assert list(files.blobs) == [first] and log.last == "written"
    (row,) = table_of(files).to_pylist()
    assert row["time"] == T0.replace(microsecond=500000) and row["batch_id"] == 7
    # the next batch is a new file, under the new day
    log(AuditBatch(8, admin_results=[dc.AdminResult("r10", "delete_topic", dc.AdminStatus.OK)]))
    assert len(files.blobs) == 2 and any("/date=2026-11-24/" in u for u in files.blobs)
    # a batch with nothing decided writes no file
    log(AuditBatch(9))
    assert len(files.blobs) == 2 and log.last == "empty"


def test_refused_writes_and_failures_are_rows_and_error_lines(caplog: pytest.LogCaptureFixture) -> None:
    w = dc.ZkWrite(dc.ZkOp.SET, "/brokers/topics/a-b/partitions/3/state", '{"leader":1}', 4)
    ok = dc.ZkWrite(dc.ZkOp.DELETE, "/admin/delete_topics/gone", None)
    failure = dc.StateChangeFailure("[Topic=a-b,Partition=3,Replica=2]", "OnlineReplica", "NewReplica", "invalid")
    batch = AuditBatch(5, [w, ok], [FailedWrite(0, w, "BadVersion")], (), (), [failure])
    rows = audit_rows(batch, 1000, 2, T0).to_pylist()
    assert [(r["kind"], r["outcome"], r["topic"], r["partition"], r["error"]) for r in rows] == [
        ("zk_write", "refused", "a-b", 3, "BadVersion"),
        ("zk_write", "written", "gone", None, None),
        ("state_change_failure", "failed", "a-b", 3, "invalid"),
    ]
    assert rows[2]["action"] == "OnlineReplica -> NewReplica"
    caplog.set_level(logging.INFO, logger=STATE_CHANGE_LOGGER)
    log_state_changes(batch, 1000, 2)
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR and r.name == STATE_CHANGE_LOGGER]
    assert errors == [
        "[Controller id=1000 epoch=2] ZooKeeper refused set /brokers/topics/a-b/partitions/3/state "
        "(expected version 4) in micro-batch 5: BadVersion",
        "[Controller id=1000 epoch=2] Controller 1000 epoch 2 failed to change state for "
        "[Topic=a-b,Partition=3,Replica=2] from OnlineReplica to NewReplica: invalid",
    ]


def test_request_summaries_are_kafka_style_lines(caplog: pytest.LogCaptureFixture) -> None:
    body = {
        "controllerId": 1000,
        "controllerEpoch": 2,
        "topicStates": [
            {
                "topicName": "t",
                "partitionStates": [
                    {"partitionIndex": 0, "leader": 1, "leaderEpoch": 1, "isr": [1, 2]},
                    {"partitionIndex": 1, "leader": 2, "leaderEpoch": 1, "isr": [2, 1]},
                ],
            }
        ],
    }
    lai = dc.BrokerRequest(1, RequestApi.LEADER_AND_ISR, WireBody(body))
    um = dc.BrokerRequest(1, RequestApi.UPDATE_METADATA, WireBody(body))
    caplog.set_level(logging.DEBUG, logger=STATE_CHANGE_LOGGER)
    log_state_changes(AuditBatch(6, requests=[um, lai]), 1000, 2)
    info = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert info == [
        "[Controller id=1000 epoch=2] Sending LeaderAndIsr request to broker 1 with 1 become-leader and "
        "1 become-follower partitions (micro-batch 6)",
        "[Controller id=1000 epoch=2] Sending UpdateMetadata request to broker 1 for 2 partitions (micro-batch 6)",
    ]
    debug = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert len(debug) == 4 and debug[0].endswith("to broker 1 for partition t-0")


def test_a_shared_update_metadata_is_logged_for_each_addressee(caplog: pytest.LogCaptureFixture) -> None:
    from core.kafka.requests import SHARED_BROKER_ID, Addressee

    body = {
        "controllerId": 1000,
        "controllerEpoch": 2,
        "brokerEpoch": -1,
        "topicStates": [{"topicName": "t", "partitionStates": [{"partitionIndex": 0, "leader": 1}]}],
    }
    um = dc.BrokerRequest(
        SHARED_BROKER_ID, RequestApi.UPDATE_METADATA, WireBody(body), (Addressee(1, 5), Addressee(3, 7))
    )
    caplog.set_level(logging.DEBUG, logger=STATE_CHANGE_LOGGER)
    log_state_changes(AuditBatch(6, requests=[um]), 1000, 2)
    info = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert info == [
        f"[Controller id=1000 epoch=2] Sending UpdateMetadata request to broker {b} for 1 partitions (micro-batch 6)"
        for b in (1, 3)
    ]
    debug = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert len(debug) == 1 and debug[0].endswith("to brokers 1,3 for partition t-0")
    # an UpdateMetadata's states are counted, not read (leaders: 0), once per addressee
    assert per_broker(digest_requests([um])) == {
        (RequestApi.UPDATE_METADATA, 1): (1, 0),
        (RequestApi.UPDATE_METADATA, 3): (1, 0),
    }


def test_topic_and_partition_of_paths_and_items() -> None:
    assert topic_partition_of_path("/brokers/topics/my-topic/partitions/12/state") == ("my-topic", 12)
    assert topic_partition_of_path("/brokers/topics/my-topic") == ("my-topic", None)
    assert topic_partition_of_path("/admin/delete_topics/x") == ("x", None)
    assert topic_partition_of_path("/controller_epoch") == (None, None)
    assert topic_partition_of_item("my-topic-3") == ("my-topic", 3)
    assert topic_partition_of_item("[Topic=a-1,Partition=2,Replica=7]") == ("a-1", 2)
    assert topic_partition_of_item("broker 3") == (None, None)
    assert default_audit_dir("file:/x/checkpoints/livectl/") == "file:/x/checkpoints/livectl-audit"


# ------------------------------------------------------------------------------------------ livectl audit


@pytest.fixture
def table_dir(tmp_path: Path, validator: InputValidator) -> Path:
    """A table of three batches on disk: create ``orders`` (r1), a broker failure, delete ``orders`` (r2)."""
    clock = Clock(dt.datetime(2026, 11, 22, 12, 0, tzinfo=dt.UTC))
    p, files = audited_pipeline(tmp_path / "q", validator, clock)
    p.run_batch([(EVENTS, p.failover_ref(snapshot_of((1, 2, 3))))])
    p.run_batch([(ADMIN, event_to_json(ev.CreateTopic("r1", "orders", 2, 2)))])
    p.run_batch([(ADMIN, event_to_json(ev.CreateTopic("r3", "other", 1, 1)))])
    clock.now = dt.datetime(2026, 11, 23, 8, 0, tzinfo=dt.UTC)
    p.run_batch([(EVENTS, event_to_json(ev.BrokerFailure(2, 102)))])
    out = tmp_path / "audit"
    for uri, data in files.blobs.items():
        target = out / uri.removeprefix(files.root + "/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return out


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(["audit", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_audit_cli_filters(table_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "--audit-dir", str(table_dir), "--topic", "orders", "--output", "json")
    rows: list[dict[str, Any]] = json.loads(out)
    assert code == 0 and rows and all(r["topic"] == "orders" for r in rows)
    assert {r["kind"] for r in rows} >= {"zk_write", "request"}
    assert rows == sorted(rows, key=lambda r: (r["time"], r["batch_id"], r["seq"]))
    assert {r["date"] for r in rows} == {"2026-11-22", "2026-11-23"}
    # --partition: only that partition's decisions (the broker failure moved some leaders)
    code, out, _ = run_cli(
        capsys, "--audit-dir", str(table_dir), "--topic", "orders", "--partition", "1", "--output", "json"
    )
    part = json.loads(out)
    assert part and all(r["partition"] == 1 and r["topic"] == "orders" for r in part)
    # --request-id: the admin result
    code, out, _ = run_cli(capsys, "--audit-dir", str(table_dir), "--request-id", "r1", "--output", "json")
    (result,) = json.loads(out)
    assert (result["kind"], result["outcome"], result["batch_id"]) == ("admin_result", "ok", 1)
    # --since: only what was decided on the 23rd (the broker failure's batch)
    code, out, _ = run_cli(capsys, "--audit-dir", str(table_dir), "--since", "2026-11-23T00:00Z", "--output", "json")
    assert {r["batch_id"] for r in json.loads(out)} == {3}
    # text output, one line per decision
    code, out, _ = run_cli(capsys, "--audit-dir", str(table_dir), "--request-id", "r3")
    assert out.startswith("2026-11-22T12:00:00.000Z batch 2 c1000 e1 admin_result create_topic")
    assert "request r3" in out and len(out.splitlines()) == 1


def test_audit_cli_refuses_bad_input(table_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "--audit-dir", str(table_dir), "--partition", "1")
    assert code == 2 and "--partition: needs --topic" in err
    code, _, err = run_cli(capsys, "--audit-dir", str(table_dir), "--since", "yesterday")
    assert code == 2 and "--since" in err and "yesterday" in err
    code, _, err = run_cli(capsys, "--audit-dir", str(tmp_path / "nothing"))
    assert code == 1 and "no state-change log at" in err
    now = dt.datetime(2026, 1, 2, tzinfo=dt.UTC)
    assert cli.parse_since("2h", now) == dt.datetime(2026, 1, 1, 22, tzinfo=dt.UTC)
    assert cli.parse_since("2026-01-01T10:00+02:00") == dt.datetime(2026, 1, 1, 8, tzinfo=dt.UTC)
    assert cli.audit_location(None, "file:/c/ck") == "file:/c/ck-audit"


# ------------------------------------------------------------------------------------------ the Spark UI texts


def test_spark_ui_texts() -> None:
    m = {
        "OfflinePartitionsCount": 0,
        "UnderReplicatedPartitions": 3,
        "ReassigningPartitions": 2,
        "PreferredReplicaImbalanceCount": 1,
        "GlobalTopicCount": 4,
        "GlobalPartitionCount": 40,
        "TopicsToDeleteCount": 0,
        "ReplicasToDeleteCount": 0,
    }
    text = spark_ui.batch_summary(1000, 5, 68, m)
    assert text.startswith("livectl c1000 e5 batch 68: offline 0, URP 3, reassigning 2; imbalanced 1, topics 4")
    assert spark_ui.app_name("livectl", 1001, standby=True) == "livectl c1001 standby at start"
    assert spark_ui.app_name("prod", 1000, standby=False) == "livectl prod c1000 active"


def test_dispatcher_describes_the_state_after_the_batch(tmp_path: Path, validator: InputValidator) -> None:
    zk = MemoryZooKeeper()
    epoch_znode(zk)
    p = Pipeline(tmp_path, zk, Fence(1, 0), validator)
    p.dispatcher.controller_id, p.dispatcher.controller_epoch = 1000, 1
    p.run_batch([(EVENTS, p.failover_ref(snapshot_of((1, 2, 3))))])
    p.run_batch([(ADMIN, event_to_json(ev.CreateTopic("r1", "orders", 4, 3)))])
    assert p.dispatcher.describe(1).startswith(
        "livectl c1000 e1 batch 1: offline 0, URP 0, under min ISR 0, reassigning 0;"
    )
    p.run_batch([(EVENTS, event_to_json(ev.BrokerFailure(3, 103)))])
    # broker 3 is in every ISR: every partition is under-replicated now, in this batch's description
    assert p.dispatcher.describe(2).startswith(
        "livectl c1000 e1 batch 2: offline 0, URP 4, under min ISR 0, reassigning 0;"
    )
