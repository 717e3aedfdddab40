"""How the controller stops: the fence check before each write, a clean stop of the query, and the outcome
``livectl run`` reports — exit code 3 with one line when this controller was fenced or lost its lease
(:class:`ControllerStoppedError`), 1 with the failure's own line when the query failed
(:func:`query_failure_reason`), 0 when it was asked to stop."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from core.kafka.zkdata import CONTROLLER_EPOCH_PATH
from sinks.errors import ControllerFencedError
from streaming.errors import StreamingError

log = logging.getLogger("livectl.app")


class ControllerStoppedError(StreamingError):
    """The controller stopped because it lost its lease or was fenced (exit code 3)."""


class WorkerStartError(StreamingError):
    """The query failed because Spark could not start a Python worker in time: its source's and planner's
    workers get a fixed 10 s to connect back, its daemon's 60 s, which a loaded machine can miss. Nothing
    of the controller's is wrong, so ``livectl run`` may stand for election again
    (``python_worker_start_retries``)."""


#: Spark's words when a Python worker it started did not connect back in time, or its daemon could not fork one
WORKER_START_FAILURES = (
    "Python worker failed to connect back",
    "Timed out while waiting for the Python worker to connect back",
    "Python daemon failed to launch worker",
)


def query_failure_reason(text: str) -> str:
    """The line that says why the query failed: a livectl error raised inside Spark (e.g. the source's
    data-loss error, or a sink's service unreachable past its retries) arrives wrapped in Spark's and Python's
    tracebacks, followed by the query's plan; the last line naming it is the reason. Anything else is
    returned as it is."""
    found: list[str] = re.findall(r"(?:KafkaSourceError|StreamingError|SinkError|\w+Error): (livectl-kafka .*)", text)
    if found:
        return found[-1].strip()
    # a sink's own error, as the Python traceback inside the Py4J message ends with it
    sink: list[tuple[str, str]] = re.findall(r"^sinks\.errors\.(\w+Error): (.+)$", text, re.MULTILINE)
    return f"{sink[-1][0]}: {sink[-1][1].strip()}" if sink else text


def fence_check(lease: Any, zk_sink: Any) -> Callable[[], None]:
    """The dispatcher's check before each topic write: the lease still held (no ZooKeeper round trip
    needed to know it is lost), then ``/controller_epoch`` still at the fence's version."""

    def check() -> None:
        if lease.lost:
            raise ControllerFencedError(CONTROLLER_EPOCH_PATH, zk_sink.fence.epoch_zk_version, str(lease.lost_reason))
        zk_sink.check_fence()

    return check


def fenced_reason(e: ControllerFencedError) -> str:
    """One line for the exit message: a znode that moved on, or the producer a successor took over."""
    if e.expected_version < 0:
        return f"{e.path}: {e.reason}"
    return f"{e.path} moved past version {e.expected_version} ({e.reason})"


def stop_query(query: Any, grace_s: float = 10.0) -> None:
    """Stop between micro-batches when one ends within ``grace_s`` (a stop inside a batch is safe, the
    batch is replayed, but Spark then logs the cancelled job at length). A trigger that is only asking the
    source for offsets is no batch: with a trigger of 0 an idle query spends nearly all its time there (the
    source's read waits for records), so waiting for the trigger to end would wait for chance."""
    if query is None or not query.isActive:
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and query.isActive and _in_batch(query.status):
        time.sleep(0.05)
    if query.isActive:
        query.stop()


def _in_batch(status: Mapping[str, Any]) -> bool:
    """Whether Spark's query ``status`` says a micro-batch with data is running (or being planned)."""
    return bool(status.get("isTriggerActive")) and bool(status.get("isDataAvailable"))


def fenced_if_replaced(check: Callable[[], None], on_fenced: Callable[[str], None], grace_s: float = 5.0) -> None:
    """After the query failed: if the fence check says this controller was replaced (given a few
    seconds for a resumed client to learn its session expired), treat the failure as fencing."""
    from sinks.errors import SinkUnavailableError

    until = time.monotonic() + grace_s
    while True:
        try:
            check()
            return
        except ControllerFencedError as e:
            on_fenced(fenced_reason(e))
            return
        except SinkUnavailableError:
            if time.monotonic() >= until:
                return
            time.sleep(0.2)


def raise_outcome(
    query: Any, *, controller_id: int, controller_epoch: int, fenced: bool, lost_reason: str | None, stopped: bool
) -> None:
    """After the query stopped: :class:`ControllerStoppedError` when this controller was fenced or lost
    its lease; :class:`StreamingError` with the failure's line when the query failed on its own; nothing
    when it was asked to stop (or its query ended without an error)."""
    if fenced or lost_reason is not None:
        raise ControllerStoppedError(
            f"controller {controller_id} (epoch {controller_epoch}) was fenced: "
            f"{lost_reason or 'another controller was elected'}; it wrote nothing more"
        )
    exc = query.exception()
    if exc is not None and not stopped:
        # the shipped log4j2.properties leaves Spark's own "terminated with error" report to us; the JVM's
        # stack trace is in it when spark.sql.pyspark.jvmStacktrace.enabled is set (docs/operations.md)
        log.error("the controller query failed: %s", exc)
        text = str(exc)
        reason = query_failure_reason(text)
        worker = worker_start_failure(text) if reason == text else None
        if worker is not None:
            raise WorkerStartError(f"the controller query failed: {worker}")
        raise StreamingError(f"the controller query failed: {reason}")


def worker_start_failure(text: str) -> str | None:
    """The line of a query's failure ``text`` that says Spark's Python worker start timed out, if one does."""
    for line in text.splitlines():
        if any(words in line for words in WORKER_START_FAILURES):
            return line.strip()
    return None
