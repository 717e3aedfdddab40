"""A broker's ISR proposals as AlterPartition requests: Kafka's broker (``DefaultAlterPartitionManager``) sends
every pending partition in one request, and so one record on ``livectl.broker-events`` carries many
(:class:`core.events.AlterPartitionRequest`). One record per partition made a broker's return at 100k partitions
~100,000 records, read ``max_records_per_batch`` a micro-batch behind everything else on the topic."""

from __future__ import annotations

from core.events import AlterPartition, AlterPartitionRequest, Event
from core.isr_events import PROPOSALS_PER_RECORD

__all__ = ["PROPOSALS_PER_RECORD", "as_requests", "correlation_ids"]


def as_requests(events: list[Event], per_record: int = PROPOSALS_PER_RECORD) -> list[Event]:
    """``events`` with each run of AlterPartition proposals from one sender at one broker epoch as
    :class:`AlterPartitionRequest` records of at most ``per_record`` partitions, in order; the other events
    as they are, between them. ``per_record`` 0: ``events`` as they are (a record per proposal)."""
    if per_record < 0:
        raise ValueError(f"per_record: must be at least 0, got {per_record}")
    if per_record == 0:
        return list(events)
    out: list[Event] = []
    run: list[AlterPartition] = []

    def close() -> None:
        out.extend(AlterPartitionRequest.records(tuple(run), per_record))
        run.clear()

    for ev in events:
        if isinstance(ev, AlterPartition):
            if run and (run[0].broker_id, run[0].broker_epoch) != (ev.broker_id, ev.broker_epoch):
                close()
            run.append(ev)
        else:
            close()
            out.append(ev)
    close()
    return out


def correlation_ids(ev: Event) -> tuple[int, ...]:
    """The proposals a record carries, by their correlation ids (none for other events)."""
    if isinstance(ev, AlterPartitionRequest):
        return tuple(p.correlation_id for p in ev.partitions)
    if isinstance(ev, AlterPartition):
        return (ev.correlation_id,)
    return ()
