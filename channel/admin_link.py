"""The channel's link to livectl's admin topics: Kafka's admin requests to the controller
(:mod:`channel.admin_apis`) published as livectl's admin commands, answered from livectl's admin results.

The link has a producer of its own (``acks=all``) for the admin topic and a consumer of its own of every
partition of the admin-results topic, positioned at its end when the link starts (before any command is
sent, so that no answer can be missed) and reading committed transactions only (an aborted one, a fenced
controller's, was never said). A thread reads the results: the first result of each command answers its
items; a request is answered when every command of it has been answered or its deadline passed
(``timeoutMs``; for ``timeoutMs`` <= 0 the link's ``no_wait_s``), whichever comes first, at the request's
correlation id on the connection it came on. A request whose connection closed is forgotten; its commands
stay with livectl's controller.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import KafkaError

from channel.acls import Check, allow_all
from channel.admin_apis import AdminAsk, CreateDefaults, Item, ItemAnswer, api_name
from channel.admin_requests import admin_request
from channel.admin_results import admin_response, item_answers, timed_out
from channel.endpoint import Connection
from core.decisions import AdminResult
from core.kafka.error_codes import KafkaError as KafkaErrorCode
from sinks.errors import SinkUnavailableError
from sinks.kafka_read import consumer_at_end
from sinks.requests.messages import read_admin_result

__all__ = ["ADMIN_RESULTS_TOPIC", "ADMIN_TOPIC", "AdminLink"]

log = logging.getLogger("livectl.channel.admin")

ADMIN_TOPIC = "livectl.admin"
ADMIN_RESULTS_TOPIC = "livectl.admin-results"


@dataclass
class _Waiting:
    """One request waiting for livectl's answers."""

    conn: Connection
    correlation_id: int
    ask: AdminAsk
    wait_ms: int
    deadline: float
    waiting: set[str]
    answers: dict[Item, ItemAnswer] = field(default_factory=dict)


Reply = Callable[[Connection, int, Any], None]


class AdminLink:
    """:meth:`start`, then :meth:`ask` from the endpoint's threads; :meth:`close` at the end."""

    def __init__(
        self,
        bootstrap_server: str,
        reply: Reply,
        *,
        admin_topic: str = ADMIN_TOPIC,
        results_topic: str = ADMIN_RESULTS_TOPIC,
        kafka: Mapping[str, Any] | None = None,
        defaults: CreateDefaults | None = None,
        topic_names: Callable[[str], str | None] = lambda _: None,
        no_wait_s: float = 30.0,
        retry_s: float = 1.0,
    ) -> None:
        self._bootstrap, self._reply = bootstrap_server, reply
        self.admin_topic, self.results_topic = admin_topic, results_topic
        self._kafka = dict(kafka or {})
        self._defaults, self._topic_names = defaults or CreateDefaults(), topic_names
        self._no_wait_ms, self._retry_s = int(no_wait_s * 1000), retry_s
        self._lock = threading.Lock()
        self._waiting: dict[str, _Waiting] = {}
        self._stop = threading.Event()
        #: set once the results topic is read from its end (commands are published only then)
        self.ready = threading.Event()
        self._producer: KafkaProducer | None = None
        self._consumer: KafkaConsumer | None = None
        self._thread = threading.Thread(target=self._run, name="admin-results", daemon=True)
        #: commands published and requests answered, for the log and tests
        self.published = 0
        self.answered = 0

    def start(self) -> None:
        self._producer = KafkaProducer(**self._kafka, bootstrap_servers=self._bootstrap, acks="all", linger_ms=0)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)
        if self._producer is not None:
            self._producer.close(timeout=5)

    def forget(self, conn: Connection) -> None:
        """Drop the requests of a closed connection (their commands stay with livectl's controller)."""
        with self._lock:
            for rid in [rid for rid, w in self._waiting.items() if w.conn is conn]:
                del self._waiting[rid]

    def ask(
        self,
        conn: Connection,
        api_key: int,
        version: int,
        correlation_id: int,
        body: Any,
        *,
        allowed: Check = allow_all,
    ) -> None:
        """Publish what request ``body`` becomes and keep it until it is answered (or answer it now); ``allowed``:
        what its principal may do (:mod:`channel.acls`)."""
        ask = admin_request(
            api_key,
            version,
            body,
            lambda: uuid.uuid4().hex,
            defaults=self._defaults,
            topic_names=self._topic_names,
            allowed=allowed,
        )
        name = f"{api_name(api_key)} v{version}"
        if not ask.commands:
            log.info("%s from %s: answered by the channel itself", name, conn.peer)
            self._send(conn, correlation_id, admin_response(ask, {}))
            return
        wait_ms = ask.timeout_ms if ask.timeout_ms > 0 else self._no_wait_ms
        deadline = time.monotonic() + wait_ms / 1000
        if not self.ready.wait(max(0.0, wait_ms / 1000)):
            log.warning("%s from %s: %s cannot be read; nothing sent", name, conn.peer, self.results_topic)
            answers = {
                it: ItemAnswer(
                    KafkaErrorCode.REQUEST_TIMED_OUT,
                    f"livectl's admin results ({self.results_topic}) cannot be read: nothing was sent to its "
                    "controller",
                )
                for items in ask.covers.values()
                for it in items
            }
            self._send(conn, correlation_id, admin_response(ask, answers))
            return
        w = _Waiting(conn, correlation_id, ask, wait_ms, deadline, {rid for rid, _ in ask.commands})
        with self._lock:
            for rid, _ in ask.commands:
                self._waiting[rid] = w
        assert self._producer is not None
        log.info(
            "%s from %s (timeout %s ms%s): %s",
            name,
            conn.peer,
            ask.timeout_ms,
            ", validate only" if ask.validate_only else "",
            " ".join(f"{rid}={json.loads(cmd)['type']}" for rid, cmd in ask.commands),
        )
        try:
            sent = [
                self._producer.send(self.admin_topic, key=rid.encode(), value=cmd.encode()) for rid, cmd in ask.commands
            ]
            for future in sent:
                future.get(timeout=max(1.0, wait_ms / 1000))
        except KafkaError as e:
            log.error("%s from %s: cannot publish to %s: %s", name, conn.peer, self.admin_topic, e)
            failed = ItemAnswer(
                KafkaErrorCode.UNKNOWN_SERVER_ERROR,
                f"livectl's admin topic {self.admin_topic} could not be written ({type(e).__name__}); "
                "the command may or may not reach livectl's controller",
            )
            with self._lock:
                for rid in list(w.waiting):
                    self._waiting.pop(rid, None)
                    w.answers.update(dict.fromkeys(ask.covers[rid], failed))
                outstanding = bool(w.waiting)
                w.waiting.clear()
            if outstanding:
                self._finish(w)
            return
        with self._lock:
            self.published += len(ask.commands)

    # ------------------------------------------------------------------ the results

    def _run(self) -> None:
        while not self._stop.is_set() and self._consumer is None:
            try:
                # the controller creates its results topic: a read before it must not create it with the bus's defaults
                config = {**self._kafka, "allow_auto_create_topics": False}
                self._consumer = consumer_at_end(self._bootstrap, self.results_topic, config)
            except SinkUnavailableError as e:
                log.info("admin results not readable yet (%s); again in %.1f s", e, self._retry_s)
                self._stop.wait(self._retry_s)
        if self._consumer is None:
            return
        self.ready.set()
        try:
            while not self._stop.is_set():
                try:
                    batches = self._consumer.poll(timeout_ms=200)
                except KafkaError as e:
                    log.warning("reading %s: %s", self.results_topic, e)
                    self._stop.wait(self._retry_s)
                    continue
                for records in batches.values():
                    for rec in records:
                        result = read_admin_result(rec.value)
                        if result is not None:
                            self._on_result(result)
                self._expire(time.monotonic())
        finally:
            self._consumer.close()

    def _on_result(self, result: AdminResult) -> None:
        with self._lock:
            w = self._waiting.pop(result.request_id, None)
            if w is None:
                return
            w.waiting.discard(result.request_id)
            w.answers.update(item_answers(w.ask, result.request_id, result))
            done = not w.waiting
        log.info(
            "livectl answered %s: %s %s %s",
            result.request_id,
            result.status.value,
            result.error or "",
            result.message,
        )
        if done:
            self._finish(w)

    def _expire(self, now: float) -> None:
        late: list[_Waiting] = []
        with self._lock:
            for rid, w in list(self._waiting.items()):
                if w.deadline <= now:
                    del self._waiting[rid]
                    w.waiting.discard(rid)
                    w.answers.update(timed_out(w.ask, rid, w.wait_ms))
                    log.info("request %s: no answer from livectl's controller within %s ms", rid, w.wait_ms)
                    if not w.waiting:
                        late.append(w)
        for w in late:
            self._finish(w)

    def _finish(self, w: _Waiting) -> None:
        self._send(w.conn, w.correlation_id, admin_response(w.ask, w.answers))

    def _send(self, conn: Connection, correlation_id: int, response: Any) -> None:
        self._reply(conn, correlation_id, response)
        with self._lock:
            self.answered += 1
