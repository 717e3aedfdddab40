"""Fetches between simulated broker processes: one line of JSON each way over TCP loopback.

Every simulated broker listens on the endpoint it registers in ``/brokers/ids/<id>`` (as a Kafka broker's
listener does); a follower whose leader is in another process connects to the leader's endpoint, taken
from LeaderAndIsr ``liveLeaders`` or UpdateMetadata ``liveBrokers``. No ZooKeeper, no Kafka topic.

Each connection is a fetch session, as Kafka's incremental fetch requests are (KIP-227): both ends remember,
per partition, the last request and the last answer sent on it, and a message carries only what differs.
Request: ``{"leaderId", "replicaId", "maxRecords", "partitions": [...]}``, each partition either its session
slot (an integer: the same request as last time) or ``[slot, topic, partition, fetchOffset, lastFetchedEpoch,
currentLeaderEpoch]`` (new or changed). Response: ``{"partitions": [[index, errorCode, highWatermark,
logEndOffset, [[epoch, seq], ...], [epoch, endOffset] | null], ...]}``, one entry per partition of the request
(by its index there) whose answer differs from the last one sent for its slot; the others are answered as
last time. The leader serves every partition of every request, as before: only the bytes shrink. Any error
ends the session (the follower closes the connection; the next fetch starts afresh).
"""

from __future__ import annotations

import json
import logging
import socket
import socketserver
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from simbrokers.broker import FetchRequest, FetchResponse
from simbrokers.log import EpochEndOffset, Record
from simbrokers.partition import FetchPartitionRequest, FetchPartitionResponse

log = logging.getLogger(__name__)

#: (leader id, request) -> response, or None when that leader is not served here
Serve = Callable[[int, FetchRequest], FetchResponse | None]


class SessionError(ValueError):
    """A message that does not fit its session (a slot never sent, an answer for no partition)."""


@dataclass
class FollowerSession:
    """The follower's end of one connection's fetch session."""

    slots: dict[tuple[str, int], int] = field(default_factory=dict)
    sent: dict[int, FetchPartitionRequest] = field(default_factory=dict)
    answers: dict[int, FetchPartitionResponse] = field(default_factory=dict)

    def encode_request(self, leader_id: int, req: FetchRequest) -> tuple[dict[str, Any], list[int]]:
        """The message for ``req`` and the slot of each of its partitions, in order."""
        parts: list[Any] = []
        order: list[int] = []
        for p in req.partitions:
            slot = self.slots.setdefault((p.topic, p.partition), len(self.slots))
            order.append(slot)
            if self.sent.get(slot) == p:
                parts.append(slot)
            else:
                self.sent[slot] = p
                parts.append([slot, p.topic, p.partition, p.fetch_offset, p.last_fetched_epoch, p.current_leader_epoch])
        return {
            "leaderId": leader_id,
            "replicaId": req.replica_id,
            "maxRecords": req.max_records,
            "partitions": parts,
        }, order

    def decode_response(self, o: dict[str, Any], order: list[int]) -> FetchResponse:
        """The whole answer to the request whose slots were ``order``."""
        changed: dict[int, FetchPartitionResponse] = {}
        for index, error, hw, leo, records, div in o["partitions"]:
            if not 0 <= index < len(order):
                raise SessionError(f"an answer for partition {index} of a request of {len(order)}")
            req = self.sent[order[index]]
            changed[index] = FetchPartitionResponse(
                req.topic,
                req.partition,
                int(error),
                int(hw),
                int(leo),
                tuple(Record(int(e), int(s)) for e, s in records),
                None if div is None else EpochEndOffset(int(div[0]), int(div[1])),
            )
        out = []
        for index, slot in enumerate(order):
            answer = changed.get(index)
            if answer is None:
                answer = self.answers.get(slot)
                if answer is None:
                    raise SessionError(f"no answer for slot {slot}, and none before")
            else:
                self.answers[slot] = answer
            out.append(answer)
        return FetchResponse(tuple(out))


@dataclass
class LeaderSession:
    """The leader's end of one connection's fetch session."""

    requests: dict[int, FetchPartitionRequest] = field(default_factory=dict)
    answers: dict[int, FetchPartitionResponse] = field(default_factory=dict)

    def decode_request(self, o: dict[str, Any]) -> tuple[int, FetchRequest, list[int]]:
        """(leader id, the whole request, the slot of each of its partitions)."""
        parts: list[FetchPartitionRequest] = []
        order: list[int] = []
        for e in o["partitions"]:
            if isinstance(e, int):
                slot = e
                req = self.requests.get(slot)
                if req is None:
                    raise SessionError(f"slot {slot} was never sent on this session")
            else:
                slot, topic, partition, offset, last_epoch, leader_epoch = e
                slot = int(slot)
                req = FetchPartitionRequest(str(topic), int(partition), int(offset), int(last_epoch), int(leader_epoch))
                self.requests[slot] = req
            order.append(slot)
            parts.append(req)
        return int(o["leaderId"]), FetchRequest(int(o["replicaId"]), tuple(parts), int(o["maxRecords"])), order

    def encode_response(self, resp: FetchResponse, order: list[int]) -> dict[str, Any]:
        """The answers that differ from the last ones sent for their slots (the leader answers each partition of
        a request, in its order)."""
        if len(resp.partitions) != len(order):
            raise SessionError(f"{len(resp.partitions)} answers for {len(order)} partitions")
        out = []
        for index, (slot, p) in enumerate(zip(order, resp.partitions, strict=True)):
            if self.answers.get(slot) == p:
                continue
            self.answers[slot] = p
            div = None if p.diverging is None else [p.diverging.epoch, p.diverging.end_offset]
            out.append(
                [index, p.error_code, p.high_watermark, p.log_end_offset, [[r.epoch, r.seq] for r in p.records], div]
            )
        return {"partitions": out}


class _Handler(socketserver.StreamRequestHandler):
    server: FetchServer

    def handle(self) -> None:
        session = LeaderSession()  # one per connection: it ends with it
        for line in self.rfile:
            try:
                leader_id, req, order = session.decode_request(json.loads(line))
                resp = self.server.serve(leader_id, req)
                out = {"error": "not served here"} if resp is None else session.encode_response(resp, order)
            except (ValueError, KeyError, TypeError) as e:
                out = {"error": f"bad fetch request: {e}"}
            self.wfile.write(json.dumps(out, separators=(",", ":")).encode() + b"\n")
            self.wfile.flush()


class FetchServer(socketserver.ThreadingTCPServer):
    """Serves fetches for the brokers of this process on one listening socket per broker."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, host: str, port: int, serve: Serve) -> None:
        super().__init__((host, port), _Handler)
        self.serve = serve
        self._thread = threading.Thread(target=self.serve_forever, name=f"fetch-server-{port}", daemon=True)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


class FetchClient:
    """Keeps one connection per leader endpoint; any failure drops it and answers None."""

    def __init__(self, timeout_s: float = 2.0) -> None:
        self.timeout_s = timeout_s
        self._conns: dict[tuple[str, int], tuple[socket.socket, Any, FollowerSession]] = {}
        #: bytes of the last request sent and of its answer (without the line ends)
        self.last_bytes: tuple[int, int] = (0, 0)

    def fetch(self, host: str, port: int, leader_id: int, req: FetchRequest) -> FetchResponse | None:
        key = (host, port)
        try:
            conn = self._conns.get(key)
            if conn is None:
                sock = socket.create_connection(key, timeout=self.timeout_s)
                conn = self._conns[key] = (sock, sock.makefile("rwb"), FollowerSession())
            _, f, session = conn
            message, order = session.encode_request(leader_id, req)
            data = json.dumps(message, separators=(",", ":")).encode()
            f.write(data + b"\n")
            f.flush()
            line = f.readline()
            if not line:
                raise ConnectionError("connection closed")
            self.last_bytes = (len(data), len(line) - 1)
            o = json.loads(line)
            if "error" in o:
                # the session's two ends may no longer agree: the next fetch starts a new one
                log.debug("fetch from %s:%s refused: %s", host, port, o["error"])
                self._drop(key)
                return None
            return session.decode_response(o, order)
        except (OSError, ValueError, KeyError, TypeError) as e:
            log.debug("fetch from broker %s at %s:%s failed: %s", leader_id, host, port, e)
            self._drop(key)
            return None

    def _drop(self, key: tuple[str, int]) -> None:
        conn = self._conns.pop(key, None)
        if conn is not None:
            try:
                conn[1].close()
                conn[0].close()
            except OSError:
                pass

    def close(self) -> None:
        for key in list(self._conns):
            self._drop(key)
