"""A fenced transactional producer told from other failures; kafka-python's own ERROR lines about it are
dropped (the sink raises and ``livectl run`` says it once), every other line of its producer loggers passes."""

from __future__ import annotations

import logging

import pytest
from kafka.errors import InvalidProducerEpochError, KafkaConnectionError, KafkaError, ProducerFencedError

from sinks.requests.fencing import producer_fenced, quiet_fencing_reports

pytestmark = pytest.mark.unit


def _logged(caplog: pytest.LogCaptureFixture, level: int, name: str, msg: object, *args: object) -> list[str]:
    caplog.clear()
    with caplog.at_level(level, logger=name):
        logging.getLogger(name).log(level, msg, *args)
    return [r.getMessage() for r in caplog.records if r.name == name]


def _emitted(caplog: pytest.LogCaptureFixture, name: str, msg: str, *args: object) -> list[str]:
    return _logged(caplog, logging.ERROR, name, msg, *args)


def test_fenced_producer_reports_are_dropped_and_others_kept(caplog: pytest.LogCaptureFixture) -> None:
    quiet_fencing_reports()
    quiet_fencing_reports()  # installs once
    tm, sender = "kafka.producer.transaction_manager", "kafka.producer.sender"
    assert len(logging.getLogger(tm).filters) == 1
    # the two lines of CI's failed run: an f-string message, and one with the error as an argument
    fenced_text = f"Fatal Error handling request AddPartitionsToTxnRequest: {ProducerFencedError()}"
    assert _emitted(caplog, tm, fenced_text) == []
    assert (
        _emitted(caplog, sender, "%s: Aborting producer batches due to fatal error: %s", "s", ProducerFencedError())
        == []
    )
    assert _emitted(caplog, sender, "%s: fatal: %s", "s", InvalidProducerEpochError()) == []
    kept = _emitted(caplog, sender, "%s: Error sending produce request to node %d: %s", "s", 1, KafkaConnectionError())
    assert len(kept) == 1 and "KafkaConnectionError" in kept[0]
    assert _emitted(caplog, tm, "Could not add partition %s due to unexpected error %s", "t-0", "boom") == [
        "Could not add partition t-0 due to unexpected error boom"
    ]
    # other kafka loggers are not touched
    assert _emitted(caplog, "kafka.conn", fenced_text) == [fenced_text]


def _warned(caplog: pytest.LogCaptureFixture, name: str, msg: object, *args: object) -> list[str]:
    return _logged(caplog, logging.WARNING, name, msg, *args)


def test_batches_in_flight_when_fenced_are_not_reported(caplog: pytest.LogCaptureFixture) -> None:
    # the line a fresh-clone CI run printed before the fenced exit's own: a batch of the paused producer
    # was in flight when it resumed
    quiet_fencing_reports()
    batch, accumulator = "kafka.producer.producer_batch", "kafka.producer.record_accumulator"
    failed = "Failed to produce messages to topic-partition %s with base offset %s: %s"
    assert _warned(caplog, batch, failed, "livectl.requests-0", -1, ProducerFencedError()) == []
    # the accumulator logs the exception itself as the message
    assert _warned(caplog, accumulator, ProducerFencedError()) == []
    kept = _warned(caplog, batch, failed, "livectl.requests-0", -1, KafkaConnectionError())
    assert len(kept) == 1 and "KafkaConnectionError" in kept[0]
    assert len(_warned(caplog, accumulator, KafkaConnectionError())) == 1


def test_a_fence_is_told_by_its_type_or_by_the_state_error_naming_it() -> None:
    fenced = ProducerFencedError("epoch bumped")
    assert producer_fenced(fenced)
    assert producer_fenced(InvalidProducerEpochError("old epoch"))
    # kafka-python's later calls: a plain KafkaError whose message names the state's cause
    assert producer_fenced(
        KafkaError(f"Cannot execute transactional method because we are in an error state: {fenced}")
    )
    try:
        try:
            raise fenced
        except ProducerFencedError as e:
            raise KafkaError("commit failed") from e
    except KafkaError as chained:
        assert producer_fenced(chained)
    assert not producer_fenced(KafkaError("Cannot execute transactional method: NotCoordinatorError"))
    assert not producer_fenced(OSError("connection reset"))
