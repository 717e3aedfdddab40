"""How the controller stops: the outcome ``livectl run`` reports (fenced or lease lost: exit 3; a failed query:
its own line), the fence check after a failed query, and a stop between micro-batches."""

from __future__ import annotations

from typing import Any

import pytest

from sinks.errors import ControllerFencedError, SinkUnavailableError
from streaming.driver.shutdown import (
    ControllerStoppedError,
    WorkerStartError,
    fenced_if_replaced,
    query_failure_reason,
    raise_outcome,
    stop_query,
)
from streaming.errors import StreamingError

pytestmark = pytest.mark.unit


class FakeQuery:
    """The parts of a ``StreamingQuery`` the shutdown reads: active, trigger status, its exception."""

    def __init__(self, error: str | None = None, *, active: bool = True, triggers: int = 0, data: bool = True) -> None:
        self.error = error
        self.isActive = active
        self.triggers = triggers
        self.data = data
        self.stops = 0

    @property
    def status(self) -> dict[str, Any]:
        if self.triggers > 0:
            self.triggers -= 1
            return {"isTriggerActive": True, "isDataAvailable": self.data}
        return {"isTriggerActive": False, "isDataAvailable": False}

    def stop(self) -> None:
        self.stops += 1
        self.isActive = False

    def exception(self) -> str | None:
        return self.error


OUTCOME = {"controller_id": 1000, "controller_epoch": 3}


def test_a_fenced_controller_reports_the_reason_or_its_successor() -> None:
    with pytest.raises(ControllerStoppedError) as e:
        raise_outcome(FakeQuery(), **OUTCOME, fenced=True, lost_reason=None, stopped=True)
    assert str(e.value) == (
        "controller 1000 (epoch 3) was fenced: another controller was elected; it wrote nothing more"
    )
    with pytest.raises(ControllerStoppedError) as e:
        raise_outcome(FakeQuery("boom"), **OUTCOME, fenced=False, lost_reason="lease lost, expired", stopped=True)
    assert str(e.value) == "controller 1000 (epoch 3) was fenced: lease lost, expired; it wrote nothing more"


def test_a_failed_query_is_reported_by_its_line_unless_the_controller_was_stopped() -> None:
    failed = FakeQuery("Traceback ...\nKafkaSourceError: livectl-kafka fail_on_data_loss: data loss on t-0\n\tat x")
    with pytest.raises(StreamingError) as e:
        raise_outcome(failed, **OUTCOME, fenced=False, lost_reason=None, stopped=False)
    assert not isinstance(e.value, ControllerStoppedError)
    assert str(e.value) == "the controller query failed: livectl-kafka fail_on_data_loss: data loss on t-0"
    # asked to stop (SIGTERM, stop()): a query that ends with an error then is no failure; nor is a clean end
    raise_outcome(failed, **OUTCOME, fenced=False, lost_reason=None, stopped=True)
    raise_outcome(FakeQuery(), **OUTCOME, fenced=False, lost_reason=None, stopped=False)


def test_a_failed_query_counts_as_fenced_when_the_fence_check_says_so() -> None:
    reasons: list[str] = []

    def replaced() -> None:
        raise ControllerFencedError("/controller_epoch", 4, "BadVersion")

    fenced_if_replaced(replaced, reasons.append)
    assert reasons == ["/controller_epoch moved past version 4 (BadVersion)"]

    calls: list[int] = []

    def unreachable_then_fine() -> None:
        calls.append(1)
        if len(calls) < 3:
            raise SinkUnavailableError("ZooKeeper not reachable")

    fenced_if_replaced(unreachable_then_fine, reasons.append, grace_s=5.0)
    assert len(calls) == 3 and len(reasons) == 1, "still the controller: nothing more reported"

    def never_reachable() -> None:
        raise SinkUnavailableError("ZooKeeper not reachable")

    fenced_if_replaced(never_reachable, reasons.append, grace_s=0.0)
    assert len(reasons) == 1, "unknown after the grace: not taken as fencing"


def test_the_query_stops_between_micro_batches() -> None:
    q = FakeQuery(triggers=3)
    stop_query(q, grace_s=5.0)
    assert q.stops == 1 and q.triggers == 0, "waited for the running micro-batch to end, then stopped"
    busy = FakeQuery(triggers=10**9)
    stop_query(busy, grace_s=0.1)
    assert busy.stops == 1, "a batch that does not end within the grace is stopped inside"
    # an idle query with a trigger of 0 is always asking its source for offsets: no batch to wait for
    polling = FakeQuery(triggers=10**9, data=False)
    stop_query(polling, grace_s=5.0)
    assert polling.stops == 1 and polling.triggers == 10**9 - 1, "stopped at once"
    done = FakeQuery(active=False)
    stop_query(done)
    stop_query(None)
    assert done.stops == 0


def test_a_source_error_inside_sparks_traceback_is_reported_by_its_own_line() -> None:
    text = (
        "[STREAM_FAILED] Query [id = 1] terminated with exception: ... Traceback (most recent call last):\n"
        '  File "kafka_source.py", line 250, in read\n'
        "streaming.source.kafka_source.KafkaSourceError: livectl-kafka fail_on_data_loss: "
        "data loss on livectl.admin-0: "
        "the checkpoint reads from offset 57 but the log now ends at offset 3\n\tat org.apache.spark..."
    )
    assert query_failure_reason(text) == (
        "livectl-kafka fail_on_data_loss: data loss on livectl.admin-0: "
        "the checkpoint reads from offset 57 but the log now ends at offset 3"
    )
    assert query_failure_reason("something else") == "something else"


def test_a_sink_error_inside_py4js_message_is_reported_by_its_own_line() -> None:
    """The controller cut off from Kafka inside a micro-batch (bench/partitions/kafka_cuts.py, kafka-cut:in-batch): the
    request sink gives up after its retries and the query fails with Py4J's message, the Python traceback and
    the query's plan; the exit line is the sink's error alone."""
    text = (
        "An exception was raised by the Python Proxy. Return Message: Traceback (most recent call last):\n"
        '  File "/work/sinks/requests.py", line 874, in _partitions\n'
        '    raise SinkUnavailableError(f"could not read the partitions of {topic}: {e!r}") from e\n'
        "sinks.errors.SinkUnavailableError: could not read the partitions of cm.requests: "
        "KafkaTimeoutError('Unable to bootstrap from 10.231.112.10:9092')\n"
        "\n=== Streaming Query ===\nIdentifier: cm [id = 58df]\n"
        "   +- ~StreamingDataSourceV2ScanRelation[key#2, value#3] livectl-kafka\n"
    )
    assert query_failure_reason(text) == (
        "SinkUnavailableError: could not read the partitions of cm.requests: "
        "KafkaTimeoutError('Unable to bootstrap from 10.231.112.10:9092')"
    )


SPARK_WORKER_TIMEOUT = (
    "Python worker failed to connect back.\n=== Streaming Query ===\nIdentifier: q [id = 1, runId = 2]\n"
    "Current Committed Offsets: {}"
)


def test_spark_failing_to_start_a_python_worker_is_told_apart_from_livectls_own_errors() -> None:
    with pytest.raises(WorkerStartError) as e:
        raise_outcome(FakeQuery(SPARK_WORKER_TIMEOUT), **OUTCOME, fenced=False, lost_reason=None, stopped=False)
    # one line, Spark's, without the query's description that follows it
    assert str(e.value) == "the controller query failed: Python worker failed to connect back."
    # livectl's own line wins: a data-loss stop whose trace mentions a worker is still that stop
    both = SPARK_WORKER_TIMEOUT + "\nKafkaSourceError: livectl-kafka fail_on_data_loss: data loss on t-0"
    with pytest.raises(StreamingError) as other:
        raise_outcome(FakeQuery(both), **OUTCOME, fenced=False, lost_reason=None, stopped=False)
    assert not isinstance(other.value, WorkerStartError)
    assert str(other.value) == "the controller query failed: livectl-kafka fail_on_data_loss: data loss on t-0"
    with pytest.raises(StreamingError) as plain:
        raise_outcome(FakeQuery("boom"), **OUTCOME, fenced=False, lost_reason=None, stopped=False)
    assert not isinstance(plain.value, WorkerStartError)
