"""Fencing of every output, and retries while a service restarts, on the dispatcher with the fakes.

The real-service versions are in ``tests/integration/sinks/test_sinks_zookeeper_fence.py`` (the fence check on a real
ZooKeeper) and ``tests/e2e/test_fenced_controller.py`` (a controller process paused and resumed).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from shell_pipeline import ADMIN, EVENTS, Pipeline, epoch_znode, snapshot_of

from core import decisions as dc
from core import events as ev
from core.codec.events import event_to_json
from sinks.errors import ControllerFencedError, SinkUnavailableError
from sinks.memory import MemoryRequestSink, MemoryZkSink, MemoryZooKeeper
from sinks.ports import Fence, RequestBatchResult
from streaming.query.validation import InputValidator

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def validator() -> InputValidator:
    return InputValidator()


def _fenced_pipeline(tmp_path: Path, validator: InputValidator) -> tuple[Pipeline, MemoryZooKeeper]:
    zk = MemoryZooKeeper()
    epoch_znode(zk)
    p = Pipeline(tmp_path, zk, Fence(1, 0), validator)
    sink = p.dispatcher.zk_sink
    assert isinstance(sink, MemoryZkSink)
    p.dispatcher.fence_check = sink.check_fence
    p.run_batch([(EVENTS, p.failover_ref(snapshot_of((1, 2, 3))))])
    p.run_batch([(ADMIN, event_to_json(ev.CreateTopic("r1", "orders", 2, 2)))])
    return p, zk


def test_a_batch_without_zookeeper_writes_sends_nothing_once_fenced(tmp_path: Path, validator: InputValidator) -> None:
    p, zk = _fenced_pipeline(tmp_path, validator)
    before = list(p.requests.messages)
    zk.set("/controller_epoch", b"2")  # a standby took over while this controller was paused
    tree = zk.snapshot()
    invalid = (
        '{"version":1,"type":"create_topic","request_id":"bad","topic":"x","partitions":-1,"replication_factor":1}'
    )
    with pytest.raises(ControllerFencedError):
        # a broker registers (UpdateMetadata to every broker, no ZooKeeper write), an invalid command
        # (a rejected record and an INVALID_REQUEST result), a record that is not JSON
        p.run_batch(
            [
                (EVENTS, event_to_json(ev.BrokerStartup(4, 404))),
                (ADMIN, invalid),
                (ADMIN, "not json"),
            ]
        )
    assert p.dispatcher.fenced and p.dispatcher.metrics["ActiveControllerCount"] == 0
    assert p.requests.messages == before, "nothing on requests, admin results or rejected"
    assert zk.snapshot() == tree


def test_the_first_refusal_stops_the_batch(tmp_path: Path, validator: InputValidator) -> None:
    """Fenced between the request write and the admin results: the requests went out under the fence,
    nothing after the refusal does."""
    p, zk = _fenced_pipeline(tmp_path, validator)
    sink = p.dispatcher.zk_sink
    assert isinstance(sink, MemoryZkSink)
    checks: list[str] = []

    def check_then_lose() -> None:
        sink.check_fence()
        checks.append("ok")
        zk.set("/controller_epoch", b"2")  # the takeover happens right after the first check

    p.dispatcher.fence_check = check_then_lose
    before = len(p.requests.messages)
    with pytest.raises(ControllerFencedError):
        p.run_batch(
            [
                (EVENTS, event_to_json(ev.BrokerStartup(4, 404))),
                (ADMIN, "not json"),
            ]
        )
    sent = p.requests.messages[before:]
    assert checks == ["ok"]
    assert {m.topic for m in sent} == {"livectl.requests"}
    assert all(m.value_json()["controllerEpoch"] == 1 for m in sent)


class FlakyRequestSink(MemoryRequestSink):
    """Kafka restarting: the first ``failures`` writes raise :class:`SinkUnavailableError`."""

    def __init__(self, fence: Fence, failures: int) -> None:
        super().__init__(fence)
        self.failures = failures
        self.attempts = 0

    def write_admin_results(self, batch_id: int, results: Sequence[dc.AdminResult]) -> RequestBatchResult:
        self.attempts += 1
        if self.failures > 0:
            self.failures -= 1
            raise SinkUnavailableError("broker restarting")
        return super().write_admin_results(batch_id, results)


def test_a_write_is_retried_while_the_service_restarts_and_lands_once(
    tmp_path: Path, validator: InputValidator
) -> None:
    p, _zk = _fenced_pipeline(tmp_path, validator)
    flaky = FlakyRequestSink(p.fence, failures=2)
    flaky.messages = p.requests.messages
    p.requests = flaky
    p.dispatcher.request_sink = flaky
    p.dispatcher.retry_timeout_s, p.dispatcher.retry_backoff_s = 5.0, 0.01
    p.run_batch([(ADMIN, event_to_json(ev.DeleteTopic("r2", "orders")))])
    results = [m.value_json() for m in flaky.messages if m.topic == "livectl.admin-results"]
    assert flaky.attempts == 3
    assert [r["request_id"] for r in results].count("r2") == 1


def test_without_retry_time_an_unavailable_service_fails_the_batch(tmp_path: Path, validator: InputValidator) -> None:
    p, _zk = _fenced_pipeline(tmp_path, validator)
    flaky = FlakyRequestSink(p.fence, failures=1)
    p.dispatcher.request_sink = flaky
    p.dispatcher.retry_timeout_s = 0.0
    with pytest.raises(SinkUnavailableError):
        p.run_batch([(ADMIN, event_to_json(ev.DeleteTopic("r2", "orders")))])
    assert not p.dispatcher.fenced


def test_a_fenced_controller_is_not_retried(tmp_path: Path, validator: InputValidator) -> None:
    p, zk = _fenced_pipeline(tmp_path, validator)
    p.dispatcher.retry_timeout_s, p.dispatcher.retry_backoff_s = 30.0, 0.01
    zk.set("/controller_epoch", b"2")
    calls: list[int] = []
    sink = p.dispatcher.zk_sink
    assert isinstance(sink, MemoryZkSink)

    def counted() -> None:
        calls.append(1)
        sink.check_fence()

    p.dispatcher.fence_check = counted
    with pytest.raises(ControllerFencedError):
        p.run_batch([(ADMIN, "not json")])
    assert calls == [1]


def test_an_outage_seen_by_a_replaced_controller_is_reported_as_fencing(
    tmp_path: Path, validator: InputValidator
) -> None:
    """A paused process resumes with its deadline gone and a dead connection: the write fails as
    "unavailable", but the fence check (after the client learnt its session expired) says "fenced"."""
    p, zk = _fenced_pipeline(tmp_path, validator)
    p.dispatcher.request_sink = FlakyRequestSink(p.fence, failures=5)
    p.dispatcher.retry_timeout_s = 0.0
    sink = p.dispatcher.zk_sink
    assert isinstance(sink, MemoryZkSink)
    answers = iter([SinkUnavailableError("reconnecting"), None])

    def check() -> None:
        problem = next(answers, None)
        if problem is not None:
            raise problem
        zk.set("/controller_epoch", b"2")  # what the reconnected client finds: a new controller
        sink.check_fence()

    p.dispatcher.fence_check = check
    with pytest.raises(ControllerFencedError):
        p.dispatcher.retried(7, "admin results", lambda: p.dispatcher.request_sink.write_admin_results(7, []))
    assert p.dispatcher.fenced
