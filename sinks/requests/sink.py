"""The request sink on Kafka: one transactional producer writes each micro-batch's messages in order.

Every write of a batch is one Kafka transaction (``acks=all``, one request in flight per connection) of a
producer whose ``transactional.id`` (:func:`transactional_id`) every controller of the cluster shares, so a
successor's first write fences the rest. Before its first write of a topic, and again after any failed
write, the sink reads what of the batch the topic holds (:mod:`sinks.requests.tail`) and sends only the
rest; afterwards the instance remembers what it wrote, so replaying a batch it completed (or an older one)
sends nothing. Consumers get a second line of defence: **simulated brokers keep the highest
(controllerEpoch, batchId) applied per request type and drop any message at or below it**, as Kafka brokers
drop requests from an older controller epoch.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from kafka import KafkaProducer
from kafka.errors import KafkaError

from core.decisions import AdminResult, BrokerRequest
from sinks.compression import compression_type
from sinks.errors import ControllerFencedError, SinkUnavailableError
from sinks.ports import Fence, Rejected, RequestBatchResult
from sinks.requests.fencing import producer_fenced, quiet_fencing_reports
from sinks.requests.messages import OutboundMessage, admin_result_messages, rejected_messages, request_messages
from sinks.requests.tail import TAIL_WINDOW, TailAhead, read_tail_ahead, read_tail_identities

log = logging.getLogger("livectl.sinks")


def transactional_id(query_name: str) -> str:
    """The Kafka ``transactional.id`` of the request sink of the controller query ``query_name``: one id
    for every controller of the cluster, so that a successor's first write fences the rest (and the one
    ``TransactionalId`` resource the controller's principal is granted, :mod:`admin.acls`)."""
    return f"livectl-{query_name}"


class RequestSink:
    """:class:`sinks.ports.RequestSinkPort` on Kafka (kafka-python, ``acks=all``, in order).

    The topics must exist. ``fence`` supplies the controller epoch written into every message."""

    def __init__(
        self,
        bootstrap_servers: str,
        fence: Fence,
        *,
        requests_topic: str = "livectl.requests",
        admin_results_topic: str = "livectl.admin-results",
        rejected_topic: str = "livectl.rejected",
        timeout_s: float = 30.0,
        tail_window: int = TAIL_WINDOW,
        client_config: Mapping[str, Any] | None = None,
        transactional_id: str | None = None,
        max_request_size: int | None = None,
        compression: str = "zstd",
    ) -> None:
        """``client_config``: extra kafka-python keyword arguments of every client of the sink (security:
        :meth:`sinks.security.KafkaSecurity.client_kwargs`).

        ``transactional_id``: every write is one Kafka transaction of a producer with this id, shared by
        every controller of the cluster. A controller's first write initialises it, which fences the
        producer of any earlier controller at the broker (Kafka's zombie fencing): a controller paused
        between its ZooKeeper fence check and its send, and resumed after a takeover, gets
        ``PRODUCER_FENCED`` (raised as :class:`ControllerFencedError`) instead of writing after its
        successor. ``None``: a plain idempotent-free producer (tests, brokers without transactions).

        ``max_request_size``: the largest produce request the producer sends, in bytes (kafka-python's
        ``max_request_size``; ``None``: its default, 1 MiB). Brokers still refuse messages over their
        ``message.max.bytes``.

        ``compression``: the producer's codec, one of :data:`sinks.compression.COMPRESSIONS` (``none``,
        ``gzip``, ``snappy``, ``lz4``, ``zstd``); an unknown name raises
        :class:`sinks.compression.CompressionError`."""
        self._compression_type = compression_type(compression)
        self.compression = compression
        self.fence = fence
        self._transactional_id = transactional_id
        #: set once a successor fenced this sink's producer: never start another (it would fence the successor)
        self._fenced: ControllerFencedError | None = None
        self._client_config = dict(client_config or {})
        self.requests_topic = requests_topic
        self.admin_results_topic = admin_results_topic
        self.rejected_topic = rejected_topic
        self._bootstrap = bootstrap_servers
        self._timeout = timeout_s
        self._tail_window = tail_window
        self._producer: KafkaProducer | None = None
        #: one producer at a time: two with one transactional id would fence each other
        self._producer_lock = threading.Lock()
        self._closed = False
        self._max_request_size = max_request_size
        #: per topic: (latest batch id written by this instance, identities written for it); absent
        #: means "unknown, read the topic's tail first"
        self._written: dict[str, tuple[int, set[tuple[int, str]]]] = {}
        #: messages the broker acknowledged, all batches together: a count that grows while a large batch is
        #: sent (the replay wait's progress, :mod:`streaming.driver.replay_progress`)
        self.messages_acked = 0
        #: the requests topic's tail as read by :meth:`start` once the producer had fenced every earlier one,
        #: for the first write (:class:`TailAhead`); dropped by the first write, used or not
        self._ahead: TailAhead | None = None
        self._ahead_lock = threading.Lock()
        self._sending_started = False

    @property
    def bootstrap_servers(self) -> str:
        """The Kafka cluster this sink writes to."""
        return self._bootstrap

    def start(self) -> threading.Thread:
        """Start the producer now, on a thread (returned, started), instead of at the first write: a new
        controller calls it as it wins the lease, so its transactional init — which fences every earlier
        controller's producer, Kafka's moment for it — is done before its first micro-batch needs the sink.
        A failure here is only logged: the first write starts the producer again and reports its own error.

        With a transactional id, the thread then reads the requests topic's tail (:func:`read_tail_ahead`): once
        the init has fenced every earlier producer nothing but this sink writes there, so the first write
        settles what of its batch is there already from it, without reading the tail itself (a consumer's
        start and a fetch of the previous controller's last messages: ~0.4 s quiet, more in a takeover)."""
        self._closed = False
        thread = threading.Thread(target=self._start_producer, name="livectl-request-producer", daemon=True)
        thread.start()
        return thread

    def _start_producer(self) -> None:
        if self._fenced is not None:
            return
        try:
            self._get_producer()
        except Exception as e:  # the first write meets it again and says it
            log.info("request sink: starting the producer ahead failed, the first write starts it: %r", e)
            return
        if self._closed:  # closed while it started: close() may have found no producer yet
            self.close()
            return
        if self._transactional_id is None or self._sending_started:
            return  # without fencing an earlier controller could still write after the read
        try:
            ahead = read_tail_ahead(
                self._bootstrap,
                self.requests_topic,
                window=self._tail_window,
                timeout_s=self._timeout,
                client_config=self._client_config,
            )
        except Exception as e:  # the first write reads the tail itself
            log.info(
                "request sink: reading the tail of %s ahead failed, the first write reads it: %r",
                self.requests_topic,
                e,
            )
            return
        with self._ahead_lock:
            if not self._sending_started:
                self._ahead = ahead

    def close(self) -> None:
        self._closed = True
        if self._producer is not None:
            self._producer.close(timeout=self._timeout)
            self._producer = None

    def __enter__(self) -> RequestSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def write_requests(self, batch_id: int, requests: Sequence[BrokerRequest]) -> RequestBatchResult:
        partitions = self._partitions(self.requests_topic) if any(r.addressees for r in requests) else (0,)
        msgs = request_messages(self.requests_topic, self.fence, batch_id, requests, partitions=partitions)
        return self._send(batch_id, msgs)

    def write_admin_results(self, batch_id: int, results: Sequence[AdminResult]) -> RequestBatchResult:
        msgs = admin_result_messages(self.admin_results_topic, self.fence, batch_id, results)
        return self._send(batch_id, msgs)

    def write_rejected(self, batch_id: int, rejected: Sequence[Rejected]) -> RequestBatchResult:
        return self._send(batch_id, rejected_messages(self.rejected_topic, self.fence, batch_id, rejected))

    # ------------------------------------------------------------------ internals

    def _send(self, batch_id: int, msgs: list[OutboundMessage]) -> RequestBatchResult:
        if not msgs:
            return RequestBatchResult(batch_id, 0, 0)
        if self._fenced is not None:
            raise self._fenced
        topic = msgs[0].topic
        with self._ahead_lock:
            self._sending_started = True
            ahead = self._ahead if topic == self.requests_topic else None
            self._ahead = None
        known = self._written.get(topic)
        if known is not None and known[0] > batch_id:
            return RequestBatchResult(batch_id, 0, len(msgs))
        if known is not None and known[0] == batch_id:
            done = known[1]
        elif known is not None:
            done = set()
        else:
            settled = ahead.identities(batch_id) if ahead is not None else None
            done = settled if settled is not None else self._tail_identities(topic, batch_id)
        todo = [m for m in msgs if m.identity not in done]
        self._written.pop(topic, None)  # unknown until this send is confirmed
        producer: KafkaProducer | None = None
        try:
            producer = self._get_producer()
            if self._transactional_id is not None:
                producer.begin_transaction()
            futures = [
                producer.send(
                    m.topic, key=m.key, value=m.value, headers=list(m.headers), partition=m.partition
                ).add_callback(self._acked)
                for m in todo
            ]
            producer.flush(timeout=self._timeout)
            for f in futures:
                f.get(timeout=self._timeout)
            if self._transactional_id is not None:
                producer.commit_transaction()
        except (KafkaError, OSError) as e:
            fenced = self._transactional_id is not None and producer_fenced(e)
            # a transactional producer in an error state cannot be used again: the retry starts a new one,
            # whose init aborts the open transaction (abort_transaction here could wait without a bound)
            self._drop_producer()
            if fenced:
                self._fenced = ControllerFencedError(
                    f"transactional.id {self._transactional_id}",
                    -1,
                    f"a newer controller's producer took over the output topics ({e})",
                )
                raise self._fenced from e
            raise SinkUnavailableError(f"could not write batch {batch_id} to {topic}: {e!r}") from e
        self._written[topic] = (batch_id, done | {m.identity for m in todo})
        return RequestBatchResult(batch_id, len(todo), len(msgs) - len(todo))

    def _acked(self, _metadata: Any) -> None:
        # on the producer's I/O thread, its only writer
        self.messages_acked += 1

    def _partitions(self, topic: str) -> tuple[int, ...]:
        """The partition ids of ``topic`` as the producer knows them now (from its metadata: the same count
        its partitioner places the per-broker messages with)."""
        try:
            found = self._get_producer().partitions_for(topic)
        except (KafkaError, OSError) as e:
            self._drop_producer()
            raise SinkUnavailableError(f"could not read the partitions of {topic}: {e!r}") from e
        if not found:
            raise SinkUnavailableError(f"topic {topic} does not exist or has no partitions")
        return tuple(sorted(found))

    def _get_producer(self) -> KafkaProducer:
        with self._producer_lock:
            if self._producer is None:
                self._producer = self._new_producer()
            return self._producer

    def _new_producer(self) -> KafkaProducer:
        extra: dict[str, Any] = {}
        if self._transactional_id is not None:
            extra = {"transactional_id": self._transactional_id, "max_block_ms": int(self._timeout * 1000)}
            quiet_fencing_reports()
        if self._max_request_size is not None:
            extra["max_request_size"] = self._max_request_size
        producer = KafkaProducer(
            **self._client_config,
            **extra,
            bootstrap_servers=self._bootstrap,
            acks="all",
            retries=5,
            # one request in flight per connection: retries cannot reorder a broker's messages
            max_in_flight_requests_per_connection=1,
            linger_ms=2,
            # request bodies are repetitive JSON: every codec shrinks them several times over
            compression_type=self._compression_type,
            request_timeout_ms=int(self._timeout * 1000),
        )
        if self._transactional_id is not None:
            try:
                producer.init_transactions()  # fences every earlier producer with this id
            except BaseException:
                producer.close(timeout=0)
                raise
        return producer

    def _drop_producer(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            with contextlib.suppress(KafkaError, OSError):
                producer.close(timeout=0)

    def _tail_identities(self, topic: str, batch_id: int) -> set[tuple[int, str]]:
        """Identities of batch ``batch_id`` already on ``topic``, read from its tail."""
        try:
            return read_tail_identities(
                self._bootstrap,
                topic,
                batch_id=batch_id,
                window=self._tail_window,
                timeout_s=self._timeout,
                client_config=self._client_config,
            )
        except (KafkaError, OSError) as e:
            raise SinkUnavailableError(f"could not read the tail of {topic} to check batch {batch_id}: {e!r}") from e
