"""How much the read's consumer asks for per fetch (:class:`FetchSize`): at most 1 MiB, as kafka-python asks by
default, down to 16 KiB when an answer did not come.

A fetch answer is received whole before any of its records is handed out, and kafka-python closes the
connection when it has not come within ``request_timeout_ms`` (30 s) and asks the same again. Over a link
too slow to bring the answer in that time — 1 MiB per partition at 32 or 256 kbit/s — the read therefore got
nothing at all, however long the link stayed up (docs/reliability.md, "Degraded links"). So the size follows
what comes back, as TCP's window does after a retransmission timeout:

* **Back to the least** (:data:`READ_FETCH_MIN_BYTES`) when records are known to wait (a high watermark, the
  read's or the data-loss check's, past where the read stands, or no fetch answer at all yet) and a third of
  the request timeout has gone by since a poll first brought nothing while they waited, with no record since.
  The consumer is then made again with the smaller size (kafka-python takes it only when a consumer is made);
  the answer in flight is dropped — it would have timed out.
* **Four times bigger**, up to :data:`READ_FETCH_MAX_BYTES`, each time one fetch size's worth of records came,
  in polls that followed one another without an empty one, within a 24th of the request timeout: the next
  answer, four times as big, should then come within a sixth of it, half the time after which it would count
  as not come. Four times, not twice, because each change makes a consumer again, whose first answer takes
  some 0.2 s even on loopback (``python -m bench source_read``).

On a clean link the size stays at 1 MiB, or is back there after three answers. The same bound holds for the
whole answer (``fetch_max_bytes``), not only per partition: the answer holds the admin and broker-event
topics' records together. A record batch larger than the size still comes whole (KIP-74), so the read always
moves on.

Pure bookkeeping: :class:`~streaming.source.consumer.SourceConsumer` calls :meth:`FetchSize.polled` after each
poll of the read's consumer with the records' size and the poll's times, and makes its consumer again when it
says the size changed."""

from __future__ import annotations

#: the largest fetch the read asks for, per partition and for the whole answer: kafka-python's default
#: ``max_partition_fetch_bytes``, what the read always asked for before
READ_FETCH_MAX_BYTES = 1024 * 1024

#: the least: 4 s at 32 kbit/s, the slowest link tried (docs/reliability.md, "Degraded links")
READ_FETCH_MIN_BYTES = 16 * 1024

#: the share of the request timeout within which a fetch size's worth of records must come for it to grow
GROW_WITHIN = 1 / 24

#: how much it grows then
GROWTH = 4

#: the share of the request timeout the read's polls may go without a record, records waiting, before the size
#: goes back to the least
STALLED_AFTER = 1 / 3


class FetchSize:
    """The read's fetch size (``bytes``) for a consumer whose ``request_timeout_ms`` is given (see the module
    docstring). Times are ``time.monotonic()`` seconds, given by the caller."""

    def __init__(self, request_timeout_ms: int, start: int = READ_FETCH_MAX_BYTES) -> None:
        self.bytes = start
        self.grow_s = request_timeout_ms / 1000 * GROW_WITHIN
        self.stalled_s = request_timeout_ms / 1000 * STALLED_AFTER
        #: when the polls bringing records one after another began, and the bytes they brought since
        self._flow_since: float | None = None
        self._flow_bytes = 0
        #: when a poll first brought nothing while records waited, since the last record
        self._waiting_since: float | None = None
        #: how often the size went back to the least, and grew
        self.stalls = 0
        self.grown = 0

    def polled(self, got_bytes: int, began: float, ended: float, waiting: bool) -> bool:
        """One poll, from ``began`` to ``ended``, brought records of ``got_bytes`` bytes (keys and values); and
        whether records are known to wait after it. True when the size changed."""
        if got_bytes > 0:
            self._waiting_since = None
            if self._flow_since is None:
                self._flow_since = began
            self._flow_bytes += got_bytes
            if self._flow_bytes < self.bytes:
                return False
            quick = ended - self._flow_since <= self.grow_s
            self._flow_since, self._flow_bytes = ended, 0
            if quick and self.bytes < READ_FETCH_MAX_BYTES:
                self.bytes = min(READ_FETCH_MAX_BYTES, self.bytes * GROWTH)
                self.grown += 1
                return True
            return False
        self._flow_since, self._flow_bytes = None, 0
        if not waiting:
            self._waiting_since = None
            return False
        if self._waiting_since is None:
            self._waiting_since = began
        if ended - self._waiting_since < self.stalled_s or self.bytes <= READ_FETCH_MIN_BYTES:
            return False
        self._waiting_since = None
        self.bytes = READ_FETCH_MIN_BYTES
        self.stalls += 1
        return True
