"""A transactional producer fenced by a newer controller's: telling it from other failures, and keeping
kafka-python's own reports of it out of the log (the sink raises :class:`sinks.errors.ControllerFencedError`
for it, and ``livectl run`` says it once)."""

from __future__ import annotations

import logging
from typing import Any

from kafka.errors import InvalidProducerEpochError, ProducerFencedError

#: the errors that say a newer producer took this transactional id
_FENCING_ERRORS = (ProducerFencedError, InvalidProducerEpochError)
_FENCING_NAMES = tuple(e.__name__ for e in _FENCING_ERRORS)
#: the kafka-python loggers that report a fenced transactional producer from its I/O thread (ERROR), or
#: each of its batches in flight when the fence came (WARNING)
_FENCING_LOGGERS = (
    "kafka.producer.transaction_manager",
    "kafka.producer.sender",
    "kafka.producer.producer_batch",
    "kafka.producer.record_accumulator",
)


class _FencingReportedByLivectl(logging.Filter):
    """Drops kafka-python's own lines about a fenced producer: the sink raises
    :class:`ControllerFencedError` for it and ``livectl run`` says it in one line, so the same fact twice
    (from the producer's I/O thread, timing-dependent) is noise. Every other record passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        if any(isinstance(a, _FENCING_ERRORS) for a in (record.msg, *_record_args(record))):
            return False
        try:
            text = record.getMessage()
        except Exception:  # a malformed record is not ours to judge: let logging report it
            return True
        return not any(name in text for name in _FENCING_NAMES)


def _record_args(record: logging.LogRecord) -> tuple[Any, ...]:
    args = record.args
    if isinstance(args, tuple):
        return args
    return () if args is None else (args,)


_FENCING_FILTER = _FencingReportedByLivectl()


def quiet_fencing_reports() -> None:
    """Installs :class:`_FencingReportedByLivectl` on kafka-python's producer loggers (once)."""
    for name in _FENCING_LOGGERS:
        logger = logging.getLogger(name)
        if _FENCING_FILTER not in logger.filters:
            logger.addFilter(_FENCING_FILTER)


def producer_fenced(error: BaseException) -> bool:
    """Whether ``error``, or an error it was raised from, says a newer producer took the transactional id.

    After a fence kafka-python raises later calls as a plain ``KafkaError`` whose message names the state's
    cause (``… in an error state: [Error 90] ProducerFencedError …``): that text is the public trace of it."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, _FENCING_ERRORS) or any(name in str(seen) for name in _FENCING_NAMES):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
